"""Task state machine: the transition table of messages.md and the fold rules."""

from __future__ import annotations

import itertools

import pytest

from snap_spark.protocol.tasks import (
    STATES,
    TERMINAL,
    TaskReport,
    extract_report,
    fold_task,
    is_legal,
)

# The table of messages.md "State Transitions", written out independently.
ALLOWED = {
    ("submitted", "working"), ("submitted", "failed"), ("submitted", "canceled"),
    ("working", "completed"), ("working", "failed"), ("working", "canceled"),
    ("working", "input_required"),
    ("input_required", "working"), ("input_required", "failed"),
    ("input_required", "canceled"),
}


@pytest.mark.parametrize(("a", "b"), list(itertools.product(STATES, STATES)))
def test_transition_table(a: str, b: str) -> None:
    assert is_legal(a, b) == ((a, b) in ALLOWED or a == b)


def test_terminal_states_have_no_exit() -> None:
    for state in TERMINAL:
        assert not any(is_legal(state, other) for other in STATES if other != state)


def report(state: str, ts: int, sender: str = "A", order: float = 0, mid: str = "") -> TaskReport:
    return TaskReport("t1", "c1", state, sender, mid or f"m-{state}-{ts}", ts, order)


def test_happy_path() -> None:
    result = fold_task([report("submitted", 1), report("working", 2), report("completed", 3)])
    assert (result.state, result.transitions, result.anomalies) == ("completed", 2, 0)
    assert result.owner == "A" and result.context_id == "c1" and result.state_timestamp == 3


def test_first_report_may_be_terminal() -> None:
    result = fold_task([report("completed", 5)])
    assert (result.state, result.transitions, result.anomalies) == ("completed", 0, 0)


def test_illegal_transition_is_flagged_and_ignored() -> None:
    result = fold_task([report("completed", 1), report("working", 2)])
    assert result.state == "completed" and result.anomalies == 1
    assert [e.anomaly for e in result.events] == [None, "illegal_transition"]
    assert not result.events[1].legal and not result.events[1].applied


def test_submitted_cannot_skip_working() -> None:
    result = fold_task([report("submitted", 1), report("completed", 2)])
    assert result.state == "submitted" and result.anomalies == 1


def test_repeat_is_a_no_op() -> None:
    result = fold_task([report("working", 1), report("working", 2), report("completed", 3)])
    assert (result.state, result.transitions, result.anomalies) == ("completed", 1, 0)
    assert result.events[1].legal and not result.events[1].applied


def test_non_owner_reports_are_anomalies() -> None:
    result = fold_task([report("submitted", 1), report("canceled", 2, sender="B"),
                        report("working", 3)])
    assert result.state == "working" and result.anomalies == 1
    assert result.events[1].anomaly == "non_owner"


def test_order_is_timestamp_then_receipt() -> None:
    shuffled = [report("completed", 3, order=0), report("working", 2, order=5),
                report("submitted", 2, order=1)]
    result = fold_task(shuffled)
    assert [e.new_state for e in result.events] == ["submitted", "working", "completed"]
    assert result.state == "completed"


def test_extract_report_only_from_responses_with_a_state() -> None:
    base = {"from": "A", "id": "m1", "timestamp": 1}
    task = {"id": "t1", "contextId": "c1", "status": {"state": "working"}}
    assert extract_report({**base, "type": "response", "payload": {"task": task}}) is not None
    assert extract_report({**base, "type": "event", "payload": {"task": task}}) is None
    bad_state = {"id": "t1", "status": {"state": "paused"}}
    assert extract_report({**base, "type": "response", "payload": {"task": bad_state}}) is None
    assert extract_report({**base, "type": "response", "payload": {"task": "t1"}}) is None
    assert extract_report({**base, "type": "response", "payload": []}) is None
