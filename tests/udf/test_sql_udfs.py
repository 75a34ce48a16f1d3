"""The SQL functions of :mod:`snap_spark.udfs.sql`, run in real Spark SQL.

Every verdict is compared with the pure-Python checker run independently per line, and with
the sample generator's labels; canonical forms with ``rfc8785`` and the spec's JCS vectors;
P2TR decodes with the spec's key vectors.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from bech32m import codecs as bech32
from hypothesis import given, settings
from hypothesis import strategies as st

import snap_spark
from snap_spark.protocol.errors import ERROR_NAMES, IdentityInvalid
from snap_spark.protocol.keys import decode_p2tr, encode_p2tr, xonly_key
from snap_spark.protocol.records import parse_line
from snap_spark.protocol.validate import MissingReceiptTime, ReceiptClock, check_record
from snap_spark.samples.messages import ATTACK_KINDS, SampleConfig, generate
from snap_spark.udfs import sql as sql_udfs
from tests.conftest import load_vector
from tests.unit.helpers import ADDR_A, ADDR_C_TEST, T0, envelope, message, signed

pytestmark = pytest.mark.spark

SAMPLE = list(generate(SampleConfig(agents=6, messages=2000, seed=23, attack_share=0.4,
                                    bare_share=0.15, testnet_share=0.3)))
LINES = [line for line, _ in SAMPLE]
LABELS = [label for _, label in SAMPLE]

#: The checker's per-line fields, as snap_verify names them.
_FIELDS = ("msg_id", "version", "sender", "recipient", "msg_type", "method", "timestamp",
           "received_at", "has_sig", "canonical_payload")


@pytest.fixture(scope="module")
def sql(spark: Any) -> Iterator[Any]:
    """The session with the SNAP functions registered, Arrow batches of 300 rows (so one
    query spans many batches)."""
    assert snap_spark.register_udfs(spark) == list(sql_udfs.UDF_NAMES)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "300")
    yield spark
    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def _bare_clock(raw: bytes) -> float | None:
    """The receipt time the generator's labels assume for a bare line: its own timestamp."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or ("message" in value and "id" not in value):
        return None  # not a bare message (an envelope, or garbage)
    ts = value.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return None
    try:
        seconds = float(ts)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


RECEIVED = [_bare_clock(line) for line in LINES]


def reference(raw: bytes | None, received_at: float | None) -> dict[str, Any]:
    """What snap_verify must say of one line: the protocol's checker, run on its own."""
    clock = ReceiptClock.refuse() if received_at is None else ReceiptClock("fixed", received_at)
    try:
        checked = check_record(parse_line(raw), clock)
    except MissingReceiptTime:
        return {"verdict": "rejected", "error_code": 1003, "needs_clock": True}
    code = checked.stateless_code
    ref = {
        "verdict": checked.verdict,
        "error_code": code,
        "error_name": None if code is None else ERROR_NAMES[code],
        "error_detail": checked.stateless_detail or None,
        "replay_candidate": checked.replay_candidate,
        "needs_clock": False,
    }
    ref.update({name: getattr(checked, name) for name in _FIELDS})
    return ref


def _assert_matches(row: dict[str, Any], ref: dict[str, Any], what: object) -> None:
    for name, expected in ref.items():
        assert row[name] == expected, (what, name, row[name], expected)
    if ref["needs_clock"]:
        assert "receipt time" in row["error_detail"], what


def _lines_view(spark: Any, name: str, raws: list[bytes | None],
                received: list[float | None]) -> None:
    seconds = [None if r is None else float(r) for r in received]
    rows = list(zip(range(1, len(raws) + 1), raws, seconds, strict=True))
    spark.createDataFrame(rows, "line_no BIGINT, raw BINARY, received_at DOUBLE"
                          ).createOrReplaceTempView(name)


@pytest.fixture(scope="module")
def verified(sql: Any) -> list[dict[str, Any]]:
    """snap_verify over the sample in SQL, the lines given as STRING (invalid UTF-8 kept)."""
    _lines_view(sql, "sample_lines", LINES, RECEIVED)
    rows = sql.sql("""
        SELECT line_no, snap_verify(CAST(raw AS STRING), received_at) AS v
        FROM sample_lines ORDER BY line_no""").collect()
    return [row.v.asDict() for row in rows]


# ------------------------------------------------------------------ snap_verify


def test_sample_covers_every_attack_kind() -> None:
    kinds = {label.kind for label in LABELS}
    assert set(ATTACK_KINDS) <= kinds
    assert sum(1 for line, r in zip(LINES, RECEIVED, strict=True)
               if r is not None and b'"received_at"' not in line) > 100  # bare lines


def test_snap_verify_equals_the_checker_on_every_line(verified: list[dict[str, Any]]) -> None:
    assert len(verified) == len(LINES)
    for i, (raw, received) in enumerate(zip(LINES, RECEIVED, strict=True)):
        _assert_matches(verified[i], reference(raw, received), (i + 1, LABELS[i].kind))
    codes = Counter(row["error_code"] for row in verified)
    assert {None, 1003, 1004, 2001, 2002, 2004, 2005} <= set(codes), codes
    assert not any(row["needs_clock"] for row in verified)


def test_snap_verify_agrees_with_the_labels(verified: list[dict[str, Any]]) -> None:
    replays = 0
    for row, label in zip(verified, LABELS, strict=True):
        if label.expected_code == 2006:
            # Replay needs the stream: the stateless verdict only says the line may be one.
            assert row["replay_candidate"], label
            replays += 1
        else:
            assert row["error_code"] == label.expected_code, (label, row["error_detail"])
            assert row["verdict"] == ("valid" if label.expected_code is None else "rejected")
    assert replays > 0


def test_dataframe_api_equals_sql(sql: Any, verified: list[dict[str, Any]]) -> None:
    from snap_spark.udfs.sql import snap_verify

    rows = sql.table("sample_lines").select(
        "line_no", snap_verify("raw", "received_at").alias("v")).orderBy("line_no").collect()
    assert [row.v.asDict() for row in rows] == verified


def test_lines_read_with_read_text(sql: Any, tmp_path: Path) -> None:
    """``spark.read.text`` keeps invalid UTF-8 in a STRING: the line is judged, not crashed on."""
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    sql.read.text(str(path)).createOrReplaceTempView("text_lines")
    rows = sql.sql("""SELECT CAST(value AS BINARY) AS raw, snap_verify(value) AS v
                      FROM text_lines""").collect()
    got = Counter((bytes(r.raw), r.v.error_code, r.v.error_detail, r.v.needs_clock)
                  for r in rows)
    want: Counter[tuple[bytes, int | None, str | None, bool]] = Counter()
    for raw in LINES:
        ref = reference(raw, None)
        detail = ref.get("error_detail")
        if ref["needs_clock"]:
            detail = ("a bare message line needs a receipt time: received_at is NULL "
                      "(pass unix seconds to check the timestamp drift)")
        want[(raw, ref["error_code"], detail, ref["needs_clock"])] += 1
    assert got == want
    assert any(key[3] for key in got)  # bare lines without a clock
    assert any(not _utf8(key[0]) for key in got)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _message_line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode()


def test_receipt_clock_of_bare_lines(sql: Any) -> None:
    bare = _message_line(signed())
    late = envelope(signed(), received_at=T0 + 61)
    rows = [bare, bare, bare, bare, bare, late, late]
    clocks = [None, T0 + 60, T0 + 61, T0 - 61.5, float("nan"), None, T0]
    _lines_view(sql, "clock_lines", rows, clocks)
    got = [r.v for r in sql.sql("""SELECT snap_verify(raw, received_at) AS v
                                   FROM clock_lines ORDER BY line_no""").collect()]
    # NULL (and NaN, which pandas cannot tell from NULL): no clock, so no verdict beyond 1003.
    for v in (got[0], got[4]):
        assert (v.verdict, v.error_code, v.needs_clock) == ("rejected", 1003, True)
        assert "needs a receipt time" in v.error_detail and v.error_name == ERROR_NAMES[1003]
    assert (got[1].verdict, got[1].error_code, got[1].received_at) == ("valid", None, T0 + 60)
    assert got[1].msg_id == "msg-001" and got[1].sender == ADDR_A and got[1].has_sig
    assert (got[2].error_code, got[3].error_code) == (2004, 2004)
    assert got[2].error_detail.startswith(f"timestamp {T0} is 61s behind receipt time")
    # the drift check reads the receipt clock in whole seconds: T0 - 61.5 is second T0 - 62
    assert got[3].error_detail == (f"timestamp {T0} is 62s ahead of receipt second {T0 - 62} "
                                   f"(receipt time {T0 - 62}.5, max drift 60s)")
    # An envelope's own received_at wins over the argument.
    assert got[5].error_code == 2004 and got[6].error_code == 2004
    for row, raw, clock in zip(got[1:4], rows[1:4], clocks[1:4], strict=True):
        _assert_matches(row.asDict(), reference(raw, clock), clock)


def test_timestamp_receipt_time_casts_to_seconds(sql: Any) -> None:
    bare = _message_line(signed()).decode()
    sql.createDataFrame([(bare,)], "raw string").createOrReplaceTempView("one_bare")
    v = sql.sql(f"""SELECT snap_verify(raw, timestamp_seconds({T0 + 30})) AS v
                    FROM one_bare""").first().v
    assert (v.verdict, v.received_at) == ("valid", T0 + 30)


def test_receipt_values_of_any_type() -> None:
    """The batch function behind the UDF takes any cell type: a usable number is the clock,
    anything else is no clock, with the reason."""
    from decimal import Decimal

    import numpy as np

    bare = _message_line(signed())
    clocks: list[Any] = [Decimal(T0), np.float64(T0 + 1), np.int64(T0 + 2), True, "soon",
                         -1.0, float("inf"), None, float(T0 + 61)]
    cols = sql_udfs.verify_lines([bare] * len(clocks), clocks)
    assert cols["error_code"] == [None, None, None, 1003, 1003, 1003, 1003, 1003, 2004]
    assert cols["received_at"][:3] == [T0, T0 + 1, T0 + 2]
    assert cols["needs_clock"] == [False] * 3 + [True] * 5 + [False]
    assert cols["error_detail"][3] == "received_at must be unix seconds (a number), got bool"
    assert cols["error_detail"][5] == "received_at must be non-negative unix seconds, got -1.0"


def _garbage() -> list[bytes | None]:
    deep = b"[" * 10_000 + b"]" * 10_000
    deep_payload = message(payload={"a": json.loads("[" * 500 + "]" * 500)})
    huge_payload = signed(payload={"blob": "x" * 2_000_000})
    return [
        None,
        b"",
        b"   ",
        b"\xff\xfe{",
        b'{"id": "\xc3\x28"}',
        b"\xef\xbb\xbf{}",  # a byte order mark
        deep,
        b'{"received_at": 1, "message": ' + deep + b"}",
        envelope(deep_payload),  # 500 levels inside the payload
        b'{"a":' * 10_000,  # truncated, 10,000 deep
        envelope(huge_payload),  # 2 MB payload: over the 1 MiB JCS limit
        envelope(message(timestamp=10**400)),
        b'{"received_at": "soon", "message": {}}',
        b"null",
        b"1e999999",
        envelope('{"id": "\\ud800"}'),
        _message_line(message(sig="A" * 128)),  # uppercase hex
    ]


def test_garbage_gets_a_reason_never_an_exception(sql: Any) -> None:
    raws = _garbage()
    _lines_view(sql, "garbage_lines", raws, [float(T0)] * len(raws))
    for column in ("raw", "CAST(raw AS STRING)"):
        rows = sql.sql(f"""SELECT line_no, snap_verify({column}, received_at) AS v
                           FROM garbage_lines ORDER BY line_no""").collect()
        assert len(rows) == len(raws)
        for row, raw in zip(rows, raws, strict=True):
            v = row.v.asDict()
            assert v["verdict"] == "rejected" and v["error_detail"], (row.line_no, v)
            if raw is None:
                assert (v["error_code"], v["error_detail"]) == (1003, "raw_line is NULL")
            else:
                _assert_matches(v, reference(raw, float(T0)), row.line_no)
    details = [r.v.error_detail for r in rows]
    assert any(d.startswith("JCS(payload) is 2000") and d.endswith("over the 1 MiB limit")
               for d in details)
    assert "payload nesting deeper than 10" in details


def test_null_received_and_line_both_null(sql: Any) -> None:
    v = sql.sql("SELECT snap_verify(NULL, NULL) AS v").first().v
    assert (v.verdict, v.error_code, v.error_detail, v.needs_clock) == (
        "rejected", 1003, "raw_line is NULL", False)


# ------------------------------------------------------------------ snap_canonicalize


def _canonical_sql(spark: Any, texts: list[str | bytes | None]) -> list[str | None]:
    rows = [(i, t.encode() if isinstance(t, str) else t) for i, t in enumerate(texts)]
    spark.createDataFrame(rows, "i INT, t BINARY").createOrReplaceTempView("json_texts")
    out = spark.sql("""SELECT snap_canonicalize(CAST(t AS STRING)) AS c
                       FROM json_texts ORDER BY i""").collect()
    return [r.c for r in out]


def test_canonicalize_spec_vectors(sql: Any) -> None:
    vectors = load_vector("jcs-payloads.json")["vectors"]
    texts = [json.dumps(v["input"], indent=2, ensure_ascii=False) for v in vectors]
    assert _canonical_sql(sql, texts) == [v["expected"] for v in vectors]


def test_canonicalize_sample_payloads_equal_rfc8785(sql: Any) -> None:
    texts, expected = [], []
    big = 0
    for raw in LINES:
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        msg = value.get("message", value) if isinstance(value, dict) else None
        if isinstance(msg, str):
            try:
                msg = json.loads(msg)
            except ValueError:
                continue
        if not isinstance(msg, dict) or not isinstance(msg.get("payload"), dict | list):
            continue
        payload = msg["payload"]
        try:
            want = rfc8785.dumps(payload).decode()
        except rfc8785.IntegerDomainError:
            big += 1  # rfc8785 refuses integers beyond 2^53: checked below
            continue
        except (rfc8785.CanonicalizationError, RecursionError, ValueError):
            continue
        texts.append(json.dumps(payload))
        expected.append(want)
    assert len(texts) > 1500 and big > 0
    got = _canonical_sql(sql, texts)
    # deep_payload lines are deeper than SNAP allows, still far within what the SQL accepts.
    assert got == expected


def test_canonicalize_numbers_as_doubles(sql: Any) -> None:
    texts = ['{"n": 9007199254740993, "m": 123456789012345678901234567890, "f": [1.0, -0.0]}',
             "-9007199254740995", "1E3"]
    expected = [
        rfc8785.dumps({"n": float(9007199254740993), "m": 1.2345678901234568e29,
                       "f": [1, 0]}).decode(),
        rfc8785.dumps(float(-9007199254740995)).decode(),
        "1000",
    ]
    assert expected[0] == '{"f":[1,0],"m":1.2345678901234568e+29,"n":9007199254740992}'
    assert _canonical_sql(sql, texts) == expected


def test_canonicalize_invalid_is_null(sql: Any) -> None:
    too_deep = "[" * (sql_udfs.CANONICAL_MAX_DEPTH + 1) + "]" * (sql_udfs.CANONICAL_MAX_DEPTH + 1)
    deep_enough = "[" * sql_udfs.CANONICAL_MAX_DEPTH + "]" * sql_udfs.CANONICAL_MAX_DEPTH
    texts: list[str | bytes | None] = [
        None, "", "   ", "[1,", "{'a': 1}", "NaN", "1e400", '{"a": -1e400}', '"\\ud800"',
        b"\xff", "[" * 10_000 + "]" * 10_000, '{"a":' * 10_000, too_deep,
        '{"x": "' + "y" * 2_000_000 + '"', deep_enough, '{"ok": "x"}',
    ]
    got = _canonical_sql(sql, texts)
    assert got[:-2] == [None] * (len(texts) - 2)
    assert got[-2] == deep_enough and got[-1] == '{"ok":"x"}'


def test_canonicalize_big_payload(sql: Any) -> None:
    text = json.dumps({"x": "y" * 2_000_000, "a": 1.0})
    assert _canonical_sql(sql, [text]) == ['{"a":1,"x":"' + "y" * 2_000_000 + '"}']


_JSON = st.recursive(
    st.none() | st.booleans() | st.text(max_size=8)
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=20,
)


@settings(max_examples=5)  # each example is one Spark query over up to 150 values
@given(values=st.lists(_JSON, min_size=1, max_size=150),
       ascii_only=st.booleans())
def test_canonicalize_property_equals_rfc8785(sql: Any, values: list[Any],
                                              ascii_only: bool) -> None:
    texts = [json.dumps(v, ensure_ascii=ascii_only) for v in values]
    assert _canonical_sql(sql, texts) == [rfc8785.dumps(v).decode() for v in values]


# ------------------------------------------------------------------ snap_p2tr_key


def _p2tr_sql(spark: Any, addresses: list[str | bytes | None]) -> list[Any]:
    rows = [(i, a.encode() if isinstance(a, str) else a) for i, a in enumerate(addresses)]
    spark.createDataFrame(rows, "i INT, a BINARY").createOrReplaceTempView("addresses")
    out = spark.sql("""SELECT snap_p2tr_key(CAST(a AS STRING)) AS k
                       FROM addresses ORDER BY i""").collect()
    return [r.k for r in out]


def test_p2tr_spec_vectors(sql: Any) -> None:
    vectors = load_vector("key-encoding.json")["vectors"]
    keys = _p2tr_sql(sql, [v["p2trAddress"] for v in vectors] * 3)  # repeats share a decode
    for k, v in zip(keys, vectors * 3, strict=True):
        assert (k.valid, k.network, k.output_key, k.on_curve, k.error) == (
            True, v["network"], v["tweakedPublicKey"], True, None)


def _off_curve_program() -> bytes:
    for n in range(2, 1000):
        program = n.to_bytes(32, "big")
        if xonly_key(program) is None:
            return program
    raise AssertionError("no off-curve x below 1000")


def _invalid_addresses() -> list[str]:
    good = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
    program = bytes.fromhex("2b07498923bde6b9779fde46f5308dec34f464f01929af5b66be30fc3e0b3011")
    five_bit = bytes(bech32.convertbits(program, 8, 5))
    as_bech32 = bech32.bech32_encode("bc", b"\x01" + five_bit, bech32.Encoding.BECH32)
    v0_program = bech32.bech32_encode("bc", b"\x00" + five_bit, bech32.Encoding.BECH32)
    flipped = good[:-1] + ("q" if good[-1] != "q" else "p")
    return [
        flipped,  # bad checksum
        as_bech32,  # witness v1 with a bech32 (not bech32m) checksum
        good.upper(),
        good[:-1],
        good + "q",
        v0_program,  # witness v0, 32-byte program (P2WSH), also 62 characters
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",  # witness v0 P2WPKH
        "bt1p" + good[4:],
        "",
        "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse39é",
    ]


def test_p2tr_invalid_addresses(sql: Any) -> None:
    addresses = _invalid_addresses()
    keys = _p2tr_sql(sql, addresses)
    for k, address in zip(keys, addresses, strict=True):
        with pytest.raises(IdentityInvalid) as exc:
            decode_p2tr(address)
        assert (k.valid, k.network, k.output_key, k.on_curve, k.error) == (
            False, None, None, None, exc.value.detail), address
    assert "bech32 (BIP-173)" in keys[1].error and "lowercase" in keys[2].error


def test_p2tr_off_curve_null_and_bytes(sql: Any) -> None:
    off_curve = encode_p2tr(_off_curve_program(), "testnet")
    keys = _p2tr_sql(sql, [off_curve, None, b"\xff\xfe", ADDR_C_TEST])
    assert (keys[0].valid, keys[0].network, keys[0].on_curve) == (True, "testnet", False)
    assert keys[0].output_key == _off_curve_program().hex()
    assert keys[1] is None  # NULL address, NULL struct
    assert (keys[2].valid, keys[2].error) == (False, "address is not valid UTF-8")
    assert (keys[3].valid, keys[3].network) == (True, "testnet")


def test_p2tr_decodes_each_distinct_address_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def counting(address: object) -> Any:
        calls.append(address)
        return decode_p2tr(address)

    monkeypatch.setattr(sql_udfs, "decode_p2tr", counting)
    addresses = [ADDR_A, ADDR_C_TEST, "x", ADDR_A, "x", None, ADDR_A.encode()] * 50
    cols = sql_udfs.decode_addresses(addresses)
    assert sorted(map(str, calls)) == sorted(map(str, [ADDR_A, ADDR_C_TEST, "x", ADDR_A]))
    assert cols["valid"][:7] == [True, True, False, True, False, None, True]


# ------------------------------------------------------------------ registration, docs


def test_register_udfs_twice_replaces_them(sql: Any) -> None:
    stale = envelope(signed(), received_at=T0 + 100)
    _lines_view(sql, "stale_line", [stale], [None])
    query = "SELECT snap_verify(raw, received_at).error_code AS c FROM stale_line"
    try:
        assert snap_spark.register_udfs(sql, max_drift=120) == list(sql_udfs.UDF_NAMES)
        assert sql.sql(query).first().c is None  # 100 s within the wider limit
        assert sql_udfs.register_udfs(sql) == list(sql_udfs.UDF_NAMES)
        assert sql_udfs.register_udfs(sql) == list(sql_udfs.UDF_NAMES)
        assert sql.sql(query).first().c == 2004
    finally:
        sql_udfs.register_udfs(sql)
    names = [r.function for r in sql.sql("SHOW USER FUNCTIONS LIKE '*snap_*'").collect()]
    assert Counter(names) == Counter(
        [*sql_udfs.UDF_NAMES, *("_" + n for n in sql_udfs.UDF_NAMES)])


def test_import_snap_spark_stays_spark_free() -> None:
    code = ("import sys, snap_spark, snap_spark.protocol\n"
            "assert callable(snap_spark.register_udfs)\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'pandas')]\n"
            "sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
