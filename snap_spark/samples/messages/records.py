"""What the message simulation keeps between lines: steps, sent messages and task records.

A conversation is an iterator of :class:`Step`; a written honest message becomes a
:class:`Sent` in the :class:`History`, which attacks copy and replay, and a task report
updates the task's :class:`TaskRecord`, from which the expected ``tasks`` table is read.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from snap_spark.samples.messages.agents import Agent
from snap_spark.samples.messages.config import ExpectedTask

__all__ = [
    "Conversation",
    "Emitted",
    "History",
    "Scheduled",
    "Sent",
    "Step",
    "TaskRecord",
]


@dataclass(slots=True)
class Step:
    """One message of a conversation, ``delay`` seconds after the previous one."""

    delay: float
    sender: Agent
    recipient: Agent | None
    type: str
    method: str
    payload: dict[str, Any]
    source: str
    signed: bool = True
    kind: str = ""
    status: dict[str, Any] | None = None


@dataclass(slots=True)
class Sent:
    """An honest valid message already written, kept as a base for attacks and replays."""

    message: dict[str, Any]
    field: Any  # what the envelope carried: the dict or its JSON text
    sender: Agent
    received_at: int
    enveloped: bool


@dataclass(slots=True)
class Scheduled:
    """A line decided earlier and written when the clock reaches it (replays)."""

    line: bytes
    kind: str
    code: int | None


@dataclass(slots=True)
class TaskRecord:
    """The generator's own account of one task: what it sent, and what it meant by it.

    Reports are noted as they are written, each with the intent the conversation gave it
    (``kind``). The order they are written in is their fold order: an owner's reports are
    at least 2.5 s apart on one clock, and a non-owner's report leaves at least 10 s after
    the owner's first one (clock skews are within ±3 s); :meth:`sent` checks both.
    """

    task_id: str
    context_id: str
    owner: str | None = None
    state: str | None = None
    state_timestamp: int = 0
    last_message_id: str = ""
    first_timestamp: int = 0
    owner_timestamp: int = 0  # of the owner's latest report
    reports: int = 0
    transitions: int = 0
    illegal: int = 0
    foreign: int = 0

    def sent(self, kind: str, state: str, sender: str, message_id: str, timestamp: int) -> None:
        """Note one report written as a valid line."""
        self.reports += 1
        if kind == "task_non_owner":
            if self.owner is None or sender == self.owner or timestamp <= self.first_timestamp:
                raise AssertionError(f"{self.task_id}: a non-owner report before the owner's")
            self.foreign += 1
            return
        if self.owner is None:  # the first report comes from the agent running the task
            self.owner, self.first_timestamp = sender, timestamp
        elif sender != self.owner or timestamp <= self.owner_timestamp:
            raise AssertionError(f"{self.task_id}: owner reports out of order")
        self.owner_timestamp = timestamp
        if kind == "task_illegal_transition":  # sent to be refused: the state stays
            self.illegal += 1
            return
        if state == self.state:  # a repeat (a late poll, working again): nothing changes
            return
        if self.state is not None:
            self.transitions += 1
        self.state, self.state_timestamp, self.last_message_id = state, timestamp, message_id

    def expected(self) -> ExpectedTask:
        """The ``tasks`` row this record stands for."""
        assert self.owner is not None and self.state is not None
        return ExpectedTask(
            self.task_id, self.context_id, self.owner, self.state, self.state_timestamp,
            self.last_message_id, self.reports, self.transitions, self.illegal, self.foreign,
        )  # fmt: skip


#: A line to write: its bytes, its kind and the code it must get.
Emitted: TypeAlias = tuple[bytes, str, int | None]
#: A conversation: its messages, in the order they are sent.
Conversation: TypeAlias = Iterator[Step]


class History:
    """The honest messages written lately (bases of attacks and replays), the forged copies
    still to be written, and the record of every task reported so far."""

    def __init__(self) -> None:
        self.recent: deque[Sent] = deque(maxlen=64)
        self.recent_requests: deque[Sent] = deque(maxlen=64)
        self.replayable: deque[Sent] = deque(maxlen=48)
        self.pending_forgeries = 0
        self.tasks: dict[str, TaskRecord] = {}  # by task id, in order of first report

    def remember(self, sent: Sent, *, request: bool) -> None:
        """Keep a written honest message as a base for attacks (and replays if enveloped)."""
        self.recent.append(sent)
        if request:
            self.recent_requests.append(sent)
        if sent.enveloped:
            self.replayable.append(sent)

    def report(self, task: dict[str, Any], kind: str, state: str, sender: str, message_id: str,
               timestamp: int) -> None:
        """Note a task report written as a valid line (``task`` is its ``payload.task``)."""
        record = self.tasks.get(task["id"])
        if record is None:
            record = self.tasks[task["id"]] = TaskRecord(task["id"], task["contextId"])
        record.sent(kind, state, sender, message_id, timestamp)

    def expected_tasks(self) -> list[ExpectedTask]:
        """The tasks of the lines written so far, in order of their first report."""
        return [record.expected() for record in self.tasks.values()]
