"""Honest conversations of a message sample, one generator of :class:`Step` each.

A conversation yields its messages in order, each ``delay`` seconds after the previous one:
a service call (one signed ``service/call`` request, no ``to``), a ``message/send`` task
(polls, ``input_required`` turns and cancelation through legal states; now and then an
illegal transition or a report from a non-owner, written as valid lines), or a
``message/stream`` task (events with progress and partial artifacts, sometimes a
``tasks/resubscribe``, then the final report).
"""

from __future__ import annotations

import random
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from snap_spark.samples.messages.agents import Agent, Cast
from snap_spark.samples.messages.content import (
    FOLLOW_UPS,
    GATEWAYS,
    PROGRESS_TEXT,
    RELAYS,
    SERVICE_CALLS,
    SERVICES,
    UNSIGNED_SHARE,
    Content,
    random_token,
)
from snap_spark.samples.messages.records import Conversation, Step

__all__ = ["Conversations"]

_TERMINAL: Final[frozenset[str]] = frozenset({"completed", "failed", "canceled"})
_ILLEGAL_SHARE: Final = 0.02  # of send tasks
_NON_OWNER_SHARE: Final = 0.02  # of send tasks


@dataclass(frozen=True)
class _SentTask:
    """Who and what a ``message/send`` conversation is about: its requester and owner, the
    source that carries its messages, its task id and context id."""

    requester: Agent
    owner: Agent
    source: str
    task: str
    context: str


class Conversations:
    """Starts the three kinds of honest conversation between the agents of a :class:`Cast`."""

    def __init__(self, rng: random.Random, cast: Cast, content: Content) -> None:
        self.rng = rng
        self.cast = cast
        self.content = content

    def open(self) -> Conversation:
        """A new conversation of a random agent: a service call about a fifth of the time
        (always when the agent has no peer on its network), else a streamed task or, most
        often, a sent one, with a peer of the same network."""
        rng = self.rng
        requester = rng.choice(self.cast.agents)
        peers = [a for a in self.cast.by_network[requester.network] if a is not requester]
        roll = rng.random()
        if roll < 0.22 or not peers:
            return self.service_call(requester)
        if roll < 0.42:
            return self.stream_task(requester, rng.choice(peers))
        return self.send_task(requester, rng.choice(peers))

    def service_call(self, requester: Agent) -> Conversation:
        """One signed ``service/call`` request to an HTTP service."""
        name, arguments = self.rng.choice(SERVICE_CALLS)
        payload = {"name": name, "arguments": dict(arguments)}
        source = self.rng.choice(SERVICES)
        yield Step(
            0.0, requester, None, "request", "service/call", payload, source, True, "service_call"
        )

    def opening(self, requester: Agent, owner: Agent, sources: Sequence[str]
                ) -> tuple[str, str, str, tuple[dict[str, Any], str]]:
        """What starts a task conversation, drawn in this order: its source (one of
        ``sources``), task id, context id, and the user's message with its kind."""
        source = self.rng.choice(sources)
        task = random_token(self.rng, "task")
        return source, task, self.content.context(requester, owner), \
            self.content.user_message()

    def send_task(self, requester: Agent, owner: Agent) -> Conversation:
        """``message/send`` then polls, turns and cancelation through legal states."""
        rng = self.rng
        source, task, context, (message, kind) = self.opening(requester, owner, RELAYS + GATEWAYS)
        sent = _SentTask(requester, owner, source, task, context)
        yield Step(
            0.0,
            requester,
            owner,
            "request",
            "message/send",
            {"message": message},
            source,
            kind=kind,
        )
        state = rng.choices(
            ("completed", "failed", "submitted", "working"), (0.4, 0.05, 0.25, 0.3)
        )[0]
        yield self._report(sent, rng.uniform(1.0, 8.0), "message/send", state)

        illegal = rng.random() < _ILLEGAL_SHARE
        yield from self._non_owner_report(sent)
        final = yield from self._turns(sent, state, illegal)
        if final is not None:
            yield from self._after_terminal(sent, final, illegal)

    def _ask(self, sent: _SentTask, delay: float, method: str, payload: dict[str, Any]) -> Step:
        """A request of the requester to the owner of ``sent``."""
        return Step(delay, sent.requester, sent.owner, "request", method, payload, sent.source)

    def _report(self, sent: _SentTask, delay: float, method: str, state: str,
                **extra: Any) -> Step:
        """The owner's report of state ``state`` of the task of ``sent``."""
        return self.content.report(
            delay, sent.owner, sent.requester, method, sent.task, sent.context, state,
            sent.source, **extra,
        )  # fmt: skip

    def _non_owner_report(self, sent: _SentTask) -> Conversation:
        """Now and then, a report on the task by an agent that does not own it."""
        rng = self.rng
        owner, requester = sent.owner, sent.requester
        others = [
            a for a in self.cast.by_network[owner.network] if a is not owner and a is not requester
        ]
        if rng.random() < _NON_OWNER_SHARE and others:
            # at least 10 s after the owner's first report, so it sorts after it
            claimed = rng.choice(("canceled", "completed", "failed"))
            yield self.content.report(
                rng.uniform(10.0, 25.0), rng.choice(others), requester, "tasks/get", sent.task,
                sent.context, claimed, sent.source, kind="task_non_owner", signed=True,
            )  # fmt: skip

    def _turns(self, sent: _SentTask, state: str, illegal: bool
               ) -> Generator[Step, None, str | None]:
        """Requests and reports from ``state`` until a terminal state, which it returns; with
        ``illegal``, a submitted task jumps to completed instead and it returns ``None``."""
        rng = self.rng
        task = sent.task
        # Owner reports are >= 2.5 s apart, so their timestamps strictly increase.
        while state not in _TERMINAL:
            if state == "submitted" and illegal:
                # skips `working`: submitted -> completed is forbidden
                yield self._ask(sent, rng.uniform(2.0, 15.0), "tasks/get", {"taskId": task})
                yield self._report(
                    sent, rng.uniform(0.5, 4.0), "tasks/get", "completed",
                    kind="task_illegal_transition", signed=True,
                )  # fmt: skip
                return None
            nxt = self._next_state(state)
            method, step = self._turn_request(sent, state, nxt)
            yield step
            yield self._report(sent, rng.uniform(0.5, 4.0), method, nxt)
            state = nxt
        return state

    def _next_state(self, state: str) -> str:
        """The state a task in the non-terminal ``state`` moves to next (drawn)."""
        rng = self.rng
        if state == "submitted":
            return rng.choices(("working", "failed", "canceled"), (0.84, 0.08, 0.08))[0]
        if state == "working":
            return rng.choices(
                ("completed", "input_required", "failed", "canceled", "working"),
                (0.55, 0.2, 0.1, 0.08, 0.07),
            )[0]
        # input_required
        return rng.choices(("working", "failed", "canceled"), (0.8, 0.1, 0.1))[0]

    def _turn_request(self, sent: _SentTask, state: str, nxt: str) -> tuple[str, Step]:
        """The requester's request that moves the task from ``state`` to ``nxt``, with its
        method: a cancelation, an answer to an ``input_required`` turn, or a poll."""
        rng = self.rng
        task = sent.task
        if nxt == "canceled":
            method = "tasks/cancel"
            return method, self._ask(sent, rng.uniform(2.0, 20.0), method, {"taskId": task})
        if state == "input_required" and nxt == "working":
            method = "message/send"
            answer, _ = self.content.user_message(rng.choice(FOLLOW_UPS))
            answer["parts"] = answer["parts"][:1]
            return method, self._ask(
                sent, rng.uniform(3.0, 40.0), method, {"taskId": task, "message": answer}
            )
        method = "tasks/get"
        query: dict[str, Any] = {"taskId": task}
        if rng.random() < 0.3:
            query["historyLength"] = rng.choice((0, 5, 10))
        return method, self._ask(sent, rng.uniform(2.0, 15.0), method, query)

    def _after_terminal(self, sent: _SentTask, state: str, illegal: bool) -> Conversation:
        """After the terminal ``state``: sometimes a late poll, and with ``illegal`` a report
        that moves the task back to working."""
        rng = self.rng
        task = sent.task
        if rng.random() < 0.2:  # a late poll repeats the terminal state: a no-op
            yield self._ask(sent, rng.uniform(2.0, 30.0), "tasks/get", {"taskId": task})
            yield self._report(sent, rng.uniform(0.5, 4.0), "tasks/get", state)
        if illegal:  # a terminal task reported as working again
            yield self._ask(sent, rng.uniform(2.0, 30.0), "tasks/get", {"taskId": task})
            yield self._report(
                sent, rng.uniform(0.5, 4.0), "tasks/get", "working",
                kind="task_illegal_transition", signed=True,
            )  # fmt: skip

    def stream_task(self, requester: Agent, owner: Agent) -> Conversation:
        """``message/stream``: events with progress and partial artifacts, then a response."""
        rng = self.rng
        source, task, context, (message, kind) = self.opening(requester, owner, GATEWAYS + RELAYS)
        method = "message/stream"
        yield Step(
            0.0, requester, owner, "request", method, {"message": message}, source, kind=kind
        )
        events = rng.randint(2, 6)
        resubscribe_at = rng.randint(1, events - 1) if rng.random() < 0.15 else -1
        for index in range(events):
            if index == resubscribe_at:  # the stream broke: resume it
                method = "tasks/resubscribe"
                yield Step(
                    rng.uniform(2.0, 10.0),
                    requester,
                    owner,
                    "request",
                    method,
                    {"taskId": task},
                    source,
                )
            payload: dict[str, Any]
            if rng.random() < 0.7:
                progress = round((index + 1) / (events + 1), 2)
                payload = {
                    "taskId": task,
                    "progress": progress,
                    "message": rng.choice(PROGRESS_TEXT),
                }
            else:
                artifact = self.content.artifacts()[0]
                artifact["partial"] = True
                payload = {"taskId": task, "artifact": artifact}
            signed = rng.random() >= UNSIGNED_SHARE
            yield Step(
                rng.uniform(0.3, 3.0), owner, requester, "event", method, payload, source, signed
            )
        final = "completed" if rng.random() < 0.9 else "failed"
        yield self.content.report(
            rng.uniform(0.5, 3.0), owner, requester, method, task, context, final, source
        )
        if rng.random() < 0.1:
            yield Step(
                rng.uniform(2.0, 30.0),
                requester,
                owner,
                "request",
                "tasks/get",
                {"taskId": task},
                source,
            )
            yield self.content.report(
                rng.uniform(0.5, 4.0), owner, requester, "tasks/get", task, context, final, source
            )
