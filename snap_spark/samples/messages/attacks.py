"""The attacks and broken lines of a message sample (``attack_share`` of its lines).

An attack is a mutated copy of a recent honest message with a fresh ``id``, unless the
attack is about the id: replays (an exact copy written later) and a forged copy raced ahead
of the genuine message (written by the simulation just before its next honest request). So
every label follows from the verdict order alone. The tricks themselves are in
:mod:`snap_spark.samples.messages.mutations`.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeAlias

import orjson

from snap_spark.protocol.keys import Network
from snap_spark.samples.messages.agents import Agent, Cast, MessageSigner
from snap_spark.samples.messages.config import ATTACK_KINDS, SampleConfig
from snap_spark.samples.messages.content import GATEWAYS, RELAYS, random_uuid
from snap_spark.samples.messages.mutations import (
    break_constraint,
    break_type,
    broken_line,
    depth,
    envelope_line,
    malformed_address,
    nest,
    off_curve_address,
    tampered_payload,
)
from snap_spark.samples.messages.records import Emitted, History, Scheduled, Sent

__all__ = ["Attacker"]

#: Relative frequency of the attack kinds.
_ATTACK_WEIGHTS: Final[dict[str, int]] = {
    "tampered_payload": 6,
    "wrong_key": 5,
    "untweaked_key": 5,
    "tampered_timestamp": 4,
    "off_curve_key": 2,
    "forged_copy_then_genuine": 3,
    "unsigned_request": 5,
    "replay_in_window": 6,
    "replay_outside_window": 4,
    "stale_timestamp": 5,
    "future_timestamp": 4,
    "boundary_drift_60": 3,
    "malformed_address": 6,
    "mixed_network": 3,
    "missing_field": 4,
    "wrong_type": 4,
    "bad_id_pattern": 3,
    "uppercase_sig": 2,
    "deep_payload": 2,
    "boundary_depth_10": 2,
    "constraint_violation": 3,
    "ecmascript_pattern": 2,
    "number_overflow": 1,
    "not_json": 3,
    "not_object": 2,
    "invalid_utf8": 2,
    "empty_line": 2,
    "embedded_not_json": 1,
}

# Kinds whose code is decided without the receipt clock (or with drift 0 when the message's
# own timestamp is the clock): only these may be written bare.
_BARE_OK: Final[frozenset[str]] = frozenset(
    {
        "tampered_payload",
        "wrong_key",
        "untweaked_key",
        "tampered_timestamp",
        "off_curve_key",
        "unsigned_request",
        "malformed_address",
        "mixed_network",
        "missing_field",
        "wrong_type",
        "bad_id_pattern",
        "uppercase_sig",
        "deep_payload",
        "boundary_depth_10",
        "constraint_violation",
        "ecmascript_pattern",
        "number_overflow",
        "not_json",
        "not_object",
        "invalid_utf8",
    }
)

_REQUIRED: Final[tuple[str, ...]] = (
    "id", "version", "from", "type", "method", "payload", "timestamp",
)  # fmt: skip
_OVERFLOW_SENTINEL: Final = 1.2345678901234567e300
_OVERFLOW_SENTINEL_TEXT: Final = orjson.dumps(_OVERFLOW_SENTINEL)
#: Kinds whose line itself is broken (written by ``broken_line``).
_BROKEN_KINDS: Final[tuple[str, ...]] = (
    "not_json", "not_object", "invalid_utf8", "embedded_not_json",
)  # fmt: skip

#: Makes the message of one attack kind from ``(kind, request, any_message, now)``;
#: ``None`` when there is no message to build it on.
_Builder: TypeAlias = Callable[[str, Sent, Sent, int], "dict[str, Any] | None"]


class Attacker:
    """Writes attack lines from the :class:`History` of honest messages.

    Args:
        config: the sample's config (``bare_share``).
        rng: the sample's random generator, shared with the honest simulation.
        cast: the agents (whose keys sign the attacks that need a valid signature).
        signer: signs messages as the sample does.
        history: the honest messages written so far; forged copies are queued in it.
        schedule: ``schedule(at, line)`` writes ``line`` when the clock reaches ``at``
            (replays).
    """

    def __init__(self, config: SampleConfig, rng: random.Random, cast: Cast,
                 signer: MessageSigner, history: History,
                 schedule: Callable[[float, Scheduled], None]) -> None:
        self.config = config
        self.rng = rng
        self.cast = cast
        self.signer = signer
        self.history = history
        self.schedule = schedule
        kinds = list(_ATTACK_WEIGHTS)
        self._kinds = kinds
        self._cumulative: list[int] = []
        total = 0
        for kind in kinds:
            total += _ATTACK_WEIGHTS[kind]
            self._cumulative.append(total)
        self._builders = self._builder_table()

    def ready(self) -> bool:
        """Whether an attack can be written (there is a request to build it on)."""
        return bool(self.history.recent_requests)

    def forges(self) -> bool:
        """Whether a forged copy is waiting for the next signed honest request."""
        return self.history.pending_forgeries > 0

    def forged_copy(self, message: dict[str, Any], sender: Agent, received_at: int) -> Emitted:
        """The forged copy of a genuine request, received 1-3 s before it: same id, payload
        tampered, signed by another agent half of the time."""
        rng = self.rng
        self.history.pending_forgeries -= 1
        forged = dict(message)
        forged["payload"] = tampered_payload(rng, message["payload"])
        if rng.random() < 0.5:  # the attacker signs with a key of its own
            forged["sig"] = self.signer.sign(forged, self.cast.other_agent(sender).signer)
        earlier = received_at - rng.randint(1, 3)
        line = envelope_line(rng, forged, earlier, rng.choice(RELAYS))
        return line, "forged_copy_then_genuine", 2001

    def _fresh_copy(
        self, base: Sent, received_at: int, *, sign: bool | None = None
    ) -> dict[str, Any]:
        """``base`` with a new id and a timestamp near ``received_at``, re-signed if it was."""
        message = dict(base.message)
        message["id"] = random_uuid(self.rng)
        message["timestamp"] = received_at - self.rng.randint(-3, 5)
        message.pop("sig", None)
        if sign is None:
            sign = "sig" in base.message
        if sign:
            message["sig"] = self.signer.sign(message, base.sender.signer)
        return message

    def _pick(self, pool: deque[Sent], need_to: bool = False) -> Sent | None:
        """A random recent message (one with a ``to`` when asked), ``None`` if there is none."""
        if not pool:
            return None
        start = self.rng.randrange(len(pool))
        for offset in range(len(pool)):
            candidate = pool[(start + offset) % len(pool)]
            if not need_to or "to" in candidate.message:
                return candidate
        return None

    def attack(self, clock: float) -> list[Emitted]:
        """The lines of one attack at ``clock`` (none when it is written later or needs a
        base there is none of yet)."""
        rng = self.rng
        kind = self._kinds[_bisect(self._cumulative, rng.random() * self._cumulative[-1])]
        code = ATTACK_KINDS[kind]
        now = math.floor(clock)
        source = rng.choice(RELAYS + GATEWAYS)
        bare = kind in _BARE_OK and rng.random() < self.config.bare_share

        if kind == "empty_line":
            return [(b"", kind, code)]
        if kind == "forged_copy_then_genuine":
            self.history.pending_forgeries += 1  # written just before the next honest request
            return []
        if kind in ("replay_in_window", "replay_outside_window"):
            self._schedule_replay(kind, now)
            return []

        request = self._pick(self.history.recent_requests)
        assert request is not None  # the pool is non-empty (checked by the caller)
        any_message = self._pick(self.history.recent) or request
        build = self._builders.get(kind)
        if build is None:  # pragma: no cover - every kind has a builder
            raise AssertionError(kind)
        message = build(kind, request, any_message, now)
        if message is None:
            return []
        return [(self._line(kind, message, now, source, bare), kind, code)]

    def _builder_table(self) -> dict[str, _Builder]:
        """Which method makes the message of each attack kind that is built on a recent one."""
        groups: tuple[tuple[_Builder, tuple[str, ...]], ...] = (
            (self._tampered, ("tampered_payload", "tampered_timestamp")),
            (self._wrong_signer, ("wrong_key", "untweaked_key", "off_curve_key")),
            (self._bad_timestamp, ("stale_timestamp", "future_timestamp", "boundary_drift_60")),
            (self._broken_field, ("missing_field", "wrong_type")),
            (self._deep_payload, ("deep_payload", "boundary_depth_10")),
            (self._broken_base, _BROKEN_KINDS),
        )
        # a kind with a builder of its own: the builder is named after it
        alone = ("unsigned_request", "malformed_address", "mixed_network", "bad_id_pattern",
                 "uppercase_sig", "constraint_violation", "ecmascript_pattern",
                 "number_overflow")
        return {**{kind: builder for builder, kinds in groups for kind in kinds},
                **{kind: getattr(self, f"_{kind}") for kind in alone}}

    def _line(self, kind: str, message: dict[str, Any], now: int, source: str,
              bare: bool) -> bytes:
        """The written line of an attack message: an envelope (or a bare message), except for
        the number overflow and the kinds that break the line itself."""
        rng = self.rng
        if kind == "number_overflow":
            line = envelope_line(rng, message, now, source, bare=bare)
            assert line.count(_OVERFLOW_SENTINEL_TEXT) == 1
            return line.replace(_OVERFLOW_SENTINEL_TEXT, b"1e400")
        if kind in _BROKEN_KINDS:
            return broken_line(rng, kind, message, now, source, bare)
        return envelope_line(rng, message, now, source, bare=bare)

    def _tampered(self, kind: str, request: Sent, any_message: Sent,
                  now: int) -> dict[str, Any]:
        """A signed copy of ``request`` whose payload or timestamp changes after signing."""
        rng = self.rng
        message = self._fresh_copy(request, now)
        if kind == "tampered_payload":
            message["payload"] = tampered_payload(rng, message["payload"])
        else:
            message["timestamp"] += rng.choice((-1, 1)) * rng.randint(1, 20)
        return message

    def _wrong_signer(self, kind: str, request: Sent, any_message: Sent,
                      now: int) -> dict[str, Any]:
        """A copy of ``request`` signed by another agent, by the untweaked key, or claiming an
        address whose key is off the curve."""
        message = self._fresh_copy(request, now, sign=False)
        sender = request.sender
        if kind == "wrong_key":
            signer = self.cast.other_agent(sender).signer
        elif kind == "untweaked_key":
            signer = sender.raw_signer
        else:
            message["from"] = off_curve_address(self.rng, sender.network)
            signer = sender.signer
        message["sig"] = self.signer.sign(message, signer)
        return message

    def _unsigned_request(self, kind: str, request: Sent, any_message: Sent,
                          now: int) -> dict[str, Any]:
        """A copy of ``request`` without a signature."""
        return self._fresh_copy(request, now, sign=False)

    def _bad_timestamp(self, kind: str, request: Sent, any_message: Sent,
                       now: int) -> dict[str, Any]:
        """A signed copy of ``request`` whose timestamp is too old, too far ahead, or exactly
        60 s off."""
        rng = self.rng
        message = self._fresh_copy(request, now, sign=False)
        if kind == "stale_timestamp":
            message["timestamp"] = now - rng.choice((61, rng.randint(61, 3600)))
        elif kind == "future_timestamp":
            message["timestamp"] = now + rng.choice((61, rng.randint(61, 3600)))
        else:
            message["timestamp"] = now + rng.choice((-60, 60))
        message["sig"] = self.signer.sign(message, request.sender.signer)
        return message

    def _malformed_address(self, kind: str, request: Sent, any_message: Sent,
                           now: int) -> dict[str, Any]:
        """A copy of any recent message with a broken ``from`` (or, sometimes, ``to``)."""
        rng = self.rng
        message = self._fresh_copy(any_message, now)
        target = "to" if "to" in message and rng.random() < 0.4 else "from"
        message[target] = malformed_address(rng, message[target])
        return message

    def _mixed_network(self, kind: str, request: Sent, any_message: Sent,
                       now: int) -> dict[str, Any] | None:
        """A signed copy of a message with a ``to``, redirected to the other network."""
        base = self._pick(self.history.recent_requests, need_to=True) or self._pick(
            self.history.recent, need_to=True
        )
        if base is None:  # only service calls so far: nothing to redirect
            return None
        message = self._fresh_copy(base, now, sign=False)
        other: Network = "testnet" if base.sender.network == "mainnet" else "mainnet"
        peers = self.cast.by_network[other]
        message["to"] = self.rng.choice(peers).address if peers else self.cast.outsiders[other]
        message["sig"] = self.signer.sign(message, base.sender.signer)
        return message

    def _broken_field(self, kind: str, request: Sent, any_message: Sent,
                      now: int) -> dict[str, Any]:
        """A copy of any recent message with a required field removed or of the wrong type."""
        message = self._fresh_copy(any_message, now)
        if kind == "missing_field":
            del message[self.rng.choice(_REQUIRED)]
        else:
            break_type(self.rng, message)
        return message

    def _bad_id_pattern(self, kind: str, request: Sent, any_message: Sent,
                        now: int) -> dict[str, Any]:
        """A signed copy of ``request`` whose id breaks the id pattern."""
        rng = self.rng
        message = self._fresh_copy(request, now, sign=False)
        message["id"] = rng.choice(
            (
                f"msg@{rng.getrandbits(32):08x}",
                f"msg {rng.getrandbits(32):08x}",
                f"msg.{rng.getrandbits(32):08x}",
                f"msg/{rng.getrandbits(32):08x}",
                f"msg-ü{rng.getrandbits(32):08x}",
                "m" * 129,
            )
        )
        message["sig"] = self.signer.sign(message, request.sender.signer)
        return message

    def _uppercase_sig(self, kind: str, request: Sent, any_message: Sent,
                       now: int) -> dict[str, Any]:
        """A signed copy of ``request`` whose signature is written in upper-case hex."""
        message = self._fresh_copy(request, now)
        while message["sig"] == message["sig"].upper():  # pragma: no cover - 2^-128
            message = self._fresh_copy(request, now)
        message["sig"] = message["sig"].upper()
        return message

    def _deep_payload(self, kind: str, request: Sent, any_message: Sent,
                      now: int) -> dict[str, Any]:
        """A signed copy of ``request`` whose payload nests 11 levels deep (10 at the
        boundary)."""
        levels = 11 if kind == "deep_payload" else 10
        message = self._fresh_copy(request, now, sign=False)
        message["payload"] = {**message["payload"], "context": nest(levels - 1)}
        assert depth(message["payload"]) == levels
        message["sig"] = self.signer.sign(message, request.sender.signer)
        return message

    def _constraint_violation(self, kind: str, request: Sent, any_message: Sent,
                              now: int) -> dict[str, Any]:
        """A signed copy of ``request`` that breaks one of the schema's constraints."""
        message = self._fresh_copy(request, now)
        break_constraint(self.rng, message)
        return message

    def _ecmascript_pattern(self, kind: str, request: Sent, any_message: Sent,
                            now: int) -> dict[str, Any]:
        """A signed copy of ``request`` with a value that only a non-ECMAScript regex
        accepts."""
        message = self._fresh_copy(request, now, sign=False)
        name, value = self.rng.choice(
            (
                ("version", "٠.١"),  # Arabic-Indic digits: \d is ASCII in ECMAScript
                ("version", "１.０"),  # fullwidth digits
                ("version", "0.1\n"),  # $ does not match before a final newline
                ("id", f"{message['id']}\n"),
                ("method", f"{message['method']}\n"),
            )
        )
        message[name] = value
        message["sig"] = self.signer.sign(message, request.sender.signer)
        return message

    def _number_overflow(self, kind: str, request: Sent, any_message: Sent,
                         now: int) -> dict[str, Any]:
        """An unsigned copy of any recent message carrying a placeholder number, which
        :meth:`_line` swaps for one no double holds."""
        message = self._fresh_copy(any_message, now, sign=False)
        message["payload"] = {**message["payload"], "metrics": {"value": _OVERFLOW_SENTINEL}}
        return message

    def _broken_base(self, kind: str, request: Sent, any_message: Sent,
                     now: int) -> dict[str, Any]:
        """A copy of any recent message, for :meth:`_line` to write as a broken line."""
        return self._fresh_copy(any_message, now)

    def _schedule_replay(self, kind: str, now: int) -> None:
        """Queue an exact copy of an accepted message for a later receipt time."""
        rng = self.rng
        pool = self.history.replayable
        for _ in range(8):
            if not pool:
                return
            original = pool[rng.randrange(len(pool))]
            first = original.received_at
            if kind == "replay_in_window":
                # Within 5-100 s of the first receipt and no more than 60 s after the
                # message's timestamp, so the drift check passes and the replay store fires.
                low = max(now + 1, first + 5)
                high = min(first + 100, original.message["timestamp"] + 60)
                if low > high:
                    continue
                at = rng.randint(low, high)
                code: int | None = 2006
            else:
                # More than 120 s after: outside the window, but the drift (> 60) fails first.
                at = max(first + rng.randint(121, 900), now + 1)
                code = 2004
            pool.remove(original)
            envelope = {"received_at": at, "source": rng.choice(RELAYS), "message": original.field}
            self.schedule(at + 0.5, Scheduled(orjson.dumps(envelope), kind, code))
            return


def _bisect(cumulative: Sequence[int], value: float) -> int:
    """The first index whose cumulative weight is over ``value``."""
    low, high = 0, len(cumulative)
    while low < high:
        mid = (low + high) // 2
        if cumulative[mid] <= value:
            low = mid + 1
        else:
            high = mid
    return low
