"""Decide whether SNAP accepts a message, and why not, in the order of docs/architecture.md,
*Verdict order*.

The checks, first failure wins:

1. 1003 not JSON, not an object, or a required field absent
2. 1004 wrong JSON type or a broken constraint (``constraints.md``)
3. 2005 ``from`` (or ``to``) is not a strict P2TR address
4. 1004 ``from`` and ``to`` on different networks
5. 2004 ``|floor(received_at) - timestamp| > max_drift`` (exactly ``max_drift`` passes;
   the receipt clock is read in whole seconds, as ``authentication.md`` reads
   ``Math.floor(Date.now() / 1000)``: :func:`receipt_second`)
6. 2006 the same ``(from, id)`` was *accepted* within the replay window (see :mod:`.replay`)
7. 2002 a request without ``sig``
8. 2001 the signature does not verify (a program that is not an x coordinate included)

:func:`check_message` runs every stateless check (1–5, 7, 8) on one message; the replay step
needs the message stream and lives in :mod:`snap_spark.protocol.replay`. ``docs/verdicts.md``
documents every verdict and each reading of an ambiguous rule.

Examples:
    >>> from snap_spark.protocol.records import parse_line
    >>> rec = parse_line(b'{"received_at": 5, "message": {"id": "m"}}')
    >>> check_record(rec, ReceiptClock.refuse()).pre_code
    1003
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from snap_spark.protocol.errors import (
    ErrorCode,
    IdentityInvalid,
    InvalidMessage,
    InvalidPayload,
    SnapError,
    fmt_seconds,
)
from snap_spark.protocol.jcs import MAX_SAFE_INTEGER, canonicalize
from snap_spark.protocol.jsonparse import json_type
from snap_spark.protocol.keys import decode_p2tr, xonly_key
from snap_spark.protocol.records import Record
from snap_spark.protocol.signing import signature_input
from snap_spark.protocol.verdict import (
    DEFAULT_MAX_DRIFT,
    is_replay_candidate,
    stateless_verdict,
    verdict_name,
)

REQUIRED_FIELDS = ("id", "version", "from", "type", "method", "payload", "timestamp")
MESSAGE_TYPES = frozenset(("request", "response", "event"))
MAX_PAYLOAD_BYTES = 1024 * 1024  # JCS(payload), constraints.md "Max 1 MB serialized"
MAX_MESSAGE_BYTES = 10 * 1024 * 1024  # constraints.md "Single message (serialized JSON)"

# ECMAScript patterns: ``\d`` is ASCII only, so spell the classes out; fullmatch, never ``$``.
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_VERSION = re.compile(r"[0-9]+\.[0-9]+")
_METHOD = re.compile(r"[a-z]+/[a-z_]+")
_SIG = re.compile(r"[0-9a-f]{128}")


class MissingReceiptTime(RuntimeError):
    """A bare line needs a receipt clock and none was configured (an operator decision)."""


@dataclass(frozen=True, slots=True)
class ReceiptClock:
    """Which clock gives the receipt time of a bare line (one without ``received_at``).

    ``mode`` is ``"refuse"`` (raise :class:`MissingReceiptTime`), ``"fixed"`` (``value``,
    e.g. the time a run started: ``now``), or ``"message"`` (the message's own timestamp:
    the drift check then always passes and replay windows use message time).
    """

    mode: str
    value: float | None = None

    @classmethod
    def refuse(cls) -> ReceiptClock:
        return cls("refuse")

    @classmethod
    def parse(cls, spec: str | None, *, now: float | None = None) -> ReceiptClock:
        """``None``/``""`` → refuse, ``now`` → fixed at ``now`` (default: wall clock),
        ``message`` → message time, a number → fixed unix seconds.

        Raises:
            ValueError: for any other spelling.
        """
        if spec is None or spec == "":
            return cls.refuse()
        if spec == "message":
            return cls("message")
        if spec == "now":
            return cls("fixed", float(now if now is not None else math.floor(time.time())))
        try:
            value = float(spec)
        except ValueError:
            raise ValueError(
                f"bad receipt clock {spec!r}: use 'now', 'message' or unix seconds"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"bad receipt clock {spec!r}: must be non-negative unix seconds")
        return cls("fixed", value)

    def receipt_for(self, timestamp: int | None) -> float | None:
        """The receipt time this clock gives a bare record whose own time is
        ``timestamp`` (``None``: it has none), or ``None`` when the clock gives none
        (``refuse``; ``message`` for a record without a time). Nostr events use it with
        their ``created_at``.

        Examples:
            >>> ReceiptClock("message").receipt_for(7), ReceiptClock("message").receipt_for(None)
            (7.0, None)
            >>> ReceiptClock("fixed", 9.0).receipt_for(None), ReceiptClock.refuse().receipt_for(7)
            (9.0, None)
        """
        if self.mode == "refuse" or (self.mode == "message" and timestamp is None):
            return None
        return self.resolve(0 if timestamp is None else timestamp)

    def resolve(self, timestamp: int) -> float:
        if self.mode == "fixed":
            assert self.value is not None
            return self.value
        if self.mode == "message":
            return float(timestamp)
        raise MissingReceiptTime(
            "a bare message line has no received_at; choose a receipt clock "
            "(--bare-clock now|message|<unix seconds>)"
        )


@dataclass(slots=True)
class Checked:
    """Outcome of the stateless checks on one input record.

    ``pre_code`` is the first failure among checks 1–5 (``None`` if all pass); ``auth_code``
    the first among 7–8. The final verdict also needs the replay step:
    ``pre_code or (2006 if duplicate) or auth_code``.
    """

    pre_code: int | None = None
    pre_detail: str = ""
    auth_code: int | None = None
    auth_detail: str = ""
    msg_id: str | None = None
    sender: str | None = None
    recipient: str | None = None
    msg_type: str | None = None
    method: str | None = None
    version: str | None = None
    timestamp: int | None = None
    has_sig: bool = False
    canonical_payload: str | None = None
    payload: Any = None
    received_at: float | None = None
    #: With ``defer_verify``: ``(key, signature, digest)`` still to verify (check 8).
    pending: tuple[Any, bytes, bytes] | None = None

    @property
    def replay_candidate(self) -> bool:
        """True when checks 1–5 passed: the message can be a duplicate or be accepted."""
        return is_replay_candidate(self.pre_code)

    @classmethod
    def unreadable(cls, reason: str) -> Checked:
        """A line the file could not be read past (e.g. a damaged ``.gz``): 1003."""
        return cls(pre_code=int(ErrorCode.INVALID_MESSAGE),
                   pre_detail=f"file could not be read: {reason}")

    @property
    def verdict(self) -> str:
        """``"valid"`` or ``"rejected"`` by the stateless checks (replay needs a stream:
        :func:`snap_spark.protocol.replay.resolve`)."""
        return verdict_name(self.stateless_code)

    @property
    def stateless_code(self) -> int | None:
        """The code of the first failing check other than replay (see
        :mod:`snap_spark.protocol.verdict`)."""
        return stateless_verdict(self.pre_code, self.pre_detail, self.auth_code,
                                 self.auth_detail)[0]

    @property
    def stateless_detail(self) -> str:
        return stateless_verdict(self.pre_code, self.pre_detail, self.auth_code,
                                 self.auth_detail)[1]


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _check_timestamp(value: Any) -> int:
    if type(value) is int:
        ts = value
    elif type(value) is float and math.isfinite(value) and value.is_integer():
        ts = int(value)  # a double with no fraction is an integer to every JSON signer
    elif _is_number(value):
        raise InvalidPayload("timestamp must be an integer number of seconds")
    else:
        raise InvalidPayload(f"timestamp must be an integer, got {json_type(value)}")
    if not 0 <= ts <= MAX_SAFE_INTEGER:
        raise InvalidPayload("timestamp out of range 0..2^53-1")
    return ts


def _string_field(msg: dict[str, Any], name: str) -> str:
    value = msg[name]
    if type(value) is not str:
        raise InvalidPayload(f"{name} must be a string, got {json_type(value)}")
    return value


def _structure(msg: dict[str, Any], out: Checked, size: int) -> None:
    """Checks 1 and 2 (raise InvalidMessage / InvalidPayload)."""
    for name in REQUIRED_FIELDS:
        if name not in msg:
            raise InvalidMessage(f"required field {name!r} is absent")
    # Remember well-typed fields for the tables even when a later check fails.
    for name, attr in (("id", "msg_id"), ("from", "sender"), ("type", "msg_type"),
                       ("method", "method"), ("version", "version")):
        if type(msg[name]) is str:
            setattr(out, attr, msg[name])
    if type(msg.get("to")) is str:
        out.recipient = msg["to"]
    if size > MAX_MESSAGE_BYTES:
        raise InvalidPayload(f"message is {size} bytes, over the 10 MiB limit")
    msg_id = _string_field(msg, "id")
    if not _ID.fullmatch(msg_id):
        raise InvalidPayload("id must be 1-128 characters of [A-Za-z0-9_-]")
    if not _VERSION.fullmatch(_string_field(msg, "version")):
        raise InvalidPayload("version must match ^\\d+\\.\\d+$ (ASCII digits)")
    _string_field(msg, "from")
    if "to" in msg and type(msg["to"]) is not str:
        raise InvalidPayload(f"to must be a string when present, got {json_type(msg['to'])}")
    if _string_field(msg, "type") not in MESSAGE_TYPES:
        raise InvalidPayload("type must be one of request, response, event")
    method = _string_field(msg, "method")
    if len(method) > 64 or not _METHOD.fullmatch(method):
        raise InvalidPayload("method must be 1-64 characters matching ^[a-z]+/[a-z_]+$")
    payload = msg["payload"]
    if type(payload) is not dict:
        raise InvalidPayload(f"payload must be an object, got {json_type(payload)}")
    out.timestamp = _check_timestamp(msg["timestamp"])
    if "sig" in msg:
        sig = msg["sig"]
        if type(sig) is not str:
            raise InvalidPayload(f"sig must be a string, got {json_type(sig)}")
        if not _SIG.fullmatch(sig):
            raise InvalidPayload("sig must be 128 lowercase hex characters")
        out.has_sig = True
    canonical = canonicalize(payload)
    if len(canonical) > MAX_PAYLOAD_BYTES:
        raise InvalidPayload(f"JCS(payload) is {len(canonical)} bytes, over the 1 MiB limit")
    out.canonical_payload = canonical.decode("utf-8")
    out.payload = payload


def check_message(
    msg: Any,
    envelope_received_at: float | None,
    clock: ReceiptClock,
    *,
    size: int = 0,
    max_drift: float = DEFAULT_MAX_DRIFT,
    defer_verify: bool = False,
) -> Checked:
    """Run checks 1–5, 7 and 8 on a parsed message value.

    ``envelope_received_at`` is the receipt time from the line's envelope, if any; otherwise
    ``clock`` supplies it (and raises :class:`MissingReceiptTime` when refused). ``size`` is
    the serialized message size in bytes, for the 10 MiB rule.
    """
    out = Checked()
    try:
        if type(msg) is not dict:
            raise InvalidMessage(f"message is not a JSON object but {json_type(msg)}")
        _structure(msg, out, size)
        sender = decode_p2tr(out.sender)
        recipient = None
        if "to" in msg:
            try:
                recipient = decode_p2tr(msg["to"])
            except IdentityInvalid as exc:
                raise IdentityInvalid(f"to: {exc.detail}") from None
        if recipient is not None and recipient.network != sender.network:
            raise InvalidPayload(
                f"from is {sender.network} but to is {recipient.network}: mixed networks"
            )
        assert out.timestamp is not None
        received = (
            envelope_received_at
            if envelope_received_at is not None
            else clock.resolve(out.timestamp)
        )
        out.received_at = received  # the full time: receipt order and the replay window
        drift = abs(receipt_second(received) - out.timestamp)
        if drift > max_drift:
            raise_expired(out.timestamp, received, max_drift)
    except SnapError as exc:
        out.pre_code = int(exc.code)
        detail = exc.detail
        if exc.code == ErrorCode.IDENTITY_INVALID and not detail.startswith("to:"):
            detail = f"from: {detail}"
        out.pre_detail = detail
        return out
    _authenticate(msg, out, sender.program, defer_verify)
    return out


def receipt_second(received: float) -> float:
    """The whole second of a receipt time, which the drift check (2004) compares with the
    message ``timestamp``: the spec's verifier takes ``now = Math.floor(Date.now() / 1000)``
    (``authentication.md``), so a message received 60.999 s after its timestamp is in time
    and one received 61 s after is not. Only the drift check reads it; receipt order and the
    replay window keep the full time. A value that is not finite is returned as it is (the
    native core's ``f64::floor``).

    Examples:
        >>> receipt_second(1770163260.999), receipt_second(7.0), receipt_second(-0.5)
        (1770163260.0, 7.0, -1.0)
    """
    return float(math.floor(received)) if math.isfinite(received) else received


def raise_expired(timestamp: int, received: float, max_drift: float) -> None:
    """Raise the 2004 of a message ``timestamp`` received at ``received``: the offset is from
    the receipt second (:func:`receipt_second`), which the reason names when the receipt
    time has a fraction.

    Examples:
        >>> from snap_spark.protocol.errors import TimestampExpired
        >>> for at in (161.0, 161.5):
        ...     try:
        ...         raise_expired(100, at, 60.0)
        ...     except TimestampExpired as exc:
        ...         print(exc.detail)
        timestamp 100 is 61s behind receipt time 161 (max drift 60s)
        timestamp 100 is 61s behind receipt second 161 (receipt time 161.5, max drift 60s)
    """
    from snap_spark.protocol.errors import TimestampExpired

    second = receipt_second(received)
    offset = timestamp - second
    direction = "ahead of" if offset > 0 else "behind"
    if second == received:
        detail = (f"timestamp {timestamp} is {fmt_seconds(abs(offset))}s {direction} "
                  f"receipt time {fmt_seconds(received)} (max drift {fmt_seconds(max_drift)}s)")
    else:
        detail = (f"timestamp {timestamp} is {fmt_seconds(abs(offset))}s {direction} "
                  f"receipt second {fmt_seconds(second)} (receipt time "
                  f"{fmt_seconds(received)}, max drift {fmt_seconds(max_drift)}s)")
    raise TimestampExpired(detail)


def _authenticate(
    msg: dict[str, Any], out: Checked, program: bytes, defer: bool = False
) -> None:
    """Checks 7 and 8 (with ``defer``, check 8's verify call is left in ``out.pending``)."""
    if not out.has_sig:
        if out.msg_type == "request":
            out.auth_code = int(ErrorCode.SIGNATURE_MISSING)
            out.auth_detail = "request has no sig"
        return
    key = xonly_key(program)
    if key is None:
        out.auth_code = int(ErrorCode.SIGNATURE_INVALID)
        out.auth_detail = "from's witness program is not a valid x-only public key"
        return
    assert out.canonical_payload is not None and out.timestamp is not None
    data = signature_input(
        msg["id"], msg["from"], msg.get("to"), msg["type"], msg["method"],
        out.canonical_payload.encode("utf-8"), out.timestamp,
    )
    out.pending = (key, bytes.fromhex(msg["sig"]), hashlib.sha256(data).digest())
    if not defer:
        finish_verification(out)


def finish_verification(out: Checked) -> None:
    """Run the verify call left in ``out.pending`` (check 8). Thread-safe: libsecp256k1
    releases the GIL, so a batch can be verified on several threads."""
    if out.pending is None:
        return
    key, signature, digest = out.pending
    out.pending = None
    if not key.verify(signature, digest):
        out.auth_code = int(ErrorCode.SIGNATURE_INVALID)
        out.auth_detail = "signature does not verify against from's tweaked key"


def check_record(
    record: Record,
    clock: ReceiptClock,
    *,
    max_drift: float = DEFAULT_MAX_DRIFT,
    defer_verify: bool = False,
) -> Checked:
    """Stateless checks for one parsed input line (see :func:`check_message`)."""
    if record.error is not None:
        return Checked(pre_code=int(record.error.code), pre_detail=record.error.detail)
    return check_message(
        record.message, record.received_at, clock, size=record.size, max_drift=max_drift,
        defer_verify=defer_verify,
    )
