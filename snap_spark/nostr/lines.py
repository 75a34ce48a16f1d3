"""Find the Nostr event in one archived line, whatever shape the line has.

Archives of relay traffic hold lines of three shapes:

- ``event``: the event object itself, ``{"id": ..., "pubkey": ..., "sig": ...}``;
- ``frame``: a relay's ``EVENT`` message, ``["EVENT", "<subscription id>", {...}]``
  (a client's ``["EVENT", {...}]`` is read too);
- ``envelope``: ``{"received_at": <unix seconds>, "relay": "<url>", "event": {...}}``, where
  ``event`` may also be the event's JSON text; ``received_at`` and ``relay`` may be absent.

:func:`event_from_line` tells which, and gives the event object, or the reason the line is
none of them. It judges only the shape: whether the event has NIP-01's fields, id and
signature is :func:`snap_spark.protocol.nostr.check_event`'s business, so ``{}`` is an
``event`` line here. It never raises, whatever the bytes (invalid UTF-8, truncated JSON,
any depth of nesting, very long lines), and imports no Spark and no nostr-sdk.

Examples:
    >>> line = event_from_line(b'["EVENT","sub1",{"id":"ab","kind":1}]')
    >>> line.shape, line.event, line.subscription
    ('frame', {'id': 'ab', 'kind': 1}, 'sub1')
    >>> line = event_from_line(b'{"received_at":1770163200,"relay":"wss://r","event":{"kind":1}}')
    >>> line.shape, line.received_at, line.relay, line.event
    ('envelope', 1770163200, 'wss://r', {'kind': 1})
    >>> event_from_line(b'["EOSE","sub1"]').reason
    "a relay 'EOSE' message, not an EVENT"
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final, Literal

from snap_spark.protocol.errors import SnapError
from snap_spark.protocol.jsonparse import json_type, loads
from snap_spark.protocol.records import BYTE_ORDER_MARK

LineShape = Literal["event", "frame", "envelope"]

#: Characters of a foreign value quoted in a reason, at most.
_QUOTE_CHARS: Final = 40


@dataclass(frozen=True)
class EventLine:
    """What :func:`event_from_line` found in one line.

    Attributes:
        event: the event object (a ``dict``, not checked), or ``None`` when the line holds
            no event. Parsed as every snap-spark reader parses
            (:func:`snap_spark.protocol.jsonparse.loads`): an integer beyond 64 bits becomes
            a float, which :func:`~snap_spark.protocol.nostr.check_event` refuses anyway.
        shape: ``"event"``, ``"frame"`` or ``"envelope"``; ``None`` with ``event``.
        reason: why the line holds no event (``None`` when it does).
        received_at: an envelope's ``received_at`` (unix seconds), else ``None``.
        relay: an envelope's ``relay``, else ``None``.
        subscription: a relay frame's subscription id, else ``None``.
        line: the line as given.
    """

    event: dict[str, Any] | None
    shape: LineShape | None
    reason: str | None
    received_at: int | float | None = None
    relay: str | None = None
    subscription: str | None = None
    line: bytes | str = field(default=b"", repr=False)

    @cached_property
    def event_json(self) -> str | None:
        """The event as JSON text to publish (``None`` when there is no event).

        An ``event`` line is given back exactly (decoded from UTF-8), and so is an
        envelope's event given as JSON text; an event inside a frame or an envelope object
        is written as compact JSON with its members in their order and its integers exact
        (written at first use: the archive reader needs only :attr:`event`). ``None`` too
        for such an event nested too deeply for Python's JSON writer (thousands of levels;
        no relay would take it).

        Examples:
            >>> event_from_line(b'["EVENT","s",{"kind": 1, "n": 18446744073709551616}]'
            ...                 ).event_json
            '{"kind":1,"n":18446744073709551616}'
        """
        if self.event is None:
            return None
        text = self.line if isinstance(self.line, str) else self.line.decode("utf-8")
        if self.shape == "event":
            return text
        try:
            # The standard parser keeps every integer exact (the fast one does not).
            whole = json.loads(text)
            exact = whole[-1] if self.shape == "frame" else whole["event"]
        except (ValueError, TypeError, KeyError, IndexError, RecursionError):
            exact = self.event  # too deep for the standard parser: as parsed
        if isinstance(exact, str):  # an envelope's event given as JSON text
            return exact
        try:
            return _compact(exact if isinstance(exact, dict) else self.event)
        except RecursionError:
            return None


def _a(value: object) -> str:
    """The JSON type of ``value`` with its article: ``"an array"``, ``"a number"``."""
    name = json_type(value)
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _no_event(reason: str) -> EventLine:
    return EventLine(event=None, shape=None, reason=reason)


def _quoted(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 3] + "..."


def _compact(event: dict[str, Any]) -> str:
    # Non-ASCII kept as is (as JSON.stringify writes it); a lone surrogate cannot be
    # written as UTF-8, so such an event is written with \\u escapes instead.
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(event, separators=(",", ":"), allow_nan=True)
    return text


def event_from_line(line: bytes | str) -> EventLine:
    """The event in one line (without its line break), its shape, or why there is none.

    An object with an ``event`` member is an envelope; any other object is an event line;
    an array is a relay message, and only ``EVENT`` messages hold an event. Never raises.

    Examples:
        >>> event_from_line(b'{"kind":1,"content":"hi"}').shape
        'event'
        >>> event_from_line(b'{"received_at":1,"event":"{\\\\"kind\\\\":1}"}').event
        {'kind': 1}
        >>> event_from_line(b'{"kind":1').reason
        'not JSON: unterminated object or array at end of input (truncated?)'
        >>> event_from_line(b"\\xff{}").reason
        'not valid UTF-8 (byte 0)'
        >>> event_from_line(b"  ").reason
        'empty line'
        >>> event_from_line(b'["EVENT","s1","text"]').reason
        'the event of an EVENT frame is a string, not an object'
    """
    try:
        return _event_from_line(line)
    except (SnapError, ValueError, TypeError, RecursionError, MemoryError) as exc:
        # The parser turns bad JSON into SnapError; anything else is a limit of this host.
        return _no_event(f"unreadable line: {type(exc).__name__}: {exc}"[:200])


def _event_from_line(line: bytes | str) -> EventLine:
    # a leading byte order mark is not part of the JSON text (RFC 8259 lets a parser ignore
    # it), as for the batch job's lines (snap_spark.protocol.records.parse_line)
    text = line[1:] if isinstance(line, str) and line.startswith("\ufeff") else \
        line[3:] if isinstance(line, bytes) and line.startswith(BYTE_ORDER_MARK) else line
    if not text.strip():
        return _no_event("empty line")
    try:
        value = loads(text)
    except SnapError as exc:
        return _no_event(str(exc))
    if isinstance(value, dict):
        if "event" in value:
            return _from_envelope(value, line)
        return EventLine(event=value, shape="event", reason=None, line=line)
    if isinstance(value, list):
        return _from_frame(value, line)
    return _no_event(f"{_a(value)} JSON value, not an event, frame or envelope")


def _from_frame(frame: list[Any], line: bytes | str) -> EventLine:
    if not frame or not isinstance(frame[0], str):
        return _no_event("an array that is not a relay message (no message type first)")
    if frame[0] != "EVENT":
        return _no_event(f"a relay {_quoted(frame[0])} message, not an EVENT")
    if len(frame) == 3 and isinstance(frame[1], str):
        subscription: str | None = frame[1]
        event = frame[2]
    elif len(frame) == 2:  # a client's ["EVENT", <event>]
        subscription, event = None, frame[1]
    else:
        return _no_event('an EVENT frame must be ["EVENT", <subscription id>, <event>]')
    if not isinstance(event, dict):
        return _no_event(
            f"the event of an EVENT frame is {_a(event)}, not an object"
        )
    return EventLine(event=event, shape="frame", reason=None, subscription=subscription,
                     line=line)


def _from_envelope(envelope: dict[str, Any], line: bytes | str) -> EventLine:
    received_at = envelope.get("received_at")
    if received_at is not None and (
        isinstance(received_at, bool)
        or not isinstance(received_at, int | float)
        or not math.isfinite(received_at)
    ):
        return _no_event(
            f"envelope received_at must be unix seconds (a finite number), not "
            f"{_quoted(received_at) if isinstance(received_at, float) else _a(received_at)}"
        )
    relay = envelope.get("relay")
    if relay is not None and not isinstance(relay, str):
        return _no_event(f"envelope relay must be a string, not {_a(relay)}")
    event = envelope["event"]
    if isinstance(event, str):
        try:
            event = loads(event)
        except SnapError as exc:
            return _no_event(f"envelope event is a string that is {exc}")
        if not isinstance(event, dict):
            return _no_event(
                f"envelope event is the JSON text of {_a(event)}, not an object"
            )
    elif not isinstance(event, dict):
        return _no_event(
            f"envelope event must be an object or its JSON text, not {_a(event)}"
        )
    return EventLine(event=event, shape="envelope", reason=None, received_at=received_at,
                     relay=relay, line=line)
