"""Task state machine (``messages.md`` "Task States") and the fold of a task's reports.

State comes from *valid responses* whose ``payload.task.status.state`` is one of the six
states (events report progress, not state). Per task, reports are ordered by message
timestamp, then receipt order. The sender of the first report owns the task; reports from
anyone else are anomalies and are not applied. The first report sets the state (a
synchronous agent may answer ``completed`` at once); repeating the current state is a no-op;
later reports apply only when the transition table allows them, otherwise they are recorded
as illegal and ignored.

Examples:
    >>> r = [TaskReport("t1", "c1", "submitted", "A", "m1", 1, 0),
    ...      TaskReport("t1", "c1", "completed", "A", "m2", 2, 1)]
    >>> fold_task(r).state, fold_task(r).anomalies
    ('submitted', 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(slots=True)
class TaskState:
    """Current state of one task after folding its reports."""

    task_id: str
    context_id: str | None = None
    owner: str | None = None
    state: str | None = None
    state_timestamp: int | None = None
    last_message_id: str | None = None
    transitions: int = 0
    anomalies: int = 0
    events: list[TaskEvent] = field(default_factory=list)


def extract_report(
    message: Mapping[str, Any], receipt_order: float = 0.0
) -> TaskReport | None:
    """The state report carried by a *valid* message, or ``None`` if it carries none."""
    if message.get("type") != "response":
        return None
    payload = message.get("payload")
    task = payload.get("task") if isinstance(payload, dict) else None
    if not isinstance(task, dict):
        return None
    status = task.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    task_id = task.get("id")
    if not isinstance(state, str) or state not in TRANSITIONS:
        return None
    if not isinstance(task_id, str) or not task_id:
        return None
    context = task.get("contextId")
    return TaskReport(
        task_id=task_id,
        context_id=context if isinstance(context, str) else None,
        state=state,
        sender=str(message.get("from")),
        message_id=str(message.get("id")),
        timestamp=int(message.get("timestamp", 0)),
        receipt_order=receipt_order,
    )


def fold_task(reports: Iterable[TaskReport]) -> TaskState:
    """Fold one task's reports (any order) into its state, flagging illegal transitions."""
    ordered = sorted(reports, key=lambda r: (r.timestamp, r.receipt_order))
    if not ordered:
        raise ValueError("fold_task needs at least one report")
    result = TaskState(task_id=ordered[0].task_id)
    for report in ordered:
        previous = result.state
        if result.owner is None:
            result.owner = report.sender
        if report.sender != result.owner:
            legal, applied, anomaly = is_legal(previous, report.state), False, "non_owner"
        elif previous is None:
            legal, applied, anomaly = True, True, None
        elif report.state == previous:
            legal, applied, anomaly = True, False, None  # a repeat is a no-op
        elif report.state in TRANSITIONS[previous]:
            legal, applied, anomaly = True, True, None
        else:
            legal, applied, anomaly = False, False, "illegal_transition"
        result.events.append(
            TaskEvent(report.task_id, previous, report.state, legal, applied, anomaly,
                      report.message_id, report.sender, report.timestamp)
        )
        if anomaly is not None:
            result.anomalies += 1
            continue
        if result.context_id is None and report.context_id is not None:
            result.context_id = report.context_id
        if applied:
            if previous is not None:
                result.transitions += 1
            result.state = report.state
            result.state_timestamp = report.timestamp
            result.last_message_id = report.message_id
    return result
