"""Task state from message history: the ``task_events`` and ``tasks`` tables.

The fold is the protocol's own (:func:`snap_spark.protocol.tasks.task_step`); this module
only feeds it: the valid ``messages`` rows that report a task state (``task_state`` is set
only for a response naming one of the six states), shuffled by task and sorted by message
timestamp, then receipt time, file and line; each task is folded in one Spark task, which
writes the rows of both tables as Parquet files for one commit each.

Examples:
    >>> rebuild_tasks(spark, "data/lake")  # doctest: +SKIP
    TasksResult(reports=5210, tasks=1190, illegal=36, foreign=41, ...)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from snap_spark.protocol.tasks import TaskEvent, TaskReport, TaskState, task_step
from snap_spark.protocol.verdict import VALID

#: Rows the fold tasks send back to the driver: one per data file written.
WRITTEN = pa.schema([pa.field("table", pa.string(), False), pa.field("info", pa.string())])


@dataclass
class TasksResult:
    """What a rebuild wrote."""

    reports: int = 0
    tasks: int = 0
    illegal: int = 0
    foreign: int = 0
    events_written: int = 0
    tasks_written: int = 0
    seconds: float = 0.0


def _ts(seconds: float | int | None) -> dt.datetime | None:
    if seconds is None or not 0 <= seconds <= 253_402_300_799:
        return None
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def event_row(event: TaskEvent, context_id: str | None, received_at: float | None
              ) -> dict[str, Any]:
    """A ``task_events`` row of one folded report."""
    return {"task_id": event.task_id, "seq": event.seq, "context_id": context_id,
            "previous_state": event.previous_state, "new_state": event.new_state,
            "legal": event.legal, "applied": event.applied, "anomaly": event.anomaly,
            "by_owner": event.by_owner, "message_id": event.message_id,
            "sender": event.sender, "timestamp": event.timestamp,
            "event_time": _ts(event.timestamp), "received_at": received_at}


def task_row(state: TaskState, events: Iterable[TaskEvent]) -> dict[str, Any]:
    """The ``tasks`` row of a folded task."""
    folded = list(events)
    return {"task_id": state.task_id, "context_id": state.context_id, "owner": state.owner,
            "state": state.state, "state_timestamp": state.state_timestamp,
            "state_time": _ts(state.state_timestamp), "last_message_id": state.last_message_id,
            "reports": len(folded), "transitions": state.transitions,
            "illegal_transitions": sum(e.anomaly == "illegal_transition" for e in folded),
            "foreign_reports": sum(not e.by_owner for e in folded)}


def fold_partition(roots: dict[str, str], ingest_id: str, batches: Iterable[pa.RecordBatch]
                   ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over reports sorted by task, timestamp and receipt: fold each task
    with :func:`task_step`, write both tables' files, yield one :data:`WRITTEN` row each."""
    from snap_spark.lake import PartitionedFileWriter, to_arrow
    from snap_spark.pipeline.runs import file_prefix
    from snap_spark.schemas.tables import TASK_EVENTS, TASKS

    tag = file_prefix(ingest_id, f"t-{uuid.uuid4().hex[:8]}")
    writers = {"task_events": PartitionedFileWriter(roots["task_events"], to_arrow(TASK_EVENTS),
                                                    [], file_prefix=tag),
               "tasks": PartitionedFileWriter(roots["tasks"], to_arrow(TASKS), [],
                                              file_prefix=tag)}
    events_out: list[dict[str, Any]] = []
    tasks_out: list[dict[str, Any]] = []

    def flush(final: bool = False) -> None:
        if events_out and (final or len(events_out) >= 8192):
            writers["task_events"].write(pa.RecordBatch.from_pylist(
                events_out, schema=to_arrow(TASK_EVENTS)))
            events_out.clear()
        if tasks_out and (final or len(tasks_out) >= 8192):
            writers["tasks"].write(pa.RecordBatch.from_pylist(tasks_out, schema=to_arrow(TASKS)))
            tasks_out.clear()

    state: TaskState | None = None
    folded: list[TaskEvent] = []
    received: list[float | None] = []

    def finish() -> None:
        if state is None:
            return
        events_out.extend(event_row(e, state.context_id, received[e.seq]) for e in folded)
        tasks_out.append(task_row(state, folded))
        flush()

    try:
        for batch in batches:
            for row in batch.to_pylist():
                report = TaskReport(row["task_id"], row["context_id"], row["task_state"],
                                    row["sender"], row["msg_id"], int(row["timestamp"]),
                                    float(row["received_at"] or 0.0))
                if state is None or state.task_id != report.task_id:
                    finish()
                    state, folded, received = None, [], []
                state, events = task_step(state, report)
                folded[events[0].seq:] = events  # in order: one event, appended
                received.append(row["received_at"])
        finish()
        flush(final=True)
        written = [(name, data_file) for name, writer in writers.items()
                   for data_file in writer.close()]
    except BaseException:
        for writer in writers.values():
            writer.discard()
        raise
    if written:
        yield pa.RecordBatch.from_pylist(
            [{"table": name, "info": json.dumps(dataclasses.asdict(f))} for name, f in written],
            schema=WRITTEN)


def rebuild_tasks(spark: Any, lake_dir: str) -> TasksResult:
    """Rebuild ``task_events`` and ``tasks`` in full from the lake's ``messages`` (each
    replaced in one commit).

    Raises:
        UsageError: the lake has no ``messages`` table.
    """
    import time

    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from snap_spark import storage
    from snap_spark.lake import check_table_location, delete_data_files, get_lake, table_uri
    from snap_spark.pipeline.job import batch_app_id
    from snap_spark.pipeline.land import data_file
    from snap_spark.pipeline.runs import run_marker
    from snap_spark.runner import UsageError
    from snap_spark.schemas.tables import TASK_EVENTS, TASKS

    started = time.monotonic()
    lake = get_lake(spark)
    msg_path = storage.join(lake_dir, "messages")
    if not lake.exists(msg_path):
        raise UsageError(f"no messages table under {lake_dir}: nothing to rebuild tasks from")
    paths = {name: storage.join(lake_dir, name) for name in ("task_events", "tasks")}
    check_table_location(paths["task_events"], TASK_EVENTS)
    check_table_location(paths["tasks"], TASKS)
    ingest_id = uuid.uuid4().hex
    staging = table_uri(storage.join(lake_dir, "_staging", ingest_id))
    roots = {name: lake.data_root(path, staging) for name, path in paths.items()}
    reports = (
        lake.read(spark, msg_path)
        .filter((F.col("verdict") == VALID) & F.col("task_state").isNotNull())
        .select("task_id", "context_id", "task_state", "sender", "msg_id", "timestamp",
                "received_at", "source_file", "line_no")
        .repartition("task_id")
        .sortWithinPartitions("task_id", "timestamp", "received_at", "source_file", "line_no")
    )
    result = TasksResult()
    files: dict[str, list[Any]] = {"task_events": [], "tasks": []}
    with run_marker(lake_dir, ingest_id):
        try:
            written = reports.mapInArrow(functools.partial(fold_partition, roots, ingest_id),
                                         from_arrow_schema(WRITTEN)).collect()
            for row in written:
                files[row["table"]].append(data_file(row["info"]))
            info = {"job": "rebuild_tasks", "ingest_id": ingest_id}
            for name, schema in (("task_events", TASK_EVENTS), ("tasks", TASKS)):
                if lake.replace_files(spark, paths[name], roots[name], files[name],
                                      schema=schema, partition_by=[],
                                      app_id=batch_app_id([ingest_id, name]), version=1,
                                      commit_info=info):
                    files[name] = []
        finally:
            for name, leftovers in files.items():
                delete_data_files(roots[name], leftovers)
            storage.delete_tree(staging)
    from snap_spark.lake import table_rows

    tasks = table_rows(paths["tasks"])
    result.tasks = result.tasks_written = len(tasks)
    result.reports = result.events_written = sum(int(t["reports"]) for t in tasks)
    result.illegal = sum(int(t["illegal_transitions"]) for t in tasks)
    result.foreign = sum(int(t["foreign_reports"]) for t in tasks)
    result.seconds = time.monotonic() - started
    return result


def _job() -> Any:
    from snap_spark.runner import Job

    class RebuildTasks(Job):
        """``jobs/rebuild_tasks.py``: ``messages`` → ``task_events`` and ``tasks``."""

        name = "rebuild_tasks"
        description = ("Rebuild the task_events and tasks tables under --lake in full from "
                       "its messages table (valid responses reporting a task state).")

        def run(self, spark: Any, context: Any) -> TasksResult:
            return rebuild_tasks(spark, context.lake)

        def summary(self, result: Any) -> str:
            assert isinstance(result, TasksResult)
            return (f"tasks: {result.tasks}   reports: {result.reports}   illegal transitions: "
                    f"{result.illegal}   foreign reports: {result.foreign}   "
                    f"({result.seconds:.1f}s)")

    return RebuildTasks()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``jobs/rebuild_tasks.py``."""
    from snap_spark.runner import main as run_job

    return run_job(_job(), argv)
