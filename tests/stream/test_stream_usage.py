"""The stream job's usage errors: each is one line on stderr, exit status 2, and nothing is
started or written (no Spark session, no lake, no checkpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from snap_spark.stream.stream_job import main


@pytest.mark.parametrize(("extra", "expected"), [
    ([], "give one source"),
    (["--landing", "in", "--kafka-bootstrap", "k:9092", "--topic", "t"], "give one source"),
    (["--kafka-bootstrap", "k:9092"], "--kafka-bootstrap needs --topic"),
    (["--landing", "in", "--max-files-per-trigger", "0"],
     "--max-files-per-trigger must be at least 1"),
    (["--kafka-bootstrap", "k:9092", "--topic", "t", "--max-files-per-trigger", "2"],
     "--max-files-per-trigger is for --landing"),
    (["--kafka-bootstrap", "k:9092", "--topic", "t", "--max-offsets-per-trigger", "0"],
     "--max-offsets-per-trigger must be at least 1"),
    (["--landing", "in", "--max-offsets-per-trigger", "100"],
     "--max-offsets-per-trigger is for a Kafka source"),
    (["--landing", "in", "--state-partitions", "0"], "--state-partitions must be at least 1"),
    (["--landing", "in", "--trigger", "sometimes"], "trigger"),
], ids=["no-source", "two-sources", "no-topic", "zero-files", "files-on-kafka",
        "zero-offsets", "offsets-on-landing", "zero-partitions", "bad-trigger"])
def test_a_usage_error_is_one_line_and_starts_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
        expected: str) -> None:
    lake, checkpoint = tmp_path / "lake", tmp_path / "ckpt"
    (tmp_path / "in").mkdir()
    argv = [arg.replace("in", str(tmp_path / "in")) if arg == "in" else arg for arg in extra]
    status = main([*argv, "--lake", str(lake), "--checkpoint", str(checkpoint)])
    err = capsys.readouterr().err
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], err
    assert not lake.exists() and not checkpoint.exists()
