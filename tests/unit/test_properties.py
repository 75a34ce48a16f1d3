"""Property tests: signing round trips, mutations fail, JCS is stable, nothing crashes."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from snap_spark.protocol import jcs, keys
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.errors import InvalidPayload
from snap_spark.protocol.signing import sign_message
from snap_spark.protocol.validate import ReceiptClock, check_message
from tests.unit.helpers import T0

PROFILE = settings(max_examples=150, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])

private_keys = st.integers(min_value=1, max_value=keys.CURVE_ORDER - 1).map(
    lambda n: n.to_bytes(32, "big")
)
networks = st.sampled_from(["mainnet", "testnet"])
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
payloads = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
ids = st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True)


def _message(sender: str, recipient: str | None, payload: dict[str, Any], msg_id: str,
             msg_type: str, ts: int) -> dict[str, Any]:
    msg: dict[str, Any] = {"id": msg_id, "version": "0.1", "from": sender, "type": msg_type,
                           "method": "message/send", "payload": payload, "timestamp": ts}
    if recipient is not None:
        msg["to"] = recipient
    return msg


@PROFILE
@given(private_keys, private_keys, networks, payloads, ids,
       st.sampled_from(["request", "response", "event"]), st.booleans(),
       st.integers(min_value=0, max_value=2**53 - 1))
def test_sign_verify_round_trip(a: bytes, b: bytes, network: str, payload: dict[str, Any],
                                msg_id: str, msg_type: str, with_to: bool, ts: int) -> None:
    sender = keys.p2tr_address(keys.internal_pubkey(a), network)  # type: ignore[arg-type]
    recipient = keys.p2tr_address(keys.internal_pubkey(b), network)  # type: ignore[arg-type]
    msg = sign_message(_message(sender, recipient if with_to else None, payload, msg_id,
                                msg_type, ts), a)
    # Through JSON text and back, as a receiver sees it.
    received = json.loads(json.dumps(msg))
    assert check_message(received, ts, ReceiptClock.refuse()).stateless_code is None


MUTATIONS = {
    "id": lambda v: v + "x",
    "from": None,  # replaced with another agent's address below
    "to": None,
    "type": lambda v: "response" if v != "response" else "event",
    "method": lambda v: "tasks/get" if v != "tasks/get" else "tasks/cancel",
    "payload": lambda v: {**v, "mutated": 1},
    "timestamp": lambda v: v + 1,
    "sig": lambda v: ("0" if v[0] != "0" else "1") + v[1:],
}


@PROFILE
@given(private_keys, private_keys, payloads, ids, st.sampled_from(sorted(MUTATIONS)))
def test_any_single_field_mutation_fails(a: bytes, b: bytes, payload: dict[str, Any],
                                         msg_id: str, field: str) -> None:
    # d and n-d share one x-only key (BIP-340 drops y), so compare public keys, not secrets.
    assume(keys.internal_pubkey(a) != keys.internal_pubkey(b))
    sender = keys.p2tr_address(keys.internal_pubkey(a))
    other = keys.p2tr_address(keys.internal_pubkey(b))
    msg = sign_message(_message(sender, other, payload, msg_id, "request", T0), a)
    mutated = dict(msg)
    if field == "from":
        mutated["from"] = other
    elif field == "to":
        mutated["to"] = sender
    else:
        mutated[field] = MUTATIONS[field](msg[field])  # type: ignore[misc]
    code = check_message(mutated, T0, ReceiptClock.refuse()).stateless_code
    assert code == 2001


@PROFILE
@given(json_values)
def test_jcs_is_idempotent_through_parse(value: Any) -> None:
    once = jcs.canonicalize(value, max_depth=100)
    assert jcs.canonicalize(json.loads(once), max_depth=100) == once


keys_with_astral = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x10FFFF,
                           blacklist_categories=("Cs",)),
    max_size=6,
)
wide_values = st.recursive(
    json_scalars | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(keys_with_astral, children, max_size=5),
    max_leaves=25,
)


@PROFILE
@given(wide_values)
def test_fast_path_equals_reference_jcs(value: Any) -> None:
    assert jcs.canonicalize(value, max_depth=100) == jcs.canonicalize_reference(value)


@PROFILE
@given(wide_values, st.integers(1, 6))
def test_plain_scan_agrees_with_normalize(value: Any, max_depth: int) -> None:
    """``is_plain`` (the no-copy scan) says yes only where normalize changes nothing and
    allows orjson; and depth limits still raise through ``canonicalize``."""
    try:
        normalized, _depth, fast_ok = jcs.normalize(value, max_depth=max_depth)
    except InvalidPayload:
        assert not jcs.is_plain(value, max_depth=max_depth)
        with pytest.raises(InvalidPayload):
            jcs.canonicalize(value, max_depth=max_depth)
        return
    if jcs.is_plain(value, max_depth=max_depth):
        assert fast_ok
        assert normalized == value
        assert json.dumps(normalized) == json.dumps(value)  # no int/float swap hidden by ==


@PROFILE
@given(st.dictionaries(keys_with_astral, st.integers(-(2**53) + 1, 2**53 - 1), max_size=6))
def test_fast_path_key_order_matches_rfc8785(value: dict[str, int]) -> None:
    assert jcs.canonicalize(value) == rfc8785.dumps(value)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_checker_never_raises_on_arbitrary_bytes(raw: bytes) -> None:
    results = check_lines([raw], ReceiptClock.parse("message"))
    assert len(results) == 1 and results[0].verdict in ("valid", "rejected")


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_checker_never_raises_on_arbitrary_json(value: Any) -> None:
    for line in (json.dumps(value).encode(),
                 json.dumps({"received_at": T0, "message": value}).encode()):
        results = check_lines([line], ReceiptClock.parse("message"))
        assert results[0].verdict == "rejected"


def test_depth_ten_thousand_is_rejected_not_crashed() -> None:
    deep = b"[" * 10_000 + b"]" * 10_000
    payload_deep = b'{"received_at": 1, "message": {"payload": ' + deep + b"}}"
    results = check_lines([deep, payload_deep, b"{" * 10_000], ReceiptClock.parse("message"))
    assert [r.error_code for r in results] == [1003, 1003, 1003]
    full = json.dumps({"id": "a", "version": "0.1", "from": "x", "type": "request",
                       "method": "a/b", "timestamp": 1, "payload": "P"}).encode()
    full = full.replace(b'"P"', b'{"a": ' + deep + b"}")
    assert [r.error_code for r in check_lines([full], ReceiptClock.parse("message"))] == [1004]


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False)
       | st.floats(min_value=1e-7, max_value=1e-3) | st.floats(min_value=1e14, max_value=1e22))
def test_fast_path_floats_equal_rfc8785(value: float) -> None:
    assert jcs.canonicalize({"f": value}) == jcs.canonicalize_reference({"f": value})
