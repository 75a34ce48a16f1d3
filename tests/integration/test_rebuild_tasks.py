"""jobs/rebuild_tasks.py: task tables from message history, against the generator's labels
and the protocol's fold over the checker's valid lines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from snap_spark.pipeline.batch_job import run
from snap_spark.pipeline.rebuild_job import main as rebuild_main
from snap_spark.pipeline.task_tables import rebuild_tasks
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.tasks import TaskReport, fold_task, task_fields
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_rebuild_matches_the_labels_and_the_fold(spark: Any, tmp_path: Path) -> None:
    pairs = list(generate(SampleConfig(agents=6, messages=6000, seed=5)))
    lines = [line for line, _ in pairs]
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    path.write_bytes(b"\n".join(lines) + b"\n")
    run(spark, [str(path)], str(lake))
    result = rebuild_tasks(spark, str(lake))

    labels = Counter(label.kind for _, label in pairs)
    assert labels["task_illegal_transition"] > 0 and labels["task_non_owner"] > 0
    assert result.illegal == labels["task_illegal_transition"]
    assert result.foreign == labels["task_non_owner"]

    # the protocol's fold over the checker's valid state reports, grouped here in Python
    reports: dict[str, list[tuple[Any, ...]]] = {}
    for n, verdict in enumerate(check_lines(lines, ReceiptClock.refuse()), start=1):
        if verdict.error_code is not None:
            continue
        envelope = json.loads(lines[n - 1])
        msg = envelope["message"]
        msg = json.loads(msg) if isinstance(msg, str) else msg
        fields = task_fields(msg.get("type"), msg.get("payload"))
        if fields.state and fields.task_id:
            reports.setdefault(fields.task_id, []).append(
                (msg["timestamp"], float(envelope["received_at"]), n, TaskReport(
                    fields.task_id, fields.context_id, fields.state, msg["from"], msg["id"],
                    msg["timestamp"], float(envelope["received_at"]))))
    expected = {task: fold_task([r[3] for r in sorted(items, key=lambda r: r[:3])])
                for task, items in reports.items()}
    tasks = {row["task_id"]: row for row in delta_rows(lake / "tasks")}
    assert set(tasks) == set(expected)
    for task_id, state in expected.items():
        row = tasks[task_id]
        assert (row["state"], row["owner"], row["transitions"], row["last_message_id"]) == (
            state.state, state.owner, state.transitions, state.last_message_id), task_id
    events = delta_rows(lake / "task_events")
    assert len(events) == sum(len(v) for v in reports.values()) == result.reports
    keys = [(e["task_id"], e["seq"]) for e in events]
    assert len(keys) == len(set(keys))

    # a rebuild is idempotent in content and replaces the tables in one commit each
    before = sorted(map(repr, events))
    assert rebuild_main(["--lake", str(lake)]) == 0
    assert sorted(map(repr, delta_rows(lake / "task_events"))) == before


def test_rebuild_needs_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rebuild_main(["--lake", str(tmp_path / "nothing")]) == 2
    assert "no messages table" in capsys.readouterr().err
