"""Read input files as line batches: the one read path of every snap-spark job.

Every line of every input file becomes exactly one row, nothing is parsed, decoded,
trimmed or dropped here (docs/architecture.md, *Input lines* and *Conservation*). Files are
listed (:func:`list_input_files`) and cut into line ranges (:func:`plan_ranges`); a range
is read as Arrow batches of ``(source_file, line_no, raw, byte_len, read_error)`` by
:func:`iter_line_lists` / :func:`iter_line_batches`, on top of the Spark-free splitter in
:mod:`snap_spark.files.lines`. The batch job's landing tasks (:mod:`snap_spark.pipeline.land`)
and the notebook API (:func:`read_lines`, :mod:`snap_spark.pipeline.transforms`) both run
on these ranges through :func:`over_ranges`.

Line rules:

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

import bisect
import functools
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from snap_spark.common.remote import parallelism
from snap_spark.files import storage
from snap_spark.files.lines import (
    INPUT_SUFFIXES,
    LineRange,
    is_input_file_name,
    iter_file_line_lists,
    iter_file_lines,
    list_input_files,
    plan_line_ranges,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "INPUT_SUFFIXES",
    "LINES_SCHEMA",
    "MAX_BATCH_BYTES",
    "RangesAhead",
    "is_input_file_name",
    "iter_file_lines",
    "iter_line_batches",
    "list_input_files",
    "over_ranges",
    "plan_ranges",
    "read_lines",
]

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
    errors)``; ``errors`` is ``None`` when no line of the batch has one.

    The lines come a read chunk at a time (:func:`iter_file_line_lists`) and are taken into
    a batch by slices, not one by one; a chunk with a line too long for Spark, or the record
    of a damaged gzip stream, goes line by line. Either way a batch ends at the same line.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    max_line_bytes = MAX_SPARK_BINARY_BYTES
    batch = _LineBatch()
    for first, part, read_error in iter_file_line_lists(path, start, end, first_line):
        lengths = [] if read_error is not None else list(map(len, part))  # type: ignore[arg-type]
        if read_error is None and max(lengths, default=0) <= max_line_bytes:
            taken = 0
            while taken < len(part):
                count, size, full = _slice_of(lengths, taken, batch_rows - len(batch.raws),
                                              max_batch_bytes - batch.bytes)
                batch.extend(first + taken, part[taken:taken + count], size)
                taken += count
                if full:
                    yield batch.take()
            continue
        for offset, raw in enumerate(part):
            line_no, error = first + offset, read_error
            size = 0 if raw is None else len(raw)
            if size > max_line_bytes:
                error = (
                    f"line {line_no} of {path} has {size} bytes, more than a Spark binary "
                    f"value can hold ({max_line_bytes})"
                )
                raw, size = None, 0
            batch.add(line_no, raw, error, size)
            if len(batch.raws) >= batch_rows or batch.bytes >= max_batch_bytes:
                yield batch.take()
    if batch.raws:
        yield batch.take()


class _LineBatch:
    """The lines of the batch :func:`iter_line_lists` is filling."""

    def __init__(self) -> None:
        self.line_nos: list[int] = []
        self.raws: list[bytes | None] = []
        self.errors: list[str | None] | None = None  # allocated on the first error only
        self.bytes = 0

    def add(self, line_no: int, raw: bytes | None, error: str | None, size: int) -> None:
        if error is not None and self.errors is None:
            self.errors = [None] * len(self.raws)
        self.line_nos.append(line_no)
        self.raws.append(raw)
        if self.errors is not None:
            self.errors.append(error)
        self.bytes += size

    def extend(self, first: int, raws: list[bytes | None], size: int) -> None:
        """Lines ``first, first + 1, ...`` without errors, of ``size`` bytes in all."""
        self.line_nos.extend(range(first, first + len(raws)))
        self.raws.extend(raws)
        if self.errors is not None:
            self.errors.extend([None] * len(raws))
        self.bytes += size

    def take(self) -> tuple[list[int], list[bytes | None], list[str | None] | None]:
        """The batch's lists; the batch starts again empty."""
        out = (self.line_nos, self.raws, self.errors)
        self.line_nos, self.raws, self.errors, self.bytes = [], [], None, 0
        return out


def _slice_of(lengths: list[int], at: int, rows: int, bytes_left: int
              ) -> tuple[int, int, bool]:
    """How many lines of a chunk whose lines have ``lengths``, from ``at``, a batch with
    room for ``rows`` lines and ``bytes_left`` bytes takes: ``(count, their bytes, whether
    the batch is then full)``. A batch is full at its last row, or at the first line that
    brings it to its bytes."""
    stop = min(len(lengths), at + rows)
    sizes = list(itertools.accumulate(itertools.islice(lengths, at, stop)))
    reached = bisect.bisect_left(sizes, bytes_left)
    if reached < len(sizes):
        return reached + 1, sizes[reached], True
    return stop - at, sizes[-1] if sizes else 0, stop - at == rows


def iter_line_batches(path: str, batch_rows: int = DEFAULT_BATCH_ROWS,
                      max_batch_bytes: int = MAX_BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """Yield the lines of one file as Arrow record batches in line order (a range of it:
    :func:`iter_line_lists` with ``start``, ``end`` and ``first_line``).

    A batch closes at ``batch_rows`` lines or once it holds ``max_batch_bytes`` of ``raw``,
    whichever comes first. A line too long for a Spark binary cell (over
    :data:`MAX_SPARK_BINARY_BYTES`) becomes a ``raw = None`` row with a ``read_error``
    instead of failing the task; its line number is kept, so later numbers stay exact.

    Examples:
        >>> path = tmp / "a.jsonl"
        >>> _ = path.write_bytes(b'{"id": 1}\\n\\nnot json\\r\\n{"id": 4}')
        >>> [batch.num_rows for batch in iter_line_batches(str(path), batch_rows=3)]
        [3, 1]
        >>> batch = next(iter_line_batches(str(path)))
        >>> batch.column("line_no").to_pylist(), batch.column("raw").to_pylist()
        ([1, 2, 3, 4], [b'{"id": 1}', b'', b'not json\\r', b'{"id": 4}'])
    """
    for line_nos, raws, errors in iter_line_lists(path, batch_rows, max_batch_bytes):
        yield lines_batch(path, line_nos, raws, errors)


# --------------------------------------------------------------------------------------
# Planning: which task reads which lines
# --------------------------------------------------------------------------------------


def split_size(total_bytes: int, parallelism: int) -> int:
    """Bytes per range when cutting plain files: about four ranges per core over the input
    (evens out uneven ranges), between 4 MiB (task overhead) and 128 MiB (memory per task)."""
    target = total_bytes // max(1, 4 * parallelism)
    return max(MIN_SPLIT_BYTES, min(MAX_SPLIT_BYTES, target))


def plan_ranges(
    spark: SparkSession,
    files: Sequence[str],
    split_bytes: int | None = None,
    pieces: Mapping[str, tuple[int, int | None, int]] | None = None,
    ahead: RangesAhead | None = None,
) -> list[LineRange]:
    """Cut listed input files into the line ranges one task each reads.

    ``split_bytes`` defaults to :func:`split_size` of the plain input for this session's
    parallelism; ``0`` means one range per file. Gzip files are always one range. Ranges
    follow file then line order. ``pieces`` reads only bytes ``[start, end)`` of a file,
    its first line numbered ``first_line`` (``path -> (start, end, first_line)``).
    ``ahead``: ranges planned earlier on a thread (:class:`RangesAhead`), used for every
    file they still hold for.
    """
    pieces = pieces or {}
    if split_bytes is None:
        split_bytes = split_size(_plain_bytes(files, pieces), parallelism(spark))
    if split_bytes == 0:
        return [LineRange(path, *pieces.get(path, WHOLE_FILE)) for path in files]
    planned = ahead.result(split_bytes) if ahead is not None else {}
    ranges: list[LineRange] = []
    for path in files:
        piece = pieces.get(path, WHOLE_FILE)
        known = planned.get(path)
        if known is not None and known[0] == piece:
            ranges.extend(known[1])
        else:
            ranges.extend(_piece_ranges(path, split_bytes, piece))
    return ranges


#: The piece of a file that is the whole file: ``(start, end, first_line)``.
WHOLE_FILE: tuple[int, int | None, int] = (0, None, 1)


def small_input(files: Sequence[str], pieces: Mapping[str, tuple[int, int | None, int]],
                limit: int) -> bool:
    """Whether ``files`` (their ``pieces``, ``path -> (start, end, first_line)``) are plain
    files of at most ``limit`` bytes in all; gzip files never are (their size says little
    of their lines).

    Examples:
        >>> p = tmp / "a.jsonl"
        >>> _ = p.write_bytes(b"x" * 100)
        >>> small_input([str(p)], {}, 100), small_input([str(p)], {str(p): (40, None, 2)}, 60)
        (True, True)
        >>> small_input([str(p)], {}, 99), small_input([str(tmp / "b.jsonl.gz")], {}, 10**9)
        (False, False)
    """
    if any(path.lower().endswith(".gz") for path in files):
        return False
    return _plain_bytes(files, pieces) <= limit


def _plain_bytes(files: Sequence[str], pieces: Mapping[str, tuple[int, int | None, int]]
                 ) -> int:
    """The bytes of ``files`` (their ``pieces``) that are not gzip files."""
    plain = 0
    for path in files:
        if not path.lower().endswith(".gz"):
            start, end, _ = pieces.get(path, WHOLE_FILE)
            plain += (storage.file_size(path) if end is None else end) - start
    return plain


def _piece_ranges(path: str, split_bytes: int, piece: tuple[int, int | None, int]
                  ) -> list[LineRange]:
    start, end, first_line = piece
    return plan_line_ranges(path, split_bytes, start=start, end=end, first_line=first_line)


class RangesAhead:
    """The line ranges of files the batch job expects to land, planned on a thread while
    the driver hashes the same files (:func:`snap_spark.pipeline.ledger.plan_files`).

    Both read every byte of each file; hashing holds no GIL, so the two reads overlap
    instead of following each other. Each file is planned whole, at the split size of
    all of them, from the size it has now. :func:`plan_ranges` (``ahead=``) uses a file's
    planned ranges only where they still hold: the same split size, and the file landed
    whole from the same size; it plans the others itself. Planning is only ever a reading
    of the file, so a plan that goes unused costs nothing but that read, and an error on
    the thread only means the file is planned again (where the error then surfaces).

    Examples:
        >>> _ = (tmp / "a.jsonl").write_bytes(b"aa\\nbb\\ncc\\n")
        >>> path = str(tmp / "a.jsonl")
        >>> ahead = RangesAhead([path], parallelism=2, split_bytes=4)
        >>> plan_ranges(spark, [path], 4, pieces={path: (0, 9, 1)}, ahead=ahead) == \\
        ...     plan_ranges(spark, [path], 4, pieces={path: (0, 9, 1)})
        True
    """

    def __init__(self, files: Sequence[str], parallelism: int,
                 split_bytes: int | None = None) -> None:
        import threading

        self._files = [path for path in files if not path.lower().endswith(".gz")]
        self._parallelism = parallelism
        self._split_bytes = split_bytes
        self._planned: dict[str, tuple[tuple[int, int | None, int], list[LineRange]]] = {}
        self._split: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._plan, name="snap-spark-ranges",
                                        daemon=True)
        self._thread.start()

    def _plan(self) -> None:
        try:
            sizes = {path: storage.file_size(path) for path in self._files}
            split = self._split_bytes
            if split is None:
                split = split_size(sum(sizes.values()), self._parallelism)
            self._split = split
            for path, size in sizes.items():
                if self._stop.is_set() or split == 0:
                    return
                piece = (0, size, 1)
                self._planned[path] = (piece, _piece_ranges(path, split, piece))
        except Exception:
            return

    def result(self, split_bytes: int) -> dict[
            str, tuple[tuple[int, int | None, int], list[LineRange]]]:
        """Wait for the thread; the files planned at ``split_bytes`` (none at another)."""
        self._thread.join()
        return dict(self._planned) if self._split == split_bytes else {}

    def cancel(self) -> None:
        """Plan no further file (the one being read is finished)."""
        self._stop.set()


def over_ranges(
    spark: SparkSession,
    ranges: Sequence[LineRange],
    fn: Callable[[LineRange, int], Iterator[pa.RecordBatch]],
    schema: StructType,
) -> DataFrame:
    """A DataFrame made by ``fn(range, index)`` for each range, one Spark task per range.

    It is a ``mapInArrow`` over ``spark.range(len(ranges))`` with one partition per range:
    Spark schedules the tasks, and no Data Source planning process runs per query.
    """
    count = max(1, len(ranges))
    return spark.range(len(ranges), numPartitions=count).mapInArrow(
        functools.partial(_map_ranges, list(ranges), fn), schema
    )


def _map_ranges(
    ranges: Sequence[LineRange],
    fn: Callable[[LineRange, int], Iterator[pa.RecordBatch]],
    batches: Iterable[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield from fn(ranges[index], index)


def _range_lines(
    batch_rows: int, max_batch_bytes: int, part: LineRange, _index: int
) -> Iterator[pa.RecordBatch]:
    for line_nos, raws, errors in iter_line_lists(part.path, batch_rows, max_batch_bytes,
                                                  start=part.start, end=part.end,
                                                  first_line=part.first_line):
        yield lines_batch(part.path, line_nos, raws, errors)


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
    rows). Files are listed now, on the driver (:func:`list_input_files` raises for a
    missing path) and cut into ranges by :func:`plan_ranges`; each range is one task, and
    partitions follow file then line order. Lines travel to the JVM as Arrow batches of
    ``batch_rows`` lines (capped at :data:`MAX_BATCH_BYTES` of raw bytes).

    A corrupt or truncated ``.gz`` file yields the lines decoded before the damage plus
    one row with the next ``line_no``, ``raw``/``byte_len`` null and ``read_error`` set; it
    does not fail the job (see :func:`iter_file_lines`). Files that cannot be read at all
    fail the task (and the job, after Spark's retries).

    Examples:
        >>> import gzip
        >>> _ = (tmp / "a.jsonl").write_bytes(b'{"id": 1}\\nnot json\\n')
        >>> cut_short = gzip.compress(b'{"id": 3}\\n{"id": 4}\\n')[:-12]
        >>> _ = (tmp / "b.jsonl.gz").write_bytes(cut_short)
        >>> df = read_lines(spark, [str(tmp)])  # a folder: its input files
        >>> for row in df.orderBy("source_file", "line_no").collect():
        ...     raw = None if row.raw is None else bytes(row.raw)  # bytearray before 4.2
        ...     print(row.source_file.rsplit("/", 1)[1], row.line_no, raw, row.read_error)
        a.jsonl 1 b'{"id": 1}' None
        a.jsonl 2 b'not json' None
        b.jsonl.gz 1 b'{"id": 3}' None
        b.jsonl.gz 2 None corrupt or truncated gzip file ...
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    ranges = plan_ranges(spark, list_input_files(paths), split_bytes)
    return over_ranges(
        spark, ranges, functools.partial(_range_lines, batch_rows, MAX_BATCH_BYTES),
        LINES_SCHEMA,
    )


#: ``0``: a large landing does not start Spark's Python workers ahead (for before/after
#: measurements; what a run computes is the same either way).
WARM_WORKERS_ENV = "SNAP_SPARK_WARM_WORKERS"


def warm_workers(spark: SparkSession) -> threading.Thread | None:
    """Start Spark's Python workers, one per core, on a thread, while the driver plans a
    large landing (hashing the input files, reading the ledger): a job of empty
    ``mapInArrow`` tasks. The worker daemon's start and imports (a noticeable cost on a cold
    run: docs/speed.md, *Figures behind the code*) then overlap the driver's planning, and
    the landing's first tasks find idle workers (Spark reuses them). Returns the thread to
    join, or ``None`` when ``SNAP_SPARK_WARM_WORKERS=0``. A failure is ignored: it was only
    a head start, and the landing starts its workers itself.

    Example (with a session)::

        warming = warm_workers(spark)   # then plan, then land; warming.join() at the end
    """
    import os

    if os.environ.get(WARM_WORKERS_ENV, "").strip() == "0":
        return None
    cores = parallelism(spark)

    def start() -> None:
        try:
            spark.range(cores, numPartitions=cores).mapInArrow(_no_rows, "id long").collect()
        except Exception:  # a head start only (see the docstring)
            return

    thread = threading.Thread(target=start, name="snap-spark workers warm-up", daemon=True)
    thread.start()
    return thread


def _no_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function that reads its input and yields nothing."""
    for _ in batches:
        pass
    yield from ()
