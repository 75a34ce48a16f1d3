"""Task state from message history: the ``task_events`` and ``tasks`` tables.

The fold is the protocol's own (:func:`snap_spark.protocol.tasks.task_step`); this module
only feeds it: the valid ``messages`` rows that report a task state (``task_state`` is set
only for a response naming one of the six states), shuffled by task and sorted by message
timestamp, then receipt time, file and line; each task is folded in one Spark task, which
writes the rows of both tables as Parquet files for one commit each.

Two ways in, one fold: :func:`rebuild_tasks` folds every task and replaces both tables;
:func:`refresh_tasks` folds only the tasks it is given (every report of each, old and new)
and replaces just their rows (:func:`snap_spark.lake.commit_data_files` with ``keys``).
Both give the same rows for a task, so refreshing the tasks each run touched keeps the
tables equal to a full rebuild.

Examples:
    Three responses reporting the state of task ``t1`` (a response needs no signature), the
    third an illegal step back, landed by a run:

    >>> import json
    >>> from snap_spark.lake import table_rows
    >>> from snap_spark.pipeline.job import run
    >>> from snap_spark.protocol.keys import internal_pubkey, p2tr_address
    >>> agent = p2tr_address(internal_pubkey(bytes.fromhex("0a" * 32)))
    >>> def report(n, state):  # message m<n>, sent and received n seconds in
    ...     task = {"id": "t1", "contextId": "c1", "status": {"state": state}}
    ...     message = {"id": f"m{n}", "version": "0.1", "from": agent, "type": "response",
    ...                "method": "tasks/get", "payload": {"task": task},
    ...                "timestamp": 1770163200 + n}
    ...     return json.dumps({"received_at": 1770163200 + n, "message": message})
    >>> (tmp / "in").mkdir()
    >>> lines = [report(1, "submitted"), report(2, "working"), report(3, "submitted")]
    >>> _ = (tmp / "in" / "a.jsonl").write_text("\\n".join(lines) + "\\n")
    >>> lake = str(tmp / "lake")
    >>> run(spark, [str(tmp / "in")], lake).valid
    3
    >>> rebuild_tasks(spark, lake)  # doctest: +ELLIPSIS
    TasksResult(reports=3, tasks=1, illegal=1, foreign=0, ...)

    Refreshing ``t1`` alone folds it the same way:

    >>> refresh_tasks(spark, lake, ["t1"])  # doctest: +ELLIPSIS
    TasksResult(reports=3, tasks=1, illegal=1, foreign=0, ...)
    >>> [(row["task_id"], row["state"], row["reports"]) for row in table_rows(f"{lake}/tasks")]
    [('t1', 'working', 3)]
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import uuid
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from snap_spark.protocol.tasks import TaskEvent, TaskReport, TaskState, task_step
from snap_spark.protocol.verdict import VALID

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


#: Rows the fold tasks send back to the driver: one per data file written (``table`` names
#: the table, ``info`` is the file as JSON), and one of :data:`COUNTS` per Spark task.
WRITTEN = pa.schema([pa.field("table", pa.string(), False), pa.field("info", pa.string())])

#: ``table`` of a :data:`WRITTEN` row that counts what one Spark task folded.
COUNTS = "_counts"


@dataclass
class TasksResult:
    """What a rebuild or a refresh wrote (for a refresh: the refreshed tasks only)."""

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
    counts = {"tasks": 0, "reports": 0, "illegal": 0, "foreign": 0}

    def finish() -> None:
        if state is None:
            return
        events_out.extend(event_row(e, state.context_id, received[e.seq]) for e in folded)
        row = task_row(state, folded)
        tasks_out.append(row)
        counts["tasks"] += 1
        counts["reports"] += row["reports"]
        counts["illegal"] += row["illegal_transitions"]
        counts["foreign"] += row["foreign_reports"]
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
            [{"table": name, "info": json.dumps(dataclasses.asdict(f))} for name, f in written]
            + [{"table": COUNTS, "info": json.dumps(counts)}],
            schema=WRITTEN)


def rebuild_tasks(spark: SparkSession, lake_dir: str) -> TasksResult:
    """Rebuild ``task_events`` and ``tasks`` in full from the lake's ``messages`` (each
    replaced in one commit).

    Raises:
        UsageError: the lake has no ``messages`` table.

    Examples:
        A lake that landed nothing yet (see the module's example for one that did):

        >>> rebuild_tasks(spark, str(tmp / "lake"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        snap_spark.runner.UsageError: no messages table under ...: nothing to rebuild tasks from
    """
    return _fold_tasks(spark, lake_dir, None)


def refresh_tasks(spark: SparkSession, lake_dir: str, task_ids: DataFrame | Collection[str]
                  ) -> TasksResult:
    """Fold again the tasks ``task_ids`` names, from every valid report of theirs in the
    lake's ``messages``, and replace exactly their rows in ``task_events`` and ``tasks``
    (one commit each); every other task keeps its rows, and a named task that has no
    report any more leaves both tables. The tables are created when absent.

    The fold is :func:`rebuild_tasks`'s own, so a task's rows are the ones a full rebuild
    gives it, and running the same refresh again changes no row. ``task_ids`` is a
    DataFrame with a ``task_id`` column, or a collection of ids; unknown ids and nulls are
    fine. It is joined with ``messages`` and the tables (never spelled into a predicate),
    so it may hold many ids.

    What to pass after landing: the ``task_id`` of every ``messages`` row the run added
    with ``verdict = 'valid'`` and a ``task_state`` (:func:`landed_task_ids`). A report
    that arrives late (an earlier timestamp than reports already folded) is placed by the
    re-fold. Only verdicts that change make other tasks stale: after a ``--reprocess``
    rebuild in full instead.

    Raises:
        UsageError: the lake has no ``messages`` table.
        ValueError: ``task_ids`` is a DataFrame without a ``task_id`` column, or a string.

    Examples:
        After a run, with the tasks it reported on (:func:`landed_task_ids` has the
        example); ids as a collection, not one string:

        >>> refresh_tasks(spark, str(tmp / "lake"), "t1")
        Traceback (most recent call last):
        ValueError: task_ids is one string: pass a collection of task ids
    """
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import functions as F

    if isinstance(task_ids, SparkDataFrame):
        if "task_id" not in task_ids.columns:
            raise ValueError(f"task_ids has no task_id column (columns: {task_ids.columns})")
        frame = task_ids.select(F.col("task_id").cast("string").alias("task_id"))
    elif isinstance(task_ids, str | bytes):
        raise ValueError("task_ids is one string: pass a collection of task ids")
    else:
        # distinct on the driver, a local relation: joined by broadcast, no Spark job of
        # its own
        import pyarrow as pa

        unique = sorted({str(task_id) for task_id in task_ids if task_id is not None})
        return _fold_tasks(spark, lake_dir, spark.createDataFrame(
            pa.table({"task_id": pa.array(unique, pa.string())})),
            local=len(unique) <= LOCAL_FOLD_TASKS)
    ids = frame.where(F.col("task_id").isNotNull()).distinct().persist()
    try:
        return _fold_tasks(spark, lake_dir, ids)
    finally:
        ids.unpersist()


def landed_task_ids(spark: SparkSession, lake_dir: str, ingest_ids: Collection[str]) -> DataFrame:
    """The tasks that runs ``ingest_ids`` gave a valid state report, as a DataFrame of one
    ``task_id`` column (distinct): what :func:`refresh_tasks` wants after those runs.

    Examples:
        A run that lands a report on ``t1`` and a request naming ``t2`` (no state report):

        >>> import json
        >>> from snap_spark.lake import table_rows
        >>> from snap_spark.pipeline.job import run
        >>> from snap_spark.protocol.keys import internal_pubkey, p2tr_address
        >>> from snap_spark.protocol.signing import sign_message
        >>> key = bytes.fromhex("0a" * 32)
        >>> agent = p2tr_address(internal_pubkey(key))
        >>> report = {"id": "m1", "version": "0.1", "from": agent, "type": "response",
        ...           "method": "tasks/get", "timestamp": 1770163200,
        ...           "payload": {"task": {"id": "t1", "status": {"state": "working"}}}}
        >>> request = sign_message({"id": "m2", "version": "0.1", "from": agent,
        ...     "type": "request", "method": "tasks/get", "payload": {"taskId": "t2"},
        ...     "timestamp": 1770163200}, key)
        >>> lines = [json.dumps({"received_at": 1770163200, "message": m})
        ...          for m in (report, request)]
        >>> (tmp / "in").mkdir()
        >>> _ = (tmp / "in" / "a.jsonl").write_text("\\n".join(lines) + "\\n")
        >>> lake = str(tmp / "lake")
        >>> run(spark, [str(tmp / "in")], lake).valid
        2
        >>> runs = {row["ingest_id"] for row in table_rows(f"{lake}/messages")}
        >>> ids = landed_task_ids(spark, lake, runs)
        >>> ids.collect()
        [Row(task_id='t1')]
        >>> refresh_tasks(spark, lake, ids).tasks
        1
    """
    from pyspark.sql import functions as F

    from snap_spark import storage
    from snap_spark.lake import get_lake

    runs = spark.createDataFrame([(i,) for i in set(ingest_ids)], "ingest_id string")
    return (
        _state_reports(get_lake(spark).read(spark, storage.join(lake_dir, "messages")))
        .join(F.broadcast(runs), "ingest_id", "left_semi")
        .select("task_id")
        .distinct()
    )


def _state_reports(messages: DataFrame) -> DataFrame:
    """The ``messages`` rows the fold takes: valid, reporting one of the six states."""
    from pyspark.sql import functions as F

    return messages.filter((F.col("verdict") == VALID) & F.col("task_state").isNotNull())


#: A refresh of at most this many task ids (given as a collection) folds them on the
#: driver: their reports are found by one scan of ``messages`` (the ids broadcast), then
#: folded and written in-process, instead of in a shuffle and a Spark stage. A stream's
#: micro-batch usually reports on fewer tasks than this.
LOCAL_FOLD_TASKS = 10_000

#: The order the fold takes a task's reports in (ascending, nulls first, as Spark sorts).
_FOLD_ORDER = ("task_id", "timestamp", "received_at", "source_file", "line_no")


def _fold_tasks(spark: SparkSession, lake_dir: str, ids: DataFrame | None,
                local: bool = False) -> TasksResult:
    """Fold the tasks of ``ids`` (all when ``None``) and commit both tables: in full
    (``replace=True``), or those tasks' rows (``keys``). ``local``: ``ids`` is a small
    local relation, folded on the driver (:data:`LOCAL_FOLD_TASKS`)."""
    import time

    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from snap_spark import storage
    from snap_spark.lake import (
        check_table_location,
        commit_data_files,
        commit_lease,
        delete_data_files,
        get_lake,
        table_uri,
        table_version,
    )
    from snap_spark.pipeline.ingest import batch_app_id
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
    job = "rebuild_tasks" if ids is None else "refresh_tasks"

    def fold(version: int) -> tuple[TasksResult, dict[str, list[Any]]]:
        """Fold the tasks from ``messages`` at ``version`` into files of both tables."""
        reports = _state_reports(lake.read(spark, msg_path, version))
        if ids is not None:
            reports = reports.join(F.broadcast(ids) if local else ids, "task_id", "left_semi")
        reports = reports.select("task_id", "context_id", "task_state", "sender", "msg_id",
                                 "timestamp", "received_at", "source_file", "line_no")
        fold_files = functools.partial(fold_partition, roots, ingest_id)
        if local:
            found = reports.toArrow().sort_by([(name, "ascending", "at_start")
                                               for name in _FOLD_ORDER])
            written = [row for batch in fold_files(found.to_batches())
                       for row in batch.to_pylist()]
        else:
            written = (reports.repartition("task_id").sortWithinPartitions(*_FOLD_ORDER)
                       .mapInArrow(fold_files, from_arrow_schema(WRITTEN)).collect())
        folded = TasksResult()
        out: dict[str, list[Any]] = {"task_events": [], "tasks": []}
        for row in written:
            if row["table"] == COUNTS:
                counts = json.loads(row["info"])
                folded.tasks += counts["tasks"]
                folded.reports += counts["reports"]
                folded.illegal += counts["illegal"]
                folded.foreign += counts["foreign"]
            else:
                out[row["table"]].append(data_file(row["info"]))
        return folded, out

    files: dict[str, list[Any]] = {"task_events": [], "tasks": []}
    with run_marker(lake_dir, ingest_id):
        try:
            # The fold reads one version of messages; it is committed only if no other
            # writer changed messages since, else folded again under the commit lease (two
            # writers refreshing one task leave what one rebuild gives).
            read_version = table_version(table_uri(msg_path))
            result, files = fold(read_version)
            with commit_lease(lake_dir, job):
                latest = table_version(table_uri(msg_path))
                if latest != read_version:
                    for name, leftovers in files.items():
                        delete_data_files(roots[name], leftovers)
                    files = {"task_events": [], "tasks": []}
                    result, files = fold(latest)
                info = {"job": job, "ingest_id": ingest_id, "messages_version": latest}
                for name, schema in (("task_events", TASK_EVENTS), ("tasks", TASKS)):
                    # the whole table, or those tasks' rows; the files committed or deleted
                    commit_data_files(spark, lake, paths[name], roots[name], files[name],
                                      schema=schema, app_id=batch_app_id([ingest_id, name]),
                                      version=1, commit_info=info, replace=ids is None,
                                      keys=ids)
                    files[name] = []
        finally:
            for name, leftovers in files.items():
                delete_data_files(roots[name], leftovers)
            storage.delete_tree(staging)
    result.tasks_written = result.tasks
    result.events_written = result.reports
    result.seconds = time.monotonic() - started
    return result


def _job() -> Any:
    from snap_spark.runner import Job

    class RebuildTasks(Job):
        """``jobs/rebuild_tasks.py``: ``messages`` → ``task_events`` and ``tasks``."""

        name = "rebuild_tasks"
        description = ("Rebuild the task_events and tasks tables under --lake in full from "
                       "its messages table (valid responses reporting a task state).")

        def run(self, spark: SparkSession, context: Any) -> TasksResult:
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
