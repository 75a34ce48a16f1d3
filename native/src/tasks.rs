//! The task fold of `snap_spark.pipeline.tasks.fold_partition`, over Arrow columns: each
//! task's state reports folded by the protocol's state machine
//! (`snap_spark.protocol.tasks`), giving the rows of `task_events` and `tasks`.
//!
//! The reports come grouped by task (a task's rows next to each other, as the fold's sort
//! leaves them). Within a task they are folded in the order `task_step` gives: by message
//! timestamp, then receipt order (`received_at`, a null as 0.0), equal keys in the order
//! given. Input the reference handles in a way this does not mirror (a state outside the
//! six, a null timestamp, a NaN receipt time) is refused with `None`, and the caller folds
//! in Python.

use std::collections::HashSet;

use crate::check::STATES;

/// The transitions allowed from `previous` to another state (`messages.md` "Task States").
fn allowed(previous: &str, new: &str) -> bool {
    match previous {
        "submitted" => matches!(new, "working" | "failed" | "canceled"),
        "working" => matches!(new, "completed" | "failed" | "canceled" | "input_required"),
        "input_required" => matches!(new, "working" | "failed" | "canceled"),
        _ => false,
    }
}

fn is_legal(previous: Option<&str>, new: &str) -> bool {
    match previous {
        None => STATES.contains(&new),
        Some(p) => new == p || allowed(p, new),
    }
}

/// One state report, as read from a `messages` row.
pub struct Report<'a> {
    pub task_id: &'a str,
    pub context_id: Option<&'a str>,
    pub state: &'a str,
    pub sender: &'a str,
    pub msg_id: &'a str,
    pub timestamp: i64,
    pub received_at: Option<f64>,
}

impl Report<'_> {
    fn receipt_order(&self) -> f64 {
        // the reference's `float(received_at or 0.0)`
        match self.received_at {
            Some(r) if r != 0.0 => r,
            _ => 0.0,
        }
    }
}

/// A `task_events` row.
pub struct EventRow<'a> {
    pub task_id: &'a str,
    pub seq: i64,
    pub context_id: Option<&'a str>,
    pub previous_state: Option<&'a str>,
    pub new_state: &'a str,
    pub legal: bool,
    pub applied: bool,
    pub anomaly: Option<&'static str>,
    pub by_owner: bool,
    pub message_id: &'a str,
    pub sender: &'a str,
    pub timestamp: i64,
    pub received_at: Option<f64>,
}

/// A `tasks` row.
pub struct TaskRow<'a> {
    pub task_id: &'a str,
    pub context_id: Option<&'a str>,
    pub owner: Option<&'a str>,
    pub state: Option<&'a str>,
    pub state_timestamp: Option<i64>,
    pub last_message_id: Option<&'a str>,
    pub reports: i64,
    pub transitions: i64,
    pub illegal_transitions: i64,
    pub foreign_reports: i64,
}

/// Whether the reference folds these reports the way [`fold`] does (see the module notes).
pub fn foldable(reports: &[Report<'_>]) -> bool {
    reports.iter().all(|r| STATES.contains(&r.state) && !r.received_at.is_some_and(f64::is_nan))
}

/// Fold one task's reports (given in input order) into its events and its row.
fn fold_task<'a>(reports: &[Report<'a>], events: &mut Vec<EventRow<'a>>, tasks: &mut Vec<TaskRow<'a>>) {
    let mut order: Vec<usize> = (0..reports.len()).collect();
    // stable: equal (timestamp, receipt order) keep the input order, as task_step's
    // bisect_right insertion does
    order.sort_by(|&a, &b| {
        let (ra, rb) = (&reports[a], &reports[b]);
        ra.timestamp.cmp(&rb.timestamp)
            .then(ra.receipt_order().partial_cmp(&rb.receipt_order()).expect("no NaN"))
    });
    let task_id = reports[0].task_id;
    let mut owner: Option<&'a str> = None;
    let mut context: Option<&'a str> = None;
    let mut state: Option<&'a str> = None;
    let mut state_timestamp: Option<i64> = None;
    let mut last_message_id: Option<&'a str> = None;
    let (mut transitions, mut illegal, mut foreign) = (0i64, 0i64, 0i64);
    let first_event = events.len();
    for (seq, &at) in order.iter().enumerate() {
        let report = &reports[at];
        let previous = state;
        let task_owner = *owner.get_or_insert(report.sender);
        let by_owner = report.sender == task_owner;
        let (legal, applied, anomaly) = if !by_owner {
            (is_legal(previous, report.state), false, Some("non_owner"))
        } else {
            match previous {
                None => (true, true, None),
                Some(p) if p == report.state => (true, false, None),
                Some(p) if allowed(p, report.state) => (true, true, None),
                Some(_) => (false, false, Some("illegal_transition")),
            }
        };
        events.push(EventRow {
            task_id,
            seq: seq as i64,
            context_id: None, // the task's final context, set below
            previous_state: previous,
            new_state: report.state,
            legal,
            applied,
            anomaly,
            by_owner,
            message_id: report.msg_id,
            sender: report.sender,
            timestamp: report.timestamp,
            // the reference takes the receipt time of the report given at this position
            received_at: reports[seq].received_at,
        });
        if !by_owner {
            foreign += 1;
        }
        if anomaly == Some("illegal_transition") {
            illegal += 1;
        }
        if anomaly.is_some() {
            continue;
        }
        if context.is_none() {
            context = report.context_id;
        }
        if applied {
            transitions += previous.is_some() as i64;
            state = Some(report.state);
            state_timestamp = Some(report.timestamp);
            last_message_id = Some(report.msg_id);
        }
    }
    for event in &mut events[first_event..] {
        event.context_id = context;
    }
    tasks.push(TaskRow {
        task_id,
        context_id: context,
        owner,
        state,
        state_timestamp,
        last_message_id,
        reports: reports.len() as i64,
        transitions,
        illegal_transitions: illegal,
        foreign_reports: foreign,
    });
}

/// Fold every task of `reports` (grouped by task). `None` when the reference must fold
/// them (see [`foldable`]), or when a task's rows are not next to each other.
pub fn fold<'a>(reports: &[Report<'a>]) -> Option<(Vec<EventRow<'a>>, Vec<TaskRow<'a>>)> {
    if !foldable(reports) {
        return None;
    }
    let mut events = Vec::with_capacity(reports.len());
    let mut tasks = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut start = 0;
    while start < reports.len() {
        let task_id = reports[start].task_id;
        let mut end = start + 1;
        while end < reports.len() && reports[end].task_id == task_id {
            end += 1;
        }
        if !seen.insert(task_id) {
            return None; // the reference would fold this task's rows as two tasks
        }
        fold_task(&reports[start..end], &mut events, &mut tasks);
        start = end;
    }
    Some((events, tasks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report<'a>(state: &'a str, sender: &'a str, msg_id: &'a str, timestamp: i64) -> Report<'a> {
        Report { task_id: "t1", context_id: Some("c1"), state, sender, msg_id, timestamp,
                 received_at: Some(timestamp as f64) }
    }

    #[test]
    fn an_illegal_step_back_is_recorded_and_ignored() {
        let reports = [report("submitted", "A", "m1", 1), report("working", "A", "m2", 2),
                       report("submitted", "A", "m3", 3)];
        let (events, tasks) = fold(&reports).unwrap();
        assert_eq!(tasks[0].state, Some("working"));
        assert_eq!(tasks[0].illegal_transitions, 1);
        assert_eq!(events[2].anomaly, Some("illegal_transition"));
    }

    #[test]
    fn a_late_report_is_folded_in_timestamp_order() {
        let reports = [report("working", "A", "m2", 20), report("submitted", "B", "m1", 10)];
        let (events, tasks) = fold(&reports).unwrap();
        assert_eq!(tasks[0].owner, Some("B"));
        assert_eq!(tasks[0].state, Some("submitted"));
        assert_eq!(events[1].anomaly, Some("non_owner"));
    }

    #[test]
    fn an_unknown_state_is_left_to_the_reference() {
        assert!(fold(&[report("paused", "A", "m1", 1)]).is_none());
    }
}
