"""Input lines (docs/architecture.md, *Input lines*): a bare SNAP message, or an envelope
``{"received_at": <unix seconds>, "source": "<text>", "message": <object or JSON text>}``.

A line is an envelope when it is an object with a ``message`` key and none of the SNAP
message fields; anything else is a bare message. Envelope problems (``received_at`` not a
number, ``message`` neither an object nor JSON text) make the line a 1003.

Examples:
    >>> parse_line(b'{"received_at": 10, "source": "relay", "message": "{}"}').received_at
    10.0
    >>> parse_line(b'not json').error.code
    <ErrorCode.INVALID_MESSAGE: 1003>
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import orjson

from snap_spark.protocol.errors import InvalidMessage, SnapError
from snap_spark.protocol.jsonparse import loads

MESSAGE_FIELDS = frozenset(
    ("id", "version", "from", "to", "type", "method", "payload", "timestamp", "sig")
)

#: Lines longer than this get their message re-measured without the envelope.
MAX_EXACT_SIZE_ABOVE = 10 * 1024 * 1024 - 4096


@dataclass(slots=True)
class Record:
    """One input line, parsed: the message value, its receipt time, or the line's error."""

    message: Any = None
    received_at: float | None = None
    source: str | None = None
    is_envelope: bool = False
    size: int = 0
    error: SnapError | None = None


def is_envelope(value: Any) -> bool:
    """True for an object with ``message`` and none of the SNAP message fields."""
    return type(value) is dict and "message" in value and not (MESSAGE_FIELDS & value.keys())


#: The UTF-8 byte order mark. RFC 8259 lets a parser ignore one at the start of a JSON text,
#: and many Windows exports begin their file with it: a line that starts with it is read
#: without it (``raw_messages`` keeps the line's bytes as they are).
BYTE_ORDER_MARK = b"\xef\xbb\xbf"


def parse_line(raw: bytes | None) -> Record:
    """Parse one raw input line (bytes without the newline); a leading UTF-8 byte order
    mark is ignored (:data:`BYTE_ORDER_MARK`). Never raises.

    Examples:
        >>> parse_line(b"\\xef\\xbb\\xbf" + b'{"received_at": 5, "message": {}}').received_at
        5.0
        >>> parse_line(b"\\xef\\xbb\\xbf").error.detail
        'empty line'
    """
    if raw is None:
        return Record(error=InvalidMessage("line could not be read"))
    if raw[:3] == BYTE_ORDER_MARK:
        raw = raw[3:]
    try:
        value = loads(raw)
    except SnapError as exc:
        if not raw.strip():  # only failed lines pay for the copy
            return Record(error=InvalidMessage("empty line"), size=len(raw))
        # Keep the verdict, not the raise: a traceback holds the caller's frames (and with
        # them a whole batch of parsed lines) alive until the cyclic collector runs.
        exc.__traceback__ = None
        exc.__context__ = None
        return Record(error=exc, size=len(raw))
    if not is_envelope(value):
        return Record(message=value, size=len(raw))
    record = Record(is_envelope=True, size=len(raw))
    source = value.get("source")
    record.source = source if type(source) is str else None
    received = value.get("received_at")
    if received is not None:
        try:
            # float() of an integer literal beyond the double range raises OverflowError
            seconds = float(received) if type(received) in (int, float) else math.nan
        except OverflowError:
            seconds = math.nan
        if not math.isfinite(seconds) or received < 0:
            record.error = InvalidMessage(
                "envelope received_at must be non-negative unix seconds (a number)"
            )
            return record
        record.received_at = seconds
    inner = value["message"]
    if type(inner) is str:
        try:
            inner = loads(inner)
        except SnapError as exc:
            record.error = InvalidMessage(f"envelope message text: {exc.detail}")
            return record
        record.size = len(value["message"].encode("utf-8", "surrogatepass"))
    elif type(inner) is dict and len(raw) > MAX_EXACT_SIZE_ABOVE:
        # Near the 10 MiB message limit, measure the message itself, not the envelope.
        with contextlib.suppress(orjson.JSONEncodeError, TypeError):
            record.size = len(orjson.dumps(inner))
    record.message = inner
    return record
