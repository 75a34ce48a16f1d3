"""Check input lines and write their table files in the same pass (the batch job's engine).

Each Spark task owns one file range (:class:`~snap_spark.files.lines.LineRange`, cut at line
boundaries with exact line numbers; :func:`land_ranges`). It reads the range in batches,
runs every stateless check (:mod:`snap_spark.udfs.verify`, which calls
:mod:`snap_spark.protocol`), and
writes, without sending the lines back to the JVM:

- the ``raw_messages`` Parquet file(s) of the range, where the lake backend wants them
  (in the table folder for delta-rs), uncommitted;
- the range's ``messages`` rows with their stateless verdicts, staged as an Arrow IPC file
  (the replay step can still turn some of them into 2006).

Spark only sees what the rest of the job needs, in narrow rows (:data:`LANDED_FIELDS`):
the replay input, a ``candidate`` per line that passed checks 1-5 (sender, id, receipt
time), ``count`` rows (lines per file and code), and ``raw_file`` / ``staged`` rows
describing what was written. In the batch job's Spark stage a task sends its candidates
as one ``block`` row per fold partition (an Arrow IPC stream of them,
:attr:`LandSpec.fold_blocks`): Spark then shuffles a few values per task instead of a row
per line, whose shuffle cost the JVM time in proportion to the lines (docs/speed.md,
*Figures behind the code*). The replay fold (:func:`fold_replays`, which runs
:func:`fold_landed`) runs on those rows after one shuffle, and :func:`write_messages` turns
the staged rows into the ``messages`` Parquet files with the final verdicts. The driver
commits both tables (:meth:`snap_spark.lake.Lake.add_files`).

A task that meets a bare line while no receipt clock is configured deletes what it wrote
and reports it (kind ``bare``); the driver then stops the run with nothing committed.
Files written by a task attempt that failed, or whose result the driver never used, are
never committed: Delta ignores them and ``VACUUM`` removes them.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import fs as pafs
from pyspark.sql.types import StructType

from snap_spark.common.processes import owner_alive
from snap_spark.common.pyarrow_compat import sort_nulls_first
from snap_spark.common.remote import parallelism
from snap_spark.files import storage
from snap_spark.files.lines import LineRange
from snap_spark.lake import DataFile, PartitionedFileWriter
from snap_spark.pipeline.checked import (
    CheckedLines,
    RowMeta,
    apply_duplicates,
    check_lines,
    message_rows,
    raw_rows,
    replay_candidates,
    table_arrow_schema,
)
from snap_spark.pipeline.read import iter_line_lists
from snap_spark.pipeline.runs import file_prefix
from snap_spark.protocol.replay import line_name, replayed_rows
from snap_spark.protocol.verdict import DUPLICATE
from snap_spark.settings import VerifySettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Rows Spark receives from the landing tasks (and from :func:`fold_landed`).
LANDED_FIELDS: list[pa.Field] = [
    # candidate | count | bare | raw_file | staged | duplicate | message_file | span |
    # redecided | change
    pa.field("kind", pa.string(), False),
    pa.field("source_file", pa.string()),
    pa.field("line_no", pa.int64()),
    pa.field("sender", pa.string()),
    pa.field("msg_id", pa.string()),
    pa.field("received_at", pa.float64()),
    pa.field("code", pa.int32()),  # candidate: its check 7-8 code; count: the code; dup: 2006
    pa.field("prior_code", pa.int32()),  # duplicate: the stateless code it replaces
    pa.field("file_key", pa.string()),
    pa.field("lines", pa.int64()),  # count: number of lines
    pa.field("info", pa.string()),  # raw_file/staged: JSON; duplicate: the 2006 detail
    # candidate: the task a valid response would report on (task_state set), else null
    pa.field("task_id", pa.string()),
    # block: candidate rows of one fold partition, as an Arrow IPC stream (:func:`_blocks`)
    pa.field("block", pa.binary()),
]
LANDED_SCHEMA = pa.schema(LANDED_FIELDS)


@dataclass(frozen=True)
class LandSpec:
    """Everything a landing task needs (pickled to the executors with the task)."""

    ingest_id: str
    ingest_time_us: int
    #: input path -> ingest key of the file
    file_keys: dict[str, str]
    #: ingest keys whose lines go to ``raw_messages`` / ``messages`` this run
    raw_keys: frozenset[str] = frozenset()
    msg_keys: frozenset[str] = frozenset()
    #: where the ``raw_messages`` files go (:meth:`Lake.data_root`) and the staging folder
    raw_root: str = ""
    staging: str = ""
    #: verification settings, ``verify_threads`` already decided
    settings: VerifySettings = dataclasses.field(default_factory=VerifySettings)
    max_batch_bytes: int = 64 * 1024 * 1024
    #: the run's driver (host, pid, start): a task whose driver is gone writes nothing more
    owner: tuple[str, int, str | None] | None = None
    #: the fold's partition keys (:func:`fold_keys`): a landing task sends its replay
    #: candidates as one ``block`` row per fold partition instead of a row per line; empty:
    #: a ``candidate`` row per line
    fold_blocks: tuple[int, ...] = ()

    def meta(self, path: str) -> RowMeta:
        return RowMeta(self.ingest_id, self.ingest_time_us, self.file_keys[path])


# -- the landing task (executor) --------------------------------------------------------------


@dataclass
class _Outputs:
    """What one landing task has written so far (deleted again if the task gives up)."""

    raw: PartitionedFileWriter | None = None
    staged_path: str | None = None  # in ``filesystem``
    staged_uri: str = ""  # the same file as a location other tasks can open
    staged: pa.ipc.RecordBatchFileWriter | None = None
    staged_sink: Any = None
    staged_rows: int = 0
    filesystem: pafs.FileSystem | None = None

    def discard(self) -> None:
        """Delete everything written so far (safe to call twice)."""
        raw, staged, self.raw, self.staged = self.raw, self.staged, None, None
        if raw is not None:
            raw.discard()
        if staged is not None:
            try:
                staged.close()
                self.staged_sink.close()
            finally:
                if self.filesystem is not None and self.staged_path is not None:
                    self.filesystem.delete_file(self.staged_path)


def _row(kind: str, **values: Any) -> dict[str, Any]:
    return {"kind": kind, **values}


def _rows_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=LANDED_SCHEMA)


def land_range(spec: LandSpec, index: int, path: str, start: int = 0, end: int | None = None,
               first_line: int = 1) -> Iterator[pa.RecordBatch]:
    """Check the lines of one file range and write their files; yield :data:`LANDED_SCHEMA`.

    The lines of the range are read once, in batches (:func:`iter_line_lists`); nothing is
    kept beyond a batch but the open writers (each flushes a Parquet row group at 64 MiB).
    """
    batches = (
        check_lines(spec.settings, path, line_nos, raws, errors)
        for line_nos, raws, errors in iter_line_lists(
            path, spec.settings.batch_rows, spec.max_batch_bytes, start=start, end=end,
            first_line=first_line)
    )
    yield from land_lines(spec, f"{index:05d}", path, batches)


def land_lines(spec: LandSpec, tag: str, path: str, batches: Iterable[CheckedLines],
               key: str | None = None) -> Iterator[pa.RecordBatch]:
    """Write the table files of checked batches of one source; yield :data:`LANDED_SCHEMA`
    rows (``candidate`` per replay candidate, then ``raw_file``/``staged``/``count``).

    A bare line while no receipt clock is configured deletes what was written and yields
    one ``bare`` row instead; any failure deletes what was written and re-raises. ``key``
    is the file key of the lines (default: ``spec.file_keys[path]``).
    """
    key = key if key is not None else spec.file_keys[path]
    meta = RowMeta(spec.ingest_id, spec.ingest_time_us, key)
    out = _Outputs()
    counts: Counter[int | None] = Counter()
    pending: list[pa.RecordBatch] = []  # candidates sent as blocks (spec.fold_blocks)
    tag = file_prefix(spec.ingest_id, f"{tag}-{uuid.uuid4().hex[:8]}")
    try:
        if key in spec.raw_keys:
            out.raw = PartitionedFileWriter(spec.raw_root, table_arrow_schema("raw_messages"),
                                            [], file_prefix=tag)
        if key in spec.msg_keys:
            out.filesystem, root = storage.resolve(spec.staging)
            storage.make_dirs(spec.staging)
            out.staged_path = f"{root}/messages-{tag}.arrow"
            out.staged_uri = storage.join(spec.staging, f"messages-{tag}.arrow")
            out.staged_sink = out.filesystem.open_output_stream(out.staged_path)
            out.staged = pa.ipc.new_file(out.staged_sink, table_arrow_schema("messages"))
        for checked in batches:
            if spec.owner is not None and not owner_alive(*spec.owner):
                # A driver killed mid-run (kill -9) leaves Python workers finishing their
                # batch: they must not write files after the next run cleaned up.
                raise RuntimeError("the run that owns this task is gone; wrote nothing more")
            if checked.needs_clock:
                out.discard()
                yield _rows_batch([_row("bare", source_file=path, file_key=key,
                                        lines=checked.needs_clock)])
                return
            counts.update(checked.codes())
            if out.raw is not None:
                out.raw.write(raw_rows(meta, checked))
            if out.staged is not None:
                out.staged.write_batch(message_rows(meta, checked))
                out.staged_rows += checked.num_rows
            if spec.fold_blocks:
                pending.append(_candidates(checked, key))
            else:
                yield _candidates(checked, key)
        if pending:
            yield _blocks(pending, spec.fold_blocks)
        info: list[dict[str, Any]] = []
        if out.raw is not None:
            for data_file in out.raw.close():
                info.append(_row("raw_file", source_file=path, file_key=key,
                                 lines=data_file.num_records,
                                 info=json.dumps(dataclasses.asdict(data_file))))
        if out.staged is not None:
            out.staged.close()
            out.staged_sink.close()
            info.append(_row("staged", source_file=path, file_key=key, lines=out.staged_rows,
                             info=json.dumps({"path": out.staged_uri})))
        info.extend(_row("count", source_file=path, file_key=key, code=code, lines=n)
                    for code, n in counts.items())
        if not counts:  # an empty range still tells the driver its file was read
            info.append(_row("count", source_file=path, file_key=key, code=None, lines=0))
        yield _rows_batch(info)
    except BaseException:
        out.discard()
        raise


def _candidates(checked: CheckedLines, key: str) -> pa.RecordBatch:
    """``candidate`` rows: the lines that take part in the replay step (checks 1-5 passed)."""
    keep = replay_candidates(checked)
    n = len(keep)
    take = pa.array(keep, pa.int32())
    verdicts = checked.verdicts.take(take)
    reported = pc.is_valid(verdicts.column("task_state"))
    return pa.RecordBatch.from_arrays([
        _constant("candidate", pa.string(), n),
        checked.lines.column("source_file").take(take),
        checked.lines.column("line_no").take(take),
        verdicts.column("sender"),
        verdicts.column("msg_id"),
        verdicts.column("received_at"),
        verdicts.column("auth_code"),
        pa.nulls(n, pa.int32()),
        _constant(key, pa.string(), n),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.string()),
        pc.if_else(reported, verdicts.column("task_id"), pa.scalar(None, pa.string())),
        pa.nulls(n, pa.binary()),
    ], schema=LANDED_SCHEMA)


def _blocks(candidates: list[pa.RecordBatch], keys: tuple[int, ...]) -> pa.RecordBatch:
    """The ``candidate`` rows of a landing task as one ``block`` row per fold partition they
    fall in: the rows whose ``(sender, msg_id)`` hashes (:func:`fold_bucket`) to bucket
    ``b`` go, as an Arrow IPC stream in ``block``, with ``code`` = ``keys[b]``, the value
    Spark's hash partitioning sends to partition ``b`` (:func:`fold_keys`). Spark then moves
    a few large values per task instead of a row per line.

    Examples:
        >>> rows = pa.Table.from_pylist(
        ...     [{"kind": "candidate", "sender": "s", "msg_id": f"m{i}"} for i in range(6)],
        ...     schema=LANDED_SCHEMA)
        >>> blocks = _blocks(rows.to_batches(), fold_keys(2))
        >>> sorted(blocks.column("kind").to_pylist()), blocks.num_rows <= 2
        (['block', 'block'], True)
        >>> sum(len(_unblock(b)) for b in blocks.column("block").to_pylist())
        6
    """
    table = pa.Table.from_batches(candidates, schema=LANDED_SCHEMA)
    buckets = pa.array(fold_bucket(table.column("sender"), table.column("msg_id"), len(keys)),
                       pa.int32())
    rows: list[dict[str, Any]] = []
    for bucket, key in enumerate(keys):
        part = table.filter(pc.equal(buckets, bucket))
        if part.num_rows == 0:
            continue
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, LANDED_SCHEMA) as writer:
            writer.write_table(part)
        rows.append(_row("block", code=key, lines=part.num_rows,
                         block=sink.getvalue().to_pybytes()))
    return _rows_batch(rows)


def _unblock(block: bytes) -> pa.Table:
    """The candidate rows a ``block`` row carries."""
    return pa.ipc.open_stream(block).read_all()


def fold_bucket(senders: pa.ChunkedArray | pa.Array, msg_ids: pa.ChunkedArray | pa.Array,
                buckets: int) -> list[int]:
    """The fold bucket of each ``(sender, msg_id)``: CRC-32 of both (UTF-8, NUL between)
    modulo ``buckets``, the same in every process (Python's own string hash is not).

    Examples:
        >>> fold_bucket(pa.array(["a", "a", None]), pa.array(["1", "1", "x"]), 4)
        [3, 3, 1]
    """
    import zlib

    joined = pc.binary_join_element_wise(pc.fill_null(senders, ""), pc.fill_null(msg_ids, ""),
                                         "\x00")
    return [zlib.crc32(value) % buckets for value in pc.cast(joined, pa.binary()).to_pylist()]


#: ``0``: landing tasks send replay candidates as a row per line, as before blocks (for
#: before/after measurements; verdicts are the same either way).
FOLD_BLOCKS_ENV = "SNAP_SPARK_FOLD_BLOCKS"


def fold_blocks(spark: Any) -> tuple[int, ...]:
    """The :attr:`LandSpec.fold_blocks` of a landing pass on ``spark``: :func:`fold_keys`
    of the session's shuffle partitions (its default parallelism when that setting is not a
    number), or none when ``SNAP_SPARK_FOLD_BLOCKS=0``."""
    import os

    if os.environ.get(FOLD_BLOCKS_ENV, "").strip() == "0":
        return ()
    text = str(spark.conf.get("spark.sql.shuffle.partitions", None) or "")
    partitions = int(text) if text.isdigit() and int(text) > 0 else parallelism(spark)
    return fold_keys(partitions)


def fold_keys(partitions: int) -> tuple[int, ...]:
    """For each of ``partitions`` partitions, an ``int`` that Spark's hash partitioning of an
    integer column (``repartition(partitions, col)``: Murmur3 with seed 42, ``pmod``) sends
    to that partition, so that the fold's blocks spread over every partition.

    Examples:
        >>> fold_keys(4)  # spark.range(4).selectExpr("pmod(hash(12), 4)") ... is 0, 1, 2, 3
        (12, 6, 2, 0)
    """
    found: dict[int, int] = {}
    value = 0
    while len(found) < partitions:
        found.setdefault(spark_int_hash(value) % partitions, value)
        value += 1
    return tuple(found[p] for p in range(partitions))


def spark_int_hash(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of an ``int`` (Murmur3 x86 32-bit of its 4 bytes), as a signed
    32-bit integer.

    Examples:
        >>> spark_int_hash(0), spark_int_hash(1)
        (933211791, -559580957)
    """
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = (value & mask) * 0xCC9E2D51 & mask
    k1 = rotl(k1, 15) * 0x1B873593 & mask
    h1 = seed ^ k1
    h1 = (rotl(h1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def _constant(value: Any, type_: pa.DataType, count: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type=type_), count)


# -- replay fold (executor, after a shuffle by (sender, msg_id)) ------------------------------


def fold_landed(window: float, batches: Iterable[pa.RecordBatch],
                candidates_dir: str | None = None) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function over landed rows hash-partitioned by ``(sender, msg_id)``, in
    any order: every row that is not a candidate passes through; the candidates of keys
    seen more than once are put in receipt order (``received_at, source_file, line_no``,
    nulls first) and folded by the protocol's :func:`replayed_rows`, and only
    those it turns into 2006 leave, as ``duplicate`` rows (``prior_code`` = their stateless
    code, ``info`` the detail naming the accepted line).

    With ``candidates_dir``, the task also writes its candidates there as one Parquet file
    (:data:`CANDIDATE_SCHEMA`, for the lake lookup of
    :mod:`snap_spark.pipeline.replay_store`) and yields one ``span`` row with the earliest
    receipt time among them.
    """
    candidates: list[pa.RecordBatch] = []
    for batch in batches:
        kinds = batch.column("kind")
        is_candidate = pc.equal(kinds, "candidate")
        has_blocks = "block" in batch.schema.names  # (rows made elsewhere may lack it)
        is_block = pc.equal(kinds, "block") if has_blocks else None
        others = batch.filter(pc.invert(is_candidate if is_block is None
                                        else pc.or_(is_candidate, is_block)))
        if others.num_rows:
            yield others
        chosen = batch.filter(is_candidate)
        if chosen.num_rows:
            candidates.append(chosen)
        if is_block is not None:
            for block in batch.filter(is_block).column("block").to_pylist():
                candidates.extend(_unblock(block).to_batches())
    if not candidates:
        return
    every = pa.Table.from_batches(candidates)
    if "block" in every.column_names:
        every = every.drop_columns(["block"])
    if candidates_dir is not None:
        yield _rows_batch([_row("span", received_at=pc.min(every.column("received_at")).as_py(),
                                lines=every.num_rows,
                                info=write_candidates(candidates_dir, every))])
    table = _repeated_keys(every)
    if table.num_rows == 0:
        return
    # Receipt order, copies received together by file and line (nulls first, as Spark's
    # ascending sort): the order the fold steps them in. Sorting only the repeated keys'
    # rows here, not the whole partition in Spark, saves a noticeable part of the stage's
    # time (docs/speed.md, *Figures behind the code*).
    table = sort_nulls_first(table, ["received_at", "source_file", "line_no"])
    cols = table.to_pydict()
    names = [line_name(f, n) for f, n in zip(cols["source_file"], cols["line_no"], strict=True)]
    rows = [
        _row("duplicate", source_file=cols["source_file"][i], line_no=cols["line_no"][i],
             file_key=cols["file_key"][i],
             code=DUPLICATE, prior_code=cols["code"][i], info=detail)
        for i, detail in replayed_rows(cols["sender"], cols["msg_id"], cols["received_at"],
                                       cols["code"], window, names)
    ]
    if rows:
        yield _rows_batch(rows)


def fold_replays(landed: DataFrame, window: float, candidates_dir: str | None = None,
                 blocks: tuple[int, ...] = ()) -> DataFrame:
    """The replay fold as a Spark step: ``landed`` rows (:data:`LANDED_SCHEMA` columns)
    hash-partitioned by ``(sender, msg_id)``, folded by :func:`fold_landed` (which puts
    each repeated key's candidates in receipt order itself; ``window`` in
    seconds; ``candidates_dir``: also keep the candidates there). The result, lazy, is
    :data:`LANDED_SCHEMA` rows: every row that is not a ``candidate``, a ``duplicate`` row
    per candidate the fold makes a 2006, and with ``candidates_dir`` a ``span`` row per
    task that wrote candidates. ``blocks``: the landing tasks sent their candidates as
    ``block`` rows keyed by these values (:attr:`LandSpec.fold_blocks`), which are then what
    the rows are partitioned by (one block per partition and task).

    Example (a DataFrame ``landed`` of landing rows)::

        duplicates = fold_replays(landed, 120.0).filter("kind = 'duplicate'")
    """
    return (
        (landed.repartition(len(blocks), "code") if blocks
         else landed.repartition("sender", "msg_id"))
        .mapInArrow(functools.partial(fold_landed, window, candidates_dir=candidates_dir),
                    landed_struct())
    )


#: The replay candidates a landing run keeps for its lake lookup (one Parquet file per task).
CANDIDATE_SCHEMA = pa.schema([
    pa.field("sender", pa.string()),
    pa.field("msg_id", pa.string()),
    pa.field("received_at", pa.float64()),
    pa.field("code", pa.int32()),  # checks 7-8
    pa.field("source_file", pa.string()),
    pa.field("file_key", pa.string()),
    pa.field("line_no", pa.int64()),
    # the task it reports a state of (checked task_state), so the task tables can be
    # refreshed without looking the run's rows up in messages
    pa.field("task_id", pa.string()),
])


def write_candidates(folder: str, table: pa.Table) -> str:
    """Write candidate rows as one Parquet file under ``folder``; return its location."""
    import pyarrow.parquet as pq

    location = storage.join(folder, f"candidates-{uuid.uuid4().hex}.parquet")
    filesystem, path = storage.resolve(location)
    storage.make_dirs(folder)
    pq.write_table(table.select(CANDIDATE_SCHEMA.names).cast(CANDIDATE_SCHEMA), path,
                   filesystem=filesystem)
    return location


def _repeated_keys(table: pa.Table) -> pa.Table:
    """The rows whose ``(sender, msg_id)`` occurs more than once, in their order: a message
    seen once can be neither a replay nor the original of one (cheap Arrow filter, so only
    the rare repeats are folded in Python)."""
    key = replay_keys(table)
    repeated = repeated_values(key)
    if len(repeated) == 0:
        return table.slice(0, 0)
    return table.filter(pc.is_in(key, value_set=repeated))


def replay_keys(table: pa.Table) -> pa.Array:
    """Each row's replay key, ``sender + "\n" + msg_id`` (null where either is null)."""
    return pc.binary_join_element_wise(table.column("sender"), table.column("msg_id"), "\n")


def repeated_values(values: pa.Array) -> pa.Array:
    """The distinct values that occur more than once in ``values`` (nulls aside)."""
    counts = pa.table({"v": values}).group_by("v", use_threads=False).aggregate(
        [([], "count_all")])
    return counts.filter(pc.greater(counts.column("count_all"), 1)).column("v").combine_chunks()


# -- final messages files (executor) -----------------------------------------------------------


def write_messages(msg_root: str, duplicates: Mapping[str, Mapping[int, str]],
                   ingest_id: str, batches: Iterable[pa.RecordBatch]
                   ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function over ``staged`` rows: read each staged file, apply the 2006
    verdicts of its file key (``duplicates``: file key -> line number -> detail), write the
    ``messages`` Parquet files (partitioned by ``event_date``) and yield one
    ``raw_file``-shaped row per data file written."""
    from snap_spark.schemas.tables import MESSAGES_PARTITION

    writer = PartitionedFileWriter(msg_root, table_arrow_schema("messages"),
                                   list(MESSAGES_PARTITION),
                                   file_prefix=file_prefix(ingest_id,
                                                           f"m-{uuid.uuid4().hex[:8]}"))
    try:
        for batch in batches:
            for staged in batch.to_pylist():
                filesystem, staged_path = storage.resolve(json.loads(staged["info"])["path"])
                replayed = duplicates.get(staged["file_key"], {})
                with filesystem.open_input_file(staged_path) as handle:
                    reader = pa.ipc.open_file(handle)
                    for i in range(reader.num_record_batches):  # one batch in memory at a time
                        rows = pa.Table.from_batches([reader.get_batch(i)])
                        for part in apply_duplicates(rows, replayed).to_batches():
                            writer.write(part)
        written = writer.close()
    except BaseException:
        writer.discard()
        raise
    if written:
        yield _rows_batch([
            _row("message_file", lines=f.num_records, info=json.dumps(dataclasses.asdict(f)))
            for f in written
        ])


def data_file(info: str) -> DataFile:
    """The :class:`DataFile` a ``raw_file`` / ``message_file`` row describes."""
    return DataFile(**json.loads(info))


# -- Spark plumbing -----------------------------------------------------------------------------


def landed_struct() -> StructType:
    """:data:`LANDED_SCHEMA` as a Spark ``StructType``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(LANDED_SCHEMA)


def land_part(spec: LandSpec, part: LineRange, index: int) -> Iterator[pa.RecordBatch]:
    """:func:`land_range` for one planned range (the function :func:`over_ranges` runs)."""
    yield from land_range(spec, index, part.path, part.start, part.end, part.first_line)


def reland_rows(spec: LandSpec, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function over ``raw_messages`` rows (``source_file, file_key, line_no,
    raw_text, raw_bytes, read_error``) sorted by file key and line: check the landed lines
    again (under ``spec.settings``) and stage their ``messages`` rows, as :func:`land_range`
    does for input files. The exact bytes are ``raw_bytes`` when set, else ``raw_text``."""
    size = spec.settings.batch_rows

    def chunks() -> Iterator[tuple[tuple[str, str], list[int], list[bytes | None],
                                   list[str | None]]]:
        for batch in batches:
            cols = batch.to_pydict()
            files, keys = cols["source_file"], cols["file_key"]
            start, count = 0, batch.num_rows
            while start < count:
                end, ident = start, (files[start], keys[start])
                while end < count and end - start < size and (files[end], keys[end]) == ident:
                    end += 1
                raws = [exact if exact is not None else (None if text is None
                                                          else text.encode("utf-8"))
                        for exact, text in zip(cols["raw_bytes"][start:end],
                                               cols["raw_text"][start:end], strict=True)]
                yield ident, cols["line_no"][start:end], raws, cols["read_error"][start:end]
                start = end

    for index, ((path, key), group) in enumerate(itertools.groupby(chunks(), lambda c: c[0])):
        checked = (check_lines(spec.settings, path, line_nos, raws,
                               errors if any(e is not None for e in errors) else None)
                   for _, line_nos, raws, errors in group)
        yield from land_lines(spec, f"r{index:05d}", path, checked, key=key)
