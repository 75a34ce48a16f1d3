"""Driver reads of a Delta table that keep what they read, data file by data file.

A Delta data file never changes once a commit added it: a later commit can only remove it
and add others. So the columns read from a file on the driver stay right for as long as
the table's log lists that file, and a reader that looks at the same table again needs to
read only the files added since. :func:`scan_columns` does that for
:func:`snap_spark.lake.read_arrow`.

Why it matters: the live Nostr stream (``jobs/stream_nostr.py``) looks keys up in
``nostr_events``, ``raw_messages`` and ``messages`` on the driver about ten times a
micro-batch, and each micro-batch adds a file or two to each. Read whole, every look grew
with the table, and the micro-batches grew steadily longer, mostly in these scans
(docs/speed.md, *Figures behind the code*). Read this way, each look costs the new files
plus an in-memory filter over what is kept.

What is kept: per table location and column list, the columns of each file (keyed by its
path, size and modification time, so a table deleted and written again at the same place
is never mistaken for the old one), least recently used first out once the whole cache
passes :data:`CACHE_BYTES`. A table this cannot read file by file is read as before: one
with deletion vectors or column mapping (whose files do not hold the rows or names the log
gives), or one whose files do not cast to its schema.

Examples:
    >>> import pyarrow as pa
    >>> from deltalake import DeltaTable, write_deltalake
    >>> path = str(tmp / "t")
    >>> write_deltalake(path, pa.table({"k": ["a"], "n": [1]}))
    >>> scan_columns(DeltaTable(path), path, ["k"]).column("k").to_pylist()
    ['a']
    >>> write_deltalake(path, pa.table({"k": ["b"], "n": [2]}), mode="append")
    >>> before = cache_stats()["files_read"]
    >>> sorted(scan_columns(DeltaTable(path), path, ["k"]).column("k").to_pylist())
    ['a', 'b']
    >>> cache_stats()["files_read"] - before  # the new file only
    1
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

import pyarrow as pa

from snap_spark.files import storage

if TYPE_CHECKING:
    from deltalake import DeltaTable

#: Bytes of file columns kept for all tables together (least recently used dropped first).
CACHE_BYTES: Final = 512 * 1024 * 1024
#: A table of more rows than this (by its log's record counts) is not read file by file:
#: such a read is usually narrowed by a filter, and the plain read skips the files whose
#: statistics or partition values rule them out, where this one would read them all.
MAX_ROWS: Final = 500_000

#: Protocol features whose files cannot be read on their own as the table's rows.
_UNSAFE_FEATURES: Final = frozenset({"deletionVectors", "columnMapping"})

#: A file's identity in its table: path as the log has it, size, modification time.
FileId = tuple[str, int, int]

#: Chunks a kept table may have before they are combined into one (an in-memory filter
#: over thousands of one-file chunks costs more than over one).
MAX_CHUNKS: Final = 32


@dataclass
class _Entry:
    """What is kept of one table's columns: each file's rows and bytes, and all of them
    as one table (``combined``, the rows of the files ``combined_ids``)."""

    files: dict[FileId, tuple[pa.Table, int]] = field(default_factory=dict)
    combined: pa.Table | None = None
    combined_ids: frozenset[FileId] = frozenset()

    @property
    def nbytes(self) -> int:
        extra = 0 if self.combined is None else self.combined.nbytes
        return sum(size for _, size in self.files.values()) + extra


_lock = threading.Lock()
#: (table location, columns) -> what is kept, most recently used last
_kept: OrderedDict[tuple[str, tuple[str, ...]], _Entry] = OrderedDict()
#: (table location, column) -> {file id: the distinct values of the column in the file}
_distinct: OrderedDict[tuple[str, str], dict[FileId, frozenset[Any]]] = OrderedDict()
#: The most (table, column) pairs whose distinct values per file are kept.
DISTINCT_KEPT: Final = 64
_stats = {"files_read": 0, "bytes": 0}


def cache_stats() -> dict[str, int]:
    """How many files were read into the cache so far, and the bytes it holds."""
    with _lock:
        return dict(_stats)


def clear_cache() -> None:
    """Drop everything kept (tests; a process that wants its memory back)."""
    with _lock:
        _kept.clear()
        _distinct.clear()
        _stats["bytes"] = 0


#: ``SNAP_SPARK_FILE_CACHE=0`` turns the cache off: every read is the plain one.
CACHE_ENV: Final = "SNAP_SPARK_FILE_CACHE"


def readable_by_file(table: DeltaTable) -> bool:
    """Whether each data file of ``table`` holds exactly its rows, under the schema's
    names (no deletion vectors, no column mapping), and the cache is on
    (:data:`CACHE_ENV`)."""
    if os.environ.get(CACHE_ENV, "1") == "0":
        return False
    protocol = table.protocol()
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    if features & _UNSAFE_FEATURES:
        return False
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    return mode in (None, "none")


@dataclass(frozen=True)
class _DataFiles:
    """The data files of a table's version, from its log: each one's identity and partition
    values, the partition columns, and the rows of all (``None``: a count not recorded)."""

    ids: list[FileId]
    values: list[dict[str, Any] | None]
    partitions: list[str]
    rows: int | None

    @classmethod
    def of(cls, table: DeltaTable) -> _DataFiles:
        import pyarrow.compute as pc

        partitions = list(table.metadata().partition_columns)
        actions = pa.table(table.get_add_actions(flatten=False))
        ids = [(p, int(s), int(t)) for p, s, t in zip(
            actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(),
            actions.column("modification_time").to_pylist(), strict=True)]
        values = (actions.column("partition").to_pylist() if partitions
                  and "partition" in actions.column_names else [None] * len(ids))
        counts = actions.column("num_records")
        rows = None if counts.null_count else int(pc.sum(counts).as_py() or 0)
        return cls(ids, values, partitions, rows)


def scan_columns(table: DeltaTable, uri: str, columns: Sequence[str]) -> pa.Table | None:
    """``columns`` of every row of ``table`` (opened at ``uri``, at whichever version it
    holds), reading only the data files this process has not read for these columns yet;
    ``None`` when the table cannot be read file by file (:func:`readable_by_file`, or a
    file that does not cast to the schema) or is larger than :data:`MAX_ROWS`: read it
    another way then."""
    if not readable_by_file(table):
        return None
    schema = pa.schema(table.schema().to_arrow())
    if any(name not in schema.names for name in columns):
        return None  # let the reader give its own error
    wanted = pa.schema([schema.field(name) for name in columns])
    listed = _DataFiles.of(table)
    if listed.rows is None or listed.rows > MAX_ROWS:
        return None  # a large table (or one of unknown size): the plain, pruned read
    ids, values, partitions = listed.ids, listed.values, listed.partitions
    key = (uri, tuple(columns))
    with _lock:
        entry = _kept.pop(key, None) or _Entry()
        _stats["bytes"] -= entry.nbytes
    fresh: dict[FileId, tuple[pa.Table, int]] = {}
    for file_id, partition in zip(ids, values, strict=True):
        if file_id not in entry.files:
            part = _read_file(uri, file_id[0], wanted, partitions, partition or {})
            if part is None:
                return None
            fresh[file_id] = (part, part.nbytes)
    current = frozenset(ids)
    if entry.combined is not None and entry.combined_ids == current:
        combined = entry.combined
    elif entry.combined is not None and entry.combined_ids <= current and \
            current - entry.combined_ids == set(fresh):
        # only files added since: the kept rows and the new files'
        combined = pa.concat_tables([entry.combined, *(t for t, _ in fresh.values())])
    else:  # files removed (rows replaced, an overwrite): from each file's rows
        held = {**entry.files, **fresh}
        combined = pa.concat_tables([held[i][0] for i in ids]) if ids \
            else wanted.empty_table()
    if combined.num_columns and combined.column(0).num_chunks > MAX_CHUNKS:
        combined = combined.combine_chunks()
    files = {i: kept for i, kept in entry.files.items() if i in current}
    files.update(fresh)
    entry = _Entry(files, combined, current)
    with _lock:
        _kept[key] = entry  # the most recently used, last
        _stats["files_read"] += len(fresh)
        _stats["bytes"] += entry.nbytes
        while _stats["bytes"] > CACHE_BYTES and _kept:  # this table's too, when too big
            _, dropped = _kept.popitem(last=False)
            _stats["bytes"] -= dropped.nbytes
    return combined


def distinct_values(table: DeltaTable, uri: str, column: str) -> set[Any] | None:
    """The distinct values of ``column`` in ``table`` (opened at ``uri``), from each data
    file's own distinct values, kept per file: a file is read once, and what is kept is
    its distinct values, not its rows (a ``file_key`` column has a handful per file however
    many rows it has). ``None`` when the table cannot be read file by file."""
    import pyarrow.compute as pc

    if not readable_by_file(table):
        return None
    schema = pa.schema(table.schema().to_arrow())
    if column not in schema.names:
        return None
    wanted = pa.schema([schema.field(column)])
    listed = _DataFiles.of(table)
    ids, values, partitions = listed.ids, listed.values, listed.partitions
    key = (uri, column)
    with _lock:
        held = _distinct.pop(key, {})
    found: dict[FileId, frozenset[Any]] = {}
    for file_id, partition in zip(ids, values, strict=True):
        seen = held.get(file_id)
        if seen is None:
            part = _read_file(uri, file_id[0], wanted, partitions, partition or {})
            if part is None:
                return None
            seen = frozenset(pc.unique(part.column(column)).to_pylist())
            with _lock:
                _stats["files_read"] += 1
        found[file_id] = seen
    with _lock:
        _distinct[key] = found
        while len(_distinct) > DISTINCT_KEPT:
            _distinct.popitem(last=False)
    return set().union(*found.values())


def _read_file(uri: str, path: str, wanted: pa.Schema, partitions: Sequence[str],
               partition: dict[str, Any]) -> pa.Table | None:
    """The ``wanted`` columns of one data file, typed as the table's schema (a column the
    file lacks is null; a partition column is the file's value); ``None`` when the file's
    columns do not cast."""
    import pyarrow.parquet as pq

    location = unquote(path) if "://" in path else storage.join(uri, unquote(path))
    filesystem, local = storage.resolve(location)
    in_file = [f.name for f in wanted if f.name not in partitions]
    with filesystem.open_input_file(local) as handle:
        parquet = pq.ParquetFile(handle)
        present = set(parquet.schema_arrow.names)
        read = parquet.read(columns=[n for n in in_file if n in present]) \
            if any(n in present for n in in_file) else None
        rows = parquet.metadata.num_rows
    arrays = []
    try:
        for field in wanted:
            if field.name in partitions:
                arrays.append(pa.array([partition.get(field.name)] * rows).cast(field.type))
            elif read is not None and field.name in read.column_names:
                arrays.append(read.column(field.name).cast(field.type))
            else:
                arrays.append(pa.nulls(rows, field.type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return pa.Table.from_arrays(arrays, schema=wanted)
