"""The stream's progress lines read Spark's progress as JSON text (ProgressListener with
its light bridge): a real stream writes one complete line per micro-batch while PySpark's
field-by-field copy of a progress object is made to fail."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from snap_spark.stream.stream_job import StreamPlan, run_stream

pytestmark = [pytest.mark.spark]


def test_progress_lines_come_from_spark_s_json_not_pyspark_s_copies(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql.streaming import listener, query

    copies: list[str] = []

    def refused(*_: Any) -> Any:
        copies.append("copied")  # (an error raised in Spark's callback would only be logged)
        raise AssertionError("PySpark's copy of a progress object was made")

    monkeypatch.setattr(listener.QueryProgressEvent, "fromJObject", classmethod(refused))
    monkeypatch.setattr(query.StreamingQuery, "recentProgress", property(refused))
    lines = [line for line, _ in generate(SampleConfig(agents=4, messages=600, seed=5))]
    landing = tmp_path / "landing"
    landing.mkdir()
    for n, part in enumerate((lines[:250], lines[250:])):
        (landing / f"{n}.jsonl").write_bytes(b"\n".join(part) + b"\n")
    progress = tmp_path / "progress.jsonl"
    plan = StreamPlan(lake_dir=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ckpt"),
                      settings=VerifySettings(bare_clock="message"), lateness=600.0,
                      run_id=uuid.uuid4().hex, landing=str(landing),
                      progress_json=str(progress), max_files_per_trigger=1)
    result = run_stream(spark, plan, {"availableNow": True})
    batches = [json.loads(x) for x in progress.read_text().splitlines()]
    batches = [b for b in batches if b["batch_id"] is not None]
    assert copies == []
    assert result.batches == len(batches) == 2
    assert [b["batch_id"] for b in batches] == [0, 1]
    assert sum(b["lines"] for b in batches) == len(lines)
    for fields in batches:
        assert fields["input_rows"] == 1  # one file a micro-batch
        assert fields["batch_seconds"] > 0
        assert isinstance(fields["state_rows"], int) and fields["state_rows"] > 0
        assert len(fields["query_id"]) == 36


def test_latency_counts_from_when_the_stream_could_first_see_a_file(
        spark: Any, tmp_path: Path) -> None:
    """Issue 47: a file already in the landing folder, with a modification time an hour old
    (a sample linked in, a file moved from an archive), gave a first progress line of
    ``latency p50 446.7 s``, counted from its modification time. The latency of a file runs
    from when this stream could first have seen it: here, its start."""
    import os
    import time

    lines = [line for line, _ in generate(SampleConfig(agents=4, messages=300, seed=6))]
    landing = tmp_path / "landing"
    landing.mkdir()
    old = landing / "old.jsonl"
    old.write_bytes(b"\n".join(lines) + b"\n")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    progress = tmp_path / "progress.jsonl"
    plan = StreamPlan(lake_dir=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ckpt"),
                      settings=VerifySettings(bare_clock="message"), lateness=600.0,
                      run_id=uuid.uuid4().hex, landing=str(landing),
                      progress_json=str(progress))
    started = time.time()
    run_stream(spark, plan, {"availableNow": True})
    took = time.time() - started
    batches = [json.loads(x) for x in progress.read_text().splitlines()]
    batches = [b for b in batches if b["batch_id"] is not None]
    assert [b["lines"] for b in batches] == [len(lines)]
    assert 0 <= batches[0]["latency_max"] <= took  # not the hour since it was written
