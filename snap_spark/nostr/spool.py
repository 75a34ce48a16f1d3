"""The live stream's spool: an append-only folder of relay deliveries, read by position.

A live relay stream (:mod:`snap_spark.nostr.live`) must not lose what a relay sent only
once: an ephemeral event (kind 21339) is forwarded to the subscribers connected at that
moment and stored nowhere. So the tap (:mod:`snap_spark.nostr.tap`) writes every delivery
to disk the moment it arrives, and the streaming query reads the spool by *position*:
Spark's offsets are byte positions in the spool, kept in the query's checkpoint, so a
query restarted after a crash reads exactly the deliveries it had not committed, and a
re-run micro-batch reads exactly the same lines again.

Layout: ``<folder>/<start>.jsonl`` segments, ``start`` the position (20 digits) of the
segment's first byte in the spool as a whole; a segment is closed once it holds
:data:`SEGMENT_BYTES` and the next one starts where it ends. Each line is one delivery as
an archive envelope, ``{"received_at": <unix seconds>, "relay": "<url>", "event": {...}}``,
so a spool folder is also an archive that ``jobs/ingest_nostr.py --input`` reads.

Rules that make positions exact:

- a writer appends whole lines with one ``write`` on an ``O_APPEND`` descriptor, and a
  reader returns whole lines only (a line is complete once its ``\\n`` is written), so a
  reader never stops inside a line;
- a writer that starts on a spool whose last line has no ``\\n`` (its process was killed
  in the middle of a write) cuts that partial line off first: no reader has returned it;
- one writer at a time (:class:`SpoolWriter` takes an exclusive ``flock`` on
  ``<folder>/.writer.lock``; a second writer is refused at once).

Examples:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with SpoolWriter(folder) as spool:
    ...     _ = spool.append([b'{"a":1}', b'{"b":2}'])
    >>> [(pos, line) for pos, line in read_lines(folder, 0).lines]
    [(0, b'{"a":1}'), (8, b'{"b":2}')]
    >>> read_lines(folder, 0).end, read_lines(folder, 8, max_bytes=1).end
    (16, 16)
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

#: A segment is closed once it holds this many bytes (64 MiB) and the next one begins.
SEGMENT_BYTES: Final = 64 << 20
#: A read returns at most about this many bytes of lines (whole lines; at least one).
READ_BYTES: Final = 16 << 20
_SEGMENT = re.compile(r"^(\d{20})\.jsonl$")
_LOCK_NAME: Final = ".writer.lock"


class SpoolBusy(RuntimeError):
    """Another process is writing the spool (one writer at a time)."""


def segment_name(start: int) -> str:
    """The file name of the segment starting at ``start``.

    Examples:
        >>> segment_name(1234)
        '00000000000000001234.jsonl'
    """
    return f"{start:020d}.jsonl"


def segments(folder: str) -> list[tuple[int, str]]:
    """``(start, path)`` of every segment of ``folder``, in order (none when it is absent)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), os.path.join(folder, name))
             for name in names if (m := _SEGMENT.match(name))]
    return sorted(found)


@dataclass
class SpoolRead:
    """Whole lines read from a spool: ``lines`` as ``(position, bytes without "\\n")``, and
    ``end``, the position just after the last one (the start when there was none)."""

    end: int
    lines: list[tuple[int, bytes]] = field(default_factory=list)


def read_lines(folder: str, start: int, end: int | None = None, *,
               max_bytes: int = READ_BYTES) -> SpoolRead:
    """The whole lines of the spool from position ``start`` (a line start) up to ``end``
    (a line end given by an earlier read: exactly those lines), or, without ``end``, up to
    about ``max_bytes`` of complete lines (at least one when there is one).

    Raises:
        ValueError: ``end`` given but the spool does not hold complete lines up to it (a
            spool changed behind the stream's back).
    """
    out = SpoolRead(end=start)
    budget_end = end if end is not None else start + max(max_bytes, 1)
    for seg_start, path in segments(folder):
        if out.end >= budget_end and (end is not None or out.lines):
            break
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:  # deleted once consumed: it lies before ``start``
            continue
        seg_end = seg_start + size
        if seg_end <= out.end:
            continue
        if seg_start > out.end:
            raise ValueError(f"spool {folder}: no segment holds position {out.end}")
        with open(path, "rb") as handle:
            handle.seek(out.end - seg_start)
            data = handle.read(min(seg_end, budget_end) - out.end)
            if end is None and not out.lines and b"\n" not in data:
                # the first line is longer than the budget: read it whole, and only it
                while len(data) < seg_end - out.end and b"\n" not in data[-(1 << 16):]:
                    data += handle.read(min(1 << 16, seg_end - out.end - len(data)))
                first = data.find(b"\n")
                data = data[:first + 1] if first >= 0 else data
        cut = data.rfind(b"\n")
        if cut < 0:
            break  # the next line is not complete yet
        position = out.end
        for line in data[:cut].split(b"\n"):
            out.lines.append((position, line))
            position += len(line) + 1
        out.end = position
        if out.end < seg_end:
            break  # over the budget, or the segment ends with a line still being written
    if end is not None and out.end != end:
        raise ValueError(f"spool {folder}: holds complete lines up to {out.end}, "
                         f"not up to {end}")
    return out


def remove_before(folder: str, position: int) -> int:
    """Delete the segments that end at or before ``position`` (all read and committed),
    keeping the last one; the number deleted."""
    found = segments(folder)
    removed = 0
    for (_start, path), (next_start, _next) in itertools.pairwise(found):
        if next_start <= position:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
                removed += 1
    return removed


class SpoolWriter:
    """The one writer of a spool folder (see the module docstring).

    Use as a context manager, or call :meth:`close`. :meth:`append` is safe to call from
    several threads.
    """

    def __init__(self, folder: str, *, segment_bytes: int = SEGMENT_BYTES) -> None:
        import threading

        self.folder = folder
        self.segment_bytes = segment_bytes
        os.makedirs(folder, exist_ok=True)
        self._lock_fd = os.open(os.path.join(folder, _LOCK_NAME), os.O_RDWR | os.O_CREAT,
                                0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise SpoolBusy(f"spool {folder} is being written by another process") from None
        self._mutex = threading.Lock()
        found = segments(folder)
        if not found:
            self._start = 0
            self._open(0)
        else:
            self._start, path = found[-1]
            self._cut_partial_line(path)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self._size = os.fstat(self._fd).st_size

    @staticmethod
    def _cut_partial_line(path: str) -> None:
        size = os.path.getsize(path)
        if size == 0:
            return
        with open(path, "rb+") as handle:
            # find the last "\n" from the end, in blocks
            block = 1 << 16
            end = size
            while end > 0:
                start = max(0, end - block)
                handle.seek(start)
                data = handle.read(end - start)
                cut = data.rfind(b"\n")
                if cut >= 0:
                    keep = start + cut + 1
                    break
                end = start
            else:
                keep = 0
            if keep != size:
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())

    def _open(self, start: int) -> None:
        path = os.path.join(self.folder, segment_name(start))
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._start = start

    @property
    def end(self) -> int:
        """The position just after the last line written."""
        return self._start + self._size

    def append(self, lines: Iterable[bytes]) -> int:
        """Append ``lines`` (each without ``\\n``, none containing one) in one write; the
        spool's end position after them."""
        lines = list(lines)
        if any(b"\n" in line for line in lines):
            raise ValueError("a spool line contains a newline")
        body = b"".join(line + b"\n" for line in lines)
        if not body:
            return self.end
        with self._mutex:
            view = memoryview(body)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            self._size += len(body)
            if self._size >= self.segment_bytes:
                os.fsync(self._fd)
                os.close(self._fd)
                self._open(self._start + self._size)
                self._size = 0
            return self.end

    def close(self) -> None:
        """Flush to disk and release the spool."""
        with self._mutex:
            if self._fd >= 0:
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1

    def __enter__(self) -> SpoolWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
