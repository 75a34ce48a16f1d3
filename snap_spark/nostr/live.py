"""``jobs/stream_nostr.py``: SNAP on Nostr as it happens, from relays into the lake.

A Structured Streaming query that people leave running against one or more relays:

1. **The tap** (:class:`snap_spark.nostr.tap.RelayTap`, a thread of the driver) holds a
   subscription to every relay for agent cards (kind 31337) and SNAP messages (kinds 4339
   and 21339, to the keyring's recipients unless ``--all-messages``), takes each relay's
   stored backlog from where the lake's events of that relay end, reconnects with backoff,
   and appends every delivery, the moment it arrives, to the spool
   (:mod:`snap_spark.nostr.spool`) as an archive envelope line.
2. **The source** (:class:`SpoolDataSource`, a Python streaming data source) reads the
   spool by byte position: Spark's offsets, kept in the checkpoint, are spool positions, so
   a micro-batch re-run after a crash reads exactly the same lines, and a restarted query
   goes on exactly where its last committed micro-batch ended.
3. **The commit** (``foreachBatch``, :class:`LiveCommitter`): each line is checked as an
   archive line is (:func:`snap_spark.nostr.ingest.check_copy`, in Spark tasks) and the
   batch lands through the archive ingest's own code
   (:func:`snap_spark.nostr.ingest.land_copies`): copies folded by event id across relays
   and batches, cards into ``agent_card_history`` and ``agent_cards``, SNAP messages
   decrypted, bound and verified by the batch job into ``messages``, every event in
   ``nostr_events``. Its commits are named by the micro-batch (``ingest_id`` =
   ``nostr-live-<query id>-<batch id>``), and every step is idempotent, so a re-run
   micro-batch adds nothing.

So the spool is also an archive: ``jobs/ingest_nostr.py --input <spool>`` over it gives
the tables the stream gave.

Usage::

    spark-submit jobs/stream_nostr.py --relay wss://relay.example --lake data/lake \\
        --checkpoint data/checkpoints/nostr --keyring agents.keyring
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from snap_spark.common.console import UsageError, log
from snap_spark.common.remote import refuse_remote
from snap_spark.files import storage
from snap_spark.runner import Context, Job

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructType

    from snap_spark.nostr.spool import SpoolWriter
    from snap_spark.nostr.stored import Keyring
    from snap_spark.nostr.tap import RelayTap
    from snap_spark.pipeline.queries import StopRequest
    from snap_spark.pipeline.task_tables import TasksFollower
    from snap_spark.settings import VerifySettings

#: The short name the spool source is registered under.
SOURCE_NAME: Final = "snap_nostr_spool"
#: Columns of the spool source: a line's position in the spool and its bytes.
SOURCE_SCHEMA: Final = "position long, line binary"
#: The spool folder inside the checkpoint unless ``--spool`` names one.
SPOOL_FOLDER: Final = "spool"


# -- the source ----------------------------------------------------------------------------


class SpoolDataSource(DataSource):
    """A streaming source over a spool folder (option ``path``; ``maxBytes`` bounds a
    micro-batch, default :data:`snap_spark.nostr.spool.READ_BYTES`; ``removeConsumed``
    ``true`` deletes segments every committed micro-batch has passed)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SOURCE_SCHEMA

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        from snap_spark.nostr.spool import READ_BYTES

        return SpoolStreamReader(self.options["path"],
                                 int(self.options.get("maxBytes", READ_BYTES)),
                                 str(self.options.get("removeConsumed", "false")) == "true")


class SpoolStreamReader(SimpleDataSourceStreamReader):
    """Reads whole spool lines by position; offsets are ``{"position": <byte>}``."""

    def __init__(self, path: str, max_bytes: int, remove_consumed: bool) -> None:
        self.path, self.max_bytes, self.remove_consumed = path, max_bytes, remove_consumed

    def initialOffset(self) -> dict[str, int]:
        return {"position": 0}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[int, bytes]], dict[str, int]]:
        from snap_spark.nostr.spool import read_lines

        found = read_lines(self.path, int(start["position"]), max_bytes=self.max_bytes)
        return iter(found.lines), {"position": found.end}

    def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]
                           ) -> Iterator[tuple[int, bytes]]:
        from snap_spark.nostr.spool import read_lines

        return iter(read_lines(self.path, int(start["position"]), int(end["position"])).lines)

    def commit(self, end: dict[str, int]) -> None:
        if self.remove_consumed:
            from snap_spark.nostr.spool import remove_before

            remove_before(self.path, int(end["position"]))


def check_spool_lines(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` work over spool lines: each a
    :data:`snap_spark.nostr.ingest.CHECKED` row whose origin is the relay that delivered it
    (``spool:<position>`` for a line naming none)."""
    from snap_spark.nostr.ingest import CHECKED, check_copy

    for batch in batches:
        rows = []
        for position, raw in zip(batch.column("position").to_pylist(),
                                 batch.column("line").to_pylist(), strict=True):
            row = check_copy(raw, f"spool:{position}")
            if row["relay"]:
                row["origin"] = row["relay"]
            rows.append(row)
        yield pa.RecordBatch.from_pylist(rows, schema=CHECKED)


# -- the run -------------------------------------------------------------------------------


@dataclass
class LivePlan:
    """What one live stream does (the job's options, resolved)."""

    lake_dir: str
    checkpoint: str
    relays: list[str]
    spool: str
    settings: VerifySettings
    keyring: Keyring
    all_messages: bool = False
    stored_clock: str = "event"
    since: int | None = None
    overlap: int = 600
    #: Spark's processing-time interval (``DataStreamWriter.trigger(processingTime=...)``)
    trigger: str = "1 seconds"
    duration: float | None = None
    max_batch_bytes: int | None = None
    keep_spool: bool = False
    progress_json: str | None = None
    max_backoff: float = 30.0


@dataclass
class LiveResult:
    """What a live stream did until it stopped."""

    batches: int = 0
    copies: int = 0
    new_events: int = 0
    kind_verdicts: Counter[str] = field(default_factory=Counter)
    messages_landed: int = 0
    cards: int = 0
    relays: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def warm_up(spark: SparkSession) -> float:
    """Start the Python workers the micro-batches' check runs in and load the code that
    lands a micro-batch, before the tap goes live; returns the seconds it took.

    Without it, the first micro-batch pays both (the Python workers' start and imports:
    docs/speed.md, *Figures behind the code*) while the deliveries of those seconds wait in
    the spool.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    import snap_spark.pipeline.batch_job  # noqa: F401 - the batch job every micro-batch runs
    from snap_spark.nostr.ingest import CHECKED

    started = time.monotonic()
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    lines = [(n, b"") for n in range(parallelism)]
    (spark.createDataFrame(lines, SOURCE_SCHEMA).repartition(parallelism)
     .mapInArrow(check_spool_lines, from_arrow_schema(CHECKED)).toArrow())
    return time.monotonic() - started


def batch_ingest_id(query: str, batch_id: int) -> str:
    """The ``ingest_id`` of a micro-batch's commits: the same when the micro-batch is run
    again (so its Delta app transactions are skipped), and different from every other
    batch's in its first 16 characters, which name the data files a run writes (and
    which files :func:`snap_spark.pipeline.runs.clean_leftovers` may take as a dead
    run's).

    Examples:
        >>> batch_ingest_id("q1", 7) == batch_ingest_id("q1", 7) != batch_ingest_id("q1", 8)
        True
    """
    import hashlib

    return hashlib.sha256(f"snap-spark/nostr-live/{query}/{batch_id}".encode()).hexdigest()[:32]


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


class LiveCommitter:
    """The ``foreachBatch`` function of the live stream (see the module docstring)."""

    def __init__(self, spark: SparkSession, plan: LivePlan, settings: VerifySettings,
                 tap: RelayTap | None, result: LiveResult,
                 tasks: TasksFollower | None = None) -> None:
        self.spark, self.plan, self.settings, self.tap = spark, plan, settings, tap
        self.result, self.tasks = result, tasks
        self.query_id: str | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql.pandas.types import from_arrow_schema

        from snap_spark.nostr.ingest import CHECKED, land_copies
        from snap_spark.pipeline.queries import query_id

        started = time.monotonic()
        if self.query_id is None:
            self.query_id = query_id(self.plan.checkpoint)
        rows = batch.mapInArrow(check_spool_lines,
                                from_arrow_schema(CHECKED)).toArrow().to_pylist()
        if not rows:
            return
        checked = time.monotonic()
        ingest_id = batch_ingest_id(self.query_id, batch_id)
        done = land_copies(self.spark, self.plan.lake_dir, rows, keyring=self.plan.keyring,
                           settings=self.settings, stored_clock=self.plan.stored_clock,
                           ingest_id=ingest_id, catch_up_tasks=self.tasks is None)
        committed = time.time()
        if self.tasks is not None and done.messages_landed:
            self.tasks.poke()
        waits = [committed - r["received_at"] for r in rows if r["received_at"] is not None]
        result = self.result
        result.batches += 1
        result.copies += done.copies
        result.new_events += done.new_events
        result.kind_verdicts += done.kind_verdicts
        result.messages_landed += done.messages_landed
        result.cards += done.cards
        relays = self.tap.status() if self.tap is not None else []
        by_relay = Counter(r["relay"] or "-" for r in rows)
        connected = [s["relay"] for s in relays if s["connected"]]
        fields: dict[str, Any] = {
            "batch": batch_id, "ingest_id": ingest_id, "committed_at": round(committed, 3),
            "copies": done.copies, "by_relay": dict(sorted(by_relay.items())),
            "new_events": done.new_events,
            "kind_verdicts": dict(sorted(done.kind_verdicts.items())),
            "messages_landed": done.messages_landed, "agent_cards_rows": done.cards,
            "relays_connected": connected,
            "relays_lost": [s["relay"] for s in relays if not s["connected"]],
            "seconds": round(time.monotonic() - started, 3),
            "check_seconds": round(checked - started, 3),
            "receipt_to_commit_p50": round(_percentile(waits, 0.5), 3),
            "receipt_to_commit_max": round(max(waits, default=0.0), 3),
        }
        verdicts = " ".join(f"{k}={n}" for k, n in sorted(done.kind_verdicts.items()))
        log(f"batch {batch_id}: {done.copies} deliveries, {done.new_events} new events "
            f"[{verdicts or '-'}], {done.messages_landed} messages; relays "
            f"{len(connected)}/{len(relays)} connected; "
            f"{fields['seconds']:.2f}s, receipt to commit p50 "
            f"{fields['receipt_to_commit_p50']:.2f}s max {fields['receipt_to_commit_max']:.2f}s")
        if self.plan.progress_json:
            with open(self.plan.progress_json, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(fields, sort_keys=True) + "\n")


class _RelayLog:
    """One progress line per change of a relay's connection (a relay that stays down is
    reported once, not at every try)."""

    def __init__(self) -> None:
        self.last: dict[str, str] = {}

    def __call__(self, status: dict[str, Any]) -> None:
        relay, change = status["relay"], status["change"]
        if change == "connected":
            line = f"relay {relay}: connected (connection {status['connects']})"
        elif change == "backlog":
            line = (f"relay {relay}: stored backlog read ({status['deliveries']} deliveries "
                    "so far); live")
        elif change == "lost":
            line = f"relay {relay}: connection lost: {status['error']}; reconnecting"
        elif change == "failed":
            line = f"relay {relay}: cannot follow: {status['error']}; trying again"
            if self.last.get(relay) == line:
                return
        else:
            line = f"relay {relay}: closed"
        self.last[relay] = line
        log(line)


def run_live(spark: SparkSession, plan: LivePlan) -> LiveResult:
    """Run the live stream until ``plan.duration`` seconds passed or the process is asked to
    stop (SIGTERM, SIGINT): the tap stops first, then the query takes what the spool holds
    and stops."""
    refuse_remote(spark, "the live relay stream", "jobs/stream_nostr.py")
    from snap_spark.lake import get_lake
    from snap_spark.nostr.tap import RelayTap
    from snap_spark.pipeline.queries import stop_on_signals, stream_settings
    from snap_spark.pipeline.task_tables import TasksFollower

    settings = stream_settings(plan.settings, spark)
    started = time.monotonic()
    lake = get_lake(spark)
    _prepare_session(spark, plan)
    since = _resume_points(spark, plan)
    result = LiveResult()
    spool = _open_spool(plan)
    tap: RelayTap | None = None
    # the task tables are caught up on a thread of their own, after the micro-batches'
    # commits instead of inside them (what a crash leaves, the next catch-up takes)
    tasks = TasksFollower(spark, plan.lake_dir)
    stopped = False
    signals = contextlib.ExitStack()
    try:
        # SIGTERM and SIGINT ask the stream to stop, the driver JVM's too (under
        # spark-submit `kill PID` names the JVM, which would otherwise stop Spark under it)
        stop = signals.enter_context(stop_on_signals(spark))
        recipients = None if plan.all_messages else plan.keyring.recipients()
        tap = RelayTap(plan.relays, spool, recipients=recipients, since=since,
                       overlap=plan.overlap, max_backoff=plan.max_backoff,
                       on_change=_RelayLog())
        committer = LiveCommitter(spark, plan, settings, tap, result, tasks)
        log(f"warmed up in {warm_up(spark):.1f}s (Python workers and landing code)")
        query = _start_query(spark, plan, committer)
        tasks.start()
        tap.start()
        log(f"live stream started: query id {query.id}, relays {', '.join(plan.relays)}, "
            f"lake={plan.lake_dir} backend={lake.name}, checkpoint={plan.checkpoint}, "
            f"spool={plan.spool}")
        _wait_for_stop(query, plan, stop)
        _drain_and_stop(query, tap)
        stopped = True
        tasks.close()  # the last catch-up: the tables hold every committed report
    finally:
        if not stopped:  # an error on its way out: only stop the thread
            with contextlib.suppress(BaseException):
                tasks.close(catch_up=False)
        if tap is not None:
            tap.stop()
            result.relays = tap.status()
        spool.close()
        signals.close()
    result.seconds = time.monotonic() - started
    return result


def _prepare_session(spark: SparkSession, plan: LivePlan) -> None:
    """Clean what a killed run left in the lake, set the session up for the stream (the
    checkpoint's files, no micro-batch without new input) and register the spool source."""
    from snap_spark.pipeline.runs import clean_leftovers
    from snap_spark.runtime.streaming import configure_checkpoint_files

    # what a killed run left uncommitted in any table of the lake
    clean_leftovers(plan.lake_dir)
    configure_checkpoint_files(spark, plan.checkpoint)
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    with contextlib.suppress(Exception):  # registered already in this session
        spark.dataSource.register(SpoolDataSource)


def _resume_points(spark: SparkSession, plan: LivePlan) -> dict[str, int]:
    """Per relay, where the tap starts its stored backlog before ``overlap`` is taken off:
    ``--since`` for every relay when given, else where the lake's events of each relay end."""
    from snap_spark.nostr.ingest import resume_points

    return ({relay: plan.since for relay in plan.relays} if plan.since is not None
            else resume_points(spark, plan.lake_dir, plan.relays, time.time()))


def _open_spool(plan: LivePlan) -> SpoolWriter:
    """The spool's writer; a spool another stream writes to is a usage error."""
    from snap_spark.nostr.spool import SpoolBusy, SpoolWriter

    try:
        return SpoolWriter(plan.spool)
    except SpoolBusy as exc:
        raise UsageError(f"{exc}: one stream per spool (another stream_nostr on this "
                         "checkpoint?)") from None


def _start_query(spark: SparkSession, plan: LivePlan, committer: LiveCommitter
                 ) -> StreamingQuery:
    """Start the query that reads the spool and commits each micro-batch with
    ``committer``."""
    reader = spark.readStream.format(SOURCE_NAME).option("path", plan.spool)
    if plan.max_batch_bytes:
        reader = reader.option("maxBytes", str(plan.max_batch_bytes))
    if not plan.keep_spool:
        reader = reader.option("removeConsumed", "true")
    return (reader.load().writeStream.foreachBatch(committer)
            .option("checkpointLocation", plan.checkpoint)
            .queryName("snap-spark stream_nostr")
            .trigger(processingTime=plan.trigger)
            .start())


def _wait_for_stop(query: StreamingQuery, plan: LivePlan, stop: StopRequest) -> None:
    """Wait until ``plan.duration`` has passed, the query ended or a signal asked the stream
    to stop (said in a log line)."""
    deadline = None if plan.duration is None else time.monotonic() + plan.duration
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        if query.awaitTermination(1):
            break
    if stop.is_set():
        log(f"stopping the live stream ({stop.name}); restart on the same checkpoint to "
            "go on")


def _drain_and_stop(query: StreamingQuery, tap: RelayTap) -> None:
    """Stop the tap, let the query take what the spool holds and stop it; raise when the
    query failed."""
    tap.stop()
    if query.isActive:
        query.processAllAvailable()
        query.stop()
    failure = query.exception()
    if failure is not None:
        raise RuntimeError(f"the live stream failed: {failure}")


# -- the job -------------------------------------------------------------------------------


class StreamNostr(Job):
    """``jobs/stream_nostr.py``: live relays → the Nostr tables and ``messages``."""

    name = "stream_nostr"
    description = ("Follow Nostr relays live with Structured Streaming: SNAP agent cards "
                   "(kind 31337) and messages (kinds 4339 and 21339, ephemeral ones "
                   "included) land in nostr_events, agent_card_history, agent_cards and "
                   "messages under --lake, each event once, with the verdicts an archive "
                   "run of the same events gives.")
    epilog = ("Every delivery is written to a spool (--spool, default CHECKPOINT/spool) as "
              "it arrives and the query reads the spool by position: restart on the same "
              "--checkpoint to go on exactly where the stream stopped. Stop it with SIGTERM "
              "or Ctrl-C (what was delivered is landed first), or give --duration.")
    verifies_messages = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from snap_spark.nostr.ingest import STORED_CLOCKS

        parser.add_argument("--relay", action="append", default=[], metavar="URL",
                            required=True, help="relay to follow (repeatable)")
        parser.add_argument("--checkpoint", required=True, metavar="DIR",
                            help="the query's checkpoint (a local folder: it also holds "
                            "the spool unless --spool is given)")
        parser.add_argument("--spool", metavar="DIR",
                            help="local folder of the deliveries spool "
                            "(default CHECKPOINT/spool)")
        parser.add_argument("--keyring", metavar="FILE",
                            help="64-hex private keys, one per line (mode 600): SNAP "
                            "messages to these keys are taken and decrypted")
        parser.add_argument("--all-messages", action="store_true",
                            help="take every SNAP message the relays forward, not only "
                            "those to the keyring's keys (others are counted as encrypted)")
        parser.add_argument("--stored-clock", default="event", choices=STORED_CLOCKS,
                            help="receipt time of a message event's inner message: 'event' "
                            "(default: the event's created_at, as jobs/ingest_nostr.py) or "
                            "'received' (when the event first reached the tap)")
        parser.add_argument("--since", type=int, metavar="UNIX",
                            help="take the relays' stored events from this time (default: "
                            "where each relay's events in the lake end, minus --overlap)")
        parser.add_argument("--overlap", type=int, default=600, metavar="SECONDS",
                            help="resume this much before each relay's resume point "
                            "(default 600)")
        parser.add_argument("--trigger", default="processing-time=1s",
                            help="processing-time=<n>[ms|s|m] (default processing-time=1s)")
        parser.add_argument("--duration", type=float, metavar="SECONDS",
                            help="stop after this long (default: run until stopped)")
        parser.add_argument("--max-batch-bytes", type=int, metavar="BYTES",
                            help="at most about this many spool bytes a micro-batch "
                            "(default 16 MiB)")
        parser.add_argument("--keep-spool", action="store_true",
                            help="keep spool segments once committed (default: deleted)")
        parser.add_argument("--progress-json", metavar="FILE",
                            help="also append one JSON line per micro-batch to FILE")

    def check(self, context: Context) -> None:
        from snap_spark.common.extras import require
        from snap_spark.pipeline.queries import parse_trigger

        args = context.args
        require("nostr")
        trigger = parse_trigger(args.trigger)
        if "processingTime" not in trigger:
            raise UsageError("--trigger must be processing-time=<n>[ms|s|m] for a live stream")
        if not storage.is_local(args.checkpoint) or (args.spool and
                                                     not storage.is_local(args.spool)):
            raise UsageError("--checkpoint and --spool must be local folders of the driver "
                             "for a live stream (the tap appends to the spool)")
        if args.duration is not None and not args.duration > 0:
            raise UsageError("--duration must be seconds > 0")
        if args.overlap < 0:
            raise UsageError("--overlap must be seconds >= 0")

    def run(self, spark: SparkSession, context: Context) -> LiveResult:
        from snap_spark.nostr.stored import Keyring, KeyringError
        from snap_spark.pipeline.queries import parse_trigger

        args = context.args
        try:
            keyring = Keyring.load(args.keyring) if args.keyring else Keyring([])
        except KeyringError as exc:
            raise UsageError(str(exc)) from None
        if not args.all_messages and not len(keyring):
            log("no --keyring: SNAP messages are taken only with --all-messages; following "
                "agent cards")
        checkpoint = os.path.abspath(storage.local_path(args.checkpoint))
        plan = LivePlan(
            lake_dir=context.lake, checkpoint=checkpoint, relays=list(args.relay),
            spool=os.path.abspath(storage.local_path(args.spool)) if args.spool
            else os.path.join(checkpoint, SPOOL_FOLDER),
            settings=context.verify, keyring=keyring, all_messages=args.all_messages,
            stored_clock=args.stored_clock, since=args.since, overlap=args.overlap,
            trigger=parse_trigger(args.trigger)["processingTime"], duration=args.duration,
            max_batch_bytes=args.max_batch_bytes, keep_spool=args.keep_spool,
            progress_json=args.progress_json)
        return run_live(spark, plan)

    def summary(self, result: Any) -> str:
        assert isinstance(result, LiveResult)
        verdicts = "  ".join(f"{k}:{n}" for k, n in sorted(result.kind_verdicts.items()))
        lines = [f"micro-batches: {result.batches}   deliveries: {result.copies}   new events: "
                 f"{result.new_events}   agent_cards rows: {result.cards}   messages: "
                 f"{result.messages_landed}   ({result.seconds:.1f}s)",
                 f"new events by kind:verdict: {verdicts or '-'}"]
        lines += [f"relay {r['relay']}: {r['deliveries']} deliveries, {r['connects']} "
                  f"connection(s), {r['losses']} lost"
                  + "".join(f", {what} x{n}" for what, n in sorted(
                      (r.get("complaints") or {}).items()))
                  + (f", last error: {r['error']}" if r["error"] else "")
                  for r in result.relays]
        return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``jobs/stream_nostr.py``."""
    from snap_spark.runner import main as run_job

    return run_job(StreamNostr(), argv)
