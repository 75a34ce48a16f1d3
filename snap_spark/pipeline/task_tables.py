"""Task state from message history: the ``task_events`` and ``tasks`` tables.

The fold is the protocol's own (:func:`snap_spark.protocol.tasks.task_step`); this module
only feeds it: the valid ``messages`` rows that report a task state (``task_state`` is set
only for a response naming one of the six states), shuffled by task and sorted by message
timestamp, then receipt time, file and line; each task is folded in one Spark task, which
writes the rows of both tables as Parquet files for one commit each.

Three ways in, one fold: :func:`rebuild_tasks` folds every task and replaces both tables;
:func:`refresh_tasks` folds only the tasks it is given (every report of each, old and new)
and replaces just their rows (:func:`snap_spark.lake.commit_data_files` with ``keys``);
:func:`catch_up_tasks`, what the jobs run, refreshes the tasks that rows ``messages``
added since the tables' recorded version (``tasks_through`` in the commit info) report
on. All give the same rows for a task, so the tables stay equal to a full rebuild; the
stream catches up on a thread of its own (:class:`TasksFollower`).

Examples:
    Three responses reporting the state of task ``t1`` (a response needs no signature), the
    third an illegal step back, landed by a run:

    >>> import json
    >>> from snap_spark.lake import table_rows
    >>> from snap_spark.pipeline.batch_job import run
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
import time
import uuid
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from snap_spark.common.pyarrow_compat import sort_nulls_first
from snap_spark.common.remote import refuse_remote
from snap_spark.protocol.tasks import TaskEvent, TaskReport, TaskState, task_step
from snap_spark.protocol.verdict import VALID

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from snap_spark.lake import Lake, Where


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


#: The columns a fold takes of a report, and their types as the native fold takes them.
_FOLD_INPUT = {"task_id": pa.string(), "context_id": pa.string(), "task_state": pa.string(),
               "sender": pa.string(), "msg_id": pa.string(), "timestamp": pa.int64(),
               "received_at": pa.float64()}

#: Reports a fold takes at a time (whole tasks: a task's reports are never split).
FOLD_CHUNK_ROWS = 8192


def fold_reports_reference(reports: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Fold state reports (the :data:`_FOLD_INPUT` columns, sorted by task, timestamp and
    receipt order) with :func:`~snap_spark.protocol.tasks.task_step`, a task at a time:
    the ``task_events`` and ``tasks`` rows, as tables of those schemas. The reference that
    :func:`fold_reports` equals.

    Examples:
        >>> reports = pa.table({"task_id": ["t1", "t1"], "context_id": ["c1", None],
        ...     "task_state": ["submitted", "completed"], "sender": ["A", "A"],
        ...     "msg_id": ["m1", "m2"], "timestamp": [10, 20], "received_at": [10.0, 21.0]})
        >>> events, tasks = fold_reports_reference(reports)
        >>> events.column("anomaly").to_pylist(), tasks.column("state").to_pylist()
        ([None, 'illegal_transition'], ['submitted'])
    """
    from snap_spark.lake import to_arrow
    from snap_spark.schemas.tables import TASK_EVENTS, TASKS

    events_out: list[dict[str, Any]] = []
    tasks_out: list[dict[str, Any]] = []
    state: TaskState | None = None
    folded: list[TaskEvent] = []
    received: list[float | None] = []

    def finish() -> None:
        if state is not None:
            events_out.extend(event_row(e, state.context_id, received[e.seq]) for e in folded)
            tasks_out.append(task_row(state, folded))

    for row in reports.select(list(_FOLD_INPUT)).to_pylist():
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
    return (pa.Table.from_pylist(events_out, schema=to_arrow(TASK_EVENTS)),
            pa.Table.from_pylist(tasks_out, schema=to_arrow(TASKS)))


def fold_reports(reports: pa.Table) -> tuple[pa.Table, pa.Table]:
    """:func:`fold_reports_reference`, by the native core when it is built and on
    (``SNAP_SPARK_NATIVE``), and when it takes these reports (it hands a state outside the
    six, a null timestamp or a NaN receipt time back to the reference); the same rows.

    Examples:
        >>> reports = pa.table({"task_id": ["t1", "t1"], "context_id": ["c1", None],
        ...     "task_state": ["submitted", "working"], "sender": ["A", "A"],
        ...     "msg_id": ["m1", "m2"], "timestamp": [10, 20], "received_at": [10.0, 21.0]})
        >>> [t.to_pylist() for t in fold_reports(reports)] == [
        ...     t.to_pylist() for t in fold_reports_reference(reports)]
        True
    """
    from snap_spark.udfs.verify import native_core

    core = native_core()
    fold = getattr(core, "fold_tasks", None)  # None too for a build older than the fold
    if fold is None or reports.num_rows == 0:
        return fold_reports_reference(reports)
    return _fold_natively(fold, reports) or fold_reports_reference(reports)


def _fold_natively(fold: Any, reports: pa.Table) -> tuple[pa.Table, pa.Table] | None:
    from snap_spark.lake import to_arrow
    from snap_spark.schemas.tables import TASK_EVENTS, TASKS
    from snap_spark.udfs.verify import arrow_capsules

    columns = [reports.column(name).cast(kind).combine_chunks()
               for name, kind in _FOLD_INPUT.items()]
    out = fold(*columns)
    if out is None:
        return None
    tables = []
    for capsules, schema in zip(out, (to_arrow(TASK_EVENTS), to_arrow(TASKS)), strict=True):
        batch = pa.RecordBatch.from_struct_array(pa.array(arrow_capsules(*capsules)))
        tables.append(pa.Table.from_batches([batch]).cast(schema))
    return tables[0], tables[1]


def _whole_tasks(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Reports grouped by task, in tables of at least :data:`FOLD_CHUNK_ROWS` rows (but the
    last) that never split a task's run of rows."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        rows += batch.num_rows
        if rows < FOLD_CHUNK_ROWS:
            continue
        table = pa.Table.from_batches(pending).combine_chunks()
        ids = table.column("task_id")
        others = pc.indices_nonzero(pc.fill_null(pc.not_equal(ids, ids[-1]), True))
        cut = others[-1].as_py() + 1 if len(others) else 0  # where the last task begins
        if cut:
            yield table.slice(0, cut)
        pending = table.slice(cut).to_batches()
        rows = table.num_rows - cut
    if rows:
        yield pa.Table.from_batches(pending)


def fold_partition(roots: dict[str, str], ingest_id: str, batches: Iterable[pa.RecordBatch]
                   ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over reports sorted by task, timestamp and receipt: fold each task
    (:func:`fold_reports`), write both tables' files, yield one :data:`WRITTEN` row each."""
    from snap_spark.lake import PartitionedFileWriter, to_arrow
    from snap_spark.pipeline.runs import file_prefix
    from snap_spark.schemas.tables import TASK_EVENTS, TASKS

    tag = file_prefix(ingest_id, f"t-{uuid.uuid4().hex[:8]}")
    writers = {"task_events": PartitionedFileWriter(roots["task_events"], to_arrow(TASK_EVENTS),
                                                    [], file_prefix=tag),
               "tasks": PartitionedFileWriter(roots["tasks"], to_arrow(TASKS), [],
                                              file_prefix=tag)}
    counts = {"tasks": 0, "reports": 0, "illegal": 0, "foreign": 0}
    try:
        for reports in _whole_tasks(batches):
            events, tasks = fold_reports(reports)
            for name, table in (("task_events", events), ("tasks", tasks)):
                for batch in table.to_batches():
                    writers[name].write(batch)
            counts["tasks"] += tasks.num_rows
            for key, column in (("reports", "reports"), ("illegal", "illegal_transitions"),
                                ("foreign", "foreign_reports")):
                counts[key] += pc.sum(tasks.column(column)).as_py() or 0
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
        snap_spark.common.console.UsageError: no messages table under ...: nothing to rebuild ...
    """
    refuse_remote(spark, "the task rebuild", "jobs/rebuild_tasks.py")
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
    refuse_remote(spark, "the task refresh", "jobs/rebuild_tasks.py")
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import functions as F

    if isinstance(task_ids, SparkDataFrame):
        if "task_id" not in task_ids.columns:
            raise ValueError(f"task_ids has no task_id column (columns: {task_ids.columns})")
        frame = task_ids.select(F.col("task_id").cast("string").alias("task_id"))
    elif isinstance(task_ids, str | bytes):
        raise ValueError("task_ids is one string: pass a collection of task ids")
    else:
        return _fold_tasks(spark, lake_dir, sorted({str(task_id) for task_id in task_ids
                                                    if task_id is not None}))
    ids = frame.where(F.col("task_id").isNotNull()).distinct().persist()
    try:
        return _fold_tasks(spark, lake_dir, ids)
    finally:
        ids.unpersist()


#: Commit info key of a ``task_events``/``tasks`` commit that folded every valid report of
#: ``messages`` up to a version (its value): a full rebuild, or :func:`catch_up_tasks`.
THROUGH_KEY = "tasks_through"


def tasks_through(lake_dir: str) -> int | None:
    """The version of the lake's ``messages`` up to which every report is folded into
    ``tasks`` (recorded by :func:`rebuild_tasks` and :func:`catch_up_tasks`); ``None``
    when no commit of ``tasks`` recorded one (or there is no table).

    Examples:
        >>> tasks_through(str(tmp / "no-lake")) is None
        True
    """
    from snap_spark.files import storage
    from snap_spark.lake import newest_info_with, table_uri

    info = newest_info_with(table_uri(storage.join(lake_dir, "tasks")), THROUGH_KEY)
    return None if info is None else int(info[THROUGH_KEY])


def catch_up_tasks(spark: SparkSession, lake_dir: str) -> TasksResult:
    """Bring ``task_events`` and ``tasks`` up to the lake's ``messages``: fold again every
    task reported on by a row that ``messages`` added (or rewrote) since the version the
    tables were last brought up to (:func:`tasks_through`), and replace exactly those
    tasks' rows, recording the new version. With no such version (a new lake, or tables
    written before it was recorded) the tables are rebuilt in full (:func:`rebuild_tasks`).

    The tasks to fold come from the ``messages`` log, not from whoever wrote the rows, so
    whatever commits ``messages`` (a batch run, a stream, another writer at the same time,
    a run killed before its tasks were folded) is caught up by the next call, by any
    writer; two calls at once leave what one rebuild gives. A lake without ``messages``
    has nothing to catch up.

    Examples:
        A sample landed in two runs, each of which catches up after its commit:

        >>> from snap_spark.lake import table_rows
        >>> from snap_spark.pipeline.batch_job import run
        >>> from snap_spark.samples.messages import SampleConfig, generate
        >>> sample = generate(SampleConfig(agents=3, messages=400, seed=2))
        >>> lines = [line for line, _ in sample]
        >>> lake = str(tmp / "lake")
        >>> for n, part in enumerate((lines[:200], lines[200:])):
        ...     _ = (tmp / f"{n}.jsonl").write_bytes(b"\\n".join(part) + b"\\n")
        ...     _ = run(spark, [str(tmp / f"{n}.jsonl")], lake)
        >>> catch_up_tasks(spark, lake).tasks  # nothing committed since the last run's
        0
        >>> len(table_rows(f"{lake}/tasks")) == len(sample.expected_tasks()) > 10
        True
    """
    refuse_remote(spark, "the task catch-up", "jobs/rebuild_tasks.py")
    from snap_spark.files import storage
    from snap_spark.lake import get_lake, table_uri, table_version

    if not get_lake(spark).exists(storage.join(lake_dir, "messages")):
        return TasksResult()
    through = tasks_through(lake_dir)
    if through is None:
        return _fold_tasks(spark, lake_dir, None)
    if table_version(table_uri(storage.join(lake_dir, "messages"))) == through:
        return TasksResult()  # nothing committed since: no commit either
    return _fold_tasks(spark, lake_dir, None, since=through)


#: Seconds between the starts of two catch-ups of a :class:`TasksFollower`.
CATCH_UP_INTERVAL = 5.0


class TasksFollower:
    """Keeps ``task_events`` and ``tasks`` caught up with ``messages`` on a thread of its
    own, for a writer that commits ``messages`` often (the stream): each :meth:`poke` asks
    for a :func:`catch_up_tasks`, which runs after the commit instead of inside it. At most
    one catch-up starts every ``interval`` seconds; pokes that come in between are served
    by the next, in one fold (a catch-up costs about the same for one micro-batch as for
    several, and every one competes with the stream for the cores).

    Nothing is lost when the process dies: the next catch-up, by this writer or any other,
    folds every report since the version the tables recorded. :meth:`start` catches up
    what an earlier run left; :meth:`close` waits for the thread and catches up once more,
    so the tables then hold every report committed before it.

    Example::

        follower = TasksFollower(spark, lake_dir)
        follower.start()
        ...                   # after each commit of messages:
        follower.poke()       # returns at once; raises what a catch-up failed with
        ...
        follower.close()      # the tables are caught up
    """

    def __init__(self, spark: SparkSession, lake_dir: str,
                 interval: float = CATCH_UP_INTERVAL) -> None:
        import threading

        self.spark, self.lake_dir, self.interval = spark, lake_dir, interval
        #: tasks folded so far, and catch-ups that ran
        self.refreshed = 0
        self.catch_ups = 0
        self._error: BaseException | None = None
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="snap-spark-tasks",
                                        daemon=True)

    def start(self) -> None:
        """Start the thread, with a first catch-up (what an earlier run may have left)."""
        self._thread.start()
        self._wake.set()

    def poke(self) -> None:
        """Ask for a catch-up and return at once.

        Raises:
            BaseException: the error an earlier catch-up failed with (the thread stopped).
        """
        self._raise_error()
        self._wake.set()

    def close(self, catch_up: bool = True) -> None:
        """Stop the thread (after the catch-up it is running), then, with ``catch_up``,
        catch up once more on this thread.

        Raises:
            BaseException: the error a catch-up failed with.
        """
        self._closing = True
        self._closed.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        self._raise_error()
        if catch_up:
            self._catch_up()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _catch_up(self) -> None:
        from snap_spark.common.console import log

        result = catch_up_tasks(self.spark, self.lake_dir)
        self.refreshed += result.tasks
        self.catch_ups += 1
        if result.tasks:
            log(f"tasks: {result.tasks} refreshed [{result.seconds:.1f}s]")

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            started = time.monotonic()
            try:
                self._catch_up()
            except BaseException as exc:  # raised on the writer's thread by poke/close
                self._error = exc
                return
            # the next one no sooner than interval after this one began (close: at once)
            self._closed.wait(max(0.0, started + self.interval - time.monotonic()))


def landed_task_ids(spark: SparkSession, lake_dir: str, ingest_ids: Collection[str]) -> DataFrame:
    """The tasks that runs ``ingest_ids`` gave a valid state report, as a DataFrame of one
    ``task_id`` column (distinct): what :func:`refresh_tasks` wants after those runs.

    Examples:
        A run that lands a report on ``t1`` and a request naming ``t2`` (no state report):

        >>> import json
        >>> from snap_spark.lake import table_rows
        >>> from snap_spark.pipeline.batch_job import run
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

    from snap_spark.files import storage
    from snap_spark.lake import get_lake

    runs = spark.createDataFrame([(i,) for i in set(ingest_ids)], "ingest_id string")
    return (
        _state_reports(get_lake(spark).read(spark, storage.join(lake_dir, "messages")))
        .join(F.broadcast(runs), "ingest_id", "left_semi")
        .select("task_id")
        .distinct()
    )


def _id_frame(spark: SparkSession, unique: Collection[str]) -> DataFrame:
    """Task ids gathered on the driver as a local relation (joined by broadcast, no Spark
    job of its own)."""
    return spark.createDataFrame(pa.table({"task_id": pa.array(list(unique), pa.string())}))


def state_reports_where() -> Where:
    """The ``messages`` rows the fold takes, for a Spark fold and a driver fold alike:
    valid, reporting one of the six states.

    Examples:
        >>> state_reports_where()
        ((verdict == 'valid') & task_state is not null)
    """
    from snap_spark.lake import col

    return (col("verdict") == VALID) & col("task_state").is_valid()


def _state_reports(messages: DataFrame) -> DataFrame:
    """The ``messages`` rows the fold takes (:func:`state_reports_where`)."""
    return messages.filter(state_reports_where().spark())


def _fold_on_driver(msg_uri: str, ids: DataFrame | list[str] | None, version: int) -> bool:
    """Whether a fold of ``ids`` (all tasks when ``None``) over ``messages`` at ``version``
    reads its reports on the driver (delta-rs, one filtered scan) and folds them
    in-process, with no Spark job, shuffle or stage: when the table is small and the ids
    are all tasks or few (:class:`~snap_spark.common.placement.DriverLimits` ``fold_rows`` and
    ``fold_tasks``). The scan reads every report of the table, so its size is what bounds
    it (docs/speed.md has the costs); more ids go to a Spark fold, which joins them by
    broadcast."""
    from snap_spark.common.placement import limits
    from snap_spark.lake import rows_at_most

    bounds = limits()
    some_ids = ids is None or (isinstance(ids, list) and bounds.fits("fold_tasks", len(ids)))
    return some_ids and rows_at_most(msg_uri, bounds.fold_rows, version)


#: The order the fold takes a task's reports in (ascending, nulls first, as Spark sorts).
_FOLD_ORDER = ("task_id", "timestamp", "received_at", "source_file", "line_no")
#: The ``messages`` columns the fold reads.
_REPORT_COLUMNS = ("task_id", "context_id", "task_state", "sender", "msg_id", "timestamp",
                   "received_at", "source_file", "line_no")


def _fold_tasks(spark: SparkSession, lake_dir: str, ids: DataFrame | list[str] | None,
                since: int | None = None) -> TasksResult:
    """Fold the tasks of ``ids`` (all when ``None``) and commit both tables: in full
    (``replace=True``), or those tasks' rows (``keys``). ``ids`` as a list of distinct ids
    gathered on the driver, or all tasks, are found and folded on the driver when the
    table is small (:func:`_fold_on_driver`). ``since``: the tasks are those reported on
    by rows ``messages`` added after that version (``ids`` unused); the commits record the
    version folded as :data:`THROUGH_KEY`, as a full fold does."""
    from snap_spark.common.console import UsageError
    from snap_spark.files import storage
    from snap_spark.lake import check_table_location, get_lake, table_uri
    from snap_spark.pipeline.runs import run_marker
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
    target = _FoldTarget(spark, lake, lake_dir, msg_path, paths, ingest_id,
                         {name: lake.data_root(path, staging) for name, path in paths.items()},
                         "rebuild_tasks" if ids is None and since is None else "refresh_tasks")
    with run_marker(lake_dir, ingest_id):
        try:
            result = _fold_and_commit(target, ids, since)
        finally:
            target.delete_files()
            storage.delete_tree(staging)
    result.tasks_written = result.tasks
    result.events_written = result.reports
    result.seconds = time.monotonic() - started
    return result


@dataclasses.dataclass
class _FoldTarget:
    """Where one task fold reads and writes (:func:`_fold_tasks`)."""

    spark: SparkSession
    lake: Lake
    lake_dir: str
    msg_path: str
    #: table name -> its path, for ``task_events`` and ``tasks``
    paths: dict[str, str]
    ingest_id: str
    #: table name -> the folder its new files are written to
    roots: dict[str, str]
    #: ``rebuild_tasks`` or ``refresh_tasks``: the commit lease's holder and commit info
    job: str
    #: table name -> files written and not yet committed (deleted on any way out)
    files: dict[str, list[Any]] = dataclasses.field(
        default_factory=lambda: {"task_events": [], "tasks": []})

    def delete_files(self) -> None:
        """Delete the files written and not committed."""
        from snap_spark.lake import delete_data_files

        for name, leftovers in self.files.items():
            delete_data_files(self.roots[name], leftovers)
        self.files = {"task_events": [], "tasks": []}


def _reported_after(msg_path: str, version: int, known: Collection[str] = ()
                    ) -> tuple[int, list[str]]:
    """The latest version of ``messages``, and the tasks its rows added after ``version``
    report on (with ``known``), as a sorted list."""
    from snap_spark.lake import rows_added_since

    latest, rows = rows_added_since(msg_path, version, ["task_id", "task_state"])
    found = set(known)
    if rows.num_rows:
        found.update(task_id for task_id, state in zip(
            rows.column("task_id").to_pylist(), rows.column("task_state").to_pylist(),
            strict=True) if task_id is not None and state is not None)
    return latest, sorted(found)


def _fold_and_commit(target: _FoldTarget, ids: DataFrame | list[str] | None,
                     since: int | None) -> TasksResult:
    """Fold one version of ``messages`` and commit both tables under the commit lease; if
    another writer changed ``messages`` since that version, fold again at the latest one
    first (two writers refreshing one task leave what one rebuild gives)."""
    from snap_spark.lake import commit_data_files, commit_lease, table_uri, table_version
    from snap_spark.pipeline.ledger import batch_app_id
    from snap_spark.pipeline.runs import file_prefix
    from snap_spark.schemas.tables import TASK_EVENTS, TASKS

    if since is None:
        read_version = table_version(table_uri(target.msg_path))
    else:
        read_version, ids = _reported_after(target.msg_path, since)
    result = _fold_at(target, ids, read_version)
    with commit_lease(target.lake_dir, target.job):
        latest = table_version(table_uri(target.msg_path))
        if latest != read_version:
            target.delete_files()
            if isinstance(ids, list) and since is not None:
                # and the tasks of what was committed meanwhile
                latest, ids = _reported_after(target.msg_path, read_version, ids)
            result = _fold_at(target, ids, latest)
        info: dict[str, Any] = {"job": target.job, "ingest_id": target.ingest_id,
                                "messages_version": latest}
        if ids is None or since is not None:  # every report up to it is folded
            info[THROUGH_KEY] = latest
        # ids gathered on the driver go to the commit as Arrow: no Spark job
        keys = (pa.table({"task_id": pa.array(ids, pa.string())})
                if isinstance(ids, list) else ids)
        for name, schema in (("task_events", TASK_EVENTS), ("tasks", TASKS)):
            # the whole table, or those tasks' rows; the files committed or deleted
            commit_data_files(target.spark, target.lake, target.paths[name],
                              target.roots[name], target.files[name], schema=schema,
                              app_id=batch_app_id([target.ingest_id, name]), version=1,
                              commit_info=info, replace=keys is None, keys=keys,
                              file_prefix=file_prefix(target.ingest_id, f"{name}-kept"))
            target.files[name] = []
    return result


def _fold_at(target: _FoldTarget, ids: DataFrame | list[str] | None, version: int
             ) -> TasksResult:
    """Fold the tasks of ``ids`` from ``messages`` at ``version`` into files of both
    tables (kept in ``target.files``): on the driver, or in a Spark stage."""
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import from_arrow_schema

    from snap_spark.lake import read_arrow, table_uri
    from snap_spark.pipeline.land import data_file

    fold_files = functools.partial(fold_partition, target.roots, target.ingest_id)
    if isinstance(ids, list) and not ids:
        return TasksResult()
    if _fold_on_driver(table_uri(target.msg_path), ids, version):
        # a table small enough to read on the driver: the reports read by delta-rs,
        # folded in-process; only a null test goes to the scan (string statistics in a
        # Delta log may be truncated prefixes, wrong as bounds), the whole rule is applied
        # in memory
        found = read_arrow(target.msg_path, [*_REPORT_COLUMNS, "verdict"], version,
                           where=pc.field("task_state").is_valid())
        found = found.filter(state_reports_where().arrow())
        if isinstance(ids, list):
            found = found.filter(pc.is_in(found["task_id"], pa.array(ids)))
        found = found.select(list(_REPORT_COLUMNS))
        written = [row for batch in fold_files(
            sort_nulls_first(found, _FOLD_ORDER).to_batches())
            for row in batch.to_pylist()]
    else:
        reports = _state_reports(target.lake.read(target.spark, target.msg_path, version))
        if ids is not None:
            frame = _id_frame(target.spark, ids) if isinstance(ids, list) else ids
            reports = reports.join(frame, "task_id", "left_semi")
        written = (reports.select(*_REPORT_COLUMNS).repartition("task_id")
                   .sortWithinPartitions(*_FOLD_ORDER)
                   .mapInArrow(fold_files, from_arrow_schema(WRITTEN)).collect())
    folded = TasksResult()
    for row in written:
        if row["table"] == COUNTS:
            counts = json.loads(row["info"])
            folded.tasks += counts["tasks"]
            folded.reports += counts["reports"]
            folded.illegal += counts["illegal"]
            folded.foreign += counts["foreign"]
        else:
            target.files[row["table"]].append(data_file(row["info"]))
    return folded
