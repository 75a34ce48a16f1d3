"""The stream and landing files whose last line is unfinished (issue 47, items 1 and 5).

Spark's first pick-up lands a file as it is, its unfinished last line included; when the
file grows, the landing watch lands it from that line's start and the unfinished line's rows
are removed. A file that grows while no other file arrives is landed by the watch within a
trigger interval or two. Every line once, verdicts as the checker's over the finished files,
and the progress lines adding up to what the tables hold (lines less rows replaced).
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from snap_spark.samples.messages import SampleConfig, generate, write_sample
from snap_spark.settings import VerifySettings
from snap_spark.stream.stream_job import StreamPlan, run_stream
from tests.hold import HOLDING
from tests.jobs import kill_when, start_job
from tests.lake.helpers import delta_rows
from tests.stream.landing_checks import check_each_line_once, progress_lines, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _plan(tmp_path: Path) -> StreamPlan:
    """What ``jobs/stream_verify.py --landing <tmp>/landing --lake <tmp>/lake --checkpoint
    <tmp>/ckpt --progress-json <tmp>/progress.jsonl`` runs (its default settings)."""
    return StreamPlan(lake_dir=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ckpt"),
                      settings=VerifySettings(), lateness=600.0, run_id=uuid.uuid4().hex,
                      landing=str(tmp_path / "landing"),
                      progress_json=str(tmp_path / "progress.jsonl"))


def _check(tmp_path: Path, files: list[tuple[Path, bytes]]) -> None:
    """Each line of the finished ``files`` once in both tables, with the checker's
    verdicts, and the progress adding up to the table."""
    where = [(str(path), n) for path, data in files
             for n in range(1, len(data.splitlines()) + 1)]
    check_each_line_once(tmp_path, [line for _, data in files for line in data.splitlines()],
                         where)


def test_the_issues_repro_through_the_stream_lands_each_line_once(
        spark: Any, tmp_path: Path) -> None:
    """Issue 47: the first 174,470 bytes of an 8,000-line sample (line 277 unfinished)
    dropped into the landing folder and streamed, then the rest appended and streamed."""
    whole = tmp_path / "whole.jsonl"
    write_sample(SampleConfig(messages=8000), str(whole), tasks_path=None)
    data = whole.read_bytes()
    cut = 174_470
    landing = tmp_path / "landing"
    landing.mkdir()
    path = landing / "traffic.jsonl"
    path.write_bytes(data[:cut])
    first = run_stream(spark, _plan(tmp_path), {"availableNow": True})
    assert first.lines_read == 277
    with path.open("ab") as out:
        out.write(data[cut:])
    second = run_stream(spark, _plan(tmp_path), {"availableNow": True})
    assert (second.files_grown, second.lines_read, second.rows_replaced) == (1, 7724, 1)
    assert len(delta_rows(tmp_path / "lake" / "messages", "select line_no from t")) == 8000
    _check(tmp_path, [(path, data)])


def test_a_running_stream_lands_growth_without_a_new_file_and_replaces_unfinished_lines(
        spark: Any, tmp_path: Path) -> None:
    """A running stream (1 s trigger): a.jsonl grows by whole lines while no other file
    arrives, and is landed within a few seconds (issue 47, item 5); b.jsonl arrives with
    its last line unfinished (Spark lands it so), grows twice mid-line and is finished: each
    line once, the unfinished rows replaced by the finished lines."""
    lines = [line for line, _ in generate(SampleConfig(agents=5, messages=1_200, seed=29,
                                                       attack_share=0.3))]
    a_data = b"\n".join(lines[:600]) + b"\n"
    b_data = b"\n".join(lines[600:]) + b"\n"
    b_ends = [i for i, byte in enumerate(b_data) if byte == 10]
    landing = tmp_path / "landing"
    landing.mkdir()
    a, b = landing / "a.jsonl", landing / "b.jsonl"
    a_cut = a_data.index(b"\n", len(a_data) // 3) + 1
    a.write_bytes(a_data[:a_cut])
    outcome: dict[str, Any] = {}

    def go() -> None:
        try:
            outcome["result"] = run_stream(spark, _plan(tmp_path), {"processingTime": "1 second"})
        except BaseException as exc:  # reported by the test thread
            outcome["error"] = exc

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    try:
        wait_for(tmp_path, lambda p: any(f["batch_id"] == 0 for f in p), "for batch 0")
        # b arrives in the middle of its line 100: Spark lands it so
        staging = tmp_path / "b.jsonl"
        staging.write_bytes(b_data[:b_ends[99] - 25])
        os.replace(staging, b)
        wait_for(tmp_path, lambda p: any(f["batch_id"] == 1 for f in p), "for batch 1")
        # a grows by whole lines, and nothing else arrives
        with a.open("ab") as out:
            out.write(a_data[a_cut:])
        waited = wait_for(tmp_path, lambda p: any(
            f.get("landing_watch") == "watch" and f["files_grown"] for f in p),
            "from the landing watch")
        assert waited < 10.0, f"a grown file waited {waited:.1f} s for the landing watch"
        # b: line 100 finished, then lines up to 300, line 300 unfinished again (its
        # writer still at it: the lines before it land now, line 300 waits)
        with b.open("ab") as out:
            out.write(b_data[b_ends[99] - 25:b_ends[299] - 10])
        wait_for(tmp_path, lambda p: sum(f.get("rows_replaced", 0) for f in p) >= 1,
                  "replacing b's line 100")
        with b.open("ab") as out:  # finished
            out.write(b_data[b_ends[299] - 10:])
        wait_for(tmp_path, lambda p: sum(f["lines"] - f["rows_replaced"] for f in p)
                  >= 1_200, "with every line landed")
    finally:
        for query in spark.streams.active:
            query.stop()
        worker.join(timeout=180)
    assert "error" not in outcome, outcome.get("error")
    _check(tmp_path, [(a, a_data), (b, b_data)])
    assert sum(f["rows_replaced"] for f in progress_lines(tmp_path)) == 1  # b's line 100


def test_sparks_first_pick_up_plans_a_file_against_the_ledger(
        spark: Any, tmp_path: Path) -> None:
    """A file the batch job landed with its last line unfinished, grown since, that Spark
    lists for the first time (a new checkpoint, say): its landing task lands it from the
    unfinished line's start, names the row it replaces, and reads no further than it
    hashed."""
    import pyarrow as pa

    from snap_spark.pipeline.batch_job import run
    from snap_spark.stream.stream_job import plan_files, planned_piece

    lines = [line for line, _ in generate(SampleConfig(agents=3, messages=40, seed=37))]
    data = b"\n".join(lines) + b"\n"
    ends = [i for i, byte in enumerate(data) if byte == 10]
    path, lake = tmp_path / "a.jsonl", tmp_path / "lake"
    path.write_bytes(data[:ends[19] - 5])  # line 20 unfinished
    run(spark, [str(path)], str(lake))
    path.write_bytes(data)
    ledger = str(lake / "ingested_files")
    rows = [r for b in plan_files(ledger, 1 << 20, [pa.record_batch({"path": [str(path)]})])
            for r in b.to_pylist()]
    assert [(r["start"], r["end"], r["first_line"], r["skipped"]) for r in rows] == [
        (ends[18] + 1, len(data), 20, False)]
    piece, replaced, note = planned_piece(str(path), rows[0]["file_key"], rows[0]["plan"],
                                          len(data), 21)
    assert (piece.start_byte, piece.first_line, piece.prefix_key is not None) == (
        ends[18] + 1, 20, True)
    assert replaced is not None and replaced.line_no == 20
    assert "line 20 replacing the row landed before" in note
    # the same bytes once landed: skipped
    run(spark, [str(path)], str(lake))
    again = [r for b in plan_files(ledger, 1 << 20, [pa.record_batch({"path": [str(path)]})])
             for r in b.to_pylist()]
    assert [r["skipped"] for r in again] == [True]


def test_a_stream_killed_while_it_replaces_an_unfinished_line_then_restarted(
        spark: Any, tmp_path: Path) -> None:
    """The stream's start look lands a file whose unfinished line was finished; the job is
    held still after its rows left ``raw_messages`` and ``messages`` (before its own
    ``messages`` commit), killed (SIGKILL of its process group) and started again. The run
    before (which lands the file with line 400 unfinished) and the restart are the job's
    :func:`~snap_spark.stream.stream_job.run_stream` with the job's defaults, in the test
    session; the killed run is the job process."""
    lines = [line for line, _ in generate(SampleConfig(agents=4, messages=900, seed=31))]
    data = b"\n".join(lines) + b"\n"
    ends = [i for i, byte in enumerate(data) if byte == 10]
    landing, lake, ckpt = tmp_path / "landing", tmp_path / "lake", tmp_path / "ckpt"
    landing.mkdir()
    path = landing / "live.jsonl"
    path.write_bytes(data[:ends[399] - 30])
    first = run_stream(spark, _plan(tmp_path), {"availableNow": True})
    assert first.lines_read == 400  # line 400 landed unfinished
    with path.open("ab") as out:
        out.write(data[ends[399] - 30:])
    args = ["--trigger", "available-now", "--landing", str(landing), "--lake", str(lake),
            "--checkpoint", str(ckpt), "--progress-json", str(tmp_path / "progress.jsonl")]
    said = kill_when(start_job("stream_verify.py", args,
                               hold_at="messages: removed the rows", hold_nth=2), HOLDING)
    assert "line 400 replacing the row landed before" in said
    run_stream(spark, _plan(tmp_path), {"availableNow": True})
    lake_rows = delta_rows(lake / "messages", "select source_file, line_no from t")
    assert len(lake_rows) == len(lines)
    # the killed run's progress never reached the file; the runs that finished add up
    _check(tmp_path, [(path, data)])
