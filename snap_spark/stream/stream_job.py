"""``jobs/stream_verify.py``: verify SNAP traffic as it arrives, with Structured Streaming.

Usage (see ``--help``)::

    spark-submit jobs/stream_verify.py --landing DIR --lake DIR --checkpoint DIR \\
        [--trigger available-now | --trigger processing-time=10s]
    spark-submit --jars ... jobs/stream_verify.py --kafka-bootstrap HOST:PORT --topic T \\
        --lake DIR --checkpoint DIR

Each micro-batch runs the batch job's code on its lines (:mod:`snap_spark.pipeline`):

1. **Landing** (in the streaming query): each new file of the landing folder (the batch job's
   input format, plain or ``.gz``; a file whose bytes the lake already holds is skipped) or
   each Kafka partition's records (one record, one line) is checked and its
   ``raw_messages`` files and staged ``messages`` rows are written, as the batch job's
   landing tasks do (:func:`snap_spark.pipeline.land.land_lines`).
2. **Replay window in streaming state**: the replay candidates go through
   :func:`snap_spark.stream.replay_state.replay_verdicts` (``transformWithStateInPandas`` on
   RocksDB, keyed by ``(from, id)``, bounded by the traffic within the window); the other
   landed rows pass through it unchanged.
3. **Commit** (``foreachBatch``): the batch's candidates are decided against the lake, the
   durable replay store (:mod:`snap_spark.pipeline.replay_store`: copies landed by earlier
   batches or other runs, late rows the state could not decide exactly, earlier rows a late
   copy re-decides), then ``raw_messages``, ``messages`` (with any earlier rows updated in
   the same commit), ``task_events``/``tasks`` and ``ingested_files`` are committed, each
   with the Delta app transaction ``(snap-spark/stream/<query id>, <batch id>)``: a batch
   replayed after a crash is skipped table by table, so every line lands exactly once.

The verdicts equal the batch job's on the same lines, however they were cut into files and
micro-batches (docs/verdicts.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from snap_spark import __version__
from snap_spark.common.console import UsageError, log
from snap_spark.common.remote import refuse_remote
from snap_spark.files import storage
from snap_spark.pipeline.commit import JobResult
from snap_spark.pipeline.queries import (
    StopRequest,
    parse_trigger,
    query_id,
    stop_on_signals,
    stream_settings,
    trigger_seconds,
)
from snap_spark.runner import Context, Job
from snap_spark.runner import main as run_job
from snap_spark.settings import VerifySettings
from snap_spark.stream.landing import (
    LandingChanges,
    LandingWatch,
    spark_listed_files,
    vanished_files,
    vanished_key,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from snap_spark.lake import Lake
    from snap_spark.pipeline.land import LandSpec
    from snap_spark.pipeline.ledger import FilePlan, LandedPiece, PartialLine
    from snap_spark.pipeline.task_tables import TasksFollower
    from snap_spark.stream.progress import ProgressListener

#: Delta app transaction id of a query's commits; the version is the micro-batch id.
APP_ID_PREFIX = "snap-spark/stream/"
#: The keys of a micro-batch's rows the state could not decide exactly (decided against the
#: lake at commit).
INEXACT_KEYS = pa.schema([("sender", pa.string()), ("msg_id", pa.string())])
#: How far behind the newest receipt time a line may arrive and still be decided by the
#: state alone (later ones are decided against the lake, never dropped).
DEFAULT_LATENESS = 600.0
_INPUT_SUFFIXES = ("jsonl", "ndjson", "json")


@dataclass
class StreamResult(JobResult):
    """What a stream did until it stopped (an ``available-now`` run: all of its input): the
    batch job's counts, summed over the micro-batches this process committed."""

    batches: int = 0
    #: micro-batches re-run after a restart whose commits had been made already (their
    #: figures, counted here, are those the lake recorded; nothing new was written)
    batches_already_committed: int = 0
    #: landing folder: files that grew after they were landed (their new lines landed as a
    #: continuation), that changed (landed again whole), or that vanished before they
    #: could be read (nothing of them landed)
    files_grown: int = 0
    files_changed: int = 0
    files_vanished: int = 0


# -- landing (executors) ------------------------------------------------------------------------


def _local_path(location: str) -> str:
    """A Spark file URI (``file:/x``, ``file:///x``) as the storage layer's location."""
    if location.startswith("file:"):
        return storage.local_path(location)
    return location


#: Rows of the file-planning step: one per line range of a new file (or one ``skipped``).
RANGE_SCHEMA = pa.schema([
    pa.field("path", pa.string()), pa.field("file_key", pa.string()),
    pa.field("start", pa.int64()), pa.field("end", pa.int64()),
    pa.field("first_line", pa.int64()), pa.field("index", pa.int32()),
    pa.field("size", pa.int64()), pa.field("arrived", pa.float64()),
    pa.field("skipped", pa.bool_()),
    # gone before it could be read (stream/landing.py): nothing of it lands
    pa.field("vanished", pa.bool_()),
    # the first range of a file: its plan (piece_info)
    pa.field("plan", pa.string()),
])
#: Files larger than this are cut into line ranges landed by several tasks.
STREAM_SPLIT_BYTES = 16 * 1024 * 1024


def plan_files(ledger_path: str, split_bytes: int, batches: Iterable[pa.RecordBatch]
               ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function over new files of the landing folder (column ``path``): plan
    each file against the ledger as the batch job does
    (:meth:`snap_spark.pipeline.ledger.LedgerIndex.plan`: keyed by its bytes as they are
    now; a file grown since an earlier run landed it continues from where that stopped, an
    unfinished last line included) and cut the bytes to land into line ranges
    (:func:`snap_spark.files.lines.plan_line_ranges`, ending where the hash did), one
    :data:`RANGE_SCHEMA` row each; a file whose bytes the lake already holds gives one
    ``skipped`` row. The first range's ``plan`` says what its ledger row needs."""
    from snap_spark.files.lines import plan_line_ranges
    from snap_spark.lake import read_arrow
    from snap_spark.pipeline.ledger import LandedPiece, LedgerIndex

    index: LedgerIndex | None = None
    for batch in batches:
        rows: list[dict[str, Any]] = []
        for path in batch.column("path").to_pylist():
            location = _local_path(path)
            if index is None:  # the ledger as it is when the task starts
                ledger = read_arrow(ledger_path, list(LANDED_PIECE_COLUMNS))
                index = LedgerIndex([] if ledger is None else
                                    [LandedPiece.from_row(r) for r in ledger.to_pylist()])
            try:
                stat = storage.file_stat(location)
                plan = index.plan(location)
            except FileNotFoundError:
                rows.append({"path": location, "file_key": "", "index": 0, "size": 0,
                             "arrived": time.time(), "skipped": True, "vanished": True})
                continue
            arrived = time.time() if stat.mtime_ns is None else stat.mtime_ns / 1e9
            common = {"path": location, "file_key": plan.file_key, "size": plan.end_byte,
                      "arrived": arrived, "vanished": False}
            if not plan.lands:
                rows.append({**common, "index": 0, "skipped": True})
                continue
            described = piece_info(plan)
            for number, part in enumerate(plan_line_ranges(
                    location, split_bytes, start=plan.start_byte, end=plan.end_byte,
                    first_line=plan.first_line)):
                rows.append({**common, "start": part.start, "end": part.end,
                             "first_line": part.first_line, "index": number,
                             "skipped": False, "plan": described if number == 0 else None})
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=RANGE_SCHEMA)


#: The ``ingested_files`` columns a landing task reads to plan files.
LANDED_PIECE_COLUMNS = ("source_file", "file_key", "prefix_key", "start_byte", "end_byte",
                        "first_line", "lines")


def piece_info(plan: FilePlan) -> str:
    """What the ledger row of a planned file needs besides its lines, as JSON (the ``plan``
    of its first :data:`RANGE_SCHEMA` row); :func:`planned_piece` reads it back.

    Examples:
        >>> from snap_spark.pipeline.ledger import FilePlan, PartialLine
        >>> plan = FilePlan("/l/a.jsonl", "k2", "grown", 7, 20, 3, prefix_key="k1",
        ...                 replaces=PartialLine("/l/a.jsonl", "k1", 3, 7, 10))
        >>> piece, replaced, _ = planned_piece("/l/a.jsonl", "k2", piece_info(plan), 20, 4)
        >>> (piece.start_byte, piece.end_byte, piece.first_line, piece.lines, piece.prefix_key)
        (7, 20, 3, 4, 'k1')
        >>> replaced == plan.replaces
        True
    """
    replaces = plan.replaces
    return json.dumps({
        "start": plan.start_byte, "end": plan.end_byte, "first_line": plan.first_line,
        "prefix_key": plan.prefix_key, "note": plan.note,
        "replaces": None if replaces is None else [replaces.file_key, replaces.line_no,
                                                   replaces.start_byte, replaces.end_byte]})


def planned_piece(path: str, key: str, info: str | None, size: int, lines: int
                  ) -> tuple[LandedPiece, PartialLine | None, str]:
    """The ledger row of a file (``size`` bytes when hashed) landed with ``lines`` lines as
    :func:`piece_info` described it (``info`` ``None``: the whole file), the row of an
    unfinished line it replaces, and the plan's note."""
    from snap_spark.pipeline.ledger import LandedPiece, PartialLine

    plan = json.loads(info) if info else {}
    replaces = plan.get("replaces")
    return (LandedPiece(source_file=path, file_key=key, prefix_key=plan.get("prefix_key"),
                        start_byte=int(plan.get("start", 0)),
                        end_byte=int(plan.get("end", size)),
                        first_line=int(plan.get("first_line", 1)), lines=lines),
            None if not replaces else PartialLine(path, replaces[0], int(replaces[1]),
                                                  int(replaces[2]), int(replaces[3])),
            str(plan.get("note") or ""))


def land_files(spec: LandSpec, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function over :data:`RANGE_SCHEMA` rows: land each range
    (:func:`snap_spark.pipeline.land.land_range`) under its file's key; the first range of
    a file also yields the file's ``piece`` row (``skipped`` for a file already landed)."""
    from snap_spark.pipeline.land import LANDED_SCHEMA, land_range

    for batch in batches:
        for row in batch.to_pylist():
            path, key = row["path"], row["file_key"]
            if row["index"] == 0:
                kind = ("vanished" if row["vanished"] else
                        "skipped" if row["skipped"] else "piece")
                yield pa.RecordBatch.from_pylist(
                    [{"kind": kind, "source_file": path,
                      "file_key": key,
                      "info": json.dumps({"size": row["size"], "arrived": row["arrived"],
                                          "plan": row.get("plan")})}],
                    schema=LANDED_SCHEMA)
            if row["skipped"]:
                continue
            mine = dataclasses.replace(spec, file_keys={path: key}, raw_keys=frozenset({key}),
                                       msg_keys=frozenset({key}))
            yield from land_range(mine, row["index"], path, row["start"], row["end"],
                                  row["first_line"])


def plan_and_land_files(spec: LandSpec, ledger_path: str, split_bytes: int,
                        batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function over new files of the landing folder (column ``path``): each
    file planned (:func:`plan_files`) and its ranges landed (:func:`land_files`) in turn, in
    the same task; a big file's ranges one after the other."""
    yield from land_files(spec, plan_files(ledger_path, split_bytes, batches))


def kafka_source_file(topic: str, partition: int) -> str:
    """The ``source_file`` of a Kafka partition's lines (``line_no`` = offset + 1).

    Examples:
        >>> kafka_source_file("snap", 3)
        'kafka://snap/3'
    """
    return f"kafka://{topic}/{partition}"


def land_kafka(spec: LandSpec, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function over Kafka records (``topic, partition, offset, value``): each
    record's value is one input line; a partition's records land as one source
    (:func:`kafka_source_file`), line number = offset + 1."""
    from snap_spark.pipeline.checked import check_lines
    from snap_spark.pipeline.land import LANDED_SCHEMA, land_lines

    size = spec.settings.batch_rows
    for batch in batches:
        cols = batch.to_pydict()
        groups: dict[tuple[str, int], list[int]] = {}
        for i, (topic, partition) in enumerate(zip(cols["topic"], cols["partition"],
                                                   strict=True)):
            groups.setdefault((topic, int(partition)), []).append(i)
        for (topic, partition), rows in groups.items():
            source = kafka_source_file(topic, partition)
            key = f"kafka:{topic}:{partition}"
            mine = dataclasses.replace(spec, file_keys={source: key},
                                       raw_keys=frozenset({key}), msg_keys=frozenset({key}))
            checked = (
                check_lines(spec.settings, source,
                            [int(cols["offset"][i]) + 1 for i in rows[start:start + size]],
                            [cols["value"][i] for i in rows[start:start + size]], None)
                for start in range(0, len(rows), size)
            )
            yield from land_lines(mine, f"k{partition}", source, checked, key=key)
            yield pa.RecordBatch.from_pylist(
                [{"kind": "piece", "source_file": source, "file_key": key,
                  "info": json.dumps({"arrived": min(cols["timestamp"][i] for i in rows)
                                      .timestamp()})}],
                schema=LANDED_SCHEMA)


# -- the query ----------------------------------------------------------------------------------


@dataclass
class StreamPlan:
    """What one run of the stream works with (decided on the driver at start)."""

    lake_dir: str
    checkpoint: str
    settings: VerifySettings
    lateness: float
    run_id: str
    landing: str | None = None
    kafka_bootstrap: str | None = None
    topic: str | None = None
    max_files_per_trigger: int | None = None
    #: at most this many Kafka records per micro-batch (Spark's ``maxOffsetsPerTrigger``)
    max_offsets_per_trigger: int | None = None
    progress_json: str | None = None
    #: partitions of the replay state (default: the cluster's default parallelism)
    state_partitions: int | None = None


def landed_stream(spark: SparkSession, plan: StreamPlan, spec: LandSpec) -> DataFrame:
    """The streaming DataFrame of landed rows (:data:`~snap_spark.pipeline.land.LANDED_SCHEMA`)."""
    import functools

    from snap_spark.pipeline.land import landed_struct

    if plan.kafka_bootstrap:
        from snap_spark.runtime.maven_jars import require_kafka_connector

        require_kafka_connector(spark)
        kafka = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", plan.kafka_bootstrap)
            .option("subscribe", plan.topic)
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", "true")
        )
        if plan.max_offsets_per_trigger:
            kafka = kafka.option("maxOffsetsPerTrigger", str(plan.max_offsets_per_trigger))
        records = kafka.load().select("topic", "partition", "offset", "value", "timestamp")
        return records.mapInArrow(functools.partial(land_kafka, spec), landed_struct())
    assert plan.landing is not None
    globs = ",".join(f"*.{s}" for s in _INPUT_SUFFIXES) + "," + ",".join(
        f"*.{s}.gz" for s in _INPUT_SUFFIXES)
    reader = (spark.readStream.format("binaryFile")
              .schema("path string, modificationTime timestamp, length long, content binary")
              .option("recursiveFileLookup", "true")
              # a file gone before its batch reads it is named by the commit (vanished),
              # not a failed query
              .option("ignoreMissingFiles", "true")
              .option("pathGlobFilter", "{" + globs + "}"))
    if plan.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(plan.max_files_per_trigger))

    files = reader.load(plan.landing).select("path")
    ledger = storage.join(plan.lake_dir, "ingested_files")
    # Each file is planned and landed by the task that listed it, in one Python stage:
    # Spark's file source already gives the files of a micro-batch to separate tasks. A
    # shuffle between planning and landing, which spread a big file's line ranges over the
    # cores, cost a stage per micro-batch and, round-robin over a few rows, often gave one
    # task every file (docs/speed.md, *Figures behind the code*).
    return files.mapInArrow(functools.partial(plan_and_land_files, spec, ledger,
                                              STREAM_SPLIT_BYTES), landed_struct())


def replay_input(landed: DataFrame) -> DataFrame:
    """Landed rows as the replay state's input: candidates as they are, every other row
    carried through as JSON (``passthrough``)."""
    from pyspark.sql import functions as F

    is_candidate = F.col("kind") == "candidate"
    others = F.to_json(F.struct(*[F.col(c) for c in landed.columns]))
    return landed.select(
        F.when(is_candidate, F.col("sender")).alias("sender"),
        F.when(is_candidate, F.col("msg_id")).alias("msg_id"),
        F.when(is_candidate, F.col("received_at")).alias("received_at"),
        F.when(is_candidate, F.col("code")).alias("auth_code"),
        "source_file", "line_no", "file_key",
        F.when(is_candidate, F.col("task_id")).alias("task_id"),
        F.when(~is_candidate, others).alias("passthrough"),
    )


class StreamVerify(Job):
    """``jobs/stream_verify.py``: a landing folder or a Kafka topic → the lake's tables."""

    name = "stream_verify"
    description = (
        "Verify SNAP traffic as it arrives (files dropped into a landing folder, or records of "
        "a Kafka topic) with Structured Streaming, into the same Delta tables and verdicts as "
        "jobs/verify_messages.py; the replay window is held in streaming state."
    )
    epilog = (
        "Stop it with SIGTERM or Ctrl-C: the micro-batch under way ends, then the stop-time "
        "work, and it exits 0. Restart on the same --checkpoint to go on where the stream "
        "stopped: every line lands exactly once. Settings also come from --config; "
        "command-line options win."
    )
    verifies_messages = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        source = parser.add_argument_group("source (one of)")
        source.add_argument("--landing", metavar="DIR",
                            help="folder watched for new input files (.jsonl/.ndjson/.json, "
                            "and .gz); a file that grows after it was landed lands its new "
                            "lines as a continuation, one rewritten lands again whole, one "
                            "gone before it was read is named (moving complete files in is "
                            "still the cheapest)")
        source.add_argument("--kafka-bootstrap", metavar="HOST:PORT",
                            help="Kafka bootstrap servers (with --topic): each record is one "
                            "input line")
        source.add_argument("--topic", help="Kafka topic to read")
        parser.add_argument("--checkpoint", required=True, metavar="DIR",
                            help="the query's checkpoint (offsets, replay state); keep it "
                            "to restart where the stream stopped")
        parser.add_argument("--trigger", default="processing-time=10s",
                            help="available-now (process what is there, then stop) or "
                            "processing-time=<n>[ms|s|m] (default processing-time=10s)")
        parser.add_argument("--lateness", type=float, default=DEFAULT_LATENESS,
                            metavar="SECONDS",
                            help="how far behind the newest receipt time a line may arrive "
                            "and be decided by the state alone; later lines are decided "
                            f"against the lake (default {DEFAULT_LATENESS:g})")
        parser.add_argument("--max-files-per-trigger", type=int, metavar="N",
                            help="at most N new files per micro-batch (landing folder)")
        parser.add_argument("--max-offsets-per-trigger", type=int, metavar="N",
                            help="at most N records per micro-batch (Kafka; spread over the "
                            "topic's partitions by Spark); available-now then runs "
                            "several micro-batches")
        parser.add_argument("--state-partitions", type=int, metavar="N",
                            help="partitions of the replay state, fixed when a checkpoint is "
                            "new (default: the cluster's default parallelism)")
        parser.add_argument("--progress-json", metavar="FILE",
                            help="also append one JSON line per micro-batch to FILE")

    def check(self, context: Context) -> None:
        args = context.args
        if bool(args.landing) == bool(args.kafka_bootstrap):
            raise UsageError("give one source: --landing DIR, or --kafka-bootstrap HOST:PORT "
                             "--topic T")
        if args.kafka_bootstrap and not args.topic:
            raise UsageError("--kafka-bootstrap needs --topic")
        parse_trigger(args.trigger)
        if not (args.lateness >= 0 and args.lateness < float("inf")):
            raise UsageError(f"--lateness must be seconds >= 0, got {args.lateness}")
        if args.max_files_per_trigger is not None and args.max_files_per_trigger < 1:
            raise UsageError("--max-files-per-trigger must be at least 1")
        if args.max_files_per_trigger is not None and not args.landing:
            raise UsageError("--max-files-per-trigger is for --landing; a Kafka source takes "
                             "--max-offsets-per-trigger")
        if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger < 1:
            raise UsageError("--max-offsets-per-trigger must be at least 1")
        if args.max_offsets_per_trigger is not None and not args.kafka_bootstrap:
            raise UsageError("--max-offsets-per-trigger is for a Kafka source "
                             "(--kafka-bootstrap); a landing folder takes "
                             "--max-files-per-trigger")
        if args.state_partitions is not None and args.state_partitions < 1:
            raise UsageError("--state-partitions must be at least 1")

    def reads_kafka(self, context: Context) -> bool:
        return bool(context.args.kafka_bootstrap)

    def run(self, spark: SparkSession, context: Context) -> StreamResult:
        args = context.args
        plan = StreamPlan(
            lake_dir=context.lake, checkpoint=args.checkpoint, settings=context.verify,
            lateness=args.lateness, run_id=uuid.uuid4().hex, landing=args.landing,
            kafka_bootstrap=args.kafka_bootstrap, topic=args.topic,
            max_files_per_trigger=args.max_files_per_trigger,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            progress_json=args.progress_json, state_partitions=args.state_partitions)
        return run_stream(spark, plan, parse_trigger(args.trigger))

    def summary(self, result: Any) -> str:
        from snap_spark.pipeline.commit import format_summary

        assert isinstance(result, StreamResult)
        again = (f" ({result.batches_already_committed} re-run after a restart, committed "
                 "before it: their figures are the lake's)"
                 if result.batches_already_committed else "")
        landing = (f"\nlanding folder after pick-up: {result.files_grown} grew (new lines "
                   f"landed), {result.files_changed} changed (landed again whole), "
                   f"{result.files_vanished} vanished (nothing landed)"
                   if result.files_grown or result.files_changed or result.files_vanished
                   else "")
        return (f"micro-batches: {result.batches}{again}\n{format_summary(result)}"
                f"{landing}")


#: How long a stop waits for the micro-batch under way to end before it stops the query in
#: the middle of it (the batch then runs again at the next start).
STOP_WAIT_SECONDS = 60.0


def stop_query(spark: SparkSession, query: Any, request: StopRequest | None = None,
               wait: float = STOP_WAIT_SECONDS) -> None:
    """Stop ``query`` between micro-batches: wait (at most ``wait`` seconds, or until
    ``request`` is asked again: a second signal) for the micro-batch under way to end, then
    ``query.stop()``. Spark's stop interrupts its query's thread wherever it is; between
    micro-batches that is its wait for the next trigger. The warning Spark's scheduler
    gives twice when the query's jobs are already done (``Failed to cancel job group``) is
    left out: its log level is raised to errors for the stop."""
    asked = len(request.names) if request is not None else 0
    deadline = time.monotonic() + wait
    with contextlib.suppress(Exception):  # the query ended meanwhile: nothing to wait for
        while (query.isActive and query.status["isTriggerActive"]
               and time.monotonic() < deadline
               and (request is None or len(request.names) == asked)):
            time.sleep(0.05)
    logger = "org.apache.spark.scheduler.DAGScheduler"
    jvm: Any = spark.sparkContext._jvm
    level: Any = None
    with contextlib.suppress(Exception):  # a driver that does not log with log4j 2
        level = jvm.org.apache.logging.log4j.LogManager.getLogger(logger).getLevel()
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            logger, jvm.org.apache.logging.log4j.Level.ERROR)
    try:
        query.stop()
    finally:
        if level is not None:
            with contextlib.suppress(Exception):
                jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(logger, level)


def run_stream(spark: SparkSession, plan: StreamPlan, trigger: dict[str, Any]
               ) -> StreamResult:
    """Start the query and wait until it stops (``availableNow``: when the input is done;
    a processing-time trigger: until the process is stopped)."""
    refuse_remote(spark, "the stream", "jobs/stream_verify.py")
    from snap_spark.lake import get_lake, table_uri
    from snap_spark.pipeline.batch_job import LANDED_TABLES, prepare_landing
    from snap_spark.pipeline.runs import clean_leftovers, run_marker

    settings = stream_settings(plan.settings, spark)
    started = time.monotonic()
    lake = get_lake(spark)
    prepare_landing(plan.lake_dir)
    if plan.landing and storage.path_kind(plan.landing) != "dir":
        raise UsageError(f"--landing {plan.landing} is not a folder")
    partitions = _configure_session(spark, plan)
    staging = table_uri(storage.join(plan.lake_dir, "_staging", plan.run_id))
    spec = _land_spec(plan, lake, staging, settings)
    verdicts = _verdict_stream(spark, plan, spec, settings, staging, partitions)
    stream = _prepare_query(spark, plan, lake, spec, settings, staging, verdicts, trigger)
    stopped = False
    try:
        with run_marker(plan.lake_dir, plan.run_id), stop_on_signals(spark) as stop:
            stream.run(stop)
            stopped = True
            stream.tasks.close()  # the last catch-up: the tables hold every committed report
            stream.result.tasks_refreshed = stream.tasks.refreshed
    finally:
        if not stopped:  # an error on its way out: only stop the thread
            with contextlib.suppress(BaseException):
                stream.tasks.close(catch_up=False)
        spark.streams.removeListener(stream.listener)
        with contextlib.suppress(OSError):
            storage.delete_tree(staging)
    clean_leftovers(plan.lake_dir, LANDED_TABLES)
    stream.result.seconds = time.monotonic() - started
    return stream.result


def _configure_session(spark: SparkSession, plan: StreamPlan) -> int:
    """Set the session up for the stream (the replay state's store, the checkpoint's files,
    the workers' Python, the shuffle partitions, no micro-batch without new input) and
    return the number of partitions of the replay state."""
    from snap_spark.runtime.streaming import configure_checkpoint_files, same_worker_environment
    from snap_spark.stream.replay_state import configure_state_store

    configure_state_store(spark)
    configure_checkpoint_files(spark, plan.checkpoint)
    same_worker_environment(spark)
    # The stateful step's partitions (each a RocksDB store, opened and committed every
    # micro-batch): Spark's default of 200 costs seconds a batch on a small cluster. A
    # checkpoint keeps the number it started with.
    partitions = plan.state_partitions or spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    # No micro-batch without new input: such a batch would only fire the replay state's
    # timers (keys past their window are also dropped by the next batch that brings data),
    # and costs seconds of an available-now run.
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    return partitions


def _land_spec(plan: StreamPlan, lake: Lake, staging: str, settings: VerifySettings
               ) -> LandSpec:
    """What the landing tasks of this run write with: the run's ingest id and time, the
    ``raw_messages`` data root and the staging folder of its ``messages`` rows."""
    from snap_spark.common.processes import current_owner
    from snap_spark.pipeline.land import LandSpec

    return LandSpec(
        ingest_id=plan.run_id, ingest_time_us=int(time.time() * 1_000_000), file_keys={},
        raw_root=lake.data_root(storage.join(plan.lake_dir, "raw_messages"), staging),
        staging=f"{staging}/messages", settings=settings, owner=current_owner())


def _verdict_stream(spark: SparkSession, plan: StreamPlan, spec: LandSpec,
                    settings: VerifySettings, staging: str, partitions: int) -> DataFrame:
    """The streaming DataFrame of landed rows after the replay state, which decides the
    replay candidates within the replay window."""
    from snap_spark.runtime.preinit import warm_preinit
    from snap_spark.stream.replay_state import replay_verdicts, state_buckets

    # landing mode: each bucket keeps its candidates in files under the run's staging.
    # Spark runs the replay state's init in a new interpreter at the query's start; in a
    # local session snap-spark built, a warm one does (snap_spark.runtime.preinit)
    candidates = replay_input(landed_stream(spark, plan, spec))
    with warm_preinit(candidates.sparkSession.sparkContext, (replay_verdicts.__module__,)):
        verdicts = replay_verdicts(candidates, settings.replay_window, plan.lateness,
                                   buckets=state_buckets(plan.checkpoint, partitions),
                                   candidates_dir=f"{staging}/candidates")
    return verdicts


@dataclass
class _StreamQuery:
    """One run's query, set up but not started: what it counts into, the thread that
    catches the task tables up, its ``foreachBatch`` committer, its progress listener and
    its writer."""

    spark: SparkSession
    plan: StreamPlan
    lake: Lake
    trigger: dict[str, Any]
    result: StreamResult
    tasks: TasksFollower
    committer: BatchCommitter
    listener: ProgressListener
    writer: DataStreamWriter

    def run(self, stop: StopRequest) -> None:
        """Land what changed since an earlier run, start the task-tables thread, the query
        and the landing watch, wait until the query ends or ``stop`` is set, stop the query
        between micro-batches, and land what changed while it ran."""
        # what grew or changed since an earlier run landed it (a restart)
        self.land_changes("start")
        self.tasks.start()
        query = self.writer.start()
        self.committer.follow_landing(query, self.trigger, self.listener)
        plan = self.plan
        log(f"stream started: query id {query.id}, run {plan.run_id[:8]}, "
            f"lake={plan.lake_dir} backend={self.lake.name}, checkpoint={plan.checkpoint}")
        # until the query ends (available-now: its input is done; an error raises
        # here) or a signal asks it to stop
        while not stop.is_set() and not query.awaitTermination(1):
            pass
        if query.isActive:
            log(f"stopping the stream ({stop.name}): the micro-batch under way, if "
                "any, ends first, then the stop-time work; restart on the same "
                "checkpoint to go on")
            stop_query(self.spark, query, stop)
        self.listener.flush(query)
        # what grew or changed while this run went on (after its last micro-batch)
        self.land_changes("stop")

    def land_changes(self, when: str) -> None:
        """Land what grew or changed in the landing folder, count it into the result and
        report it to the listener as ``when`` (``start`` or ``stop``)."""
        changes = self.committer.land_changes()
        add_changes(self.result, changes, [])
        self.listener.report_landing(when, changes)


def _prepare_query(spark: SparkSession, plan: StreamPlan, lake: Lake, spec: LandSpec,
                   settings: VerifySettings, staging: str, verdicts: DataFrame,
                   trigger: dict[str, Any]) -> _StreamQuery:
    """Set the run's query up over ``verdicts`` without starting it; its progress listener
    is added to the session here."""
    from snap_spark.pipeline.task_tables import TasksFollower
    from snap_spark.stream.progress import BatchProgress, ProgressListener

    result = StreamResult()
    progress = BatchProgress()
    # the task tables are caught up on a thread of their own, after each micro-batch's
    # commit instead of inside it (what a crash leaves, the next catch-up takes)
    tasks = TasksFollower(spark, plan.lake_dir)
    committer = BatchCommitter(spark, lake, plan, spec, settings, staging, result, progress,
                               tasks)
    listener = ProgressListener(progress, plan.progress_json)
    spark.streams.addListener(listener)
    writer = (verdicts.writeStream.foreachBatch(committer)
              .option("checkpointLocation", plan.checkpoint)
              .queryName(f"snap-spark stream_verify {plan.run_id[:8]}")
              .trigger(**trigger))
    return _StreamQuery(spark, plan, lake, trigger, result, tasks, committer, listener, writer)


class BatchCommitter:
    """The ``foreachBatch`` function: decides the batch against the lake and commits it with
    the batch job's code, idempotently by ``(query id, batch id)``."""

    def __init__(self, spark: SparkSession, lake: Lake, plan: StreamPlan, spec: LandSpec,
                 settings: VerifySettings, staging: str, result: StreamResult,
                 progress: Any, tasks: TasksFollower | None = None) -> None:
        self.spark, self.lake, self.plan, self.spec = spark, lake, plan, spec
        self.settings, self.staging, self.result, self.progress = (settings, staging, result,
                                                                  progress)
        #: catches the task tables up after each commit (``None``: the commit does it)
        self.tasks = tasks
        self.lock = threading.Lock()
        #: keys held in the replay state, per bucket (the last count each bucket reported)
        self.state_keys: dict[int, int] = {}
        #: landing folder: files that grow or change after they were landed
        self.watch = (LandingWatch(plan.landing, plan.lake_dir, settings)
                      if plan.landing else None)
        #: when this run of the stream began to look at its input, and when each of its
        #: last two micro-batches ended: the bounds of when a file can have first been seen
        self.started_at = time.time()
        self.ends: list[float] = []

    def seen_since(self) -> float:
        """The earliest a file of the micro-batch about to commit can have come into the
        landing folder, as far as this stream can tell: Spark lists the folder as it plans a
        micro-batch, after the one before ended, and (without ``--max-files-per-trigger``)
        takes every file its listing finds, so a file of micro-batch k was not there when
        micro-batch k-1 was planned, after micro-batch k-2 ended. With the option, or early
        in a run, this run's start: a file waiting in the folder is first seen then."""
        if self.plan.max_files_per_trigger or len(self.ends) < 2:
            return self.started_at
        return self.ends[-2]

    def arrival(self, modified: float) -> float:
        """When a file counts as arrived, for the latency figures: its modification time,
        unless it is older than :meth:`seen_since` (a file linked or moved in with an old
        time, or there before the stream started), then that time. The figures so run from
        when the stream could first have seen the file, never from an old modification
        time (a sample file linked into the folder gave ``latency p50 446.7 s``)."""
        return max(modified, self.seen_since())

    def land_changes(self) -> LandingChanges:
        """Land what grew or changed in the landing folder since it was landed (under the
        commit lock: never while a micro-batch commits)."""
        if self.watch is None:
            return LandingChanges()
        with self.lock:
            return self.watch.land(self.spark)

    def follow_landing(self, query: Any, trigger: dict[str, Any], listener: Any
                       ) -> threading.Thread | None:
        """With a processing-time trigger, look at the landing folder once per trigger
        interval on a thread of its own, and land what grew or changed: Spark runs no
        micro-batch without a new file (so no look after one), and a file that only grows
        would otherwise wait for the next new file or the stop. Each look takes the commit
        lock (never while a micro-batch commits) and is reported as ``landing_watch``
        ``watch``; the thread ends once ``query`` is no longer active. Returns the thread
        (``None``: no landing folder, or an ``availableNow`` trigger)."""
        every = trigger_seconds(trigger)
        if self.watch is None or every is None:
            return None

        def follow() -> None:
            while True:
                time.sleep(every)
                with self.lock:
                    try:
                        if not query.isActive:
                            return
                        changes = self.watch.land(self.spark) if self.watch else None
                    except Exception as exc:  # looked at again next time
                        log(f"landing: looking at {self.plan.landing} failed "
                            f"({type(exc).__name__}: {exc}); looking again later")
                        continue
                    if changes is not None and changes.result is not None:
                        add_changes(self.result, changes, [])
                        listener.report_landing("watch", changes)

        thread = threading.Thread(target=follow, name="snap-spark landing watch", daemon=True)
        thread.start()
        return thread

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self.lock:
            self._commit(batch, int(batch_id))

    def _vanished(self, batch_id: int, rows: list[dict[str, Any]]) -> list[str]:
        """The files of the landing folder Spark listed for this micro-batch that were gone
        before their lines could be read (each named in one line)."""
        if not self.plan.landing:
            return []
        reached = [r["source_file"] for r in rows
                   if r["kind"] in ("piece", "skipped", "vanished")]
        gone = sorted(set(vanished_files(spark_listed_files(self.plan.checkpoint, batch_id),
                                         reached))
                      | {r["source_file"] for r in rows if r["kind"] == "vanished"})
        for path in gone:
            log(f"landing: {path} vanished after the stream picked it up (micro-batch "
                f"{batch_id}): none of its lines were landed; if it comes back, it lands "
                "as a new version")
        return gone

    def _commit(self, batch: DataFrame, batch_id: int) -> None:
        from snap_spark.pipeline.commit import (
            CommitPlan,
            LandedPass,
            commit_pass,
            committed_figures,
        )

        started = time.monotonic()
        app_id = APP_ID_PREFIX + query_id(self.plan.checkpoint)
        rows = self._batch_rows(batch)
        vanished = self._vanished(batch_id, rows)
        if not rows and not vanished:  # no input (a batch that only fires timers)
            return
        pieces = [r for r in rows if r["kind"] in ("piece", "skipped")]
        inexact = sorted({(r["sender"], r["msg_id"]) for r in rows if r["kind"] == "inexact"})
        landed = LandedPass.from_rows([r for r in rows if r["kind"] not in (
            "piece", "skipped", "inexact", "vanished")])
        msg_path = storage.join(self.plan.lake_dir, "messages")
        done = self.lake.txn_version(msg_path, app_id)
        try:
            arrived = [json.loads(r["info"]) for r in pieces if r["kind"] == "piece"]
            keys = sorted({k for k in landed.lines} | {r["file_key"] for r in pieces
                                                       if r["kind"] == "piece"})
            outcome = JobResult()
            ingest_id = f"{self.plan.run_id[:16]}{batch_id:016x}"
            info = {"job": "stream_verify", "batch_id": batch_id, "app_id": app_id,
                    "ingest_id": ingest_id, "snap_spark": __version__,
                    "settings": self.settings.as_record()}
            ledger, replaced = _ledger_of(pieces, arrived, landed.lines, vanished, batch_id)
            commit_pass(self.spark, self.lake, landed, CommitPlan(
                lake_dir=self.plan.lake_dir, ingest_id=self.spec.ingest_id,
                ingest_time_us=self.spec.ingest_time_us, staging=self.staging,
                settings=self.settings, raw_keys=keys, msg_keys=keys,
                txn=lambda _table, _keys: (app_id, batch_id), info=info,
                raw_root=self.spec.raw_root,
                ledger=ledger if self.plan.landing else None, ledger_keys=keys,
                started=started,
                # rows the state could not decide exactly: their keys are folded again
                also_keys=(pa.table({"sender": [k[0] for k in inexact],
                                     "msg_id": [k[1] for k in inexact]},
                                    schema=INEXACT_KEYS) if inexact else None),
                catch_up_tasks=self.tasks is None, replaced=replaced), outcome)
            # the batch's rows are in the lake from here: its latency ends now, not after
            # the landing watch below
            committed_at = time.time()
            if self.tasks is not None:
                self.tasks.poke()
        finally:
            for location in landed.candidate_files:
                with contextlib.suppress(OSError):
                    storage.delete_file(location)
        if done is not None and done >= batch_id and not outcome.already_committed:
            # a re-run whose files the ledger already held: nothing was landed again, and
            # the batch's figures are the ones its commit recorded
            committed_figures(msg_path, app_id, batch_id, outcome)
        self._record(batch_id, outcome, pieces, arrived, vanished, started, committed_at)

    def _batch_rows(self, batch: DataFrame) -> list[dict[str, Any]]:
        """The rows a micro-batch sends the driver, in one action: the landing pass and
        the replay state run once per batch (landing mode: the candidates stay in files,
        only the narrow rows come here). The state's key counts are taken out of them
        into ``state_keys``."""
        from snap_spark.pipeline.land import LANDED_SCHEMA
        from snap_spark.stream.replay_state import PASSTHROUGH, STATE_KEYS_KIND, state_keys

        texts = batch.select(PASSTHROUGH).toArrow().column(PASSTHROUGH).to_pylist()
        blank = dict.fromkeys(LANDED_SCHEMA.names)
        rows = [{**blank, **json.loads(text)} for text in texts if text]
        self.state_keys = state_keys(rows, self.state_keys)
        return [r for r in rows if r["kind"] != STATE_KEYS_KIND]

    def _record(self, batch_id: int, outcome: JobResult, pieces: list[dict[str, Any]],
                arrived: list[dict[str, Any]], vanished: list[str], started: float,
                committed_at: float) -> None:
        """After a batch's commit: the landing watch lands what grew or changed, and the
        batch is counted, recorded (latency, progress) and said in one line."""
        changes = self.watch.land(self.spark) if self.watch is not None else LandingChanges()
        result = self.result
        add_changes(result, changes, vanished)
        result.batches += 1
        result.batches_already_committed += outcome.already_committed
        result.add(outcome)
        result.files_skipped += sum(1 for r in pieces if r["kind"] == "skipped")
        result.files_processed += sum(1 for r in pieces if r["kind"] == "piece")
        result.files_seen = result.files_processed + result.files_skipped
        if changes.result is not None:  # this batch's line also counts what they landed
            outcome.add(changes.result)
        # files count from when the stream could first have seen them; Kafka records
        # from their own timestamps
        since = [self.arrival(a["arrived"]) if "size" in a else a["arrived"]
                 for a in arrived]
        self.ends = [*self.ends[-1:], time.time()]
        self.progress.record(batch_id, outcome, time.monotonic() - started,
                             since, sum(self.state_keys.values()),
                             landing={"files_grown": len(changes.grown),
                                      "files_changed": len(changes.changed),
                                      "files_vanished": len(vanished),
                                      "vanished": vanished},
                             committed_at=committed_at)
        if outcome.already_committed:
            log(f"batch {batch_id} was committed before a restart: nothing new written "
                f"({outcome.lines_read} lines, as committed then)")
        else:
            log(f"batch {batch_id} committed ({outcome.lines_read} lines)")


def _ledger_of(pieces: list[dict[str, Any]], arrived: list[dict[str, Any]],
               lines: Mapping[str, int], vanished: list[str], batch_id: int
               ) -> tuple[list[LandedPiece], list[PartialLine]]:
    """The ledger rows of a landing batch's files (``pieces`` of kind ``piece``, with what
    ``arrived`` says of each; Kafka records have none), and the unfinished lines landed
    before that their lines complete; a file gone before it was read gets a ledger row
    without lines that names it."""
    from snap_spark.pipeline.ledger import LandedPiece

    ledger: list[LandedPiece] = []
    replaced: list[PartialLine] = []
    for r, a in zip([r for r in pieces if r["kind"] == "piece"], arrived, strict=True):
        if "size" not in a:
            continue  # a Kafka partition's records
        piece, partial, note = planned_piece(
            r["source_file"], r["file_key"], a.get("plan"), int(a["size"]),
            lines.get(r["file_key"], 0))
        ledger.append(piece)
        replaced += [partial] if partial is not None else []
        if note:
            log(f"landing: {r['source_file']}: {note}")
    ledger += [LandedPiece(source_file=path, file_key=vanished_key(path, batch_id),
                           prefix_key=None, start_byte=0, end_byte=0, first_line=1,
                           lines=0) for path in vanished]
    return ledger, replaced


def add_changes(result: StreamResult, changes: LandingChanges, vanished: list[str]) -> None:
    """Count into ``result`` what the landing watch landed and the files that vanished."""
    result.files_grown += len(changes.grown)
    result.files_changed += len(changes.changed)
    result.files_vanished += len(vanished)
    if changes.result is not None:
        result.add(changes.result)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``jobs/stream_verify.py``."""
    return run_job(StreamVerify(), argv)
