"""Landing-folder files that change after the stream picked them up (stream/landing.py).

Real files and a real stream: a file that grows lands its new lines as a continuation, in
a later micro-batch of a running stream and at a restart; a file that vanishes before its
micro-batch reads it is named (one line, the progress JSON, a ledger row), and lands when
it comes back. The reference is the checker over every line at once, which knows nothing
of how the lines arrived; the progress lines must add up to what the tables hold.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from snap_spark.audit.audit_job import audit
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from snap_spark.stream.landing import is_vanished_key
from snap_spark.stream.stream_job import StreamPlan, StreamResult, run_stream
from tests.lake.helpers import delta_rows
from tests.stream.landing_checks import check_each_line_once, progress_lines, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def lines() -> list[bytes]:
    return [line for line, _ in generate(SampleConfig(agents=5, messages=2_400, seed=23,
                                                      attack_share=0.3))]


def _plan(tmp_path: Path, **kwargs: Any) -> StreamPlan:
    return StreamPlan(lake_dir=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ckpt"),
                      settings=VerifySettings(), lateness=600.0, run_id=uuid.uuid4().hex,
                      landing=str(tmp_path / "landing"),
                      progress_json=str(tmp_path / "progress.jsonl"), **kwargs)


def _write(path: Path, part: list[bytes], mode: str = "wb") -> None:
    with open(path, mode) as out:
        out.write(b"\n".join(part) + b"\n")


def test_a_file_that_grows_lands_in_a_later_micro_batch_and_at_a_restart(
        spark: Any, tmp_path: Path, lines: list[bytes]) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    a, b = landing / "a.jsonl", landing / "b.jsonl"
    cuts = [0, 600, 1_200, 1_800, len(lines)]
    outcome: dict[str, Any] = {}

    def go() -> None:
        try:
            outcome["result"] = run_stream(spark, _plan(tmp_path),
                                           {"processingTime": "1 second"})
        except BaseException as exc:  # reported by the test thread
            outcome["error"] = exc

    _write(a, lines[cuts[0]:cuts[1]])
    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    try:
        wait_for(tmp_path, lambda p: any(f["batch_id"] == 0 for f in p), "for batch 0")
        # the running stream has landed a.jsonl: it grows, and a new file arrives
        _write(a, lines[cuts[1]:cuts[2]], "ab")
        _write(b, lines[cuts[2]:cuts[3]])
        wait_for(tmp_path, lambda p: sum(f["files_grown"] for f in p) >= 1,
                  "with a grown file")
    finally:
        for query in spark.streams.active:
            query.stop()
        worker.join(timeout=180)
    assert "error" not in outcome, outcome.get("error")
    grown = [f for f in progress_lines(tmp_path) if f["files_grown"]]
    # while the stream runs (after a micro-batch, or its look between them), not at a stop
    assert grown[0]["batch_id"] is not None or grown[0]["landing_watch"] == "watch"
    assert grown[0]["lines"] >= cuts[2] - cuts[1]

    # stopped: a.jsonl grows again; the next run lands it when it starts
    _write(a, lines[cuts[3]:cuts[4]], "ab")
    result = run_stream(spark, _plan(tmp_path), {"availableNow": True})
    assert isinstance(result, StreamResult) and result.files_grown == 1
    start = [f for f in progress_lines(tmp_path) if f.get("landing_watch") == "start"]
    assert len(start) == 1 and start[0]["lines"] == cuts[4] - cuts[3]

    n_a = (cuts[2] - cuts[0]) + (cuts[4] - cuts[3])
    where = ([(str(a), n) for n in range(1, cuts[2] + 1)]
             + [(str(b), n) for n in range(1, cuts[3] - cuts[2] + 1)]
             + [(str(a), n) for n in range(cuts[2] + 1, n_a + 1)])
    ordered = lines[:cuts[2]] + lines[cuts[2]:cuts[3]] + lines[cuts[3]:]
    check_each_line_once(tmp_path, ordered, where)
    # the ledger chains a.jsonl's pieces: each continues the one before
    pieces = sorted((r for r in delta_rows(tmp_path / "lake" / "ingested_files")
                     if r["source_file"] == str(a)), key=lambda r: r["start_byte"])
    assert [p["first_line"] for p in pieces] == [1, cuts[1] + 1, cuts[2] + 1]
    assert pieces[0]["prefix_key"] is None
    assert [p["prefix_key"] for p in pieces[1:]] == [p["file_key"] for p in pieces[:-1]]


def test_a_file_gone_before_its_micro_batch_is_named_and_lands_when_it_comes_back(
        spark: Any, tmp_path: Path, lines: list[bytes]) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    size = -(-len(lines) // 3)
    paths = [landing / f"part-{i}.jsonl" for i in range(3)]
    for i, path in enumerate(paths):
        _write(path, lines[i * size:(i + 1) * size])
    kept = paths[2].read_bytes()

    def remove_after_batch_0() -> None:
        deadline = time.monotonic() + 180
        while not any(f["batch_id"] == 0 for f in progress_lines(tmp_path)):
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        paths[2].unlink()  # batches 1 and 2 were planned; batch 2 is part-2's

    remover = threading.Thread(target=remove_after_batch_0, daemon=True)
    remover.start()
    result = run_stream(spark, _plan(tmp_path, max_files_per_trigger=1),
                        {"availableNow": True})
    remover.join(timeout=10)
    assert not paths[2].exists()
    assert result.files_vanished == 1
    vanished = [f for f in progress_lines(tmp_path) if f["files_vanished"]]
    assert len(vanished) == 1 and vanished[0]["vanished"] == [str(paths[2])]
    ledger = [r for r in delta_rows(tmp_path / "lake" / "ingested_files")
              if r["source_file"] == str(paths[2])]
    assert len(ledger) == 1 and is_vanished_key(ledger[0]["file_key"])
    assert ledger[0]["lines"] == 0
    # the audit counts it and names it
    report = audit(spark, str(tmp_path / "lake"), str(tmp_path / "audit"))
    landing_figures = report.summary["figures"]["landing"]
    assert landing_figures["vanished"] == 1 and landing_figures["files"] == 2
    assert [v["source_file"] for v in landing_figures["vanished_files"]] == [str(paths[2])]
    assert str(paths[2]) in (tmp_path / "audit" / "report.html").read_text()

    # it comes back: the next run lands it whole
    paths[2].write_bytes(kept)
    again = run_stream(spark, _plan(tmp_path, max_files_per_trigger=1),
                       {"availableNow": True})
    assert again.files_changed == 1
    where = [(str(p), n) for i, p in enumerate(paths)
             for n in range(1, len(lines[i * size:(i + 1) * size]) + 1)]
    check_each_line_once(tmp_path, lines, where)


def test_a_late_earlier_copy_in_a_later_micro_batch_shows_in_the_progress_json(
        spark: Any, tmp_path: Path) -> None:
    """The second micro-batch brings a copy of a message received 100 s before the copy the
    first micro-batch accepted: its commit makes that earlier row a 2006, and its progress
    line says what that did to the counts, so that the lines still add up to the table."""
    import dataclasses
    import os

    from tests.unit.helpers import PRIV_A, T0, envelope, signed

    message = signed(PRIV_A, id="dup-1", timestamp=T0 + 75)
    landing = tmp_path / "landing"
    landing.mkdir()
    late, early = landing / "late.jsonl", landing / "early.jsonl"
    late.write_bytes(envelope(message, received_at=T0 + 100) + b"\n")
    early.write_bytes(envelope(message, received_at=T0) + b"\n")
    now = time.time()
    os.utime(late, (now - 60, now - 60))  # the older file: the first micro-batch's
    os.utime(early, (now - 30, now - 30))
    plan = dataclasses.replace(_plan(tmp_path, max_files_per_trigger=1),
                               settings=VerifySettings(max_drift=100))
    run_stream(spark, plan, {"availableNow": True})
    batches = [f for f in progress_lines(tmp_path) if f["batch_id"] is not None]
    assert [(f["valid"], f["codes"], f["rows_redecided"], f["redecided_codes"])
            for f in batches] == [(1, {}, 0, {}), (1, {}, 1, {"valid": -1, "2006": 1})]
    rows = {Path(m["source_file"]).name: m["error_code"]
            for m in delta_rows(tmp_path / "lake" / "messages")}
    assert rows == {"late.jsonl": 2006, "early.jsonl": None}
