"""kill -9 at several moments of a run: the next run (or `snap-spark lake clean`) leaves
every table folder holding exactly the files its Delta log names, and every line once.

A large input, landed in Spark tasks and decided in Spark stages (more than
``land_bytes`` and ``pass_lines`` of :mod:`snap_spark.common.placement`), is killed at two moments
one after the other on one lake, each killed run the next one's starting point: while its
tasks write (at the first new ``raw_messages`` file, before ``stage 2/4``), then, run
again, right after its ``raw_messages`` commit (held still there by :mod:`tests.hold`).
The same kills of a small input, which the driver process lands itself, are made (with
the same checks: each line once, the checker's verdicts, no stray file) on the way of
``test_leftovers.py``; ``lake clean`` itself is checked here, without a job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from snap_spark.cli import main as cli_main
from snap_spark.pipeline.batch_job import run
from snap_spark.samples.messages import SampleConfig, write_sample
from tests.driver_limits import SPARK_LANDING_BYTES, set_limits
from tests.hold import HOLDING
from tests.integration.test_leftovers import kill_at_new_file
from tests.jobs import files_under, kill_when, logged_files, parquet_files, start_job
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLES = ("raw_messages", "messages")
#: Just over the default pass_lines (checked by the test): the Spark path of every step.
LINES = 21_000


def stray_files(lake: Path) -> dict[str, set[str]]:
    """Per table, the Parquet files in its folder that its Delta log does not hold."""
    return {t: parquet_files(lake / t) - logged_files(lake / t) for t in TABLES}


def check_killed_run(lake: Path, moment: str, capsys: pytest.CaptureFixture[str]
                     ) -> dict[str, set[str]]:
    """The killed run left its marker; ``snap-spark lake clean --dry-run`` names every
    file it left uncommitted and changes nothing. Returns those files per table."""
    stray = stray_files(lake)
    print(f"{moment}: uncommitted files left by the killed run:",
          {t: len(files) for t, files in stray.items()})
    assert list((lake / "_snap_runs").glob("*.json")), f"{moment}: the run left its marker"
    before = {t: parquet_files(lake / t) for t in TABLES}
    capsys.readouterr()
    assert cli_main(["lake", "clean", "--lake", str(lake), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert all(f"would remove {lake / t / f}" in listed for t in TABLES for f in stray[t])
    assert {t: parquet_files(lake / t) for t in TABLES} == before
    return stray


def keys_once(lake: Path, table: str) -> None:
    """Each line of the archive is in ``table`` exactly once."""
    keys = [(r["source_file"], r["line_no"]) for r in delta_rows(lake / table)]
    assert len(keys) == len(set(keys)) == LINES, table


def test_kill_9_while_landing_then_between_the_commits_then_rerun_leaves_each_line_once(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch job is killed (its process group, SIGKILL) while its Spark tasks write
    the landing's files (its first ``raw_messages`` file seen, ``stage 2/4`` not printed
    yet): nothing committed (Spark's Python workers, in a process group of their own, may
    delete the files they were writing once they find their driver gone). Run again as a
    job, it removes what was left, lands every line once into ``raw_messages`` and is
    held and killed right after that commit. After each kill the run left its marker and
    ``lake clean --dry-run`` names every uncommitted file, changing nothing. The run again
    in this process leaves each line once in both tables, every file one its log names,
    no staging file, no marker."""
    from snap_spark.common.placement import limits

    archive, lake = tmp_path / "traffic.jsonl", tmp_path / "lake"
    write_sample(SampleConfig(agents=8, messages=LINES, seed=13), str(archive),
                 tasks_path=None)
    # the default land_bytes (16 MiB) would land these 13 MB on the driver
    set_limits(monkeypatch, land_bytes=SPARK_LANDING_BYTES)
    in_force = limits()
    assert in_force.pass_lines < LINES and archive.stat().st_size > 4 * in_force.land_bytes
    args = ["--input", str(archive), "--lake", str(lake), "--batch-rows", "2000"]

    said = kill_at_new_file(start_job("verify_messages.py", args), lake, ("raw_messages",),
                            after="stage 1/4")
    assert "stage 2/4" not in said, said[-3000:]
    landing = check_killed_run(lake, "while landing", capsys)
    assert not logged_files(lake / "raw_messages")  # nothing committed

    said = kill_when(start_job("verify_messages.py", args, hold_at="stage 3/4"), HOLDING)
    assert "cleaned up after killed runs" in said and "stage 4/4" not in said, said[-3000:]
    for table, files in landing.items():  # the first run's files: removed by the second
        assert not files & parquet_files(lake / table), table
    keys_once(lake, "raw_messages")
    assert not logged_files(lake / "messages")
    check_killed_run(lake, "between the two commits", capsys)

    result = run(spark, [str(archive)], str(lake))  # cleans first, then lands what is left
    for table in TABLES:
        assert parquet_files(lake / table) == logged_files(lake / table), table
        keys_once(lake, table)
    assert not files_under(lake / "_staging")
    assert not list((lake / "_snap_runs").glob("*.json"))
    assert result.lines_read == LINES  # nothing was in the ledger: the file is landed again
    assert result.raw_rows_written == 0 and result.message_rows_written == LINES


def test_lake_clean_leaves_running_runs_and_foreign_files_alone(tmp_path: Path) -> None:
    """``clean_leftovers`` removes the files, staging folder and marker of a run whose
    process is gone, and leaves those of a run still writing and files no run named."""
    from snap_spark.pipeline.runs import RunMarker, clean_leftovers

    lake = tmp_path / "lake"
    table = lake / "messages" / "event_date=2026-01-01"
    table.mkdir(parents=True)
    (lake / "_snap_runs").mkdir()
    live = RunMarker("a" * 32)  # this very process: still writing
    dead = RunMarker("b" * 32, pid=2**22 + 17)  # no such process
    for marker in (live, dead):
        (lake / "_snap_runs" / f"{marker.ingest_id}.json").write_bytes(marker.to_json())
    mine_live = table / f"part-{'a' * 16}-00000-x.parquet"
    mine_dead = table / f"part-{'b' * 16}-00000-x.parquet"
    foreign = table / "part-00000-someone-else.parquet"
    for path in (mine_live, mine_dead, foreign):
        path.write_bytes(b"PAR1")
    (lake / "_staging" / ("b" * 32)).mkdir(parents=True)
    (lake / "_staging" / ("b" * 32) / "x.arrow").write_bytes(b"x")

    cleaned = clean_leftovers(str(lake), ["raw_messages", "messages"])
    assert cleaned.runs == ["b" * 32] and cleaned.running == ["a" * 32]
    assert cleaned.files == [str(mine_dead)]
    assert mine_live.exists() and foreign.exists() and not mine_dead.exists()
    assert not (lake / "_staging" / ("b" * 32)).exists()
    assert (lake / "_snap_runs" / f"{'a' * 32}.json").exists()
    assert not (lake / "_snap_runs" / f"{'b' * 32}.json").exists()
