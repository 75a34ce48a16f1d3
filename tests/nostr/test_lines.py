"""event_from_line: the three shapes of an event line, and never a crash on garbage."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snap_spark.nostr.lines import EventLine, event_from_line
from snap_spark.protocol.jsonparse import loads

EVENT: dict[str, Any] = {"id": "ab" * 32, "pubkey": "cd" * 32, "created_at": 1770163200,
                         "kind": 4339, "tags": [["p", "ef" * 32]], "content": "é\u2028",
                         "sig": "01" * 64}


def line(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def assert_consistent(found: EventLine) -> None:
    if found.event is None:
        assert found.shape is None and found.event_json is None
        assert isinstance(found.reason, str) and found.reason
    else:
        assert found.reason is None and found.shape in ("event", "frame", "envelope")
        assert isinstance(found.event_json, str)
        assert loads(found.event_json) == found.event


def test_an_event_line_is_given_back_exactly() -> None:
    text = ' {"kind": 1,  "content": "spaced"}\r'
    found = event_from_line(text.encode())
    assert (found.shape, found.event, found.event_json) == (
        "event", {"kind": 1, "content": "spaced"}, text)
    assert (found.received_at, found.relay, found.subscription) == (None, None, None)


def test_relay_and_client_frames() -> None:
    relay_frame = event_from_line(line(["EVENT", "sub-1", EVENT]))
    assert (relay_frame.shape, relay_frame.event, relay_frame.subscription) == (
        "frame", EVENT, "sub-1")
    client_frame = event_from_line(line(["EVENT", EVENT]))
    assert (client_frame.shape, client_frame.event, client_frame.subscription) == (
        "frame", EVENT, None)
    assert relay_frame.event_json == json.dumps(EVENT, ensure_ascii=False,
                                                separators=(",", ":"))


def test_envelopes() -> None:
    found = event_from_line(line({"received_at": 1770163201.5, "relay": "wss://r.example",
                                  "event": EVENT}))
    assert (found.shape, found.event, found.received_at, found.relay) == (
        "envelope", EVENT, 1770163201.5, "wss://r.example")
    as_text = json.dumps(EVENT)
    found = event_from_line(line({"received_at": 1, "event": as_text}))
    assert (found.event, found.event_json, found.relay) == (EVENT, as_text, None)
    assert event_from_line(line({"event": EVENT})).received_at is None


@pytest.mark.parametrize(("raw", "reason"), [
    (b"", "empty line"),
    (b" \t\r", "empty line"),
    (b"\xff\xfe{}", "not valid UTF-8 (byte 0)"),
    (b'{"id": 1', "not JSON: unterminated object or array at end of input (truncated?)"),
    (b'{"id": 1} x', "not JSON: extra data after the JSON value at character 10"),
    (b"\xef\xbb\xbf", "empty line"),
    (b"\xef\xbb\xbf\xef\xbb\xbf{}", "not JSON: starts with a byte order mark"),
    (b"42", "a number JSON value, not an event, frame or envelope"),
    (b'"text"', "a string JSON value, not an event, frame or envelope"),
    (b"null", "a null JSON value, not an event, frame or envelope"),
    (b"[]", "an array that is not a relay message (no message type first)"),
    (b"[1, {}]", "an array that is not a relay message (no message type first)"),
    (b'["EOSE", "s"]', "a relay 'EOSE' message, not an EVENT"),
    (b'["OK", "ab", true, ""]', "a relay 'OK' message, not an EVENT"),
    (b'["' + b"X" * 100 + b'"]', "a relay '" + "X" * 36 + "... message, not an EVENT"),
    (b'["EVENT"]', 'an EVENT frame must be ["EVENT", <subscription id>, <event>]'),
    (b'["EVENT", 7, {}]', 'an EVENT frame must be ["EVENT", <subscription id>, <event>]'),
    (b'["EVENT", "s", {}, 1]', 'an EVENT frame must be ["EVENT", <subscription id>, <event>]'),
    (b'["EVENT", "s", []]', "the event of an EVENT frame is an array, not an object"),
    (b'{"event": 5}', "envelope event must be an object or its JSON text, not a number"),
    (b'{"event": "{bad"}', "envelope event is a string that is not JSON: expected a string "
                           "key at character 1"),
    (b'{"event": "[1]"}', "envelope event is the JSON text of an array, not an object"),
    (b'{"event": {}, "received_at": "now"}',
     "envelope received_at must be unix seconds (a finite number), not a string"),
    (b'{"event": {}, "received_at": true}',
     "envelope received_at must be unix seconds (a finite number), not a boolean"),
    (b'{"event": {}, "received_at": 1e400}',
     "envelope received_at must be unix seconds (a finite number), not inf"),
    (b'{"event": {}, "relay": 1}', "envelope relay must be a string, not a number"),
])
def test_lines_without_an_event_say_why(raw: bytes, reason: str) -> None:
    found = event_from_line(raw)
    assert (found.event, found.reason) == (None, reason)
    assert_consistent(found)


def test_deep_nesting_and_huge_lines_do_not_break_it() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    assert event_from_line(deep).reason == (
        "an array that is not a relay message (no message type first)")
    deep_event = b'{"content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert event_from_line(deep_event).shape == "event"
    assert event_from_line(deep_event).event_json == deep_event.decode()
    deep_frame = event_from_line(b'["EVENT", "s", ' + deep_event + b"]")
    assert deep_frame.shape == "frame" and deep_frame.event_json is None
    truncated_deep = b'["EVENT", "s", ' + b"{\"a\":" * 50_000
    assert event_from_line(truncated_deep).reason is not None
    huge = line({**EVENT, "content": "x" * 30_000_000})
    found = event_from_line(huge)
    assert found.shape == "event" and found.event_json == huge.decode()
    framed = event_from_line(b'["EVENT","s",' + huge + b"]")
    assert framed.event_json == json.dumps(json.loads(huge), ensure_ascii=False,
                                           separators=(",", ":"))


def test_a_lone_surrogate_is_written_as_an_escape() -> None:
    found = event_from_line(b'["EVENT", "s", {"content": "\\ud800"}]')
    assert found.event == {"content": "\ud800"}
    assert found.event_json == '{"content":"\\ud800"}'


def test_integers_of_frames_and_envelopes_are_written_exactly() -> None:
    big = '{"created_at":18446744073709551616,"kind":-9223372036854775809}'
    assert event_from_line(f'["EVENT","s",{big}]').event_json == big
    assert event_from_line(f'{{"event":{big}}}').event_json == big
    assert event_from_line(f'{{"event":{big}}}').event == {
        "created_at": 1.8446744073709552e19, "kind": -9.223372036854776e18}


def test_text_lines_are_read_too() -> None:
    assert event_from_line(json.dumps(["EVENT", "s", EVENT])).event == EVENT


@given(st.binary(max_size=300))
def test_any_bytes_give_an_event_or_a_reason(raw: bytes) -> None:
    assert_consistent(event_from_line(raw))


# Integers within 64 bits: beyond them the parser gives floats (tested on its own above).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=4),
    max_leaves=20,
)
events = st.dictionaries(st.text(max_size=8).filter(lambda k: k != "event"), json_values,
                         max_size=8)


@given(events, st.text(max_size=10), st.integers(0, 2**40) | st.floats(0, 2**40))
def test_the_three_shapes_give_the_same_event(event: dict[str, Any], sub: str,
                                              received_at: float) -> None:
    shapes = [
        event_from_line(line(event)),
        event_from_line(line(["EVENT", sub, event])),
        event_from_line(line({"received_at": received_at, "relay": "wss://r", "event": event})),
        event_from_line(line({"event": json.dumps(event)})),
    ]
    for found in shapes:
        assert_consistent(found)
        assert found.event == event
    assert [found.shape for found in shapes] == ["event", "frame", "envelope", "envelope"]
    assert shapes[1].subscription == sub and shapes[2].received_at == received_at


@given(st.text(max_size=200))
def test_any_text_gives_an_event_or_a_reason(text: str) -> None:
    assert_consistent(event_from_line(text))


def test_a_leading_byte_order_mark_is_ignored() -> None:
    """Many Windows exports start their file with a UTF-8 BOM, which RFC 8259 lets a parser
    ignore: the line's event is the one the same line without it holds."""
    plain = line({"received_at": 1770163200, "event": EVENT})
    with_bom = event_from_line(b"\xef\xbb\xbf" + plain)
    assert with_bom.reason is None
    assert (with_bom.event, with_bom.received_at, with_bom.shape) == (
        event_from_line(plain).event, 1770163200, "envelope")
    text = event_from_line("\ufeff" + plain.decode())
    assert text.event == event_from_line(plain).event
