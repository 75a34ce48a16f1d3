"""Files are known by their bytes: touched, renamed, linked, grown, changed, appended to
while the job runs, and crashed between commits (issue cases that landed lines twice)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from snap_spark.pipeline.batch_job import run
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate, write_sample
from tests.driver_limits import SPARK_LANDING_BYTES, set_limits
from tests.integration.helpers import run_dying_before_messages_commit
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def lines_of(count: int, seed: int) -> list[bytes]:
    return [line for line, _ in generate(SampleConfig(agents=4, messages=count, seed=seed))]


def keys(lake: Path, table: str) -> list[tuple[str, int]]:
    return [(Path(r["source_file"]).name, r["line_no"]) for r in delta_rows(lake / table)]


def assert_each_line_once(lake: Path, expected: dict[str, int]) -> None:
    for table in ("raw_messages", "messages"):
        got = keys(lake, table)
        assert len(got) == len(set(got)), f"{table}: duplicate (source_file, line_no)"
        per_file: dict[str, list[int]] = {}
        for name, line_no in got:
            per_file.setdefault(name, []).append(line_no)
        assert {n: sorted(v) for n, v in per_file.items()} == {
            n: list(range(1, c + 1)) for n, c in expected.items()}, table


def test_touched_renamed_and_linked_files_are_landed_once(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, lake = tmp_path / "in", tmp_path / "lake"
    folder.mkdir()
    data = b"\n".join(lines_of(300, 1)) + b"\n"
    (folder / "a.jsonl").write_bytes(data)
    os.symlink(folder / "a.jsonl", folder / "link.jsonl")  # the same bytes twice in a run
    first = run(spark, [str(folder)], str(lake))
    assert (first.files_processed, first.files_skipped, first.lines_read) == (1, 1, 300)
    assert "same bytes as" in capsys.readouterr().err

    os.utime(folder / "a.jsonl", (time.time() + 60, time.time() + 60))  # touched
    (folder / "copy.jsonl").write_bytes(data)  # the same bytes under another name
    again = run(spark, [str(folder)], str(lake))
    assert (again.files_processed, again.lines_read, again.message_rows_written) == (0, 0, 0)
    err = capsys.readouterr().err
    assert f"same bytes already landed as {folder / 'a.jsonl'}" in err
    assert_each_line_once(lake, {"a.jsonl": 300})


def test_a_grown_file_lands_only_its_new_lines(spark: Any, tmp_path: Path) -> None:
    lines = lines_of(500, 2)
    path, lake = tmp_path / "grow.jsonl", tmp_path / "lake"
    path.write_bytes(b"\n".join(lines[:200]) + b"\n")
    assert run(spark, [str(path)], str(lake)).lines_read == 200
    with path.open("ab") as handle:
        handle.write(b"\n".join(lines[200:]) + b"\n")
    grown = run(spark, [str(path)], str(lake))
    assert (grown.lines_read, grown.raw_rows_written, grown.message_rows_written) == (
        300, 300, 300)
    assert_each_line_once(lake, {"grow.jsonl": 500})
    raw = {r["line_no"]: r["raw_text"].encode() for r in delta_rows(lake / "raw_messages")}
    assert [raw[n] for n in range(1, 501)] == lines
    # every verdict is the checker's over all 500 lines: the lake is the replay store, so
    # the new lines are decided against the first 200 too
    codes = {r["line_no"]: r["error_code"] for r in delta_rows(lake / "messages")}
    assert [codes[n] for n in range(1, 501)] == [
        v.error_code for v in check_lines(lines, ReceiptClock.refuse())]
    assert run(spark, [str(path)], str(lake)).files_processed == 0


def test_a_changed_file_is_a_new_version_said_so(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = lines_of(100, 3)
    path, lake = tmp_path / "c.jsonl", tmp_path / "lake"
    path.write_bytes(b"\n".join(lines) + b"\n")
    run(spark, [str(path)], str(lake))
    old_key = delta_rows(lake / "ingested_files")[0]["file_key"]
    path.write_bytes(b"\n".join([*lines[:50], b'{"edited": true}', *lines[51:]]) + b"\n")
    changed = run(spark, [str(path)], str(lake))
    assert changed.lines_read == 100
    assert f"changed since it was landed as {old_key}" in capsys.readouterr().err
    assert len(delta_rows(lake / "ingested_files")) == 2


def test_lines_appended_while_the_job_runs_land_once(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer appends 1,000 lines to the input the moment the run has hashed and planned
    it (its ``stage 1/4`` line; the run's own ``log`` wrapped here to append there), before
    its Spark tasks land it (more bytes than the driver lands itself): the run lands the
    3,000 lines it hashed, the next run the 1,000 appended, each line once."""
    from snap_spark.common.console import log as real_log
    from snap_spark.common.placement import limits

    path, lake = tmp_path / "live.jsonl", tmp_path / "lake"
    write_sample(SampleConfig(agents=6, messages=3000, seed=4), str(path), tasks_path=None)
    set_limits(monkeypatch, land_bytes=SPARK_LANDING_BYTES)  # (the default: on the driver)
    assert path.stat().st_size > limits().land_bytes
    extra = b"\n".join(lines_of(1000, 5)) + b"\n"
    appended: list[str] = []

    def log(message: str) -> None:
        real_log(message)
        if message.startswith("stage 1/4") and not appended:  # hashed and planned
            with path.open("ab") as handle:
                handle.write(extra)
            appended.append(message)

    monkeypatch.setattr("snap_spark.pipeline.batch_job.log", log)
    assert run(spark, [str(path)], str(lake)).lines_read == 3000
    assert appended
    monkeypatch.setattr("snap_spark.pipeline.batch_job.log", real_log)
    assert run(spark, [str(path)], str(lake)).lines_read == 1000
    assert_each_line_once(lake, {"live.jsonl": 4_000})


def test_killed_between_commits_then_touched_keeps_the_tables_one_to_one(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    path.write_bytes(b"\n".join(lines_of(400, 6)) + b"\n")
    run_dying_before_messages_commit(spark, [str(path)], lake, monkeypatch)
    os.utime(path, (time.time() + 120, time.time() + 120))  # touched before the re-run
    healed = run(spark, [str(path)], str(lake))
    assert (healed.raw_rows_written, healed.message_rows_written) == (0, 400)
    assert_each_line_once(lake, {"in.jsonl": 400})
