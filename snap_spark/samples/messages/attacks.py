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
from typing import Any, Final

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
        message: Any
        if kind == "tampered_payload":
            message = self._fresh_copy(request, now)
            message["payload"] = tampered_payload(rng, message["payload"])
        elif kind == "tampered_timestamp":
            message = self._fresh_copy(request, now)
            message["timestamp"] += rng.choice((-1, 1)) * rng.randint(1, 20)
        elif kind == "wrong_key":
            message = self._fresh_copy(request, now, sign=False)
            message["sig"] = self.signer.sign(message, self.cast.other_agent(request.sender).signer)
        elif kind == "untweaked_key":
            message = self._fresh_copy(request, now, sign=False)
            message["sig"] = self.signer.sign(message, request.sender.raw_signer)
        elif kind == "off_curve_key":
            message = self._fresh_copy(request, now, sign=False)
            message["from"] = off_curve_address(rng, request.sender.network)
            message["sig"] = self.signer.sign(message, request.sender.signer)
        elif kind == "unsigned_request":
            message = self._fresh_copy(request, now, sign=False)
        elif kind == "stale_timestamp":
            message = self._fresh_copy(request, now, sign=False)
            message["timestamp"] = now - rng.choice((61, rng.randint(61, 3600)))
            message["sig"] = self.signer.sign(message, request.sender.signer)
        elif kind == "future_timestamp":
            message = self._fresh_copy(request, now, sign=False)
            message["timestamp"] = now + rng.choice((61, rng.randint(61, 3600)))
            message["sig"] = self.signer.sign(message, request.sender.signer)
        elif kind == "boundary_drift_60":
            message = self._fresh_copy(request, now, sign=False)
            message["timestamp"] = now + rng.choice((-60, 60))
            message["sig"] = self.signer.sign(message, request.sender.signer)
        elif kind == "malformed_address":
            message = self._fresh_copy(any_message, now)
            target = "to" if "to" in message and rng.random() < 0.4 else "from"
            message[target] = malformed_address(rng, message[target])
        elif kind == "mixed_network":
            base = self._pick(self.history.recent_requests, need_to=True) or self._pick(
                self.history.recent, need_to=True
            )
            if base is None:  # only service calls so far: nothing to redirect
                return []
            message = self._fresh_copy(base, now, sign=False)
            other: Network = "testnet" if base.sender.network == "mainnet" else "mainnet"
            peers = self.cast.by_network[other]
            message["to"] = rng.choice(peers).address if peers else self.cast.outsiders[other]
            message["sig"] = self.signer.sign(message, base.sender.signer)
        elif kind == "missing_field":
            message = self._fresh_copy(any_message, now)
            del message[rng.choice(_REQUIRED)]
        elif kind == "wrong_type":
            message = self._fresh_copy(any_message, now)
            break_type(rng, message)
        elif kind == "bad_id_pattern":
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
        elif kind == "uppercase_sig":
            message = self._fresh_copy(request, now)
            while message["sig"] == message["sig"].upper():  # pragma: no cover - 2^-128
                message = self._fresh_copy(request, now)
            message["sig"] = message["sig"].upper()
        elif kind in ("deep_payload", "boundary_depth_10"):
            levels = 11 if kind == "deep_payload" else 10
            message = self._fresh_copy(request, now, sign=False)
            message["payload"] = {**message["payload"], "context": nest(levels - 1)}
            assert depth(message["payload"]) == levels
            message["sig"] = self.signer.sign(message, request.sender.signer)
        elif kind == "constraint_violation":
            message = self._fresh_copy(request, now)
            break_constraint(rng, message)
        elif kind == "ecmascript_pattern":
            message = self._fresh_copy(request, now, sign=False)
            name, value = rng.choice(
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
        elif kind == "number_overflow":
            message = self._fresh_copy(any_message, now, sign=False)
            message["payload"] = {**message["payload"], "metrics": {"value": _OVERFLOW_SENTINEL}}
            line = envelope_line(rng, message, now, source, bare=bare)
            assert line.count(_OVERFLOW_SENTINEL_TEXT) == 1
            return [(line.replace(_OVERFLOW_SENTINEL_TEXT, b"1e400"), kind, code)]
        elif kind in ("not_json", "not_object", "invalid_utf8", "embedded_not_json"):
            message = self._fresh_copy(any_message, now)
            return [(broken_line(rng, kind, message, now, source, bare), kind, code)]
        else:  # pragma: no cover - every kind is handled above
            raise AssertionError(kind)
        return [(envelope_line(rng, message, now, source, bare=bare), kind, code)]

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
