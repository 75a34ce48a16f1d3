"""Task state machine (``messages.md`` "Task States") and the fold of a task's reports.

State comes from *valid responses* whose ``payload.task.status.state`` is one of the six
states (events report progress, not state). Per task, reports are ordered by message
timestamp, then receipt order. The sender of the first report owns the task; reports from
anyone else are anomalies and are not applied. The first report sets the state (a
synchronous agent may answer ``completed`` at once); repeating the current state is a no-op;
later reports apply only when the transition table allows them, otherwise they are recorded
as illegal and ignored.

The fold is written once, as an incremental step (:func:`task_step`) over a task's
:class:`TaskState`, which :meth:`~TaskState.to_plain` turns into JSON-able values: a batch
fold (:func:`fold_task`), a stream's state processor and a full rebuild run the same code.

Examples:
    >>> r = [TaskReport("t1", "c1", "submitted", "A", "m1", 1, 0),
    ...      TaskReport("t1", "c1", "completed", "A", "m2", 2, 1)]
    >>> fold_task(r).state, fold_task(r).anomalies
    ('submitted', 1)
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

STATES = ("submitted", "working", "input_required", "completed", "failed", "canceled")
TERMINAL = frozenset(("completed", "failed", "canceled"))

#: Allowed transitions (``messages.md``, State Transitions).
TRANSITIONS: Mapping[str, frozenset[str]] = {
    "submitted": frozenset(("working", "failed", "canceled")),
    "working": frozenset(("completed", "failed", "canceled", "input_required")),
    "input_required": frozenset(("working", "failed", "canceled")),
    "completed": frozenset(),
    "failed": frozenset(),
    "canceled": frozenset(),
}


def is_legal(previous: str | None, new: str) -> bool:
    """True if ``previous → new`` is allowed (``None`` means no state yet: any state)."""
    if previous is None:
        return new in TRANSITIONS
    return new == previous or new in TRANSITIONS.get(previous, frozenset())


@dataclass(frozen=True, slots=True)
class TaskReport:
    """A state report taken from one valid response."""

    task_id: str
    context_id: str | None
    state: str
    sender: str
    message_id: str
    timestamp: int
    receipt_order: float  # receipt time or any sortable input position


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One report as applied (or refused) by the fold."""

    task_id: str
    previous_state: str | None
    new_state: str
    legal: bool
    applied: bool
    anomaly: str | None  # None, "illegal_transition" or "non_owner"
    message_id: str
    sender: str
    timestamp: int
    receipt_order: float = 0.0
    by_owner: bool = True
    #: Position of the report in the task's fold order, from 0: with ``task_id`` the key of
    #: an event row (see :func:`task_step` for how a late report re-numbers later events).
    seq: int = 0


def _report_order(report: TaskReport) -> tuple[int, float]:
    return report.timestamp, report.receipt_order


@dataclass(frozen=True, slots=True)
class TaskState:
    """State of one task after folding its reports; immutable, steps return a new one.

    ``reports`` are the folded reports in fold order: what a late report is re-folded with
    (a task has few). The other fields are the ``tasks`` table row.
    """

    task_id: str
    context_id: str | None = None
    owner: str | None = None
    state: str | None = None
    state_timestamp: int | None = None
    last_message_id: str | None = None
    transitions: int = 0
    anomalies: int = 0
    reports: tuple[TaskReport, ...] = ()

    @property
    def events(self) -> tuple[TaskEvent, ...]:
        """The event of every folded report, in fold order (computed again on each call)."""
        return _fold(self.task_id, self.reports)[1]

    def to_plain(self) -> dict[str, Any]:
        """JSON-able form, for a state store row or a Delta column.

        Examples:
            >>> s = fold_task([TaskReport("t1", "c1", "working", "A", "m1", 5, 0.5)])
            >>> s.to_plain()["reports"]
            [['c1', 'working', 'A', 'm1', 5, 0.5]]
            >>> TaskState.from_plain(s.to_plain()) == s
            True
        """
        return {
            "task_id": self.task_id,
            "context_id": self.context_id,
            "owner": self.owner,
            "state": self.state,
            "state_timestamp": self.state_timestamp,
            "last_message_id": self.last_message_id,
            "transitions": self.transitions,
            "anomalies": self.anomalies,
            "reports": [
                [r.context_id, r.state, r.sender, r.message_id, r.timestamp, r.receipt_order]
                for r in self.reports
            ],
        }

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> TaskState:
        """The state :meth:`to_plain` described (also after a JSON round trip)."""
        task_id = plain["task_id"]
        return cls(
            task_id=task_id,
            context_id=plain["context_id"],
            owner=plain["owner"],
            state=plain["state"],
            state_timestamp=plain["state_timestamp"],
            last_message_id=plain["last_message_id"],
            transitions=plain["transitions"],
            anomalies=plain["anomalies"],
            reports=tuple(TaskReport(task_id, *row) for row in plain["reports"]),
        )


class TaskFields(NamedTuple):
    """The task a message names, and the state it reports (see :func:`task_fields`)."""

    task_id: str | None
    context_id: str | None
    state: str | None


_NO_TASK = TaskFields(None, None, None)


def task_fields(msg_type: Any, payload: Any) -> TaskFields:
    """Task id, context id and reported state of a message, from its ``type`` and ``payload``.

    ``task_id``/``context_id`` are ``payload.task.id``/``payload.task.contextId`` when
    ``payload.task`` is an object, else ``payload.taskId`` (no context); strings only.
    ``state`` is set only for a state-bearing report: a ``response`` whose
    ``payload.task.status.state`` is one of :data:`STATES` and ``payload.task.id`` a
    non-empty string. Validity is the caller's business: the fold takes valid messages only.

    Examples:
        >>> task = {"id": "t1", "contextId": "c1", "status": {"state": "working"}}
        >>> task_fields("response", {"task": task})
        TaskFields(task_id='t1', context_id='c1', state='working')
        >>> task_fields("event", {"task": task}).state is None
        True
        >>> task_fields("request", {"taskId": "t1"})
        TaskFields(task_id='t1', context_id=None, state=None)
    """
    if not isinstance(payload, dict):
        return _NO_TASK
    task = payload.get("task")
    if not isinstance(task, dict):
        task_id = payload.get("taskId")
        return TaskFields(task_id if isinstance(task_id, str) else None, None, None)
    task_id, context = task.get("id"), task.get("contextId")
    if not isinstance(task_id, str):
        task_id = None
    if not isinstance(context, str):
        context = None
    state = None
    if msg_type == "response" and task_id:
        status = task.get("status")
        reported = status.get("state") if isinstance(status, dict) else None
        if isinstance(reported, str) and reported in TRANSITIONS:
            state = reported
    return TaskFields(task_id, context, state)


def extract_report(
    message: Mapping[str, Any], receipt_order: float = 0.0
) -> TaskReport | None:
    """The state report carried by a *valid* message, or ``None`` if it carries none.

    Examples:
        >>> msg = {"type": "response", "from": "A", "id": "m1", "timestamp": 5,
        ...        "payload": {"task": {"id": "t1", "status": {"state": "completed"}}}}
        >>> extract_report(msg).state
        'completed'
    """
    fields = task_fields(message.get("type"), message.get("payload"))
    if fields.state is None or fields.task_id is None:
        return None
    return TaskReport(
        task_id=fields.task_id,
        context_id=fields.context_id,
        state=fields.state,
        sender=str(message.get("from")),
        message_id=str(message.get("id")),
        timestamp=int(message.get("timestamp", 0)),
        receipt_order=receipt_order,
    )


def _apply(state: TaskState, report: TaskReport) -> tuple[TaskState, TaskEvent]:
    """The rule: fold one report, taken after every report of ``state``, into it."""
    previous = state.state
    owner = report.sender if state.owner is None else state.owner  # the first reporter
    by_owner = report.sender == owner
    if not by_owner:
        legal, applied, anomaly = is_legal(previous, report.state), False, "non_owner"
    elif previous is None:
        legal, applied, anomaly = True, True, None
    elif report.state == previous:
        legal, applied, anomaly = True, False, None  # a repeat is a no-op
    elif report.state in TRANSITIONS[previous]:
        legal, applied, anomaly = True, True, None
    else:
        legal, applied, anomaly = False, False, "illegal_transition"
    event = TaskEvent(report.task_id, previous, report.state, legal, applied, anomaly,
                      report.message_id, report.sender, report.timestamp,
                      report.receipt_order, by_owner, len(state.reports))
    reports = (*state.reports, report)
    if anomaly is not None:
        return replace(state, owner=owner, anomalies=state.anomalies + 1,
                       reports=reports), event
    context = state.context_id if state.context_id is not None else report.context_id
    if not applied:
        return replace(state, owner=owner, context_id=context, reports=reports), event
    return replace(
        state, owner=owner, context_id=context, state=report.state,
        state_timestamp=report.timestamp, last_message_id=report.message_id,
        transitions=state.transitions + (previous is not None), reports=reports,
    ), event


def _fold(task_id: str, ordered: Iterable[TaskReport]) -> tuple[TaskState, tuple[TaskEvent, ...]]:
    state = TaskState(task_id)
    events = []
    for report in ordered:
        state, event = _apply(state, report)
        events.append(event)
    return state, tuple(events)


def task_step(state: TaskState | None, report: TaskReport
              ) -> tuple[TaskState, tuple[TaskEvent, ...]]:
    """Fold one report into its task's state (``None``: no report yet); new state, events.

    Reports may arrive in any order; the state always equals :func:`fold_task` over every
    report stepped so far. A report that sorts after all folded ones (by timestamp, then
    receipt order; equal keys in step order) yields its own event. A late report sorts
    before some: the task is re-folded and the events of every report from its position on
    are returned, re-numbered. So the returned events always *replace* the task's events
    with ``seq >= events[0].seq``: a caller keeping one row per ``(task_id, seq)`` upserts
    them, and since a task gains exactly one event per report nothing is ever deleted.

    Raises:
        ValueError: the report belongs to another task.

    Examples:
        >>> s, ev = task_step(None, TaskReport("t1", None, "working", "A", "m2", 20, 0))
        >>> [(e.seq, e.new_state, e.anomaly) for e in ev]
        [(0, 'working', None)]
        >>> s, ev = task_step(s, TaskReport("t1", None, "submitted", "B", "m1", 10, 1))
        >>> [(e.seq, e.new_state, e.anomaly) for e in ev], s.owner, s.state
        ([(0, 'submitted', None), (1, 'working', 'non_owner')], 'B', 'submitted')
    """
    if state is None:
        state = TaskState(report.task_id)
    elif report.task_id != state.task_id:
        raise ValueError(f"report of task {report.task_id!r} offered to {state.task_id!r}")
    reports = state.reports
    if not reports or _report_order(report) >= _report_order(reports[-1]):
        new_state, event = _apply(state, report)
        return new_state, (event,)
    at = bisect_right(reports, _report_order(report), key=_report_order)
    new_state, events = _fold(state.task_id, (*reports[:at], report, *reports[at:]))
    return new_state, events[at:]


def fold_task(reports: Iterable[TaskReport]) -> TaskState:
    """Fold one task's reports (any order) into its state, flagging illegal transitions.

    Equal (timestamp, receipt order) keep the given order. :attr:`TaskState.events` gives
    the event of each report.

    Examples:
        >>> s = fold_task([TaskReport("t1", None, "working", "A", "m2", 2, 1),
        ...                TaskReport("t1", None, "submitted", "A", "m1", 1, 0)])
        >>> s.state, s.transitions, [e.new_state for e in s.events]
        ('working', 1, ['submitted', 'working'])
    """
    ordered = sorted(reports, key=_report_order)
    if not ordered:
        raise ValueError("fold_task needs at least one report")
    state: TaskState | None = None
    for report in ordered:
        state, _ = task_step(state, report)
    assert state is not None
    return state
