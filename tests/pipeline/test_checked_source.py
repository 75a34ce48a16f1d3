"""The fused reader (read + check in one pass) equals reading then checking, row for row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from snap_spark.pipeline.checked_source import read_checked
from snap_spark.pipeline.source import read_lines
from snap_spark.pipeline.verify import VerifySettings, check, resolve_replay
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.sample import SampleConfig, generate

pytestmark = pytest.mark.spark


def test_fused_equals_two_pass_and_the_checker(spark: Any, tmp_path: Path) -> None:
    lines = [line for line, _ in generate(SampleConfig(agents=5, messages=3000, seed=3,
                                                       attack_share=0.3, bare_share=0.1))]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    settings = VerifySettings(bare_clock="message")
    fused = read_checked(spark, [str(path)], settings, split_bytes=200_000)
    assert fused.rdd.getNumPartitions() > 1
    two_pass = read_lines(spark, [str(path)]).transform(check(settings))
    columns = sorted(fused.columns)
    a = sorted((tuple(r) for r in fused.select(columns).collect()), key=repr)
    b = sorted((tuple(r) for r in two_pass.select(columns).collect()), key=repr)
    assert a == b
    final = fused.transform(resolve_replay(settings)).select(
        "line_no", "error_code", "error_detail").orderBy("line_no").collect()
    reference = check_lines(lines, ReceiptClock.parse("message"))
    assert [(r.line_no, r.error_code, r.error_detail or "") for r in final] == [
        (v.line_no, v.error_code, v.error_detail) for v in reference]
