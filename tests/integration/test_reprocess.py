"""Re-deciding landed lines: --reprocess under new settings, and messages completed from
raw_messages when the input is gone; raw_messages is never rewritten."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from snap_spark.pipeline.batch_job import main, reverify, run
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from tests.integration.helpers import run_dying_before_messages_commit
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def verdicts(lake: Path) -> list[tuple[int, int | None, str]]:
    rows = delta_rows(lake / "messages", "select line_no, error_code, error_detail from t "
                      "order by source_file, line_no")
    return [(r["line_no"], r["error_code"], r["error_detail"] or "") for r in rows]


@pytest.fixture
def landed(spark: Any, tmp_path: Path) -> dict[str, Any]:
    lines = [line for line, _ in generate(SampleConfig(agents=5, messages=1500, seed=8,
                                                       attack_share=0.3))]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    lake = tmp_path / "lake"
    run(spark, [str(path)], str(lake))
    return {"lines": lines, "path": path, "lake": lake}


def test_reprocess_redecides_under_new_settings_in_one_commit(
        spark: Any, landed: dict[str, Any]) -> None:
    lake, lines = landed["lake"], landed["lines"]
    raw_version = DeltaTable(str(lake / "raw_messages")).version()
    msg_version = DeltaTable(str(lake / "messages")).version()
    names = [line_name(str(landed["path"]), n) for n in range(1, len(lines) + 1)]
    assert verdicts(lake) == [(v.line_no, v.error_code, v.error_detail)
                              for v in check_lines(lines, ReceiptClock.refuse(), names=names)]

    code = main(["--reprocess", "--lake", str(lake), "--max-drift", "5",
                 "--replay-window", "0"])
    assert code == 0
    expected = check_lines(lines, ReceiptClock.refuse(), max_drift=5, replay_window=0,
                           names=names)
    assert verdicts(lake) == [(v.line_no, v.error_code, v.error_detail) for v in expected]
    assert sum(v.error_code == 2004 for v in expected) > sum(
        v.error_code == 2004 for v in check_lines(lines, ReceiptClock.refuse()))
    assert DeltaTable(str(lake / "raw_messages")).version() == raw_version  # never rewritten
    messages = DeltaTable(str(lake / "messages"))
    assert messages.version() == msg_version + 1  # one commit
    last = messages.history(1)[0]
    assert '"action":"reprocess"' in last["userMetadata"]
    assert '"max_drift":5.0' in last["userMetadata"]
    assert len(delta_rows(lake / "messages")) == len(lines)


def test_reprocess_refuses_input_and_needs_a_lake(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--reprocess", "--input", str(tmp_path), "--lake", str(tmp_path)]) == 2
    assert main(["--lake", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "give no --input" in err and "give --input" in err


def test_messages_are_completed_from_raw_messages_when_the_input_is_gone(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [line for line, _ in generate(SampleConfig(agents=4, messages=600, seed=9))]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"\n".join(lines[:300]) + b"\n")
    lake = tmp_path / "lake"
    run_dying_before_messages_commit(spark, [str(first)], lake, monkeypatch)
    first.unlink()  # the archive is gone (or rewritten) before the next run
    second.write_bytes(b"\n".join(lines[300:]) + b"\n")
    result = run(spark, [str(second)], str(lake))
    assert result.completed_rows == 300 and result.message_rows_written == 300
    raw = {(r["source_file"], r["line_no"]) for r in delta_rows(lake / "raw_messages")}
    msg = [(r["source_file"], r["line_no"]) for r in delta_rows(lake / "messages")]
    assert len(msg) == len(set(msg)) == len(raw) == 600 and set(msg) == raw
    expected = [(v.line_no, v.error_code) for v in check_lines(lines[:300],
                                                               ReceiptClock.refuse())]
    got = sorted((r["line_no"], r["error_code"]) for r in delta_rows(lake / "messages")
                 if r["source_file"].endswith("a.jsonl"))
    assert got == expected


def test_files_another_run_completed_first_are_left_to_it(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs started together after a killed one both find its file without messages
    rows: the one that commits second is refused for that file only, and still lands its
    own input (the race is played here in one process: the other run's completion is made
    between this run's reading of the lake and its commit)."""
    from snap_spark.pipeline import batch_job as job_module

    lines = [line for line, _ in generate(SampleConfig(agents=4, messages=600, seed=9))]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"\n".join(lines[:300]) + b"\n")
    lake = tmp_path / "lake"
    run_dying_before_messages_commit(spark, [str(first)], lake, monkeypatch)
    first.unlink()
    second.write_bytes(b"\n".join(lines[300:]) + b"\n")
    real = job_module.reverify
    raced: list[int] = []

    def other_run_first(*args: Any, **kwargs: Any) -> Any:
        raced.append(real(spark, str(lake), keys=kwargs["keys"]).message_rows_written)
        return real(*args, **kwargs)

    monkeypatch.setattr(job_module, "reverify", other_run_first)
    result = run(spark, [str(second)], str(lake))
    assert raced == [300]  # the other run's completion
    assert result.completed_rows == 0 and result.message_rows_written == 300
    assert "completed meanwhile by another writer" in capsys.readouterr().err
    raw = {(r["source_file"], r["line_no"]) for r in delta_rows(lake / "raw_messages")}
    msg = [(r["source_file"], r["line_no"]) for r in delta_rows(lake / "messages")]
    assert len(msg) == len(set(msg)) == len(raw) == 600 and set(msg) == raw


def test_reprocess_keeps_every_bad_line_and_its_reason(spark: Any, tmp_path: Path) -> None:
    import gzip
    import json

    from tests.unit.helpers import envelope, message

    deep = b"[" * 10_000 + b"]" * 10_000
    big = envelope(message(payload={"t": "x" * (12 * 1024 * 1024)}))
    bad = [b"", b"{truncated", b"\xff\xfe\x00 invalid utf-8", deep, big, b"[1,2]",
           envelope(message(timestamp="soon")), json.dumps({"received_at": 1}).encode(),
           b"\r", b"\x00\x00"]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.jsonl").write_bytes(b"\n".join(bad) + b"\n")
    cut = gzip.compress(b"\n".join(bad[:3]) + b"\n")
    (tmp_path / "in" / "cut.jsonl.gz").write_bytes(cut[: len(cut) - 9])  # damaged archive
    lake = tmp_path / "lake"
    run(spark, [str(tmp_path / "in")], str(lake))
    before = sorted((r["source_file"], r["line_no"], r["error_code"], r["error_detail"])
                    for r in delta_rows(lake / "messages"))
    assert len(before) == len(bad) + 4 and all(r[2] for r in before)
    result = reverify(spark, str(lake))
    assert result.lines_read == len(before) == result.message_rows_written
    after = sorted((r["source_file"], r["line_no"], r["error_code"], r["error_detail"])
                   for r in delta_rows(lake / "messages"))
    assert after == before
