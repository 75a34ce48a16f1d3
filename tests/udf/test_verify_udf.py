"""The batch checker and the row mapping: same verdicts as the protocol core, threads or not."""

from __future__ import annotations

from snap_spark.pipeline.checked import RowMeta, check_lines, message_rows, raw_rows
from snap_spark.protocol.records import parse_line
from snap_spark.protocol.validate import ReceiptClock, check_record
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from snap_spark.udfs.verify import check_columns

LINES = [line for line, _ in generate(SampleConfig(agents=6, messages=4000, seed=9,
                                                   attack_share=0.3))]


def _cols(threads: int) -> dict[str, list[object]]:
    return check_columns(list(LINES), [None] * len(LINES), ReceiptClock.refuse(), 60.0,
                         verify_threads=threads)


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


def test_rows_keep_bad_bytes_and_read_errors() -> None:
    checked = check_lines(VerifySettings(verify_threads=2), "f", [1, 2, 3],
                          [LINES[0], b"\xff", None], [None, None, "gzip cut"])
    meta = RowMeta("run", 0, "key")
    raw = raw_rows(meta, checked).to_pylist()
    msgs = message_rows(meta, checked).to_pylist()
    assert [r["line_no"] for r in raw] == [r["line_no"] for r in msgs] == [1, 2, 3]
    assert raw[1]["raw_bytes"] == b"\xff" and raw[0]["raw_bytes"] is None
    assert raw[2]["read_error"] == "gzip cut"
    assert msgs[1]["error_code"] == 1003 and msgs[1]["verdict"] == "rejected"
    assert msgs[2]["error_code"] == 1003 and "gzip cut" in msgs[2]["error_detail"]
    ref = check_record(parse_line(LINES[0]), ReceiptClock.refuse())
    assert (msgs[0]["error_code"], msgs[0]["error_detail"] or "") == (
        ref.stateless_code, ref.stateless_detail)
