"""The Arrow-batch adapter: same verdicts as the protocol core, threads or not."""

from __future__ import annotations

import pyarrow as pa

from snap_spark.protocol.records import parse_line
from snap_spark.protocol.validate import ReceiptClock, check_record
from snap_spark.sample import SampleConfig, generate
from snap_spark.udfs.verify import CHECKED_SCHEMA, check_batches, check_rows

LINES = [line for line, _ in generate(SampleConfig(agents=6, messages=4000, seed=9,
                                                   attack_share=0.3))]


def _cols(threads: int) -> dict[str, list[object]]:
    n = len(LINES)
    return check_rows(["f"] * n, list(range(1, n + 1)), list(LINES), [None] * n,
                      ReceiptClock.refuse(), 60.0, verify_threads=threads)


def test_threaded_verification_changes_nothing() -> None:
    single = _cols(1)
    assert _cols(4) == single
    assert any(code == 2001 for code in single["auth_code"])


def test_rows_equal_the_protocol_core() -> None:
    cols = _cols(2)
    for i, raw in enumerate(LINES):
        ref = check_record(parse_line(raw), ReceiptClock.refuse())
        assert (cols["pre_code"][i], cols["auth_code"][i]) == (ref.pre_code, ref.auth_code)
        assert (cols["pre_detail"][i] or "", cols["auth_detail"][i] or "") == (
            ref.pre_detail, ref.auth_detail)
        assert cols["canonical_payload"][i] == ref.canonical_payload


def test_check_batches_keeps_schema_and_rows() -> None:
    batch = pa.RecordBatch.from_pydict({
        "source_file": ["f"] * 3, "line_no": [1, 2, 3],
        "raw": [LINES[0], b"\xff", None], "read_error": [None, None, "gzip cut"]})
    out = list(check_batches(iter([batch]), "", 0.0, 60.0, verify_threads=2))
    assert len(out) == 1 and out[0].schema == CHECKED_SCHEMA and out[0].num_rows == 3
    rows = out[0].to_pylist()
    assert rows[1]["raw_bytes"] == b"\xff" and rows[1]["pre_code"] == 1003
    assert rows[2]["pre_code"] == 1003 and "gzip cut" in rows[2]["pre_detail"]
