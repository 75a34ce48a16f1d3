"""The replay window (check 6) held in Structured Streaming state.

:func:`replay_verdicts` turns a stream of *replay candidates* (messages that passed checks
1–5, one row each, :data:`CANDIDATE_SCHEMA`) into a stream of replay verdicts
(:data:`VERDICT_SCHEMA`). It groups by ``(sender, msg_id)`` and runs
:class:`ReplayStateProcessor` with ``transformWithStateInPandas`` in ``EventTime`` mode; the
processor only stores and loads state and shapes rows: each key's candidates go through
:func:`snap_spark.protocol.replay.fold_candidates` (which expires the key's state at the
watermark, then steps the rule, :func:`~snap_spark.protocol.replay.replay_step`), the same
driver the batch fold and the lake's replay store run.

Output, per micro-batch:

- one row per input row of the batch (``changed = false``): its verdict, ``code`` 2006 (with
  ``duplicate_of``, the receipt time of the accepted copy) or its own check-7/8 code
  (``None`` when it passes);
- one row per row of an *earlier* batch whose verdict this batch changed
  (``changed = true``): a late, earlier-received copy re-decides its key, so an accepted
  copy can become a 2006 and a former 2006 can be accepted or get back its own code. A sink
  must upsert by ``(file_key, line_no)``, later batches winning.

The detail of a 2006 is ``duplicate_detail(duplicate_of, received_at, window)``
(:func:`snap_spark.protocol.replay.duplicate_detail`). The accepted line itself is not named:
once its candidate has left the state only its receipt time is kept (the ``anchor``), so a
column naming it would be null in exactly the cases a reader would want it; a caller that
wants the line looks up ``(sender, msg_id, received_at = duplicate_of)`` in the lake.

**Watermark and late rows.** Measured on PySpark 4.0.1: when the column carrying the
watermark reaches ``transformWithStateInPandas`` in ``EventTime`` mode, Spark drops input
rows behind the watermark *before* the processor sees them; they only count in
``stateOperators[0].numRowsDroppedByWatermark``. The filter uses the watermark for late
events, which is the *previous* micro-batch's watermark: in a batch that moves the
watermark from ``W1`` to ``W2``, a row received in ``[W1, W2)`` still reaches the processor
(whose ``TimerValues`` say ``W2``) and a row before ``W1`` is dropped. A candidate must
never be dropped, so :func:`replay_verdicts` puts the watermark on a column derived from
``received_at`` and drops that column again before grouping: the watermark still advances
(the ``EventTimeWatermark`` node stays in the plan, and its progress is reported) and
event-time timers still fire, but no row is filtered. ``tests/stream/test_replay_state.py``
checks both halves.

The watermark delay is ``lateness`` alone, not ``window + lateness``: the window is held in
the state (``expire`` keeps the last accepted receipt time before the watermark as the
key's anchor), so a candidate received at or after the watermark is decided exactly, and so
are the earlier rows it changes (they are all received after it, hence still kept). A
larger delay would only keep state longer.

**exact = false.** The processor sees the batch's watermark ``W`` (the newest receipt time
of earlier batches minus ``lateness``). A row received before ``W`` whose key has no state
(never seen, or deleted once its window passed), or received before the key's horizon (the
watermark at which ``expire`` last dropped candidates of the key), cannot be decided
exactly: what it would be compared with, or what it would change, may have left the state.
It is decided against what the state still knows (the anchor, else nothing), changes no
other row, is not kept, and comes out with ``exact = false``. Any other late row (its key
still holds everything since before it) is decided exactly. The caller must re-decide the
key of an ``exact = false`` row against the lake: take the key's candidates from the
``messages`` table plus this row, fold them in receipt order
(:func:`snap_spark.protocol.replay.replayed_rows`), and update every row whose verdict
differs, this one included. Rows with ``exact = true`` equal the batch fold over every
candidate offered so far, provided no candidate of their key arrives behind the watermark
later (that one comes out ``exact = false``, and re-deciding its key repairs the others).

**State layout.** Keys are grouped into buckets (a hash of ``(sender, msg_id)``): PySpark
4.0 spends state calls and frames on every grouping key, so with one group per key the
stream ran slowly (docs/speed.md, *Figures behind the code*). A new checkpoint gets one
bucket per state partition, its id chosen so that Spark's hash places one in each partition
(:func:`state_buckets`, computed on the driver by :func:`spark_partition`, recorded in the
checkpoint); checkpoints started earlier keep the buckets they began with: four per
partition, or the 32 buckets ``0 .. 31`` (which Spark spreads 12/20 over two partitions).
Each bucket holds its keys as one Arrow table, a row per key (the event time at which
``expire`` will have dropped it whole, and its
:class:`~snap_spark.protocol.replay.ReplayKeyState`: in columns when it is one candidate, as
most keys' are, else as the JSON of
:meth:`~snap_spark.protocol.replay.ReplayKeyState.to_plain`; :func:`encode_bucket`), cut
into 256 KiB pieces of text (:data:`STATE_SCHEMA`), read and rewritten in bulk once per
micro-batch that touches the bucket, and one event-time timer at the bucket's first expiry.
Only the keys a batch touches become Python objects; in landing mode a new key the batch
brings once, on time, is added as a row without becoming one either. Buckets that earlier
versions stored as a JSON object (plain, or zlib-compressed) are read, and stored as Arrow
from their next micro-batch on. Each touched key is expired
at the batch's watermark before it is stepped; keys past their expiry are deleted whenever
their bucket is touched or its timer fires. So the keys held are those with a candidate
received within ``window + lateness`` of the newest receipt time, whatever the history;
each bucket reports its count in a ``state_keys`` row (:func:`state_keys`), since Spark's
own row count is per bucket.

**applyInPandasWithState** still fails on the installed pyarrow 26.0.1: the first
micro-batch stops with ``TypeError: 'float' object cannot be interpreted as an integer`` in
``pyarrow.lib.RecordBatch.slice`` (measured 2026-11 with a one-column count processor), so
nothing here uses it.

Spark settings: the RocksDB state store provider (``transformWithStateInPandas`` needs it:
without it, ``STATE_STORE_MULTIPLE_COLUMN_FAMILIES``), set by :func:`configure_state_store`
before the query starts; protobuf installed in the Python workers (5 for PySpark 4.0 and
4.1, at least 6.33.5 for 4.2).

Example (with a SparkSession ``spark`` and a candidates stream)::

    configure_state_store(spark)
    verdicts = replay_verdicts(candidates, window=120.0, lateness=600.0)
    query = (verdicts.writeStream.foreachBatch(upsert_verdicts)
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    query.awaitTermination()
"""

from __future__ import annotations

import base64
import functools
import math
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

import orjson
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    ListState,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
    ValueState,
)

from snap_spark.common.memory import gc_paused
from snap_spark.protocol.replay import (
    EMPTY_STATE,
    ReplayCandidate,
    ReplayKeyState,
    duplicate_detail,
    fold_candidates,
    line_name,
)
from snap_spark.protocol.verdict import candidate_code

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

#: Spark setting naming the state store provider, and the provider
#: ``transformWithStateInPandas`` needs (it keeps several column families per operator).
STATE_STORE_PROVIDER_CONF: Final = "spark.sql.streaming.stateStore.providerClass"
#: Spark setting: RocksDB state commits write changelogs instead of snapshots.
CHANGELOG_CONF: Final = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
ROCKSDB_PROVIDER: Final = (
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")

#: Input rows of :func:`replay_verdicts`: one per replay candidate. ``auth_code`` is the
#: check-7/8 code (2002, 2001), null when those checks pass.
#: ``task_id`` (optional, may be null) only travels into the candidate files of the landing
#: mode (see :func:`replay_verdicts`).
CANDIDATE_SCHEMA: Final = (
    "sender string, msg_id string, received_at double, auth_code int, source_file string, "
    "line_no long, file_key string, task_id string")
CANDIDATE_COLUMNS: Final = ("sender", "msg_id", "received_at", "auth_code", "source_file",
                            "line_no", "file_key", "task_id")
#: Optional input column: a row with a non-null ``passthrough`` (and null ``sender`` and
#: ``msg_id``) is not a candidate; it comes out unchanged, in the same column, with
#: ``exact`` true and ``changed`` false. It lets a stream carry the other rows of its
#: landing pass through the one stateful operator (the landing runs once per batch).
PASSTHROUGH: Final = "passthrough"

#: Output rows of :func:`replay_verdicts` (see the module docstring).
VERDICT_SCHEMA: Final = (
    "sender string, msg_id string, file_key string, source_file string, line_no long, "
    "received_at double, code int, duplicate_of double, changed boolean, exact boolean, "
    "auth_code int, passthrough string")
VERDICT_COLUMNS: Final = ("sender", "msg_id", "file_key", "source_file", "line_no",
                          "received_at", "code", "duplicate_of", "changed", "exact",
                          "auth_code", "passthrough")

#: A bucket's state: its keys as one Arrow table (a row per key: when ``expire`` will have
#: dropped it whole, and its ReplayKeyState; :func:`encode_bucket`) in base64, cut into
#: pieces of :data:`CHUNK_CHARS` held in a ``ListState`` (a single multi-MB ``ValueState``
#: breaks the state server's pickle framing, and a list of one row per key makes RocksDB
#: merge the list element by element, far too slow for a large bucket: docs/speed.md,
#: *Figures behind the code*), and a ``ValueState`` with the bucket's one timer.
STATE_SCHEMA: Final = "chunk string"
CHUNK_CHARS: Final = 256 * 1024
#: Starts a bucket's state text as checkpoints written before :data:`ARROW_MARK` hold it
#: (its keys' JSON object, zlib-compressed, in base64); JSON never starts so.
COMPRESSED_MARK: Final = "z1:"
#: Starts a bucket's state text (:func:`encode_bucket`: an Arrow IPC stream, in base64).
ARROW_MARK: Final = "a1:"
STATE_NAME: Final = "replay"
TIMER_SCHEMA: Final = "timer_ms long"
TIMER_NAME: Final = "replay_timer"
#: State is held per bucket of keys (a hash of ``(sender, msg_id)``): one state read and
#: one write per bucket and micro-batch instead of several per key, whose cost per key in
#: PySpark 4.0 kept a stream keyed per key slow (docs/speed.md, *Figures behind the code*).
DEFAULT_BUCKETS: Final = 32
BUCKET_COLUMN: Final = "_replay_bucket"
#: The group of the rows that are not candidates (passed through).
PASSTHROUGH_BUCKET: Final = -1
#: ``passthrough`` JSON of the row each bucket emits per call: how many keys it holds.
STATE_KEYS_KIND: Final = "state_keys"

# a NamedTuple's own __new__ costs more on this hot path (docs/speed.md, *Figures behind
# the code*)
_new = tuple.__new__
#: A record's sort key: per key ``(sender, msg_id)``, in fold order (received_at,
#: source_file, line_no).
_FOLD_ORDER = itemgetter(0, 1, 2, 3, 4)

#: Column the watermark is defined on, dropped again before grouping (see module docstring).
_WATERMARK_COLUMN: Final = "_replay_watermark_time"

def configure_state_store(spark: SparkSession) -> None:
    """Set the Spark settings :func:`replay_verdicts` needs, before its query starts.

    The RocksDB state store provider; a query's checkpoint records the provider it started
    with, so a restarted query keeps it. Changelog checkpointing: a micro-batch's commit
    writes the state's changes, not a snapshot of the store (snapshots are taken in the
    background); Spark reads checkpoints written either way, so it may be turned on for a
    query that started without it.

    Example::

        configure_state_store(spark)
        assert spark.conf.get(STATE_STORE_PROVIDER_CONF) == ROCKSDB_PROVIDER
    """
    spark.conf.set(STATE_STORE_PROVIDER_CONF, ROCKSDB_PROVIDER)
    spark.conf.set(CHANGELOG_CONF, "true")


def replay_verdicts(candidates_df: DataFrame, window: float, lateness: float,
                    buckets: int | Sequence[int] = DEFAULT_BUCKETS,
                    candidates_dir: str | None = None) -> DataFrame:
    """Replay verdicts of a stream of candidates (:data:`CANDIDATE_SCHEMA` columns; others
    are ignored), as a stream of :data:`VERDICT_SCHEMA` rows (append mode).

    **Landing mode** (``candidates_dir`` given): the stream's counterpart of the batch
    job's :func:`snap_spark.pipeline.land.fold_landed`, for a stream whose rows come from
    the landing pass. Each bucket writes the batch's candidates as one Parquet file under
    ``candidates_dir`` (:data:`snap_spark.pipeline.land.CANDIDATE_SCHEMA`), and only
    ``passthrough`` rows come out, holding :data:`~snap_spark.pipeline.land.LANDED_SCHEMA`
    rows as JSON: the ``span`` of each file written (earliest receipt time, count,
    location), a ``duplicate`` row (detail naming the accepted line when the state still
    holds it) for each candidate the state makes a 2006, and an ``inexact`` row (``sender``,
    ``msg_id``) for each candidate it cannot decide exactly. Rows of earlier batches whose
    verdict changes are not reported: the caller decides the batch's keys against the
    lake, which holds those rows (:mod:`snap_spark.pipeline.replay_store`). A micro-batch
    of 200k candidates sends its driver a few thousand rows instead of 200k.

    ``window`` is the replay window (seconds of receipt time), the same for the whole life
    of a checkpoint. ``lateness`` (seconds) is how far behind the newest receipt time seen
    a candidate may arrive and still be decided exactly; later ones come out
    ``exact = false`` (see the module docstring for what the caller then does). Every input
    row gets exactly one ``changed = false`` output row; a row offered twice (a file landed
    again) is a second copy to the rule, so sources must offer each line once.

    The only watermark should be the one set here: columns other than the candidate ones
    are dropped before grouping (a watermark column reaching the operator would make Spark
    drop late rows), but a watermark defined upstream still joins Spark's global watermark
    (the minimum by default) and so holds state longer.

    ``buckets`` is the number of buckets (ids ``0 .. buckets - 1``) or the bucket ids
    themselves (distinct, non-negative; :func:`state_buckets` chooses them for a new
    checkpoint); either is fixed for the life of a checkpoint.

    Raises:
        ValueError: ``window`` or ``lateness`` is negative, NaN or infinite; no bucket, or
            bucket ids repeated or negative.

    Example::

        candidates = spark.readStream.schema(CANDIDATE_SCHEMA).json("in/")
        out = replay_verdicts(candidates, window=120.0, lateness=600.0)
        assert out.columns == list(VERDICT_COLUMNS)
    """
    for name, value in (("window", window), ("lateness", lateness)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    ids = list(range(buckets)) if isinstance(buckets, int) else [int(b) for b in buckets]
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise ValueError(f"buckets must be at least 1, or distinct ids >= 0, got {buckets!r}")
    index = F.pmod(F.xxhash64("sender", "msg_id"), F.lit(len(ids)))
    if ids != list(range(len(ids))):  # the index picks one of the ids
        index = F.element_at(F.array(*[F.lit(i) for i in ids]), (index + 1).cast("int"))
    delay_ms = math.ceil(lateness * 1000)
    if PASSTHROUGH not in candidates_df.columns:
        candidates_df = candidates_df.withColumn(PASSTHROUGH, F.lit(None).cast("string"))
    watermarked = (
        candidates_df.select(*CANDIDATE_COLUMNS, PASSTHROUGH)
        .withColumn(_WATERMARK_COLUMN, F.timestamp_seconds("received_at"))
        .withWatermark(_WATERMARK_COLUMN, f"{delay_ms} milliseconds")
        # Spark would drop rows behind the watermark before the processor if the column
        # carrying it reached the operator: the watermark must not filter, only advance.
        .drop(_WATERMARK_COLUMN)
    )
    bucketed = watermarked.withColumn(
        BUCKET_COLUMN,
        F.when(F.col("sender").isNull() & F.col("msg_id").isNull(), F.lit(PASSTHROUGH_BUCKET))
        .otherwise(index).cast("int"))
    # Spark runs the processor's ``init`` in a new interpreter on the driver at every
    # query start; the stream job has a warm one do it in a local session, by calling this
    # inside snap_spark.runtime.preinit.warm_preinit
    return bucketed.groupBy(BUCKET_COLUMN).transformWithStateInPandas(
        statefulProcessor=ReplayStateProcessor(window, candidates_dir),
        outputStructType=VERDICT_SCHEMA,
        outputMode="Append",
        timeMode="EventTime",
    )


#: File in a query's checkpoint folder that records its replay state's bucket ids.
LAYOUT_FILE: Final = "snap_spark_state.json"
#: Buckets per state partition of a new checkpoint: one. Each bucket costs a state read, a
#: state write, a timer and a candidates file per micro-batch, and a micro-batch of a few
#: thousand lines touches every bucket whatever their number; the ids are chosen so that
#: each partition holds the same number, so keys spread evenly over the partitions however
#: few there are. Four per partition (before session 20) made the bench's latency measure
#: micro-batches longer (docs/speed.md, *Figures behind the code*).
BUCKETS_PER_PARTITION: Final = 1


def state_buckets(checkpoint: str, partitions: int) -> list[int]:
    """The bucket ids of the replay state of the query checkpointed at ``checkpoint``
    (pass them to :func:`replay_verdicts`).

    - As :data:`LAYOUT_FILE` in the checkpoint records them.
    - A checkpoint whose query started before they were recorded keeps the layout it began
      with: ``0 .. DEFAULT_BUCKETS - 1``.
    - A new checkpoint gets :data:`BUCKETS_PER_PARTITION` ids per state partition, chosen
      so that each of the ``partitions`` holds as many (Spark places a bucket by its hash
      modulo the partitions, :func:`spark_partition`; ids ``0 .. n - 1`` would fall
      unevenly), and records them before the query starts.

    Example::

        ids = state_buckets("/ckpt", partitions=2)   # a new checkpoint
        assert len(ids) == 2 and ids == state_buckets("/ckpt", partitions=64)
    """
    import json

    from snap_spark.files import storage

    location = storage.join(checkpoint, LAYOUT_FILE)
    if storage.exists(location):
        with storage.open_input(location) as handle:
            return [int(i) for i in json.loads(handle.read())["bucket_ids"]]
    if storage.exists(storage.join(checkpoint, "metadata")):
        return list(range(DEFAULT_BUCKETS))
    per_partition = BUCKETS_PER_PARTITION
    taken: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for bucket in range(64 * per_partition * partitions):
        chosen = taken[spark_partition(bucket, partitions)]
        if len(chosen) < per_partition:
            chosen.append(bucket)
    ids = sorted(i for chosen in taken.values() for i in chosen)
    if len(ids) != per_partition * partitions:  # no id hashes to some partition (never seen)
        ids = list(range(per_partition * partitions))
    storage.make_dirs(checkpoint)
    filesystem, path = storage.resolve(location)
    with filesystem.open_output_stream(path) as out:
        out.write(json.dumps({"bucket_ids": ids, "partitions": partitions}).encode())
    return ids


_MASK32: Final = 0xFFFFFFFF


def _rotl32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK32


def spark_partition(value: int, partitions: int) -> int:
    """The partition Spark's hash partitioning gives an ``int`` grouping key among
    ``partitions``: ``pmod(hash(value), partitions)``, where ``hash`` is Spark's 32-bit
    Murmur3 of a 4-byte integer with seed 42 (its ``hash`` function and its shuffle's
    ``HashPartitioning``). Computed here, a new checkpoint's buckets are chosen without a
    Spark job; tests/stream/test_replay_state.py compares it with Spark's own.

    Examples:
        >>> [spark_partition(b, 2) for b in range(6)]
        [1, 1, 0, 1, 0, 0]
    """
    if not -(2 ** 31) <= value < 2 ** 31:
        raise ValueError(f"not a 32-bit integer: {value}")
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    k1 = (value & _MASK32) * 0xCC9E2D51 & _MASK32
    k1 = _rotl32(k1, 15) * 0x1B873593 & _MASK32
    h1 = _rotl32(42 ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _MASK32
    h1 ^= 4  # the input's length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK32
    h1 ^= h1 >> 16
    signed = h1 - (1 << 32) if h1 >= 1 << 31 else h1
    return signed % partitions


def state_rows(progress: Mapping[str, Any] | None) -> int | None:
    """Rows in the stateful operators' state after the batch ``progress`` describes
    (``StreamingQuery.lastProgress`` or an entry of ``recentProgress``), ``None`` when there
    is no progress yet or the query has no stateful operator.

    Examples:
        >>> state_rows({"stateOperators": [{"numRowsTotal": 7}]})
        7
        >>> state_rows(None) is None, state_rows({"stateOperators": []}) is None
        (True, True)
    """
    if not progress:
        return None
    operators = progress.get("stateOperators") or []
    if not operators:
        return None
    return sum(int(op["numRowsTotal"]) for op in operators)


def expiry_ms(state: ReplayKeyState, window: float) -> int:
    """Event time (epoch ms) of the timer after which ``expire`` empties ``state``: just
    past ``max(newest candidate, anchor) + window`` (the margin absorbs float rounding).

    Examples:
        >>> s = fold_candidates(EMPTY_STATE, [ReplayCandidate(10.0, None)], 120.0).state
        >>> expiry_ms(s, 120.0)
        130001
        >>> fold_candidates(s, [], 120.0, watermark=130001 / 1000).state.is_empty
        True
    """
    candidates, newest = state.candidates, state.anchor
    if candidates and (newest is None or candidates[-1].received_at > newest):
        newest = candidates[-1].received_at
    if newest is None:
        raise ValueError("an empty state has no expiry")
    return math.ceil((newest + window) * 1000) + 1


@functools.cache
def _bucket_schema() -> pa.Schema:
    """The Arrow schema of a stored bucket (:func:`encode_bucket`): a row per key."""
    import pyarrow as pa

    return pa.schema([
        pa.field("key", pa.string(), False),       # "sender\nmsg_id"
        pa.field("expiry_ms", pa.int64(), False),  # when expire will have dropped it whole
        # A key whose state is one candidate, not a duplicate, no anchor (most keys: the
        # state fresh_entry builds) is held in these columns ...
        pa.field("received_at", pa.float64()),
        pa.field("code", pa.int32()),
        pa.field("file_key", pa.string()),
        pa.field("source_file", pa.string()),
        pa.field("line_no", pa.int64()),
        pa.field("horizon", pa.float64()),
        # ... any other key as the JSON of its plain state (the columns above null).
        pa.field("plain", pa.string()),
    ])


_INT32 = range(-(2 ** 31), 2 ** 31)
_INT64 = range(-(2 ** 63), 2 ** 63)


def _columns_of(entry: Sequence[Any]) -> tuple[Any, ...] | None:
    """``(received_at, code, file_key, source_file, line_no, horizon)`` of a key's entry
    ``[expiry_ms, plain]`` whose state the bucket's columns hold exactly (see
    :func:`_bucket_schema`), else ``None``."""
    plain = entry[1]
    if not isinstance(plain, dict) or plain.keys() != {"candidates", "anchor", "horizon"}:
        return None
    rows, horizon = plain["candidates"], plain["horizon"]
    if plain["anchor"] is not None or not isinstance(rows, list) or len(rows) != 1 \
            or not (horizon is None or type(horizon) is float):
        return None
    row = rows[0]
    if not isinstance(row, list) or len(row) != 5:
        return None
    received_at, code, ref, order, duplicate_of = row
    if duplicate_of is not None or type(received_at) is not float \
            or not (code is None or (type(code) is int and code in _INT32)) \
            or not isinstance(ref, list) or not isinstance(order, list) \
            or len(ref) != 2 or len(order) != 2:
        return None
    file_key, line_no = ref
    source_file, order_line = order
    if type(line_no) is not int or type(order_line) is not int or line_no != order_line \
            or line_no not in _INT64 or not (file_key is None or type(file_key) is str) \
            or not (source_file is None or type(source_file) is str):
        return None
    return received_at, code, file_key, source_file, line_no, horizon


def table_of_keys(keys: Mapping[str, Sequence[Any]]) -> pa.Table:
    """A bucket's keys (``"sender\\nmsg_id"`` -> ``[expiry_ms, plain state]``) as its
    Arrow table (:func:`_bucket_schema`); :func:`keys_of_table` gives them back.

    Examples:
        >>> one = [130001, {"candidates": [[10.0, None, ["k", 3], ["f", 3], None]],
        ...                 "anchor": None, "horizon": 5.0}]
        >>> two = [140001, {"candidates": [], "anchor": 20.0, "horizon": 9.0}]
        >>> table = table_of_keys({"s\\nm1": one, "s\\nm2": two})
        >>> table.column("plain").to_pylist()[0] is None, table.column("line_no").to_pylist()
        (True, [3, None])
        >>> keys_of_table(table) == {"s\\nm1": one, "s\\nm2": two}
        True
    """
    import pyarrow as pa

    columns: list[list[Any]] = [[] for _ in range(9)]
    for name, entry in keys.items():
        simple = _columns_of(entry)
        columns[0].append(name)
        columns[1].append(int(entry[0]))
        if simple is None:
            for column in columns[2:8]:
                column.append(None)
            columns[8].append(orjson.dumps(entry[1]).decode())
        else:
            for column, value in zip(columns[2:8], simple, strict=True):
                column.append(value)
            columns[8].append(None)
    schema = _bucket_schema()
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema,
                                                                      strict=True)],
                                schema=schema)


def keys_of_table(table: pa.Table) -> dict[str, list[Any]]:
    """The keys a bucket's table holds, each ``[expiry_ms, plain state]`` (the plain state
    as :meth:`~snap_spark.protocol.replay.ReplayKeyState.to_plain` gives it)."""
    out: dict[str, list[Any]] = {}
    names = _bucket_schema().names
    for values in zip(*(table.column(n).to_pylist() for n in names), strict=True):
        key, expiry, received_at, code, file_key, source_file, line_no, horizon, plain = values
        if plain is not None:
            out[key] = [expiry, orjson.loads(plain)]
        else:
            out[key] = [expiry, {"candidates": [[received_at, code, [file_key, line_no],
                                                 [source_file, line_no], None]],
                                 "anchor": None, "horizon": horizon}]
    return out


def encode_bucket(keys: Mapping[str, Any] | pa.Table) -> str:
    """A bucket's keys (a table of :func:`_bucket_schema`, or the keys as
    :func:`table_of_keys` takes them) as the text its state holds: an Arrow IPC stream,
    zstd-compressed, in base64 after the :data:`ARROW_MARK`.

    The bucket is written whole every micro-batch that touches it, through the state
    server. As a table, keys this batch did not touch are carried over without becoming
    Python objects, and a new key seen once is added as a row without becoming one either
    (on a bucket of 100k such keys it encodes much faster than the zlib-compressed JSON
    object of checkpoints written before, which :func:`bucket_table` still reads, and makes
    2.1 MB of text against about 6 MB; docs/speed.md, *Figures behind the code*).

    Examples:
        >>> one = [130001, {"candidates": [[10.0, None, ["k", 3], ["f", 3], None]],
        ...                 "anchor": None, "horizon": 5.0}]
        >>> text = encode_bucket({"s\\nm": one})
        >>> text.startswith(ARROW_MARK), decode_bucket(text) == {"s\\nm": one}
        (True, True)
    """
    import pyarrow as pa

    table = keys if isinstance(keys, pa.Table) else table_of_keys(keys)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, _bucket_schema(),
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table.cast(_bucket_schema()))
    return ARROW_MARK + base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def bucket_table(text: str) -> pa.Table:
    """The table of the keys a bucket's state text holds: :func:`encode_bucket`'s text,
    or what checkpoints written before it hold (the keys' JSON object, compressed after
    :data:`COMPRESSED_MARK`, or plain)."""
    import pyarrow as pa

    if text.startswith(ARROW_MARK):
        table: pa.Table = pa.ipc.open_stream(
            base64.b64decode(text[len(ARROW_MARK):])).read_all()
        return table
    return table_of_keys(_decode_json_bucket(text))


def decode_bucket(text: str) -> dict[str, Any]:
    """The keys a bucket's state text holds, each ``[expiry_ms, plain state]``, whichever
    form it was stored in (see :func:`bucket_table`).

    Examples:
        >>> decode_bucket('{"key": [1, null]}'), decode_bucket("")
        ({'key': [1, None]}, {})
    """
    if text.startswith(ARROW_MARK):
        return keys_of_table(bucket_table(text))
    return _decode_json_bucket(text)


def _decode_json_bucket(text: str) -> dict[str, Any]:
    """A bucket stored as a JSON object (checkpoints written before :data:`ARROW_MARK`)."""
    if not text:
        return {}
    if text.startswith(COMPRESSED_MARK):
        keys: dict[str, Any] = orjson.loads(
            zlib.decompress(base64.b64decode(text[len(COMPRESSED_MARK):])))
    else:
        keys = orjson.loads(text)
    return keys


def _watermark(timer_values: TimerValues) -> float | None:
    """The batch's event-time watermark in seconds, ``None`` before the first one."""
    ms = timer_values.getCurrentWatermarkInMs()
    return ms / 1000 if ms > 0 else None


def _row_id(ref: Any) -> tuple[str, int]:
    """``(file_key, line_no)`` of a candidate's ``ref``."""
    file_key, line_no = ref
    return str(file_key), int(line_no)


def _split_batch(batch: pa.Table, stored: pa.Table, watermark: float | None, window: float,
                 landing: bool) -> tuple[pa.Table | None, list[tuple[Any, ...]]]:
    """A bucket's batch split into the rows kept as Arrow (landing mode: the new keys it
    brings once, on time, as state rows: :func:`_fresh_mask`, :func:`_fresh_rows`) and the
    records of the other rows, sorted per key in fold order so that no step changes a row
    of this batch."""
    import pyarrow.compute as pc

    fresh: pa.Table | None = None
    rest = batch
    if landing:
        mask = _fresh_mask(batch, stored, watermark)
        fresh = _fresh_rows(batch.filter(mask), watermark, window)
        rest = batch.filter(pc.invert(mask))
    records = list(zip(*(rest.column(c).to_pylist() for c in _RECORD_COLUMNS),
                       strict=True))
    records.sort(key=_FOLD_ORDER)
    return fresh, records


def _step_records(records: list[tuple[Any, ...]], keys: dict[str, Any],
                  watermark: float | None, window: float, landing: bool
                  ) -> tuple[list[tuple[str, str, ReplayCandidate, float | None, bool, bool]],
                             dict[tuple[str, int], str | None]]:
    """Step each key of ``records`` (sorted per key) from its entry in ``keys``, which is
    updated in place (dropped when its state empties). Returns the rows to report (all of
    them, or in landing mode only this batch's 2006 and inexact rows) and, in landing
    mode, the accepted line each 2006 repeats when still kept."""
    out: list[tuple[str, str, ReplayCandidate, float | None, bool, bool]] = []
    names: dict[tuple[str, int], str | None] = {}
    start, count = 0, len(records)
    while start < count:
        sender, msg_id = records[start][0], records[start][1]
        end = start + 1
        while end < count and records[end][0] == sender and records[end][1] == msg_id:
            end += 1
        name = f"{sender}\n{msg_id}"
        entry = keys.get(name)
        if entry is None and end == start + 1:
            # A key seen once: its entry built directly; step_key gives the same
            # (tests/stream/test_replay_state.py, tests/unit/test_replay.py).
            entry = fresh_entry(records[start], watermark, window)
            if entry is not None:
                keys[name] = entry
                if not landing:  # landing mode reports only 2006 and inexact rows
                    out.append((sender, msg_id, _candidate(records[start]), None, False,
                                True))
                start = end
                continue
        state = EMPTY_STATE if entry is None else ReplayKeyState.from_plain(entry[1])
        state, rows_out = step_key(state, records[start:end], watermark, window)
        for candidate, seen, changed, exact in rows_out:
            if landing:
                # landing mode reports only this batch's 2006 and inexact rows
                if changed or (seen is None and exact):
                    continue
                if seen is not None:
                    names[_row_id(candidate.ref)] = _accepted_name(state, seen)
            out.append((sender, msg_id, candidate, seen, changed, exact))
        if state.is_empty:
            keys.pop(name, None)
        else:
            keys[name] = [expiry_ms(state, window), state.to_plain()]
        start = end
    return out, names


class ReplayStateProcessor(StatefulProcessor):
    """``transformWithStateInPandas`` processor over buckets of ``(sender, msg_id)`` keys:
    holds each key's :class:`~snap_spark.protocol.replay.ReplayKeyState`, steps each key's
    candidates with :func:`~snap_spark.protocol.replay.fold_candidates` (expiring the
    key's state at the watermark first) and deletes empty keys (see the module docstring
    for state and output).

    With ``candidates_dir`` it runs in landing mode (see :func:`replay_verdicts`).

    Examples:
        >>> ReplayStateProcessor(120.0).window
        120.0
    """

    def __init__(self, window: float, candidates_dir: str | None = None) -> None:
        self.window = float(window)
        self.candidates_dir = candidates_dir

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._keys: ListState = handle.getListState(STATE_NAME, STATE_SCHEMA)
        self._timer: ValueState = handle.getValueState(TIMER_NAME, TIMER_SCHEMA)

    def close(self) -> None:
        pass

    def _load_table(self) -> tuple[pa.Table | None, int | None]:
        """The bucket's stored table (:func:`_bucket_schema`; ``None`` when it holds
        nothing) and its timer."""
        if not self._timer.exists():
            return None, None
        stored = self._timer.get()
        timer_ms = None if stored is None or stored[0] is None else int(stored[0])
        return bucket_table("".join(row[0] for row in self._keys.get())), timer_ms

    def _load(self) -> tuple[dict[str, Any], int | None]:
        """The bucket's keys (``"sender\\nmsg_id"`` -> ``[expiry_ms, plain state]``) and
        timer."""
        table, timer_ms = self._load_table()
        return ({} if table is None else keys_of_table(table)), timer_ms

    def _save(self, table: pa.Table, timer_ms: int | None) -> None:
        """Store the bucket (or delete it when empty) with one timer at its first expiry."""
        import pyarrow.compute as pc

        if table.num_rows == 0:
            if timer_ms is not None:
                self._handle.deleteTimer(timer_ms)
            self._keys.clear()
            self._timer.clear()
            return
        wanted = int(pc.min(table.column("expiry_ms")).as_py())
        if wanted != timer_ms:
            if timer_ms is not None:
                self._handle.deleteTimer(timer_ms)
            self._handle.registerTimer(wanted)
        text = encode_bucket(table)
        self._keys.put([(text[i:i + CHUNK_CHARS],) for i in range(0, len(text), CHUNK_CHARS)])
        self._timer.update((wanted,))

    def handleInputRows(
        # pandas frames: the processor runs in pandas mode (PySpark 4.2's stubs also allow
        # the Row mode's rows, so the parameter takes the union's supertype)
        self, key: Any, rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        (bucket,) = key
        if bucket is None or int(bucket) == PASSTHROUGH_BUCKET:
            yield from _passed_through(rows)
            return
        # The step allocates a few small objects per key, and the bucket's state holds all
        # of them at once: the cyclic collector, left on, rescans that growing heap again
        # and again, which makes the step much slower on a large bucket (docs/speed.md,
        # *Figures behind the code*). Reference counting frees what the step drops; the
        # collector runs again after it.
        with gc_paused():
            out_frames = self._step_bucket(int(bucket), rows, timerValues)
        yield from out_frames

    def _step_bucket(self, bucket: int, rows: Iterator[pd.DataFrame],
                     timerValues: TimerValues) -> list[pd.DataFrame]:
        """The output frames of one bucket's rows in a micro-batch (see
        :meth:`handleInputRows`), its state loaded, stepped and saved.

        Only the keys the batch touches become Python objects: the stored keys it does not
        touch stay Arrow rows, and in landing mode so do the new keys it brings once, on
        time (:func:`_fresh_mask`, :func:`_fresh_rows`: most keys of a stream; landing
        mode reports nothing for them). Every other key steps through :func:`step_key`.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        frames = list(rows)
        batch = _batch_table(frames)
        watermark = _watermark(timerValues)
        stored, timer_ms = self._load_table()
        stored = _unexpired(stored, watermark)
        landing, window = self.candidates_dir is not None, self.window
        fresh, records = _split_batch(batch, stored, watermark, window, landing)
        touched = list(dict.fromkeys(f"{r[0]}\n{r[1]}" for r in records))
        touched_set = pa.array(touched, pa.string())
        in_touched = pc.is_in(stored.column("key"), value_set=touched_set)
        keys = keys_of_table(stored.filter(in_touched))
        kept = stored.filter(pc.invert(in_touched))
        out, names = _step_records(records, keys, watermark, window, landing)
        parts = [kept, table_of_keys(keys)]
        if fresh is not None:
            parts.append(fresh)
        table = pa.concat_tables(parts)
        self._save(table, timer_ms)
        if self.candidates_dir is None:
            result = _verdict_frame(out)
        else:
            result = _landing_frame(out, names, self.window,
                                    _write_bucket(self.candidates_dir, batch))
        return [result, _state_keys_frame(bucket, table.num_rows)]

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        (bucket,) = key
        with gc_paused():
            stored, timer_ms = self._load_table()
            table = _unexpired(stored, _watermark(timerValues))
            # Spark deletes the timer that fired; only a different one is still pending.
            pending = timer_ms if timer_ms != expiredTimerInfo.getExpiryTimeInMs() else None
            self._save(table, pending)
            count = table.num_rows
        yield _state_keys_frame(int(bucket), count)


#: A record of the batch (see :func:`step_key`), as its table's columns give it.
_RECORD_COLUMNS: Final = ("sender", "msg_id", "received_at", "source_file", "line_no",
                          "auth_code", "file_key")
#: Receipt times (seconds) whose expiry the bucket's ``int64`` column holds with room to
#: spare; a new key received outside them steps through the general path.
_FRESH_RECEIVED_LIMIT: Final = 1e12


def _batch_table(frames: list[pd.DataFrame]) -> pa.Table:
    """A bucket's candidates of the batch as one table of :data:`CANDIDATE_COLUMNS`, in
    the candidates' types (``auth_code`` int32: a frame's column of integers that holds a
    null comes as float64, and PySpark 4.2 gives a key's rows in several frames, typed
    apart)."""
    import pyarrow as pa

    from snap_spark.pipeline.land import CANDIDATE_SCHEMA

    schema = pa.schema([CANDIDATE_SCHEMA.field("code" if c == "auth_code" else c).with_name(c)
                        for c in CANDIDATE_COLUMNS])
    if not frames:
        return schema.empty_table()
    return pa.concat_tables(
        pa.Table.from_pandas(frame[list(CANDIDATE_COLUMNS)], schema=schema,
                             preserve_index=False)
        for frame in frames)


def _unexpired(table: pa.Table | None, watermark: float | None) -> pa.Table:
    """The stored keys ``expire`` would not drop whole at ``watermark`` (an entry
    ``[expiry_ms, ...]`` is dropped when ``expiry_ms <= watermark * 1000``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table is None:
        return _bucket_schema().empty_table()
    if watermark is None or table.num_rows == 0:
        return table
    # an integer is <= the float limit exactly when it is <= the limit's floor
    limit = math.floor(watermark * 1000)
    if limit >= 2 ** 63:
        return table.slice(0, 0)
    if limit < -(2 ** 63):
        return table
    return table.filter(pc.greater(table.column("expiry_ms"), pa.scalar(limit, pa.int64())))


def _fresh_mask(batch: pa.Table, stored: pa.Table, watermark: float | None) -> pa.Array:
    """The rows of the batch whose key the bucket does not hold and the batch brings once,
    received at or after ``watermark`` (and within :data:`_FRESH_RECEIVED_LIMIT`): the rows
    :func:`fresh_entry` takes, which :func:`_fresh_rows` adds without Python objects."""
    import pyarrow.compute as pc

    from snap_spark.pipeline.land import repeated_values, replay_keys

    keys = replay_keys(batch)
    received = batch.column("received_at")
    mask = pc.and_(pc.is_valid(keys), pc.is_valid(batch.column("line_no")))
    mask = pc.and_(mask, pc.invert(pc.is_in(keys, value_set=repeated_values(keys))))
    if stored.num_rows:
        mask = pc.and_(mask, pc.invert(pc.is_in(
            keys, value_set=stored.column("key").combine_chunks())))
    mask = pc.and_(mask, pc.and_(pc.greater_equal(received, 0.0),
                                 pc.less(received, _FRESH_RECEIVED_LIMIT)))
    if watermark is not None:
        mask = pc.and_(mask, pc.greater_equal(received, watermark))
    return pc.fill_null(mask, False).combine_chunks()


def _fresh_rows(rows: pa.Table, watermark: float | None, window: float) -> pa.Table:
    """The bucket rows of new keys each seen once, on time (:func:`_fresh_mask`): what
    :func:`fresh_entry` gives each, as :func:`table_of_keys` stores it, without a Python
    object per key. The expiry is :func:`expiry_ms` computed in the same IEEE steps."""
    import pyarrow as pa
    import pyarrow.compute as pc

    received = rows.column("received_at")
    expiry = pc.add(pc.cast(pc.ceil(pc.multiply(pc.add(received, window), 1000.0)),
                            pa.int64()), 1)
    n = rows.num_rows
    from snap_spark.pipeline.land import replay_keys

    return pa.Table.from_arrays([
        replay_keys(rows),
        expiry,
        received,
        rows.column("auth_code"),
        rows.column("file_key"),
        rows.column("source_file"),
        rows.column("line_no"),
        pa.repeat(pa.scalar(watermark, pa.float64()), n),
        pa.nulls(n, pa.string()),
    ], schema=_bucket_schema())


def _accepted_name(state: ReplayKeyState, seen: float) -> str | None:
    """``line N of FILE`` of the accepted candidate received at ``seen``, if still kept."""
    for candidate, duplicate_of in zip(state.candidates, state.duplicate_of, strict=True):
        if candidate.received_at == seen and duplicate_of is None \
                and candidate.auth_code is None:
            source_file, line_no = candidate.order
            return line_name(None if source_file is None else str(source_file), int(line_no))
    return None


def _write_bucket(folder: str, batch: pa.Table) -> dict[str, Any]:
    """Write a bucket's candidates of the batch (:func:`_batch_table`) as one Parquet file
    in ``folder`` (:data:`snap_spark.pipeline.land.CANDIDATE_SCHEMA`); its ``span`` row."""
    import pyarrow.compute as pc

    from snap_spark.pipeline.land import write_candidates

    table = batch.rename_columns(["code" if c == "auth_code" else c for c in batch.column_names])
    return {"kind": "span", "received_at": pc.min(table.column("received_at")).as_py(),
            "lines": table.num_rows, "info": write_candidates(folder, table)}


def _landing_frame(rows: list[tuple[str, str, ReplayCandidate, float | None, bool, bool]],
                   names: Mapping[tuple[str, int], str | None], window: float,
                   span: dict[str, Any]) -> pd.DataFrame:
    """Landing-mode output of a bucket (see :func:`replay_verdicts`): its ``span``, then a
    ``duplicate`` row per 2006 and an ``inexact`` row per row not decided exactly."""
    texts = [orjson.dumps(span).decode()]
    for sender, msg_id, c, seen, changed, exact in rows:
        if changed:
            continue
        file_key, line_no = _row_id(c.ref)
        if seen is not None:
            texts.append(orjson.dumps({
                "kind": "duplicate", "source_file": c.order[0],
                "line_no": line_no, "file_key": file_key,
                "code": candidate_code(c.auth_code, duplicate=True),
                "prior_code": c.auth_code,
                "info": duplicate_detail(seen, c.received_at, window,
                                         names.get((file_key, line_no)))}).decode())
        if not exact:
            texts.append(orjson.dumps({"kind": "inexact", "sender": sender,
                                       "msg_id": msg_id}).decode())
    import pandas as pd

    frame = pd.DataFrame({name: [None] * len(texts) for name in VERDICT_COLUMNS},
                         columns=list(VERDICT_COLUMNS))
    frame["changed"] = False
    frame["exact"] = True
    frame[PASSTHROUGH] = texts
    return frame


def step_key(state: ReplayKeyState, records: list[tuple[Any, ...]], watermark: float | None,
             window: float) -> tuple[ReplayKeyState, list[tuple[ReplayCandidate,
                                                                float | None, bool, bool]]]:
    """Step one key's candidates of a batch (in fold order) through its state: the new
    state and the output rows ``(candidate, duplicate_of, changed, exact)``, the batch's
    rows first, then the rows of earlier batches whose verdict moved.

    ``records`` are ``(sender, msg_id, received_at, source_file, line_no, auth_code,
    file_key)``. The protocol's :func:`~snap_spark.protocol.replay.fold_candidates` does
    the work, expiring the state at ``watermark`` first.

    Examples:
        >>> state, rows = step_key(EMPTY_STATE, [("s", "m", 10.0, "f", 3, None, "k")], 5.0,
        ...                        120.0)
        >>> [(c.ref, seen, changed, exact) for c, seen, changed, exact in rows]
        [(['k', 3], None, False, True)]
        >>> state.to_plain()
        {'candidates': [[10.0, None, ['k', 3], ['f', 3], None]], 'anchor': None, 'horizon': 5.0}
    """
    candidates = [_candidate(record) for record in records]
    state, decisions, changed, _ = fold_candidates(state, candidates, window,
                                                   watermark=watermark)
    out = [(c, d.duplicate_of, False, d.exact)
           for c, d in zip(candidates, decisions, strict=True)]
    if changed:
        out.extend((v.candidate, v.duplicate_of, True, True) for v in changed)
    return state, out


def fresh_entry(record: tuple[Any, ...], watermark: float | None, window: float
                ) -> list[Any] | None:
    """A bucket's entry (``[expiry_ms, plain state]``) for a key without state that one
    ``record`` of the batch brings (see :func:`step_key`), built directly: equal to
    ``[expiry_ms(s, window), s.to_plain()]`` for ``s = fresh_state(_candidate(record),
    watermark)``, without the objects between (a hot path: most keys of a stream).
    ``None`` when the record is received before ``watermark`` (the general fold decides it).

    Examples:
        >>> record = ("s", "m", 10.0, "f", 3, None, "k")
        >>> expiry, plain = fresh_entry(record, 5.0, 120.0)
        >>> expiry, plain["candidates"], plain["horizon"]
        (130001, [[10.0, None, ['k', 3], ['f', 3], None]], 5.0)
        >>> from snap_spark.protocol.replay import fresh_state
        >>> state = fresh_state(_candidate(record), 5.0)
        >>> fresh_entry(record, 5.0, 120.0) == [expiry_ms(state, 120.0), state.to_plain()]
        True
        >>> fresh_entry(record, 11.0, 120.0) is None
        True
    """
    _s, _m, received_at, source_file, line_no, auth_code, file_key = record
    received_at = float(received_at)
    if watermark is not None and received_at < watermark:
        return None
    # pandas hands a nullable int column over as floats with NaN for null
    code = None if auth_code is None or auth_code != auth_code else int(auth_code)
    line = int(line_no)
    return [math.ceil((received_at + window) * 1000) + 1,
            {"candidates": [[received_at, code, [file_key, line], [source_file, line], None]],
             "anchor": None, "horizon": watermark}]


def _candidate(record: tuple[Any, ...]) -> ReplayCandidate:
    """The candidate of a record (see :func:`step_key`): ``ref`` ``[file_key, line_no]``,
    ``order`` ``(source_file, line_no)``."""
    _s, _m, received_at, source_file, line_no, auth_code, file_key = record
    # pandas hands a nullable int column over as floats with NaN for null
    code = None if auth_code is None or auth_code != auth_code else int(auth_code)
    line = int(line_no)
    return _new(ReplayCandidate, (float(received_at), code, [file_key, line], (source_file, line)))


def _verdict_frame(rows: list[tuple[str, str, ReplayCandidate, float | None, bool, bool]]
                   ) -> pd.DataFrame:
    """Output rows as a :data:`VERDICT_SCHEMA` frame.

    Built from plain tuples (a typed column per field costs four times as much); Arrow
    casts the inferred columns to the output schema (a ``code`` column of ints and nulls
    arrives as floats, cast back exactly).

    Examples:
        >>> c = ReplayCandidate(20.0, None, ["fk", 2], ("f", 2))
        >>> _verdict_frame([("a", "m", c, 10.0, False, True)]).to_dict("records")[0]["code"]
        2006
    """
    import pandas as pd

    return pd.DataFrame(
        [(sender, msg_id, c.ref[0], c.order[0], c.ref[1], c.received_at,  # type: ignore[index]
          candidate_code(c.auth_code, dup is not None), dup, changed, exact, c.auth_code,
          None)
         for sender, msg_id, c, dup, changed, exact in rows],
        columns=VERDICT_COLUMNS)


def _state_keys_frame(bucket: int, keys: int) -> pd.DataFrame:
    """The row a bucket reports its number of keys in (``passthrough`` JSON)."""
    row: dict[str, Any] = dict.fromkeys(VERDICT_COLUMNS)
    row.update(changed=False, exact=True,
               passthrough=orjson.dumps({"kind": STATE_KEYS_KIND, "bucket": bucket,
                                         "keys": keys}).decode())
    import pandas as pd

    return pd.DataFrame([row], columns=list(VERDICT_COLUMNS))


def state_keys(rows: Iterable[Mapping[str, Any]], known: dict[int, int] | None = None
               ) -> dict[int, int]:
    """Keys held per bucket, from the ``state_keys`` rows among output ``rows`` (parsed
    ``passthrough`` JSON objects), updating ``known`` (the last count of each bucket).

    Examples:
        >>> state_keys([{"kind": "state_keys", "bucket": 3, "keys": 12}], {3: 5, 4: 1})
        {3: 12, 4: 1}
    """
    counts = dict(known or {})
    for row in rows:
        if row.get("kind") == STATE_KEYS_KIND:
            counts[int(row["bucket"])] = int(row["keys"])
    return counts


def _passed_through(rows: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Rows that are not candidates (null key, ``passthrough`` set), out unchanged."""
    import pandas as pd

    for frame in rows:
        kept = frame[frame[PASSTHROUGH].notna()]
        if len(kept):
            yield pd.DataFrame({
                **{name: [None] * len(kept) for name in VERDICT_COLUMNS},
                "file_key": kept["file_key"].tolist(),
                "source_file": kept["source_file"].tolist(),
                "changed": [False] * len(kept), "exact": [True] * len(kept),
                PASSTHROUGH: kept[PASSTHROUGH].tolist(),
            }, columns=list(VERDICT_COLUMNS))
