"""Operator faults under the batch job: a lake it cannot write (a read-only mount, no write
permission), a full disk, the lake folder deleted while it runs. Each time the job exits
with status 4 (``snap_spark.runner.EXIT_STORAGE``) and one line on stderr saying what
happened and what to do; what the lake held stays; once the fault is mended, the same run
again completes, and the tables hold every line exactly once, with the verdicts the
pure-Python checker gives all lines (which knows nothing of Spark or of the faults).

The three faults that leave the lake as it was (nothing written; the deleted folder put
back from a backup) meet one lake one after another, each checked to have left every file
of it byte for byte as it was, and the run again after the last of them completes: it runs
on the very lake the three faults and their mending left. The full disk leaves files of a
run cut short in the lake: it has a lake of its own and a run again of its own.

Real processes, real Delta tables, real faults (how each is made: :mod:`tests.operate.faults`);
the lake holding the first file that every fault meets is landed beforehand by the batch
job's own ``run`` in the test session.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from snap_spark.pipeline.batch_job import run
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.runner import EXIT_STORAGE
from snap_spark.samples.messages import SampleConfig, generate
from tests.lake.helpers import delta_rows
from tests.operate.faults import (
    finished,
    give_write_permission,
    kill_group,
    limit_file_size,
    one_error_line,
    read_only_mount,
    run_job,
    start_paused,
    wait_paused,
    without_write_permission,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = "verify_messages"


class Inputs:
    """Two files of one sample (replays across them included), a lake holding the first
    (landed by :func:`snap_spark.pipeline.batch_job.run` on the test session, as the job's own
    process lands it), and what the checker says of every line of both."""

    def __init__(self, spark: Any, root: Path) -> None:
        lines = [line for line, _ in generate(SampleConfig(agents=5, messages=3_000, seed=23,
                                                           attack_share=0.3))]
        half = len(lines) // 2
        self.first, self.second = root / "first.jsonl", root / "second.jsonl"
        self.first.write_bytes(b"\n".join(lines[:half]) + b"\n")
        self.second.write_bytes(b"\n".join(lines[half:]) + b"\n")
        where = ([(str(self.first), n) for n in range(1, half + 1)]
                 + [(str(self.second), n) for n in range(1, len(lines) - half + 1)])
        names = [line_name(source, n) for source, n in where]
        self.reference = {key: (verdict.error_code, verdict.error_detail or None)
                          for key, verdict in zip(where, check_lines(
                              lines, ReceiptClock.refuse(), names=names), strict=True)}
        self.lake = root / "lake-of-first"
        landed = run(spark, [str(self.first)], str(self.lake))
        assert (landed.lines_read, landed.valid + landed.rejected) == (half, half)

    def lake_copy(self, folder: Path) -> Path:
        """A lake of its own for a test, holding the first file."""
        lake = folder / "lake"
        shutil.copytree(self.lake, lake)
        return lake

    def second_run(self, lake: Path) -> list[str]:
        return ["--input", str(self.second), "--lake", str(lake)]


@pytest.fixture(scope="module")
def inputs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    """The sample's two files, the lake holding the first, the checker's verdicts."""
    return Inputs(spark, tmp_path_factory.mktemp("faults"))


def files_of(lake: Path) -> dict[Path, bytes | None]:
    """Every folder (``None``) and file (its bytes) under ``lake``, by relative path."""
    return {p.relative_to(lake): None if p.is_dir() else p.read_bytes()
            for p in lake.rglob("*")}


def landed(lake: Path) -> dict[tuple[str, int], Any]:
    """The verdicts ``messages`` holds, each line once in it and in ``raw_messages``."""
    for table in ("raw_messages", "messages"):
        counted = Counter((r["source_file"], r["line_no"])
                          for r in delta_rows(lake / table, "select source_file, line_no from t"))
        assert not counted or max(counted.values()) == 1, (table, counted.most_common(2))
    return {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
            for m in delta_rows(lake / "messages")}


def check_complete(inputs: Inputs, lake: Path) -> None:
    """The run again completes: every line of both files once, the checker's verdicts."""
    finished(run_job(f"{JOB}.py", inputs.second_run(lake)))
    assert landed(lake) == inputs.reference


def check_first_kept(inputs: Inputs, lake: Path) -> None:
    """What the lake held before the fault is all there, each line once."""
    held = landed(lake)
    first = {k: v for k, v in inputs.reference.items() if k[0] == str(inputs.first)}
    assert {k: held.get(k) for k in first} == first


def cannot_write(inputs: Inputs, lake: Path, how: str) -> None:
    """The run into ``lake`` made unwritable ``how``: exit 4, one line naming the lake and
    the error, and nothing written (every file as it was, byte for byte).

    ``read-only mount``: the lake is a read-only bind mount in the job's own mount
    namespace (EROFS, what a disk remounted read-only gives). Where this process cannot
    make one (no CAP_SYS_ADMIN and no user namespaces), the lake is made read-only with
    ``chmod`` instead, as for ``no write permission``, so the case is still run.
    ``no write permission``: every folder and file of the lake ``chmod a-w`` (EACCES); as
    root, which permissions do not bind, the job runs without the capabilities that pass
    over them (``setpriv``). Either way the write permission is given back afterwards."""
    before = files_of(lake)
    prefix = read_only_mount(lake) if how == "read-only mount" else None
    said = "read-only file system"
    if prefix is None:
        prefix, said = without_write_permission(lake), "permission denied"
    try:
        done = run_job(f"{JOB}.py", inputs.second_run(lake), prefix=prefix)
    finally:
        give_write_permission(lake)
    assert done.returncode == EXIT_STORAGE, (how, done.stderr[-3000:])
    line = one_error_line(done, JOB)
    assert line.startswith(f"{JOB}: the lake cannot be written: {lake}/"), (how, line)
    assert f": {said};" in line and "run the job again" in line, (how, line)
    assert files_of(lake) == before, how  # nothing written


def deleted_while_running(inputs: Inputs, lake: Path, work: Path) -> None:
    """The job is held right after it landed its lines (``stage 2/4``, nothing committed
    yet), the lake folder is deleted, and the job goes on: it says the lake went away and
    exits 4. The lake is put back from a copy taken before (an operator's backup), and
    what it held before the fault is all there."""
    backup = work / "backup"
    shutil.copytree(lake, backup)
    release = work / "release"
    proc = start_paused(f"{JOB}.py", inputs.second_run(lake), "stage 2/4", release)
    try:
        wait_paused(proc)
        shutil.rmtree(lake)
        release.touch()
        out, err = proc.communicate(timeout=300)
    finally:
        kill_group(proc)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert done.returncode == EXIT_STORAGE, err[-3000:]
    line = one_error_line(done, JOB)
    assert line.startswith(f"{JOB}: the lake folder {lake} went away while the job ran"), line
    assert "put the lake back" in line and "run the job again" in line, line
    shutil.rmtree(lake, ignore_errors=True)  # what the run wrote there after the deletion
    shutil.copytree(backup, lake)
    check_first_kept(inputs, lake)


def test_a_lake_that_cannot_be_written_or_goes_away_is_one_line_and_the_run_again_completes(
        inputs: Inputs, tmp_path: Path) -> None:
    """One lake holding the first file meets, one after another, a read-only mount, no
    write permission (:func:`cannot_write`: nothing written) and its folder deleted while
    the job runs (:func:`deleted_while_running`: put back from a backup); after each,
    every file of the lake is as it was before the first fault, byte for byte, so each
    fault meets the lake it would have met alone. Once the last is mended, the same run
    again completes on that lake: every line of both files once, the checker's verdicts."""
    lake = inputs.lake_copy(tmp_path)
    first = files_of(lake)
    for how in ("read-only mount", "no write permission"):
        cannot_write(inputs, lake, how)
        assert files_of(lake) == first, how
    deleted_while_running(inputs, lake, tmp_path)
    assert files_of(lake) == first
    check_complete(inputs, lake)


def test_a_full_disk_is_one_line_and_the_run_again_completes(inputs: Inputs,
                                                             tmp_path: Path) -> None:
    """Every file the job's processes write stops at 256 kB (``RLIMIT_FSIZE``, SIGXFSZ
    ignored: writes past it fail with EFBIG, as on a full disk). Spark itself copies each
    JAR of ``spark.jars`` into its scratch folder as it starts, 30 MB for Kafka's: the job
    runs with empty JAR caches (it needs neither Delta's JARs, on delta-rs, nor Kafka's),
    so that the limit meets the job's own writes into the lake."""
    lake = inputs.lake_copy(tmp_path)
    no_jars = tmp_path / "no-jars"
    no_jars.mkdir()
    done = run_job(f"{JOB}.py", inputs.second_run(lake),
                   env={"SNAP_SPARK_DELTA_JARS": str(no_jars),
                        "SNAP_SPARK_KAFKA_JARS": str(no_jars)},
                   preexec_fn=limit_file_size(256 * 1024))
    assert done.returncode == EXIT_STORAGE, done.stderr[-3000:]
    line = one_error_line(done, JOB)
    assert "file size limit reached" in line and "run the job again" in line, line
    check_first_kept(inputs, lake)
    check_complete(inputs, lake)
