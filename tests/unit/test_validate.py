"""Each SNAP error code, and which one wins when several checks fail."""

from __future__ import annotations

import json
from typing import Any

import pytest

from snap_spark.protocol import keys
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.records import parse_line
from snap_spark.protocol.validate import (
    MissingReceiptTime,
    ReceiptClock,
    check_message,
    check_record,
)
from tests.unit.helpers import (
    ADDR_A,
    ADDR_B,
    ADDR_C_TEST,
    PRIV_A,
    PRIV_B,
    T0,
    envelope,
    message,
    signed,
)

CLOCK = ReceiptClock.refuse()


def verdict(msg: Any, received_at: float | None = T0, clock: ReceiptClock = CLOCK) -> int | None:
    return check_message(msg, received_at, clock).stateless_code


def line_codes(lines: list[bytes], clock: ReceiptClock = CLOCK) -> list[int | None]:
    return [v.error_code for v in check_lines(lines, clock)]


# ---- valid ---------------------------------------------------------------------------------

def test_signed_request_is_valid() -> None:
    assert verdict(signed()) is None


def test_unsigned_response_and_event_are_valid() -> None:
    assert verdict(message(type="response")) is None
    assert verdict(message(type="event", method="message/stream")) is None


def test_service_call_without_to_is_valid() -> None:
    assert verdict(signed(to=None, method="service/call", payload={"name": "q"})) is None


def test_extension_fields_are_ignored_and_unsigned() -> None:
    msg = signed()
    msg["x-trace"] = "abc"
    msg["unknown"] = {"deep": [1, 2]}
    assert verdict(msg) is None


def test_version_is_not_signed() -> None:
    msg = signed()
    msg["version"] = "9.9"
    assert verdict(msg) is None


# ---- 1003 -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "raw",
    [b"", b"   ", b"not json", b'{"id": "x"', b"[1, 2]", b"42", b'"text"', b"null",
     b"\xff\xfe{}", b"NaN", b'{"a": Infinity}', b"\xef\xbb\xbf{}"],
)
def test_bad_lines_are_1003(raw: bytes) -> None:
    assert line_codes([raw]) == [1003]


@pytest.mark.parametrize("field", ["id", "version", "from", "type", "method", "payload",
                                   "timestamp"])
def test_missing_required_field_is_1003(field: str) -> None:
    assert verdict(message(**{field: None})) == 1003


def test_envelope_with_bad_received_at_is_1003() -> None:
    line = json.dumps({"received_at": "soon", "message": signed()}).encode()
    assert line_codes([line]) == [1003]


def test_envelope_message_as_text() -> None:
    line = json.dumps({"received_at": T0, "message": json.dumps(signed())}).encode()
    assert line_codes([line]) == [None]
    bad = json.dumps({"received_at": T0, "message": '{"id": '}).encode()
    assert line_codes([bad]) == [1003]


# ---- 1004 -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "overrides",
    [
        {"id": ""}, {"id": "x" * 129}, {"id": "msg@001"}, {"id": "msg\n"}, {"id": 7},
        {"version": "1"}, {"version": "v0.1"}, {"version": "0.1\n"}, {"version": "٠.١"},
        {"version": 0.1},
        {"from": 12}, {"to": 12}, {"type": "notification"}, {"type": ["request"]},
        {"method": "sendMessage"}, {"method": "Message/send"}, {"method": "a/" + "b" * 63},
        {"payload": []}, {"payload": "x"},
        {"timestamp": "1770163200"}, {"timestamp": 1770163200.5}, {"timestamp": -1},
        {"timestamp": 2**53}, {"timestamp": True},
        {"sig": "AB" * 64}, {"sig": "ab" * 63}, {"sig": 5}, {"sig": None},
    ],
    ids=repr,
)
def test_type_and_constraint_failures_are_1004(overrides: dict[str, Any]) -> None:
    msg = message()
    for key, value in overrides.items():
        msg[key] = value  # explicit None stays as JSON null here
    assert verdict(msg) == 1004


def test_null_to_is_1004_not_absent() -> None:
    msg = message()
    msg["to"] = None
    assert verdict(msg) == 1004


def test_payload_depth_limit() -> None:
    depth10: dict[str, Any] = {}
    for _ in range(9):
        depth10 = {"a": depth10}
    assert verdict(signed(payload=depth10)) is None
    sig = {"sig": "ab" * 64}  # never reached: depth is checked first
    assert verdict(message(payload={"a": depth10}, **sig)) == 1004
    assert verdict(message(payload={"a": [[[[[[[[[[]]]]]]]]]]}, **sig)) == 1004


def test_payload_size_limit_is_on_jcs_bytes() -> None:
    # {"t":"..."} is 8 bytes of framing: fill to exactly 1 MiB, then one more byte.
    fits = {"t": "x" * (1024 * 1024 - 8)}
    assert verdict(signed(payload=fits)) is None
    assert verdict(signed(payload={"t": "x" * (1024 * 1024 - 7)})) == 1004


def test_non_finite_numbers_are_1004_not_crash() -> None:
    raw = envelope(message()).replace(b'"hi"', b"1e400")
    assert line_codes([raw]) == [1004]
    huge_int = envelope(message()).replace(b'"hi"', b"9" * 5000)
    assert line_codes([huge_int]) == [1004]


def test_big_integers_are_canonicalized_as_doubles() -> None:
    a = signed(payload={"n": 9007199254740992})
    b = dict(a, payload={"n": 9007199254740993})  # same double, same signature
    assert verdict(b) is None


def test_integral_float_timestamp_is_an_integer() -> None:
    msg = signed()
    msg["timestamp"] = float(T0)
    assert verdict(msg) is None


def test_mixed_networks_is_1004() -> None:
    assert verdict(signed(to=ADDR_C_TEST)) == 1004


def test_huge_message_is_1004() -> None:
    line = envelope(message(**{"x-pad": "y" * (10 * 1024 * 1024)}))
    assert line_codes([line]) == [1004]


# ---- 2005 -----------------------------------------------------------------------------------

def _bech32_v1(program: bytes) -> str:
    from bech32m import codecs

    data = bytes([1]) + bytes(codecs.convertbits(program, 8, 5))
    return codecs.bech32_encode("bc", data, codecs.Encoding.BECH32)


@pytest.mark.parametrize(
    "address",
    [
        ADDR_A.upper(),
        ADDR_A[:-1] + ("q" if ADDR_A[-1] != "q" else "p"),  # checksum
        "bc1q" + ADDR_A[4:],
        ADDR_A[:-2],
        "",
        "bc1p",
        _bech32_v1(keys.decode_p2tr(ADDR_A).program),
        "bcrt1p" + ADDR_A[4:],
    ],
)
def test_malformed_from_is_2005(address: str) -> None:
    assert verdict(message(**{"from": address})) == 2005


def test_malformed_to_is_2005() -> None:
    assert verdict(message(to=ADDR_B[:-1] + "x")) == 2005
    assert verdict(message(to="")) == 2005


def test_program_off_curve_is_2001_not_2005() -> None:
    # x = 5 has no curve point (5^3 + 7 = 132 is not a square mod p).
    off_curve = keys.encode_p2tr((5).to_bytes(32, "big"))
    assert keys.xonly_key((5).to_bytes(32, "big")) is None
    msg = message(**{"from": off_curve})
    msg["sig"] = "00" * 64
    assert verdict(msg) == 2001


# ---- 2004 -----------------------------------------------------------------------------------

def test_drift_boundary() -> None:
    msg = signed()
    assert verdict(msg, T0 + 60) is None
    assert verdict(msg, T0 - 60) is None
    assert verdict(msg, T0 + 61) == 2004
    assert verdict(msg, T0 - 60.5) == 2004


#: Receipt offset from the timestamp -> its code. The receipt clock is read in whole seconds
#: (authentication.md: ``now = Math.floor(Date.now() / 1000)``): late receipt up to 60.999 s
#: passes; early receipt is unchanged (the timestamp is whole, so more than 60 s early fails).
FRACTIONAL_DRIFT = [(60.5, None), (60.999, None), (61.0, 2004), (61.5, 2004),
                    (-60.0, None), (-60.001, 2004), (-60.5, 2004), (-61.0, 2004)]


@pytest.mark.parametrize(("offset", "code"), FRACTIONAL_DRIFT)
def test_drift_reads_the_receipt_clock_in_whole_seconds(offset: float, code: int | None) -> None:
    received = T0 + offset
    checked = check_message(signed(), received, CLOCK)
    assert checked.stateless_code == code
    assert checked.received_at == received  # kept whole: the fraction is not dropped
    assert line_codes([envelope(signed(), received)]) == [code]
    assert line_codes([json.dumps(signed()).encode()], ReceiptClock("fixed", received)) == [code]


def test_drift_reason_names_the_receipt_second() -> None:
    late = check_message(signed(), T0 + 61.5, CLOCK)
    assert late.pre_detail == (f"timestamp {T0} is 61s behind receipt second {T0 + 61} "
                               f"(receipt time {T0 + 61}.5, max drift 60s)")
    early = check_message(signed(), T0 - 60.25, CLOCK)
    assert early.pre_detail == (f"timestamp {T0} is 61s ahead of receipt second {T0 - 61} "
                                f"(receipt time {T0 - 61}.75, max drift 60s)")
    whole = check_message(signed(), T0 + 61, CLOCK)
    assert whole.pre_detail == (f"timestamp {T0} is 61s behind receipt time {T0 + 61} "
                                "(max drift 60s)")


def test_drift_whole_seconds_with_another_max_drift() -> None:
    """Both sides of the comparison are whole seconds, so a fractional max drift acts as its
    whole part: 5.5 lets a message be received up to 5 s early and 5.999 s late."""
    msg = signed()
    for max_drift in (5, 5.5):
        code = [check_message(msg, T0 + at, CLOCK, max_drift=max_drift).stateless_code
                for at in (5.999, 6.0, -5.0, -5.25)]
        assert code == [None, 2004, None, 2004], max_drift


def test_bare_line_needs_a_clock() -> None:
    raw = json.dumps(signed()).encode()
    with pytest.raises(MissingReceiptTime):
        check_record(parse_line(raw), ReceiptClock.refuse())
    assert line_codes([raw], ReceiptClock.parse("message")) == [None]
    assert line_codes([raw], ReceiptClock.parse(str(T0 + 100))) == [2004]


def test_bare_garbage_needs_no_clock() -> None:
    assert line_codes([b"garbage"], ReceiptClock.refuse()) == [1003]


# ---- 2006 -----------------------------------------------------------------------------------

def test_replay_within_window() -> None:
    msg = signed()
    lines = [envelope(msg, T0 - 60), envelope(msg, T0 + 60), envelope(msg, T0)]
    # receipt order: T0-60 (accepted), T0 (dup), T0+60 (dup: exactly 120 s after)
    assert line_codes(lines) == [None, 2006, 2006]


def test_replay_after_window_is_a_drift_failure() -> None:
    msg = signed()
    assert line_codes([envelope(msg, T0), envelope(msg, T0 + 121)]) == [None, 2004]


def test_replay_window_keeps_the_fractional_receipt_time() -> None:
    """Only the drift check reads whole seconds. A copy accepted 60 s early and repeated
    120.5 s later (60.5 s late: in time) is past the 120 s window by its full receipt time,
    so it is accepted again; exactly 120 s later it is a 2006, and 121 s later a 2004."""
    msg = signed()
    first = envelope(msg, T0 - 60)
    assert line_codes([first, envelope(msg, T0 + 60.5)]) == [None, None]
    assert line_codes([first, envelope(msg, T0 + 60.0)]) == [None, 2006]
    assert line_codes([first, envelope(msg, T0 + 61.0)]) == [None, 2004]
    # receipt order is the full time as well: T0 + 0.25 comes before T0 + 0.75
    later, earlier = envelope(msg, T0 + 0.75), envelope(msg, T0 + 0.25)
    assert line_codes([later, earlier]) == [2006, None]


def test_forged_copy_first_does_not_shadow_genuine() -> None:
    genuine = signed(payload={"v": 1})
    forged = dict(genuine, payload={"v": 2})
    assert line_codes([envelope(forged, T0), envelope(genuine, T0 + 1)]) == [2001, None]


def test_forged_copy_after_genuine_is_2006() -> None:
    genuine = signed(payload={"v": 1})
    forged = dict(genuine, payload={"v": 2})
    assert line_codes([envelope(genuine, T0), envelope(forged, T0 + 1)]) == [None, 2006]


def test_replay_key_is_per_sender() -> None:
    a = signed(PRIV_A)
    b = signed(PRIV_B, **{"from": ADDR_B, "to": ADDR_A})
    assert line_codes([envelope(a), envelope(b)]) == [None, None]


def test_receipt_order_not_file_order() -> None:
    msg = signed()
    assert line_codes([envelope(msg, T0 + 10), envelope(msg, T0)]) == [2006, None]


# ---- 2002 / 2001 ----------------------------------------------------------------------------

def test_request_without_sig_is_2002() -> None:
    assert verdict(message()) == 2002


def test_bad_signatures_are_2001() -> None:
    good = signed()
    assert verdict(dict(good, payload={"tampered": True})) == 2001
    assert verdict(dict(good, timestamp=T0 + 1), T0) == 2001
    assert verdict({k: v for k, v in good.items() if k != "to"}) == 2001  # `to` is signed
    assert verdict(signed(PRIV_B)) == 2001  # B's key, A's address
    assert verdict(dict(good, sig="00" * 64)) == 2001
    signed_response = signed(type="response")
    assert verdict(dict(signed_response, payload={})) == 2001  # a bad sig on a response


def test_untweaked_key_signature_is_2001() -> None:
    from coincurve import PrivateKey

    from snap_spark.protocol.signing import message_digest

    msg = message()
    sig = PrivateKey(PRIV_A).sign_schnorr(message_digest(msg), bytes(32)).hex()
    assert verdict(dict(msg, sig=sig)) == 2001


# ---- order of checks ------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("overrides", "received_at", "expected"),
    [
        ({"id": None, "method": "BAD", "from": "junk"}, T0 + 999, 1003),
        ({"method": "BAD", "from": "junk"}, T0 + 999, 1004),
        ({"from": "junk", "to": ADDR_C_TEST}, T0 + 999, 2005),
        ({"to": ADDR_C_TEST}, T0 + 999, 1004),
        ({"payload": {"x": 1}}, T0 + 999, 2004),
        ({"sig": None}, T0 + 999, 2004),
    ],
)
def test_first_failing_check_wins(
    overrides: dict[str, Any], received_at: float, expected: int
) -> None:
    base = signed()
    msg = dict(base)
    for key, value in overrides.items():
        if value is None:
            msg.pop(key, None)
        else:
            msg[key] = value
    assert verdict(msg, received_at) == expected


def test_duplicate_beats_missing_and_bad_signature() -> None:
    genuine = signed()
    unsigned = {k: v for k, v in genuine.items() if k != "sig"}
    assert line_codes([envelope(genuine), envelope(unsigned, T0 + 1)]) == [None, 2006]


def test_detail_names_the_field() -> None:
    out = check_message(message(method="X"), T0, CLOCK)
    assert out.pre_code == 1004 and "method" in out.pre_detail
    out = check_message(message(to="bc1pzzz"), T0, CLOCK)
    assert out.pre_code == 2005 and out.pre_detail.startswith("to:")
    assert ADDR_A != ADDR_B


def test_strict_decode_can_require_a_curve_point() -> None:
    off_curve = keys.encode_p2tr((5).to_bytes(32, "big"))
    assert keys.decode_p2tr(off_curve).program == (5).to_bytes(32, "big")
    with pytest.raises(keys.IdentityInvalid):
        keys.decode_p2tr(off_curve, require_point=True)
    assert not keys.is_valid_p2tr(off_curve)
    assert keys.is_valid_p2tr(off_curve, require_point=False)
    assert keys.decode_p2tr(ADDR_A, require_point=True).network == "mainnet"


def test_verdict_property() -> None:
    assert check_message(signed(), T0, CLOCK).verdict == "valid"
    assert check_message(message(), T0, CLOCK).verdict == "rejected"


# -- inputs that crashed a whole batch before (found while proving the native core equal) --

def _rows(lines: list[bytes]) -> Any:
    """The lines through the job's own mapping to table rows (Arrow), Python core."""
    from snap_spark.pipeline.checked import RowMeta, message_rows
    from snap_spark.pipeline.checked import check_lines as check_batch
    from snap_spark.settings import VerifySettings

    checked = check_batch(VerifySettings(bare_clock="now"), "a.jsonl",
                          list(range(1, len(lines) + 1)), lines, None)
    return message_rows(RowMeta("run", 0, "key"), checked).to_pydict()


def test_lone_surrogates_are_rejected_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNAP_SPARK_NATIVE", "0")
    base = {"id": "m", "version": "0.1", "from": ADDR_A, "type": "event", "method": "a/b",
            "payload": {}, "timestamp": T0}
    in_key = json.dumps(base).replace('"payload": {}', '"payload": {"\\ud800": 1}')
    in_id = json.dumps(base).replace('"id": "m"', '"id": "a\\udc00"')
    source = '{"source": "\\ud800x", "message": {}}'
    rows = _rows([in_key.encode(), in_id.encode(), source.encode()])
    assert rows["error_code"] == [1004, 1004, 1003]
    assert rows["error_detail"][0] == ("payload cannot be canonicalized: input contains "
                                       "non-UTF-8 codepoints")
    assert rows["msg_id"][1] == "a\ufffd"  # the table keeps the field, its lone half replaced


def test_received_at_beyond_a_double_is_a_1003() -> None:
    line = b'{"received_at": 1' + b"0" * 400 + b', "message": {}}'
    record = parse_line(line)
    assert record.error is not None and record.error.code == 1003
    assert "received_at" in record.error.detail


def test_an_address_that_is_only_a_checksum_is_a_2005() -> None:
    from bech32m import codecs

    address = codecs.bech32_encode("bc1p" + "q" * 51, b"", codecs.Encoding.BECH32M)
    assert len(address) == 62
    with pytest.raises(keys.IdentityInvalid, match="no witness version"):
        keys.decode_p2tr(address)


def test_a_leading_byte_order_mark_is_ignored() -> None:
    """A UTF-8 BOM at the start of a line (a Windows export's first line) is not part of its
    JSON text (RFC 8259 lets a parser ignore it): the line's verdict is the one it has
    without it. Only one is: a second one is the text's, and not JSON."""
    bom = b"\xef\xbb\xbf"
    line = envelope(signed())
    assert line_codes([bom + line, line]) == [None, 2006]
    assert line_codes([bom + bom + line]) == [1003]
    [only] = check_lines([bom], CLOCK)
    assert (only.error_code, only.error_detail) == (1003, "empty line")
