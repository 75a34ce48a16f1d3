"""SIGKILL jobs (their whole process group) at every step of their way on one lake, then
look at every table a job writes: after each kill, ``snap-spark lake clean --dry-run`` names
every Parquet file of a table folder that no commit of its Delta log references; after the
runs again, no such file is left anywhere, nor a staging file or a run marker, and the
tables equal those of the same runs uninterrupted.

The batch job lands one archive, small enough for the driver process to land it itself
(:mod:`snap_spark.common.placement`, ``land_bytes``), held still by :mod:`tests.hold` and killed
right after its lines in turn (``stage 1/4``; ``stage 2/4``: its files written, nothing
committed; ``stage 3/4``: between its two commits; then, not held, ``tasks: … refreshed``),
each kill followed by the next run of the same archive; then a second archive, killed after
its ``stage 4/4`` line while its task catch-up writes ``task_events`` and ``tasks`` (at the
first new data file there, before its commit); then Nostr ingestion, held still and killed
once the stored messages it lands are written, before their commit. After the runs again the
first archive's lines are in ``raw_messages`` and ``messages`` once each, with the verdicts
of the pure-Python checker over that archive (the kill tests of a small input on the driver
path live here; those of a large one in Spark tasks are in ``test_crash.py``). Issue 47: the
sweeps looked in ``raw_messages``, ``messages`` and ``ingested_files`` only (the batch
job's, ``lake clean``) or in the Nostr tables only (the ingestion's, which also forgets the
markers it finds), so the catch-up's files were never named, and the ingestion's landing
leftovers were forgotten; on that code this test fails at the task catch-up. """

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from snap_spark.cli import main as cli_main
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, write_sample
from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample
from snap_spark.schemas.tables import TABLES
from tests.driver_limits import SPARK_LANDING_BYTES, set_limits
from tests.hold import HOLDING
from tests.jobs import files_under, kill_when, logged_files, parquet_files, start_job
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: Columns that name the run which wrote a row: they differ between any two runs.
PER_RUN = ("ingest_id", "ingest_time")


def referenced_files(table: Path) -> set[str]:
    """Every data file (relative to the table) some version of its Delta log holds: the
    files of each version by delta-rs, so files a later commit removed (and nothing has
    vacuumed) count as the log's too. None without a log, or with a log a run killed
    before its first commit left without any version."""
    if not any((table / "_delta_log").glob("*.json")):
        return set()
    latest = DeltaTable(str(table))
    found: set[str] = set()
    for version in range(latest.version() + 1):
        at = DeltaTable(str(table), version=version)
        found.update(str(Path(uri).relative_to(table)) for uri in at.file_uris())
    return found


def unreferenced(lake: Path) -> dict[str, set[str]]:
    """Per table any job writes: the Parquet files in its folder (partitions included, its
    ``_delta_log`` not) that no version of its Delta log references."""
    out: dict[str, set[str]] = {}
    for name in TABLES:
        table = lake / name
        on_disk = {str(p.relative_to(table)) for p in table.rglob("*.parquet")
                   if "_delta_log" not in p.relative_to(table).parts}
        stray = on_disk - referenced_files(table)
        if stray:
            out[name] = stray
    return out


def data_files(lake: Path) -> set[Path]:
    """Every Parquet file under the folders of the tables any job writes."""
    return {p for name in TABLES for p in (lake / name).rglob("*.parquet")}


def kill_at_new_file(proc: subprocess.Popen[bytes], lake: Path, tables: tuple[str, ...],
                     *, after: str | None = None, timeout: float = 120.0) -> str:
    """SIGKILL the job's process group as soon as a Parquet file appears in the folder of
    one of ``tables`` (none was there when this was called), once ``after`` was printed
    (when given): a data file written and not committed yet. Its stderr is read on a
    thread meanwhile (Spark's output must not fill the pipe); returns what it printed.
    Fails if the job ends first."""
    assert proc.stderr is not None
    stderr = proc.stderr
    seen: list[bytes] = []
    said = threading.Event()

    def drain() -> None:
        for line in iter(stderr.readline, b""):
            seen.append(line)
            if after is not None and after.encode() in line:
                said.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    before = {p for name in tables for p in (lake / name).rglob("*.parquet")}
    deadline = time.monotonic() + timeout
    hit: set[Path] = set()
    while proc.poll() is None and time.monotonic() < deadline:
        if after is None or said.is_set():
            hit = {p for name in tables for p in (lake / name).rglob("*.parquet")} - before
            if hit:
                break
        time.sleep(0.002)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    printed = b"".join(seen).decode(errors="replace")
    assert hit, f"no new data file in {tables} before the job ended:\n{printed[-3000:]}"
    return printed


def check_dry_run_names_every_stray(lake: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> dict[str, set[str]]:
    """``snap-spark lake clean --dry-run`` lists every Parquet file no log references, and
    changes nothing; returns those files per table."""
    stray = unreferenced(lake)
    if not lake.is_dir():  # killed before it wrote anything
        return stray
    before = data_files(lake)
    capsys.readouterr()
    assert cli_main(["lake", "clean", "--lake", str(lake), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    unnamed = sorted(f"{name}/{f}" for name, files in stray.items() for f in files
                     if f"would remove {lake / name / f}" not in listed)
    assert not unnamed, f"lake clean --dry-run does not name {unnamed}:\n{listed}"
    assert data_files(lake) == before
    return stray


def tables(lake: Path) -> dict[str, list[str]]:
    """Every table's rows without the columns naming their run, as sorted JSON (the lake's
    path, in the source of the Nostr stored messages landed from an inbox there, as LAKE)."""
    out = {}
    for name in TABLES:
        rows = delta_rows(lake / name) if (lake / name / "_delta_log").is_dir() else []
        out[name] = sorted(
            json.dumps({k: v for k, v in row.items() if k not in PER_RUN}, sort_keys=True,
                       default=str).replace(str(lake), "LAKE") for row in rows)
    return out


@pytest.fixture(autouse=True)
def _landing_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """This module's runs (its jobs and its runs in this process) land on the driver up to
    :data:`~tests.driver_limits.SPARK_LANDING_BYTES`: the second archive lands in Spark
    tasks, as the test was written for."""
    set_limits(monkeypatch, land_bytes=SPARK_LANDING_BYTES)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two archives of the batch job (the first landed on the driver) and a Nostr sample
    (events, keyring, well-known list)."""
    folder = tmp_path_factory.mktemp("leftovers-in")
    archives = [folder / "first.jsonl", folder / "second.jsonl"]
    # the first (1,200 lines: landed on the driver) only goes through the stages; the
    # second (8,000) leaves its task catch-up time enough to be killed while it writes
    for seed, (path, lines) in enumerate(zip(archives, (1_200, 8_000), strict=True), 31):
        write_sample(SampleConfig(agents=8, messages=lines, seed=seed), str(path),
                     tasks_path=None)
    assert archives[0].stat().st_size <= SPARK_LANDING_BYTES < archives[1].stat().st_size
    nostr = output_paths(str(folder / "nostr"))
    write_nostr_sample(NostrSampleConfig(cards=12, messages=60, well_known=6, seed=9),
                       str(folder / "nostr"))
    return {"archives": archives, "nostr": nostr}


def nostr_args(paths: dict[str, str], lake: Path) -> list[str]:
    return ["--lake", str(lake), "--input", paths["events"], "--keyring", paths["keyring"],
            "--well-known", paths["well_known"]]


def land_uninterrupted(spark: Any, inputs: dict[str, Any], lake: Path) -> None:
    """The runs of the test, in its order, in this process (the session's settings are the
    job processes': local[2], two shuffle partitions, delta-rs)."""
    from snap_spark.nostr.ingest import ingest
    from snap_spark.nostr.stored import Keyring
    from snap_spark.pipeline.batch_job import run

    for archive in inputs["archives"]:
        run(spark, [str(archive)], str(lake))
    paths = inputs["nostr"]
    ingest(spark, str(lake), inputs=[paths["events"]], keyring=Keyring.load(paths["keyring"]),
           well_known=[paths["well_known"]])


def test_killed_at_every_step_then_run_again_leaves_no_file_a_log_does_not_reference(
        spark: Any, inputs: dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each kill of the module docstring, then ``lake clean --dry-run`` (names every file
    no log references, changes nothing); after the runs again: no such file, no staging
    file, no marker, each line of the first archive once with the checker's verdict, and
    every table equal to that of the same runs uninterrupted."""
    lake = tmp_path / "lake"
    first, second = (str(a) for a in inputs["archives"])
    left: dict[str, dict[str, set[str]]] = {}

    # the first archive, killed right after each line (held there at stages 1/4 to 3/4:
    # on a busy machine a job not held went on from stage 1/4 to its raw_messages commit
    # before the kill, and the run after it had nothing left to land); each run again
    # carries it further (after stage 3/4: its messages, then the task catch-up)
    for text, held in (("stage 1/4", True), ("stage 2/4", True), ("stage 3/4", True),
                       ("tasks:", False)):
        proc = start_job("verify_messages.py", ["--input", first, "--lake", str(lake)],
                         hold_at=text if held else None)
        said = kill_when(proc, HOLDING if held else text)
        assert text in said
        left[text] = check_dry_run_names_every_stray(lake, capsys)
        if text == "stage 2/4":  # landed on the driver: its raw_messages files, uncommitted
            assert left[text].get("raw_messages"), left[text]
            assert not logged_files(lake / "raw_messages")
        if text == "stage 3/4":  # raw_messages committed (each line once), messages not;
            # the files the run killed at stage 2/4 left were removed by this one
            assert not logged_files(lake / "messages")
            keys = [r["line_no"] for r in delta_rows(lake / "raw_messages",
                                                     "select line_no from t")]
            assert len(keys) == len(set(keys)) == len(Path(first).read_bytes().splitlines())
            for name, files in left["stage 2/4"].items():
                assert not files & parquet_files(lake / name), name
    # the second, killed after stage 4/4 while its task catch-up writes (the tables exist:
    # the catch-up is a merge, its files are those of a run of its own). Held right after
    # that line while this process takes the lake's commit lease, then let go: the
    # catch-up writes its files and waits for the lease, so the kill at its first file
    # leaves them uncommitted however fast the machine commits (a kill racing the commit
    # came after it on a loaded machine)
    from snap_spark.lake.lease import commit_lease

    go_on = tmp_path / "go-on"
    proc = start_job("verify_messages.py", ["--input", second, "--lake", str(lake)],
                     hold_at="stage 4/4", hold_until=str(go_on))
    assert proc.stderr is not None
    held = b""
    while HOLDING.encode() not in held:
        line = proc.stderr.readline()
        assert line, held.decode(errors="replace")[-3000:]
        held += line
    with commit_lease(str(lake), "test: the catch-up waits"):
        go_on.touch()
        kill_at_new_file(proc, lake, ("task_events", "tasks"))
    left["stage 4/4, task catch-up"] = check_dry_run_names_every_stray(lake, capsys)
    assert {"task_events", "tasks"} & set(left["stage 4/4, task catch-up"]), left
    # Nostr ingestion, held still and killed once the stored messages it lands are
    # written, not committed (its batch run's stage 2/4 line)
    kill_when(start_job("ingest_nostr.py", nostr_args(inputs["nostr"], lake),
                        hold_at="stage 2/4"), HOLDING)
    left["ingest_nostr"] = check_dry_run_names_every_stray(lake, capsys)
    assert left["ingest_nostr"], "the killed ingestion left a data file uncommitted"
    print("uncommitted files after each kill:",
          {point: {t: len(f) for t, f in files.items()} for point, files in left.items()})

    # run again: the ingestion (its sweep first), then the batch job over both archives
    # (the ledger rows of the runs killed before their last commit)
    from snap_spark.nostr.ingest import ingest
    from snap_spark.nostr.stored import Keyring
    from snap_spark.pipeline.batch_job import run

    paths = inputs["nostr"]
    ingest(spark, str(lake), inputs=[paths["events"]], keyring=Keyring.load(paths["keyring"]),
           well_known=[paths["well_known"]])
    run(spark, [first, second], str(lake))
    assert unreferenced(lake) == {}
    for name in ("raw_messages", "messages"):
        assert parquet_files(lake / name) == logged_files(lake / name), name
    assert not files_under(lake / "_staging")
    assert not list((lake / "_snap_runs").glob("*.json"))
    # the first archive: each line once in both tables, with the checker's verdict
    lines = Path(first).read_bytes().splitlines()
    of_first = f"from t where source_file = '{first}'"
    for name in ("raw_messages", "messages"):
        keys = [r["line_no"] for r in delta_rows(lake / name, f"select line_no {of_first}")]
        assert len(keys) == len(set(keys)) == len(lines), name
    names = [line_name(first, n) for n in range(1, len(lines) + 1)]
    expected = {n: (v.error_code, v.error_detail or None) for n, v in enumerate(
        check_lines(lines, ReceiptClock.refuse(), names=names), 1)}
    assert {r["line_no"]: (r["error_code"], r["error_detail"]) for r in delta_rows(
        lake / "messages", f"select line_no, error_code, error_detail {of_first}")} == expected

    reference = tmp_path / "reference"
    land_uninterrupted(spark, inputs, reference)
    got, want = tables(lake), tables(reference)
    differing = {name: {"rows": (len(got[name]), len(want[name])),
                        "only here": sorted(set(got[name]) - set(want[name]))[:2],
                        "only in the reference": sorted(set(want[name]) - set(got[name]))[:2]}
                 for name in TABLES if got[name] != want[name]}
    assert not differing, json.dumps(differing, indent=1)
