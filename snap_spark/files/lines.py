"""Split input files into lines exactly as every snap-spark reader does (Spark or not).

Lines end at ``b"\\n"`` only; the ``b"\\n"`` is not part of the line but everything else
is, including a ``b"\\r"`` before it, invalid UTF-8, NUL bytes and very long lines. A final
``b"\\n"`` does not start an extra line, an empty line elsewhere is a line, a last line
without ``b"\\n"`` is still a line, an empty file has no lines. Files ending in ``.gz`` (any
case) are gunzipped, multi-member streams included.

A corrupt or truncated ``.gz`` file yields the lines decoded before the damage, then ONE
record with the next line number, ``raw = None`` and a ``read_error`` saying what failed.
Other I/O errors are raised. This module imports no Spark: the command-line checker and the
jobs' landing tasks (:mod:`snap_spark.pipeline.read`) both use it.

Files are local paths or any location :mod:`snap_spark.files.storage` opens (``s3a://bkt/in``,
``gs://...``): local files are read with plain ``os``/``io`` calls as before (the fast path),
remote objects through pyarrow in large ranged reads; both split exactly alike.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, cast

from snap_spark.files import storage

#: File name endings read from folders (compared case-insensitively).
INPUT_SUFFIXES: tuple[str, ...] = (
    ".jsonl",
    ".ndjson",
    ".json",
    ".jsonl.gz",
    ".ndjson.gz",
    ".json.gz",
)

#: Bytes requested from a file per read call; memory use is about this plus the longest line.
READ_CHUNK_BYTES = 1024 * 1024

#: Bytes per read from a remote object: each read is one ranged request, so fewer, larger.
REMOTE_READ_CHUNK_BYTES = storage.REMOTE_BUFFER_BYTES

# What a damaged gzip stream raises while being read: a bad header or CRC
# (BadGzipFile), a stream that stops early (EOFError), bad deflate data (zlib.error).
_GZIP_DAMAGE = (gzip.BadGzipFile, EOFError, zlib.error)

LineRecord = tuple[int, bytes | None, str | None]


# --------------------------------------------------------------------------------------
# Listing input files
# --------------------------------------------------------------------------------------


def is_input_file_name(path: str) -> bool:
    """True when ``path`` ends in one of :data:`INPUT_SUFFIXES` (case-insensitive).

    Examples:
        >>> is_input_file_name("a/b.ndjson.gz"), is_input_file_name("a/b.txt")
        (True, False)
    """
    return path.lower().endswith(INPUT_SUFFIXES)


def list_input_files(paths: Sequence[str]) -> list[str]:
    """Expand files and folders into the sorted, de-duplicated locations to read.

    Folders are searched recursively for names ending in ``.jsonl``, ``.ndjson`` or
    ``.json``, optionally followed by ``.gz`` (case-insensitive); other files are ignored,
    and so are hidden entries (names starting with ``.`` or ``_``, folders included).
    A file named explicitly is always read, hidden or not, but it must have one of those
    endings. Local paths are made absolute with :func:`os.path.abspath` (symbolic links are
    not resolved; symbolic links to folders are followed, each real folder once); remote
    locations (see :mod:`snap_spark.files.storage`) are listed as URIs with the scheme given,
    e.g. ``s3a://bkt/in/a.jsonl``. A file reached twice is listed once.

    Raises:
        FileNotFoundError: a path does not exist (or a folder holds a broken link).
        ValueError: an explicitly named file has an unsupported ending, or a path is
            neither a regular file nor a folder, or has an unsupported scheme.
        OSError: a folder cannot be listed.

    Examples:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> for name in ("b.ndjson.gz", "a.jsonl", "notes.txt", "_SUCCESS.json"):
        ...     open(os.path.join(folder, name), "wb").close()
        >>> [os.path.basename(p) for p in list_input_files([folder])]
        ['a.jsonl', 'b.ndjson.gz']
        >>> import shutil; shutil.rmtree(folder)
    """
    if isinstance(paths, str):  # a bare string is a Sequence[str] of characters
        paths = [paths]
    found: set[str] = set()
    for given in paths:
        location = storage.normalize(given)
        kind = storage.path_kind(location)
        if kind == "dir":
            found.update(storage.list_files(location, INPUT_SUFFIXES))
        elif kind == "file":
            if not is_input_file_name(location):
                raise ValueError(
                    f"input file {given!r} does not end in one of {', '.join(INPUT_SUFFIXES)}"
                )
            found.add(location)
        elif kind == "other":
            raise ValueError(f"input path {given!r} is neither a regular file nor a folder")
        else:
            raise FileNotFoundError(errno.ENOENT, "input path does not exist", given)
    return sorted(found)


# --------------------------------------------------------------------------------------
# Splitting one file into lines (pure Python)
# --------------------------------------------------------------------------------------


class _LineSplitter:
    """Iterate the ``b"\\n"``-terminated lines of a byte stream, without the ``b"\\n"``.

    Reads fixed-size chunks and splits them with ``bytes.split`` (C speed); a line that
    spans chunks is joined once from its pieces, so a 50 MB line costs one copy, not a
    quadratic series. ``bytes_read`` and ``pending_bytes`` stay readable after an error.
    """

    def __init__(self, read: Callable[[int], bytes], chunk_bytes: int = READ_CHUNK_BYTES):
        self._read = read
        self._chunk_bytes = chunk_bytes
        #: (Decompressed) bytes taken from the stream so far.
        self.bytes_read = 0
        #: Bytes of the current line not yet terminated by ``b"\\n"``.
        self.pending_bytes = 0

    def __iter__(self) -> Iterator[bytes]:
        for lines in self.lists():
            yield from lines

    def lists(self) -> Iterator[list[bytes]]:
        """The lines in lists, one per chunk read that ends at least one line (the reader
        of a batch takes them whole, not a line at a time)."""
        pending: list[bytes] = []
        while True:
            chunk = self._read(self._chunk_bytes)
            if not chunk:
                break
            self.bytes_read += len(chunk)
            parts = chunk.split(b"\n")
            tail = parts.pop()  # after the chunk's last b"\n": an unfinished line, or b""
            if parts:
                if pending:
                    pending.append(parts[0])
                    parts[0] = b"".join(pending)
                    pending = []
                    self.pending_bytes = 0
                yield parts
            if tail:
                pending.append(tail)
                self.pending_bytes += len(tail)
        if pending:  # the file does not end in b"\n": its last line still counts
            self.pending_bytes = 0
            yield [b"".join(pending)]


class _Readable(Protocol):
    """What the line reader needs of a stream: ``read`` and ``seek`` (for ranges)."""

    def read(self, size: int = -1, /) -> bytes | None: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


class _Prefix:
    """The first ``limit`` bytes of a stream, as a stream (a gzip file read only as far as
    it was when it was hashed)."""

    def __init__(self, stream: BinaryIO | io.FileIO, limit: int) -> None:
        self._stream = stream
        self._left = limit

    def read(self, size: int = -1, /) -> bytes:
        if self._left <= 0:
            return b""
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = self._stream.read(size) or b""
        self._left -= len(data)
        return data


def _open_input(
    path: str, stack: contextlib.ExitStack, limit: int | None = None
) -> tuple[gzip.GzipFile | io.FileIO | BinaryIO, int]:
    """Open ``path`` for streaming, gunzipped when its name ends in ``.gz`` (any case);
    returns the stream and the chunk size to read it in. Closed with ``stack``. ``limit``
    reads a gzip file's first ``limit`` (compressed) bytes only."""
    gz = path.lower().endswith(".gz")
    if gz and limit is not None:
        raw = stack.enter_context(storage.open_input(path))
        prefix: Any = _Prefix(raw, limit)
        return stack.enter_context(gzip.GzipFile(fileobj=prefix, mode="rb")), READ_CHUNK_BYTES
    if storage.is_local(path):
        local = storage.local_path(path) if path[:5].lower() == "file:" else path
        if gz:
            return stack.enter_context(gzip.GzipFile(local, "rb")), READ_CHUNK_BYTES
        # unbuffered: the splitter reads large chunks itself
        return stack.enter_context(io.FileIO(local, "rb")), READ_CHUNK_BYTES
    if gz:
        # GzipFile does not close a stream it was given: the stack closes both.
        raw = stack.enter_context(storage.open_input(path))
        return stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb")), READ_CHUNK_BYTES
    return stack.enter_context(storage.open_range(path)), REMOTE_READ_CHUNK_BYTES


def iter_file_lines(
    path: str, start: int = 0, end: int | None = None, first_line_no: int = 1
) -> Iterator[LineRecord]:
    """Yield ``(line_no, raw, read_error)`` for every line of one file, streaming it.

    ``line_no`` counts from 1; ``raw`` is the line's exact bytes without its terminating
    ``b"\\n"`` (a ``b"\\r"`` before it is kept); ``read_error`` is ``None``. See the module
    docstring for the line rules. Memory use is about one read chunk plus the longest line.

    A ``.gz`` file is gunzipped. If its stream is corrupt or truncated, the lines decoded
    before the damage are yielded, then one last record ``(next line_no, None, message)``
    whose message names the file, the failure and how many bytes of an unterminated
    partial line were discarded. Lines yielded before that record come from a stream later
    found to be damaged (a CRC mismatch is only detected at the end of a gzip member).

    ``start``/``end``/``first_line_no`` read one :class:`LineRange` of a plain file (see
    :func:`plan_line_ranges`); the defaults read the whole file. For a gzip file ``end``
    bounds the compressed bytes read (the file as it was when it was hashed).

    Raises:
        OSError: the file cannot be opened or read (other than gzip damage).

    Examples:
        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False) as f:
        ...     _ = f.write(b'{"a":1}\\r\\n\\nlast')
        >>> list(iter_file_lines(f.name))
        [(1, b'{"a":1}\\r', None), (2, b'', None), (3, b'last', None)]
        >>> os.unlink(f.name)
    """
    for first, raws, error in iter_file_line_lists(path, start, end, first_line_no):
        for offset, raw in enumerate(raws):
            yield first + offset, raw, error


def iter_file_line_lists(
    path: str, start: int = 0, end: int | None = None, first_line_no: int = 1
) -> Iterator[tuple[int, list[bytes | None], str | None]]:
    """:func:`iter_file_lines` in lists: ``(line_no of the first, raws, None)``, a list per
    chunk read, then for a damaged gzip stream one last ``(line_no, [None], message)``.
    The same lines, numbers and message as :func:`iter_file_lines` (which is built on it);
    a reader that batches lines takes them a list at a time.

    Examples:
        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False) as f:
        ...     _ = f.write(b'a\\nb\\nc')
        >>> list(iter_file_line_lists(f.name, first_line_no=5))
        [(5, [b'a', b'b'], None), (7, [b'c'], None)]
        >>> os.unlink(f.name)
    """
    line_no = first_line_no - 1
    gz = path.lower().endswith(".gz")
    if gz and start:
        raise ValueError("a gzip file can only be read from its start")
    with contextlib.ExitStack() as stack:
        stream, chunk_bytes = _open_input(path, stack, end if gz else None)
        read: Callable[[int], bytes]
        # read1 returns what one decompression step produced, so a damaged stream loses
        # as little already-decoded data as possible.
        read = stream.read1 if isinstance(stream, gzip.GzipFile) else stream.read
        if not gz and (start or end is not None):
            read = _bounded_reader(stream, start, end)
        splitter = _LineSplitter(read, chunk_bytes)
        try:
            for raws in splitter.lists():
                yield line_no + 1, cast("list[bytes | None]", raws), None
                line_no += len(raws)
        except _GZIP_DAMAGE as exc:
            yield (
                line_no + 1,
                [None],
                f"corrupt or truncated gzip file {path}: {type(exc).__name__}: {exc} "
                f"(after line {line_no} and {splitter.bytes_read} decompressed bytes; "
                f"{splitter.pending_bytes} bytes of an unterminated partial line discarded)",
            )


def _bounded_reader(stream: _Readable, start: int, end: int | None) -> Callable[[int], bytes]:
    """A ``read(n)`` over bytes ``[start, end)`` of a seekable file."""
    stream.seek(start)
    remaining = [None if end is None else end - start]

    def read(size: int) -> bytes:
        left = remaining[0]
        if left is not None:
            if left <= 0:
                return b""
            size = min(size, left)
        data = stream.read(size) or b""
        if left is not None:
            remaining[0] = left - len(data)
        return data

    return read


@dataclass(frozen=True)
class LineRange:
    """Bytes ``[start, end)`` of a file holding whole lines, the first numbered ``first_line``.

    ``end`` is ``None`` for "to the end of the file" (and for gzip files, read whole).
    """

    path: str
    start: int
    end: int | None
    first_line: int


def plan_line_ranges(
    path: str, split_bytes: int, *, chunk_bytes: int = 8 * 1024 * 1024, start: int = 0,
    end: int | None = None, first_line: int = 1,
) -> list[LineRange]:
    """Cut a plain file into ranges of about ``split_bytes`` at line boundaries.

    Each cut falls just after a ``b"\\n"``, and the line numbers of each range are counted
    exactly (one pass over the file, counting newlines in C), so reading the ranges one
    after another yields the same lines and numbers as reading the file whole. Gzip files
    and files no larger than ``split_bytes`` are one range. ``start``, ``end`` and
    ``first_line`` plan only bytes ``[start, end)`` of the file (``start`` just after a
    ``b"\\n"``, its line numbered ``first_line``): a file that grew since it was landed.

    Examples:
        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False) as f:
        ...     _ = f.write(b"aa\\nbb\\ncc\\ndd")
        >>> [(r.start, r.end, r.first_line) for r in plan_line_ranges(f.name, 4)]
        [(0, 6, 1), (6, None, 3)]
        >>> os.unlink(f.name)
    """
    if split_bytes < 1:
        raise ValueError("split_bytes must be at least 1")
    if path.lower().endswith(".gz"):
        return [LineRange(path, 0, end, 1)]
    stop = storage.file_size(path) if end is None else end
    if stop - start <= split_bytes:
        return [LineRange(path, start, end, first_line)]
    ranges: list[LineRange] = []
    lines_before = first_line - 1
    boundary = start + split_bytes
    offset = start
    with storage.open_range(path, start) as handle:
        while offset < stop:
            chunk = handle.read(min(chunk_bytes, stop - offset))
            if not chunk:
                break
            chunk_end = offset + len(chunk)
            search_from = 0
            while boundary < chunk_end:
                newline = chunk.find(b"\n", max(boundary - offset, search_from))
                if newline < 0:
                    break  # the line crossing the boundary ends in a later chunk
                cut = offset + newline + 1
                line_at_cut = lines_before + chunk.count(b"\n", 0, newline + 1) + 1
                ranges.append(LineRange(path, start, cut, first_line))
                start, first_line = cut, line_at_cut
                boundary = cut + split_bytes
                search_from = newline + 1
            lines_before += chunk.count(b"\n")
            offset = chunk_end
            if boundary < offset:
                boundary = offset  # keep looking for the next newline in the next chunk
    if start < offset:
        ranges.append(LineRange(path, start, end, first_line))
    return ranges
