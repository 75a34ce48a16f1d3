"""The event-driven simulation behind :func:`generate`: a clock, a heap of what comes next.

The heap holds three kinds of entries, ordered by time: the start of the next conversation
(conversations start about 0.8 times a second), the next message of a running
conversation, and a line decided earlier (a replay). Between honest lines, an attack is
written with probability ``attack_share`` (:mod:`snap_spark.samples.messages.attacks`).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from typing import Any, Final

import orjson

from snap_spark.samples.messages.agents import Cast, MessageSigner
from snap_spark.samples.messages.attacks import Attacker
from snap_spark.samples.messages.config import ExpectedTask, Label, SampleConfig
from snap_spark.samples.messages.content import (
    STRING_MESSAGE_SHARE,
    Content,
    iso,
    random_token,
    random_uuid,
)
from snap_spark.samples.messages.conversations import Conversations
from snap_spark.samples.messages.records import Emitted, History, Scheduled, Sent, Step

__all__ = ["SampleStream", "Simulation", "generate"]

# Heap entry tags: start a conversation, send a conversation's next message, write a line.
_START: Final = 0
_STEP: Final = 1
_LINE: Final = 2
_EXTENSION_SHARE: Final = 0.02
_CONVERSATIONS_PER_SECOND: Final = 0.8  # about 3 lines a second overall


class Simulation:
    """One sample's simulation: honest conversations on a clock, attacks in between."""

    def __init__(self, config: SampleConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.signer = MessageSigner(config.seed)
        self.cast = Cast(config, self.rng)
        self.history = History()
        self.conversations = Conversations(self.rng, self.cast, Content(self.rng))
        self.attacker = Attacker(config, self.rng, self.cast, self.signer, self.history,
                                 self._schedule_line)
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._clock = float(config.start_time)

    def expected_tasks(self) -> list[ExpectedTask]:
        """The tasks of the lines written so far, in order of their first report."""
        return self.history.expected_tasks()

    def _push(self, key: float, tag: int, item: Any) -> None:
        """Schedule ``item`` at time ``key`` (ties keep the order they were pushed in)."""
        self._seq += 1
        heapq.heappush(self._heap, (key, self._seq, tag, item))

    def _schedule_line(self, at: float, line: Scheduled) -> None:
        """Write ``line`` when the clock reaches ``at``."""
        self._push(at, _LINE, line)

    def lines(self) -> Iterator[tuple[bytes, Label]]:
        """Yield ``(line, label)`` pairs until ``config.messages`` lines are written."""
        target = self.config.messages
        attack_share = self.config.attack_share
        rng = self.rng
        written = 0
        self._push(self._clock, _START, None)
        while written < target:
            if rng.random() < attack_share and self.attacker.ready():
                batch = self.attacker.attack(self._clock)
            else:
                batch = self._next_honest(target - written)
            for line, kind, code in batch:
                written += 1
                yield line, Label(written, kind, code)

    def _next_honest(self, room: int) -> list[Emitted]:
        """Advance the clock to the next scheduled line and write it."""
        rng = self.rng
        while True:
            key, _seq, tag, item = heapq.heappop(self._heap)
            self._clock = key
            if tag == _START:
                conversation = self.conversations.open()
                first = next(conversation)
                self._push(key + rng.uniform(0.05, 2.0), _STEP, (conversation, first, key))
                self._push(key + rng.expovariate(_CONVERSATIONS_PER_SECOND), _START, None)
                continue
            if tag == _LINE:
                return [(item.line, item.kind, item.code)]
            conversation, step, sent_at = item
            batch = self._emit_step(step, sent_at, key, room)
            following = next(conversation, None)
            if following is not None:
                at = sent_at + following.delay
                self._push(at + rng.uniform(0.05, 2.0), _STEP, (conversation, following, at))
            return batch

    def _message(self, step: Step, ts: int) -> tuple[dict[str, Any], str]:
        """The SNAP message of ``step`` sent at ``ts`` (signed if the step is) and its kind."""
        sender = step.sender
        message: dict[str, Any] = {
            "id": random_uuid(self.rng), "version": "0.1", "from": sender.address,
        }  # fmt: skip
        if step.recipient is not None:
            message["to"] = step.recipient.address
        message["type"] = step.type
        message["method"] = step.method
        message["payload"] = step.payload
        message["timestamp"] = ts
        if step.status is not None:
            step.status["timestamp"] = iso(ts)
        kind = step.kind
        if not kind:
            if step.type == "request":
                kind = "request"
            else:
                kind = step.type if step.signed else f"{step.type}_unsigned"
            if self.rng.random() < _EXTENSION_SHARE:
                message["x-trace-id"] = random_token(self.rng, "trace")
                kind = "extension_field"
        if step.signed:
            message["sig"] = self.signer.sign(message, sender.signer)
        return message, kind

    def _emit_step(self, step: Step, sent_at: float, received: float, room: int) -> list[Emitted]:
        """The line of one conversation step, after its forged copy if one is waiting."""
        rng = self.rng
        sender = step.sender
        ts = math.floor(sent_at + sender.skew)
        received_at = math.floor(received)
        message, kind = self._message(step, ts)

        batch: list[Emitted] = []
        forge = kind == "request" and self.attacker.forges() and room >= 2 and step.signed
        bare = not forge and rng.random() < self.config.bare_share
        if forge:
            batch.append(self.attacker.forged_copy(message, sender, received_at))
            kind = "genuine_after_forged_copy"
        field_value: Any = message
        if bare:
            line = orjson.dumps(message)
        else:
            if rng.random() < STRING_MESSAGE_SHARE:
                field_value = orjson.dumps(message).decode()
            line = orjson.dumps(
                {"received_at": received_at, "source": step.source, "message": field_value}
            )
        batch.append((line, kind, None))
        if step.status is not None:  # a task report, written as a valid line
            self.history.report(step.payload["task"], kind, step.status["state"],
                                sender.address, message["id"], ts)
        sent = Sent(message, field_value, sender, received_at, not bare)
        self.history.remember(sent, request=step.type == "request")
        return batch


class SampleStream(Iterator[tuple[bytes, Label]]):
    """The lines of one sample with their labels, one at a time (see :func:`generate`);
    once every line is read, :meth:`expected_tasks` tells where its tasks end up."""

    def __init__(self, config: SampleConfig) -> None:
        self._simulation = Simulation(config)
        self._lines = self._simulation.lines()
        self._finished = False

    def __iter__(self) -> SampleStream:
        return self

    def __next__(self) -> tuple[bytes, Label]:
        try:
            return next(self._lines)
        except StopIteration:
            self._finished = True
            raise

    def expected_tasks(self) -> list[ExpectedTask]:
        """One :class:`ExpectedTask` per task that got at least one valid report, in order
        of its first report: the ``tasks`` table a full landing of the sample must give.

        Raises:
            RuntimeError: lines are still unread (the expectation covers the whole sample).

        Examples:
            >>> sample = generate(SampleConfig(agents=3, messages=200, seed=2))
            >>> lines = list(sample)
            >>> all(t.reports >= 1 for t in sample.expected_tasks())
            True
        """
        if not self._finished:
            raise RuntimeError("read every line of the sample before asking for its tasks")
        return self._simulation.expected_tasks()


def generate(config: SampleConfig) -> SampleStream:
    """Yield ``config.messages`` NDJSON lines (no trailing newline), each with its label;
    the returned iterator also knows the tasks the lines meant to produce
    (:meth:`SampleStream.expected_tasks`).

    Examples:
        >>> line, label = next(generate(SampleConfig(agents=3, messages=1, attack_share=0)))
        >>> import json
        >>> from snap_spark.samples.messages.config import HONEST_KINDS
        >>> json.loads(line)["message"]["version"], label.kind in HONEST_KINDS
        ('0.1', True)
    """
    return SampleStream(config)
