"""Write Arrow batches as the Parquet data files of a Delta table (runs on executors).

:class:`PartitionedFileWriter` splits batches by partition values, writes one Parquet file per
partition value (per Spark task) under Hive-style folders ``col=value/`` inside the table
folder, and describes each file as a :class:`DataFile`: the Delta ``add`` action the driver
commits (path relative to the table root, size, partition values as Delta strings, and per-file
statistics ``numRecords`` / ``nullCount`` / ``minValues`` / ``maxValues`` for data skipping).

Partition values are encoded as the Delta protocol says (dates ``YYYY-MM-DD``, integers in
decimal, booleans ``true``/``false``; an empty string is a null partition value, as in Delta).
Folder names use Hive's escaping, which Spark's partition discovery decodes.

Table folders are any location :mod:`snap_spark.files.storage` opens (local, ``s3://``, ...).
:func:`read_data_file` reads one data file back as the table's Arrow batches, for readers that
do not go through Spark's Hadoop filesystems.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from snap_spark.files import storage

#: Folder name Hive, Spark and delta-rs use for a null partition value.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

#: Statistics are collected for the first 32 data columns, Delta's default
#: ``delta.dataSkippingNumIndexedCols``.
STATS_COLUMNS = 32

#: String statistics keep at most this many characters (Delta's default prefix length).
STRING_STATS_PREFIX = 32

#: A buffered partition is flushed as one Parquet row group past either limit.
ROW_GROUP_ROWS = 1_000_000
ROW_GROUP_BYTES = 64 * 1024 * 1024

# Characters Hive (and Spark's ``escapePathName``) escape in partition folder names.
_HIVE_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^") | frozenset(chr(c) for c in range(0x20))

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class DataFile:
    """One Parquet file written into a table folder, described as a Delta ``add`` action."""

    #: Path relative to the table root as it is on storage (not URI-encoded: delta-rs encodes
    #: ``AddAction.path`` itself when it writes the log).
    path: str
    size: int
    partition_values: dict[str, str | None]
    num_records: int
    #: Delta statistics JSON (``numRecords``, ``nullCount``, ``minValues``, ``maxValues``).
    stats: str
    #: Milliseconds since the epoch.
    modification_time: int


def escape_path_name(text: str) -> str:
    """Escape a partition column name or value for a folder name, as Hive and Spark do.

    Examples:
        >>> escape_path_name("2024-05-01")
        '2024-05-01'
        >>> escape_path_name("a:b/c=d%")
        'a%3Ab%2Fc%3Dd%25'
    """
    return "".join(f"%{ord(ch):02X}" if ch in _HIVE_ESCAPED else ch for ch in text)


def unescape_path_name(text: str) -> str:
    """Undo Hive escaping the way Spark's partition discovery does (``%XX`` -> one char).

    Examples:
        >>> unescape_path_name("a%3Ab%2Fc%3Dd%25")
        'a:b/c=d%'
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_hex(pair: str) -> bool:
    return len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair)


def partition_string(value: Any) -> str | None:
    """The Delta log string of a partition value (``None`` for null and empty strings).

    Examples:
        >>> partition_string(dt.date(2024, 5, 1)), partition_string(7), partition_string(True)
        ('2024-05-01', '7', 'true')
        >>> partition_string("") is None
        True
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime):
        raise TypeError("timestamp partition values are not supported")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return value or None
    raise TypeError(f"unsupported partition value {value!r}")


def partition_folder(columns: Sequence[str], values: Sequence[str | None]) -> str:
    """The relative folder (``col=value/...``, unencoded) files of one partition go into.

    Examples:
        >>> partition_folder(["day", "src"], ["2024-05-01", None])
        'day=2024-05-01/src=__HIVE_DEFAULT_PARTITION__'
    """
    return "/".join(
        f"{escape_path_name(c)}={NULL_PARTITION if v is None else escape_path_name(v)}"
        for c, v in zip(columns, values, strict=True)
    )


# -- statistics ---------------------------------------------------------------------------


@dataclass
class _ColumnStats:
    kind: str  # "int", "float", "string", "date", "timestamp", "count" (null count only)
    nulls: int = 0
    low: Any = None
    high: Any = None
    exact_bounds: bool = True  # False once a value made min/max unusable (NaN, inf, overflow)

    def update(self, column: pa.Array | pa.ChunkedArray) -> None:
        self.nulls += column.null_count
        if self.kind == "count" or not self.exact_bounds or column.null_count == len(column):
            return
        if self.kind == "float" and pc.any(pc.is_nan(column)).as_py():
            self.exact_bounds = False
            return
        bounds = pc.min_max(column)
        low, high = bounds["min"], bounds["max"]
        if not low.is_valid:
            return
        if self.kind == "timestamp":
            low_value, high_value = low.value, high.value  # microseconds since the epoch
        else:
            low_value, high_value = low.as_py(), high.as_py()
        if self.kind == "float" and not (math.isfinite(low_value) and math.isfinite(high_value)):
            self.exact_bounds = False
            return
        self.low = low_value if self.low is None else min(self.low, low_value)
        self.high = high_value if self.high is None else max(self.high, high_value)

    def bounds_json(self) -> tuple[Any, Any] | None:
        """(min, max) as Delta stats JSON values, either may be None when unknown."""
        if self.kind == "count" or not self.exact_bounds or self.low is None:
            return None
        if self.kind == "string":
            low = self.low[:STRING_STATS_PREFIX]  # a prefix is still a lower bound
            high = self.high if len(self.high) <= STRING_STATS_PREFIX else None
            return low, high
        if self.kind == "date":
            return self.low.isoformat(), self.high.isoformat()
        if self.kind == "timestamp":
            try:
                return _timestamp_stat(self.low), _timestamp_stat(self.high)
            except OverflowError:
                return None
        return self.low, self.high


def _timestamp_stat(micros: int) -> str:
    value = _EPOCH + dt.timedelta(microseconds=micros)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: Which Delta statistics a column of an Arrow type gets: min/max of its kind, or only
#: its null count; the first test that holds decides.
_STATS_KINDS: tuple[tuple[Callable[[pa.DataType], bool], str], ...] = (
    (pa.types.is_integer, "int"),
    (pa.types.is_floating, "float"),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
    (pa.types.is_date32, "date"),
    (pa.types.is_timestamp, "timestamp"),
    (lambda t: pa.types.is_boolean(t) or pa.types.is_decimal(t) or pa.types.is_binary(t)
     or pa.types.is_large_binary(t), "count"),
)


def _stats_kind(arrow_type: pa.DataType) -> str | None:
    """The statistics kind of a column (:data:`_STATS_KINDS`); ``None`` for nested types,
    which get no statistics (Delta expects per-leaf nesting for those).

    Examples:
        >>> [_stats_kind(t) for t in (pa.int32(), pa.large_string(), pa.bool_(),
        ...                             pa.list_(pa.int8()))]
        ['int', 'string', 'count', None]
    """
    return next((kind for test, kind in _STATS_KINDS if test(arrow_type)), None)


class FileStats:
    """Running Delta statistics for one data file."""

    def __init__(self, schema: pa.Schema) -> None:
        self.num_records = 0
        self._columns: dict[str, _ColumnStats] = {}
        for arrow_field in list(schema)[:STATS_COLUMNS]:
            kind = _stats_kind(arrow_field.type)
            if kind is not None:
                self._columns[arrow_field.name] = _ColumnStats(kind)

    def update(self, table: pa.Table | pa.RecordBatch) -> None:
        """Fold a batch of rows into the statistics."""
        self.num_records += table.num_rows
        for name, column_stats in self._columns.items():
            column_stats.update(table.column(name))

    def to_json(self) -> str:
        """The ``stats`` string of the file's ``add`` action."""
        stats: dict[str, Any] = {"numRecords": self.num_records}
        mins: dict[str, Any] = {}
        maxes: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        for name, column_stats in self._columns.items():
            nulls[name] = column_stats.nulls
            bounds = column_stats.bounds_json()
            if bounds is not None:
                if bounds[0] is not None:
                    mins[name] = bounds[0]
                if bounds[1] is not None:
                    maxes[name] = bounds[1]
        stats["minValues"] = mins
        stats["maxValues"] = maxes
        stats["nullCount"] = nulls
        return json.dumps(stats, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# -- writing ------------------------------------------------------------------------------


@dataclass
class _OpenFile:
    relative_path: str
    partition_values: dict[str, str | None]
    writer: pq.ParquetWriter
    stats: FileStats
    buffer: list[pa.RecordBatch] = field(default_factory=list)
    buffered_rows: int = 0
    buffered_bytes: int = 0


class PartitionedFileWriter:
    """Write batches of one Spark task into a table folder, one file per partition value.

    ``schema`` is the Arrow schema of the whole table (partition columns included); batches
    are cast to it, so Spark's session time zone label on timestamps does not matter. Call
    :meth:`close` to finish the files and get their :class:`DataFile` descriptions, or
    :meth:`discard` to delete whatever was written.

    Examples:
        >>> schema = pa.schema([("day", pa.date32()), ("n", pa.int64())])
        >>> writer = PartitionedFileWriter(str(tmp / "t"), schema, ["day"])
        >>> may1, may2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
        >>> writer.write(pa.record_batch({"day": [may1, may2, may1], "n": [1, 2, 3]}))
        >>> files = sorted(writer.close(), key=lambda f: f.path)  # one file per day
        >>> [(f.path.split("/")[0], f.partition_values, f.num_records) for f in files]
        [('day=2024-05-01', {'day': '2024-05-01'}, 2), ('day=2024-05-02', {'day': '2024-05-02'}, 1)]
        >>> json.loads(files[0].stats)["maxValues"]  # the data columns' statistics
        {'n': 3}

        After a failure, :meth:`discard` deletes what the writer wrote:

        >>> writer = PartitionedFileWriter(str(tmp / "u"), schema, ["day"])
        >>> writer.write(pa.record_batch({"day": [may1], "n": [1]}))
        >>> writer.discard()
        >>> [p for p in (tmp / "u").rglob("*") if p.is_file()]
        []
    """

    def __init__(
        self,
        table_uri: str,
        schema: pa.Schema,
        partition_by: Sequence[str],
        file_prefix: str = "part-00000",
    ) -> None:
        self._filesystem, self._root = storage.resolve(table_uri)
        self._make_dirs = storage.has_directories(self._filesystem)
        self._schema = schema
        self._partition_by = list(partition_by)
        self._data_columns = [n for n in schema.names if n not in set(self._partition_by)]
        self._data_schema = pa.schema([schema.field(n) for n in self._data_columns])
        self._file_prefix = file_prefix
        self._open: dict[tuple[str | None, ...], _OpenFile] = {}
        self._created: list[str] = []

    def write(self, batch: pa.RecordBatch) -> None:
        """Add one batch; rows go to the file of their partition value."""
        if batch.num_rows == 0:
            return
        if batch.schema != self._schema:
            batch = batch.cast(self._schema)
        if not self._partition_by:
            self._append((), batch)
            return
        for key, rows in _split_by_partition(batch, self._partition_by):
            self._append(key, rows.select(self._data_columns))

    def _append(self, key: tuple[str | None, ...], batch: pa.RecordBatch) -> None:
        target = self._open.get(key)
        if target is None:
            target = self._open_file(key)
        target.buffer.append(batch)
        target.buffered_rows += batch.num_rows
        target.buffered_bytes += batch.nbytes
        if target.buffered_rows >= ROW_GROUP_ROWS or target.buffered_bytes >= ROW_GROUP_BYTES:
            self._flush(target)

    def _open_file(self, key: tuple[str | None, ...]) -> _OpenFile:
        name = f"{self._file_prefix}-{uuid.uuid4()}-c000.snappy.parquet"
        folder = partition_folder(self._partition_by, key) if self._partition_by else ""
        relative = f"{folder}/{name}" if folder else name
        full_path = f"{self._root}/{relative}"
        if self._make_dirs:  # object stores have no folders: a marker object per call
            self._filesystem.create_dir(f"{self._root}/{folder}" if folder else self._root)
        self._created.append(full_path)
        writer = pq.ParquetWriter(
            full_path,
            self._data_schema,
            filesystem=self._filesystem,
            compression="snappy",
            version="2.6",
            write_statistics=True,
        )
        opened = _OpenFile(
            relative_path=relative,
            partition_values=dict(zip(self._partition_by, key, strict=True)),
            writer=writer,
            stats=FileStats(self._data_schema),
        )
        self._open[key] = opened
        return opened

    def _flush(self, target: _OpenFile) -> None:
        if not target.buffer:
            return
        table = pa.Table.from_batches(target.buffer, schema=self._data_schema)
        target.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        target.stats.update(table)
        target.buffer.clear()
        target.buffered_rows = 0
        target.buffered_bytes = 0

    def close(self) -> list[DataFile]:
        """Finish every open file and describe them as Delta ``add`` actions."""
        files: list[DataFile] = []
        for target in self._open.values():
            self._flush(target)
            target.writer.close()
            info = self._filesystem.get_file_info(f"{self._root}/{target.relative_path}")
            files.append(
                DataFile(
                    path=target.relative_path,
                    size=int(info.size),
                    partition_values=target.partition_values,
                    num_records=target.stats.num_records,
                    stats=target.stats.to_json(),
                    modification_time=int(time.time() * 1000),
                )
            )
        self._open.clear()
        return files

    def discard(self) -> None:
        """Close and delete every file this writer created (after a failure)."""
        for target in self._open.values():
            with contextlib.suppress(Exception):  # best effort: the files are deleted next
                target.writer.close()
        self._open.clear()
        delete_paths(self._filesystem, self._created)
        self._created.clear()


def _split_by_partition(
    batch: pa.RecordBatch, partition_by: Sequence[str]
) -> Iterator[tuple[tuple[str | None, ...], pa.RecordBatch]]:
    """Yield (Delta partition strings, rows) for each distinct partition value in ``batch``."""
    keys = pa.table([batch.column(c) for c in partition_by], names=list(partition_by))
    distinct = keys.group_by(list(partition_by), use_threads=False).aggregate([]).to_pylist()
    if len(distinct) == 1:
        only = distinct[0]
        yield tuple(partition_string(only[c]) for c in partition_by), batch
        return
    for raw in distinct:
        mask = None
        for column in partition_by:
            value = raw[column]
            array = batch.column(column)
            condition = pc.is_null(array) if value is None else pc.equal(array, value)
            condition = pc.fill_null(condition, False)
            mask = condition if mask is None else pc.and_(mask, condition)
        # "" and null both map to the null partition; the writer appends both to one file.
        yield tuple(partition_string(raw[c]) for c in partition_by), batch.filter(mask)


def delete_paths(filesystem: pafs.FileSystem, paths: Iterable[str]) -> None:
    """Delete files, ignoring ones already gone (cleanup must never mask the real error)."""
    for path in paths:
        try:
            filesystem.delete_file(path)
        except (FileNotFoundError, OSError):
            continue


def delete_data_files(table_uri: str, files: Iterable[DataFile]) -> None:
    """Delete written-but-uncommitted data files of a table."""
    filesystem, root = storage.resolve(table_uri)
    delete_paths(filesystem, [f"{root}/{f.path}" for f in files])


# -- reading ------------------------------------------------------------------------------


def read_data_file(
    location: str,
    schema: pa.Schema,
    partition_values: dict[str, Any],
    batch_rows: int = 65_536,
) -> Iterator[pa.RecordBatch]:
    """The rows of one Parquet data file as batches of the table's Arrow ``schema``.

    ``partition_values`` (typed, as delta-rs parses them from the log) fill the partition
    columns, which data files do not hold; a column missing from the file (added to the
    table later) is null; other columns are cast to the table's types.

    Examples:
        A file written before the table gained a ``note`` column, in partition
        ``day=2024-05-01`` (data files hold no partition column):

        >>> pq.write_table(pa.table({"n": [7]}), str(tmp / "part-0.parquet"))
        >>> schema = pa.schema([("day", pa.date32()), ("n", pa.int32()), ("note", pa.string())])
        >>> (batch,) = read_data_file(str(tmp / "part-0.parquet"), schema,
        ...                           {"day": dt.date(2024, 5, 1)})
        >>> batch.to_pydict()
        {'day': [datetime.date(2024, 5, 1)], 'n': [7], 'note': [None]}
        >>> batch.schema == schema  # n, an int64 in the file, cast to the table's int32
        True
    """
    filesystem, path = storage.resolve(location)
    with filesystem.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        present = set(parquet.schema_arrow.names)
        wanted = [n for n in schema.names if n in present and n not in partition_values]
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=wanted,
                                          use_threads=False):
            rows = batch.num_rows
            columns: list[pa.Array] = []
            for table_field in schema:
                name = table_field.name
                if name in partition_values:
                    value = partition_values[name]
                    columns.append(
                        pa.nulls(rows, table_field.type) if value is None
                        else pa.array([value] * rows, table_field.type)
                    )
                elif name in present:
                    columns.append(batch.column(name).cast(table_field.type))
                else:
                    columns.append(pa.nulls(rows, table_field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)
