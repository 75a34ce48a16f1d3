"""kill -9 at several moments of a run: the next run (or `snap-spark lake clean`) leaves
every table folder holding exactly the files its Delta log names, and every line once."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from snap_spark.cli import main as cli_main
from snap_spark.pipeline.job import run
from snap_spark.samples.messages import SampleConfig, write_sample
from tests.jobs import kill_when, logged_files, parquet_files, start_job
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("raw_messages", "messages")
LINES = 100_000


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("in") / "traffic.jsonl"
    write_sample(SampleConfig(agents=8, messages=LINES, seed=13), str(path))
    return path


def start_batch_job(archive: Path, lake: Path) -> subprocess.Popen[bytes]:
    return start_job("verify_messages.py", ["--input", str(archive), "--lake", str(lake),
                                            "--batch-rows", "2000"])


@pytest.mark.parametrize(("moment", "text", "delay"), [
    ("while landing", "stage 1/4", 1.5),
    ("between the two commits", "stage 3/4", 0.0),
])
def test_kill_9_then_rerun_leaves_each_line_once_and_no_stray_file(
        spark: Any, archive: Path, tmp_path: Path, moment: str, text: str, delay: float,
        capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    kill_when(start_batch_job(archive, lake), text, delay=delay)
    stray = {t: parquet_files(lake / t) - logged_files(lake / t) for t in TABLES}
    print(f"{moment}: uncommitted files left by the killed run:",
          {t: len(files) for t, files in stray.items()})
    assert list((lake / "_snap_runs").glob("*.json")), "the killed run left its marker"

    # `snap-spark lake clean --dry-run` lists, changes nothing
    before = {t: parquet_files(lake / t) for t in TABLES}
    assert cli_main(["lake", "clean", "--lake", str(lake), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert all(f"would remove {lake / t / f}" in listed for t in TABLES for f in stray[t])
    assert {t: parquet_files(lake / t) for t in TABLES} == before

    result = run(spark, [str(archive)], str(lake))  # cleans first, then lands what is left
    for table in TABLES:
        assert parquet_files(lake / table) == logged_files(lake / table), table
        rows = delta_rows(lake / table)
        keys = [(r["source_file"], r["line_no"]) for r in rows]
        assert len(keys) == len(set(keys)) == LINES, table
    assert not [p for p in (lake / "_staging").rglob("*") if p.is_file()]
    assert not list((lake / "_snap_runs").glob("*.json"))
    assert result.lines_read in (0, LINES)


@pytest.mark.parametrize("hold", ["stage 2/4", "stage 3/4"],
                         ids=["landed, nothing committed", "between the two commits"])
def test_a_small_input_landed_on_the_driver_killed_then_rerun_leaves_each_line_once(
        spark: Any, tmp_path: Path, hold: str) -> None:
    """A small input is landed by the driver process itself (commit.LOCAL_LAND_BYTES): the
    job is held still right after its landing line, or after its raw_messages commit, and
    its process group killed; the run again holds every line once, with the checker's
    verdict, and no stray file."""
    from snap_spark.pipeline.commit import LOCAL_LAND_BYTES
    from snap_spark.protocol.checker import check_lines
    from snap_spark.protocol.replay import line_name
    from snap_spark.protocol.validate import ReceiptClock
    from tests.hold import HOLDING

    small = tmp_path / "small.jsonl"
    write_sample(SampleConfig(agents=4, messages=800, seed=17), str(small))
    assert small.stat().st_size <= LOCAL_LAND_BYTES
    lines = small.read_bytes().splitlines()
    lake = tmp_path / "lake"
    said = kill_when(start_job("verify_messages.py", ["--input", str(small), "--lake",
                                                      str(lake)], hold_at=hold), HOLDING)
    assert hold in said
    written = {t: parquet_files(lake / t) for t in TABLES}
    assert written["raw_messages"], "the killed run had written its files"
    run(spark, [str(small)], str(lake))
    for name in TABLES:
        assert parquet_files(lake / name) == logged_files(lake / name), name
        keys = [(r["source_file"], r["line_no"]) for r in delta_rows(lake / name)]
        assert len(keys) == len(set(keys)) == len(lines), name
    assert not [p for p in (lake / "_staging").rglob("*") if p.is_file()]
    assert not list((lake / "_snap_runs").glob("*.json"))
    names = [line_name(str(small), n) for n in range(1, len(lines) + 1)]
    expected = {n: (v.error_code, v.error_detail or None) for n, v in enumerate(
        check_lines(lines, ReceiptClock.refuse(), names=names), 1)}
    assert {r["line_no"]: (r["error_code"], r["error_detail"])
            for r in delta_rows(lake / "messages")} == expected


def test_lake_clean_leaves_running_runs_and_foreign_files_alone(tmp_path: Path) -> None:
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
