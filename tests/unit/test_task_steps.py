"""Task fold as an incremental step: any arrival order and any cut through JSON end where
the batch fold does; the batch fold agrees with an independent reference; task fields."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snap_spark.protocol.tasks import (
    STATES,
    TaskEvent,
    TaskFields,
    TaskReport,
    TaskState,
    extract_report,
    fold_task,
    task_fields,
    task_step,
)

# messages.md "State Transitions", written out independently of tasks.TRANSITIONS.
ALLOWED = {
    ("submitted", "working"), ("submitted", "failed"), ("submitted", "canceled"),
    ("working", "completed"), ("working", "failed"), ("working", "canceled"),
    ("working", "input_required"),
    ("input_required", "working"), ("input_required", "failed"),
    ("input_required", "canceled"),
}


def reference(reports: Sequence[TaskReport]) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """Summary and events of docs/architecture.md, *Task state*, folded the plain way."""
    ordered = sorted(reports, key=lambda r: (r.timestamp, r.receipt_order))
    s: dict[str, Any] = {"context_id": None, "owner": ordered[0].sender, "state": None,
                         "state_timestamp": None, "last_message_id": None, "transitions": 0,
                         "anomalies": 0}
    events = []
    for seq, r in enumerate(ordered):
        prev = s["state"]
        legal = prev is None or r.state == prev or (prev, r.state) in ALLOWED
        if r.sender != s["owner"]:
            anomaly, applied = "non_owner", False
        elif not legal:
            anomaly, applied = "illegal_transition", False
        else:
            anomaly, applied = None, r.state != prev
        events.append((seq, prev, r.state, legal, applied, anomaly, r.message_id, r.sender,
                       r.timestamp, r.receipt_order, r.sender == s["owner"]))
        if anomaly:
            s["anomalies"] += 1
            continue
        if s["context_id"] is None:
            s["context_id"] = r.context_id
        if applied:
            s["transitions"] += prev is not None
            s["state"], s["state_timestamp"], s["last_message_id"] = (
                r.state, r.timestamp, r.message_id)
    return s, events


def event_tuple(e: TaskEvent) -> tuple[Any, ...]:
    return (e.seq, e.previous_state, e.new_state, e.legal, e.applied, e.anomaly, e.message_id,
            e.sender, e.timestamp, e.receipt_order, e.by_owner)


@st.composite
def task_reports(draw: st.DrawFn) -> list[TaskReport]:
    """One task's reports: a few senders, tied timestamps, distinct receipt orders."""
    rows = draw(st.lists(st.tuples(st.sampled_from(STATES), st.sampled_from("AAB"),
                                   st.integers(0, 4), st.sampled_from([None, "c1", "c2"])),
                         min_size=1, max_size=12))
    receipt = draw(st.permutations(range(len(rows))))
    return [TaskReport("t1", ctx, state, sender, f"m{i}", ts, float(receipt[i]))
            for i, (state, sender, ts, ctx) in enumerate(rows)]


def through_json(state: TaskState) -> TaskState:
    return TaskState.from_plain(json.loads(json.dumps(state.to_plain())))


@given(task_reports())
def test_fold_task_equals_reference(reports: list[TaskReport]) -> None:
    summary, events = reference(reports)
    folded = fold_task(reports)
    assert {k: getattr(folded, k) for k in summary} == summary
    assert [event_tuple(e) for e in folded.events] == events


@given(task_reports(), st.data())
def test_steps_in_any_order_and_any_cut_equal_the_batch_fold(
        reports: list[TaskReport], data: st.DataObject) -> None:
    """After every step the events kept per (task, seq) equal the batch fold of the reports
    so far; at the end, so does the state."""
    arrival = data.draw(st.permutations(reports))
    cuts = data.draw(st.sets(st.integers(0, len(arrival) - 1)))
    state: TaskState | None = None
    rows: dict[int, TaskEvent] = {}
    for n, report in enumerate(arrival):
        if n in cuts and state is not None:
            state = through_json(state)
        state, events = task_step(state, report)
        seqs = [e.seq for e in events]
        assert seqs == list(range(seqs[0], n + 1)), "events replace a suffix, through the last"
        rows.update((e.seq, e) for e in events)
        assert [rows[i] for i in sorted(rows)] == list(fold_task(arrival[:n + 1]).events)
    assert state == fold_task(reports)
    assert through_json(state) == state


@given(task_reports())
def test_in_order_steps_return_one_event_each(reports: list[TaskReport]) -> None:
    state: TaskState | None = None
    for report in sorted(reports, key=lambda r: (r.timestamp, r.receipt_order)):
        state, events = task_step(state, report)
        assert len(events) == 1 and events[0].message_id == report.message_id


# -- examples ---------------------------------------------------------------------------------


def report(state: str, ts: int, sender: str = "A", order: float = 0, mid: str = "") -> TaskReport:
    return TaskReport("t1", "c1", state, sender, mid or f"m-{state}-{ts}", ts, order)


def test_non_owner_report_is_an_anomaly_event() -> None:
    state, _ = task_step(None, report("submitted", 1))
    state, (event,) = task_step(state, report("canceled", 2, sender="B"))
    assert (event.anomaly, event.by_owner, event.applied, event.legal) == (
        "non_owner", False, False, True)
    assert (state.state, state.anomalies, state.owner) == ("submitted", 1, "A")


def test_illegal_transition_is_recorded_not_applied() -> None:
    state, _ = task_step(None, report("completed", 1))
    state, (event,) = task_step(state, report("working", 2))
    assert (event.previous_state, event.new_state, event.legal, event.applied, event.anomaly) \
        == ("completed", "working", False, False, "illegal_transition")
    assert (state.state, state.state_timestamp, state.anomalies) == ("completed", 1, 1)


def test_repeat_is_a_no_op_event() -> None:
    state, _ = task_step(None, report("working", 1))
    state, (event,) = task_step(state, report("working", 2))
    assert event.legal and not event.applied and event.anomaly is None
    assert (state.state_timestamp, state.last_message_id, state.transitions) == (
        1, "m-working-1", 0)


def test_a_late_report_refolds_and_replaces_the_later_events() -> None:
    state, _ = task_step(None, report("submitted", 1, order=0))
    state, _ = task_step(state, report("completed", 3, order=2))  # illegal after submitted
    assert state.state == "submitted" and state.anomalies == 1
    state, events = task_step(state, report("working", 2, order=1))  # arrives late
    assert [(e.seq, e.new_state, e.applied) for e in events] == [
        (1, "working", True), (2, "completed", True)]
    assert (state.state, state.transitions, state.anomalies) == ("completed", 2, 0)


def test_a_late_first_report_changes_the_owner() -> None:
    state, _ = task_step(None, report("working", 5, sender="A"))
    state, events = task_step(state, report("submitted", 1, sender="B"))
    assert [(e.seq, e.sender, e.by_owner, e.anomaly) for e in events] == [
        (0, "B", True, None), (1, "A", False, "non_owner")]
    assert (state.owner, state.state) == ("B", "submitted")


def test_a_report_of_another_task_is_refused() -> None:
    state, _ = task_step(None, report("working", 1))
    with pytest.raises(ValueError, match="t2"):
        task_step(state, TaskReport("t2", None, "working", "A", "m", 2, 0))


# -- task fields ------------------------------------------------------------------------------

TASK = {"id": "t1", "contextId": "c1", "status": {"state": "working"}}


@pytest.mark.parametrize(("msg_type", "payload", "fields"), [
    ("response", {"task": TASK}, ("t1", "c1", "working")),
    ("event", {"task": TASK}, ("t1", "c1", None)),  # events report progress, not state
    ("request", {"task": TASK}, ("t1", "c1", None)),
    ("response", {"task": {**TASK, "status": {"state": "paused"}}}, ("t1", "c1", None)),
    ("response", {"task": {**TASK, "status": "working"}}, ("t1", "c1", None)),
    ("response", {"task": {**TASK, "id": ""}}, ("", "c1", None)),  # no id, no report
    ("response", {"task": {**TASK, "id": 7}}, (None, "c1", None)),
    ("response", {"task": {**TASK, "contextId": 7}}, ("t1", None, "working")),
    ("response", {"task": "t1", "taskId": "t9"}, ("t9", None, None)),
    ("request", {"taskId": "t9", "contextId": "c9"}, ("t9", None, None)),
    ("request", {"taskId": 9}, (None, None, None)),
    ("response", [], (None, None, None)),
    ("response", None, (None, None, None)),
])
def test_task_fields(msg_type: str, payload: Any, fields: tuple[Any, ...]) -> None:
    assert task_fields(msg_type, payload) == TaskFields(*fields)


def test_extract_report_takes_its_fields_from_task_fields() -> None:
    msg = {"type": "response", "from": "A", "id": "m1", "timestamp": 7,
           "payload": {"task": {**TASK, "status": {"state": "input_required"}}}}
    got = extract_report(msg, receipt_order=3.5)
    assert got == TaskReport("t1", "c1", "input_required", "A", "m1", 7, 3.5)
    assert extract_report({**msg, "payload": {"task": {**TASK, "id": ""}}}) is None
