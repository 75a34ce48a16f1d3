"""Read NDJSON archives into one row per input line: exact bytes, 1-based line numbers.

This is the bottom of the ingest path (ARCHITECTURE §3, *Input lines* and *Conservation*):
every line of every input file becomes exactly one row, nothing is parsed, decoded,
trimmed or dropped here. Parsing and verdicts happen downstream on ``raw``.

Two entry points split lines identically, because the Spark reader is built on the
pure-Python one:

- :func:`iter_file_lines` -- pure Python, used by the command-line checker;
- :func:`read_lines` -- a PySpark 4.0 Python Data Source (``snap_lines``) that yields
  Arrow record batches, one Spark partition per file.

Line rules (both paths):

- lines end at ``b"\\n"`` only; the ``b"\\n"`` is not part of ``raw`` but everything else
  is, including a ``b"\\r"`` before it, invalid UTF-8, NUL bytes and very long lines;
- a final ``b"\\n"`` does not start an extra empty line, an empty line elsewhere is a
  line (``raw == b""``), a last line without ``b"\\n"`` is still a line, and an empty file
  has no lines;
- files ending in ``.gz`` (any case) are gunzipped, multi-member streams included.

A corrupt or truncated ``.gz`` file does not fail the job and is not dropped silently:
the lines decoded before the damage are returned, followed by ONE row for that file with
the next ``line_no``, ``raw = None`` and ``read_error`` saying what failed (and how many
bytes of an unterminated partial line were discarded). Other I/O errors (a file that
vanished or became unreadable after listing, a disk error) are raised, so Spark retries the
task and, failing that, fails the job loudly.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from snap_spark.lines import (
    INPUT_SUFFIXES,
    is_input_file_name,
    iter_file_lines,
    list_input_files,
    plan_line_ranges,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DATA_SOURCE_NAME",
    "DEFAULT_BATCH_ROWS",
    "INPUT_SUFFIXES",
    "LINES_SCHEMA",
    "MAX_BATCH_BYTES",
    "SnapLinesDataSource",
    "SnapLinesReader",
    "is_input_file_name",
    "iter_file_lines",
    "iter_line_batches",
    "list_input_files",
    "read_lines",
    "register_data_source",
]

#: Name the Data Source is registered under (``spark.read.format("snap_lines")``).
DATA_SOURCE_NAME = "snap_lines"

#: Lines per Arrow record batch handed from the Python reader to Spark.
DEFAULT_BATCH_ROWS = 8192

#: A batch is also closed once it holds this many bytes of ``raw`` (it may exceed the cap
#: by at most one line, since a line is never split).
MAX_BATCH_BYTES = 64 * 1024 * 1024

#: Bounds of the byte ranges plain files are cut into (see :func:`split_size`).
MIN_SPLIT_BYTES = 4 * 1024 * 1024
MAX_SPLIT_BYTES = 128 * 1024 * 1024

#: Largest value a Spark binary cell can hold (JVM byte arrays, Arrow 32-bit offsets).
MAX_SPARK_BINARY_BYTES = 2**31 - 16

#: Schema of :func:`read_lines`, also returned by ``SnapLinesDataSource.schema()``.
LINES_SCHEMA = StructType(
    [
        StructField("source_file", StringType(), nullable=False),
        StructField("line_no", LongType(), nullable=False),
        StructField("raw", BinaryType(), nullable=True),
        StructField("byte_len", IntegerType(), nullable=True),
        StructField("read_error", StringType(), nullable=True),
    ]
)

_ARROW_SCHEMA = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("line_no", pa.int64(), nullable=False),
        pa.field("raw", pa.binary()),
        pa.field("byte_len", pa.int32()),
        pa.field("read_error", pa.string()),
    ]
)


# --------------------------------------------------------------------------------------
# Arrow batches (what the Data Source reader yields)
# --------------------------------------------------------------------------------------


def lines_batch(
    path: str,
    line_nos: list[int],
    raws: list[bytes | None],
    errors: list[str | None] | None,
) -> pa.RecordBatch:
    """One record batch of :data:`LINES_SCHEMA` (Arrow); ``errors=None`` means no errors."""
    count = len(raws)
    raw_array = pa.array(raws, type=pa.binary())
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(path, type=pa.string()), count),
            pa.array(line_nos, type=pa.int64()),
            raw_array,
            pc.binary_length(raw_array),
            pa.nulls(count, type=pa.string())
            if errors is None
            else pa.array(errors, type=pa.string()),
        ],
        schema=_ARROW_SCHEMA,
    )


def iter_line_lists(
    path: str,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    max_batch_bytes: int = MAX_BATCH_BYTES,
    *,
    start: int = 0,
    end: int | None = None,
    first_line: int = 1,
) -> Iterator[tuple[list[int], list[bytes | None], list[str | None] | None]]:
    """The batches of :func:`iter_line_batches` as Python lists ``(line_nos, raws,
    errors)``; ``errors`` is ``None`` when no line of the batch has one."""
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    max_line_bytes = MAX_SPARK_BINARY_BYTES
    line_nos: list[int] = []
    raws: list[bytes | None] = []
    errors: list[str | None] | None = None  # allocated on the first error only
    batch_bytes = 0
    for line_no, raw, error in iter_file_lines(path, start, end, first_line):
        size = 0 if raw is None else len(raw)
        if size > max_line_bytes:
            error = (
                f"line {line_no} of {path} has {size} bytes, more than a Spark binary "
                f"value can hold ({max_line_bytes})"
            )
            raw, size = None, 0
        if error is not None and errors is None:
            errors = [None] * len(raws)
        line_nos.append(line_no)
        raws.append(raw)
        if errors is not None:
            errors.append(error)
        batch_bytes += size
        if len(raws) >= batch_rows or batch_bytes >= max_batch_bytes:
            yield line_nos, raws, errors
            line_nos, raws, errors, batch_bytes = [], [], None, 0
    if raws:
        yield line_nos, raws, errors


def iter_line_batches(
    path: str,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    max_batch_bytes: int = MAX_BATCH_BYTES,
    *,
    start: int = 0,
    end: int | None = None,
    first_line: int = 1,
) -> Iterator[pa.RecordBatch]:
    """Yield the lines of one file as Arrow record batches in line order.

    A batch closes at ``batch_rows`` lines or once it holds ``max_batch_bytes`` of ``raw``,
    whichever comes first. A line too long for a Spark binary cell (over
    :data:`MAX_SPARK_BINARY_BYTES`) becomes a ``raw = None`` row with a ``read_error``
    instead of failing the task; its line number is kept, so later numbers stay exact.

    Examples:
        >>> batches = iter_line_batches("/data/a.jsonl", batch_rows=1000)  # doctest: +SKIP
    """
    for line_nos, raws, errors in iter_line_lists(path, batch_rows, max_batch_bytes,
                                                  start=start, end=end, first_line=first_line):
        yield lines_batch(path, line_nos, raws, errors)


# --------------------------------------------------------------------------------------
# The Spark Python Data Source
# --------------------------------------------------------------------------------------


class FilePartition(InputPartition):
    """Whole lines of one input file (all of it, or a byte range): one Spark task."""

    def __init__(
        self, index: int, path: str, start: int = 0, end: int | None = None,
        first_line: int = 1,
    ) -> None:
        super().__init__(path)
        self.index = index
        self.path = path
        self.start = start
        self.end = end
        self.first_line = first_line


class SnapLinesReader(DataSourceReader):
    """Reads each file of a fixed list as one partition, in line order, as Arrow batches.

    One partition per file means a single huge file is read by a single task (a gzip
    stream cannot be split anyway); parallelism comes from having many files.
    """

    def __init__(
        self, paths: list[str], batch_rows: int, max_batch_bytes: int, split_bytes: int = 0
    ) -> None:
        self.paths = paths
        self.batch_rows = batch_rows
        self.max_batch_bytes = max_batch_bytes
        self.split_bytes = split_bytes

    def partitions(self) -> list[InputPartition]:
        """:class:`FilePartition` s in file then line order: one per file, or, with
        ``split_bytes``, plain files larger than that cut at line boundaries
        (:func:`snap_spark.lines.plan_line_ranges`) so that one big file uses every core."""
        if not self.split_bytes:
            return [FilePartition(index, path) for index, path in enumerate(self.paths)]
        ranges = [r for path in self.paths for r in plan_line_ranges(path, self.split_bytes)]
        return [
            FilePartition(index, r.path, r.start, r.end, r.first_line)
            for index, r in enumerate(ranges)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Yield the file's lines as record batches (nothing when there are no files)."""
        # With no files Spark still runs one task, with partition None.
        if partition is None:
            return
        if not isinstance(partition, FilePartition):
            raise TypeError(f"expected a FilePartition, got {partition!r}")
        yield from iter_line_batches(
            partition.path, self.batch_rows, self.max_batch_bytes,
            start=partition.start, end=partition.end, first_line=partition.first_line,
        )


def _int_option(options: dict[str, str], key: str, default: int) -> int:
    text = options.get(key)
    if text is None:
        return default
    value = int(text)
    if value < 1:
        raise ValueError(f"option {key!r} of {DATA_SOURCE_NAME} must be at least 1, got {value}")
    return value


class SnapLinesDataSource(DataSource):
    """Python Data Source ``snap_lines``: one row per line of the listed files.

    Options:
        paths: JSON-encoded list of file paths, read as given (no folder expansion:
            :func:`list_input_files` does that on the driver).
        batch_rows: lines per Arrow batch (default :data:`DEFAULT_BATCH_ROWS`).
        max_batch_bytes: raw bytes per Arrow batch (default :data:`MAX_BATCH_BYTES`).

    :meth:`schema` is defined, so ``spark.read.format("snap_lines")`` needs no
    ``.schema(...)``. Prefer :func:`read_lines`, which lists, registers and loads.
    """

    @classmethod
    def name(cls) -> str:
        """The short name used with ``spark.read.format``."""
        return DATA_SOURCE_NAME

    def schema(self) -> StructType:
        """Always :data:`LINES_SCHEMA`."""
        return LINES_SCHEMA

    def reader(self, schema: StructType) -> SnapLinesReader:
        """A reader over the files of the ``paths`` option."""
        encoded = self.options.get("paths")
        if encoded is None:
            raise ValueError(f"{DATA_SOURCE_NAME} needs a 'paths' option (JSON list of files)")
        paths = json.loads(encoded)
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ValueError(f"{DATA_SOURCE_NAME} option 'paths' must be a JSON list of strings")
        return SnapLinesReader(
            paths,
            batch_rows=_int_option(self.options, "batch_rows", DEFAULT_BATCH_ROWS),
            max_batch_bytes=_int_option(self.options, "max_batch_bytes", MAX_BATCH_BYTES),
            split_bytes=int(self.options.get("split_bytes", "0")),
        )


# Sessions this process has registered the data source with (registering again would
# only replace it and log a warning).
_registered_sessions: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def register_data_source(spark: SparkSession) -> None:
    """Register ``snap_lines`` with ``spark``; calling it again is a no-op."""
    if spark in _registered_sessions:
        return
    spark.dataSource.register(SnapLinesDataSource)
    _registered_sessions.add(spark)


def split_size(total_bytes: int, parallelism: int) -> int:
    """Bytes per range when cutting plain files: about four ranges per core over the input
    (evens out uneven ranges), between 4 MiB (task overhead) and 128 MiB (memory per task)."""
    target = total_bytes // max(1, 4 * parallelism)
    return max(MIN_SPLIT_BYTES, min(MAX_SPLIT_BYTES, target))


def plan_input(
    spark: SparkSession, paths: Sequence[str], split_bytes: int | None
) -> tuple[list[str], int]:
    """List the input files and choose the range size (see :func:`split_size`)."""
    files = list_input_files(paths)
    if split_bytes is None:
        plain = sum(os.path.getsize(f) for f in files if not f.lower().endswith(".gz"))
        split_bytes = split_size(plain, spark.sparkContext.defaultParallelism)
    return files, split_bytes


def read_lines(
    spark: SparkSession,
    paths: Sequence[str],
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    split_bytes: int | None = None,
) -> DataFrame:
    """Read files and folders of NDJSON (optionally gzip) into one row per input line.

    Columns (:data:`LINES_SCHEMA`): ``source_file`` (absolute path), ``line_no`` (long,
    1-based), ``raw`` (binary, the line's exact bytes without its ``b"\\n"``; a ``b"\\r"``
    is kept), ``byte_len`` (int, ``len(raw)``), ``read_error`` (string, null on normal
    rows). Files are listed now, on the driver, by :func:`list_input_files` (which raises
    for a missing path). Plain files larger than ``split_bytes`` (default:
    :func:`split_size` of the input for this session's parallelism; ``0`` means one task
    per file) are cut at line boundaries into several partitions with exact line numbers;
    a gzip file is always one task. Partitions follow file then line order. Lines travel
    to the JVM as Arrow batches of ``batch_rows`` lines (capped at :data:`MAX_BATCH_BYTES`
    of raw bytes).

    A corrupt or truncated ``.gz`` file yields the lines decoded before the damage plus
    one row with the next ``line_no``, ``raw``/``byte_len`` null and ``read_error`` set; it
    does not fail the job (see :func:`iter_file_lines`). Files that cannot be read at all
    fail the task (and the job, after Spark's retries).

    Examples:
        >>> df = read_lines(spark, ["/data/archive"])  # doctest: +SKIP
        >>> df.where("read_error IS NULL").count()  # doctest: +SKIP
        200000
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    files, split_bytes = plan_input(spark, paths, split_bytes)
    register_data_source(spark)
    return (
        spark.read.format(DATA_SOURCE_NAME)
        .option("paths", json.dumps(files))
        .option("batch_rows", str(batch_rows))
        .option("split_bytes", str(split_bytes))
        .load()
    )
