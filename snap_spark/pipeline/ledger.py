"""Which bytes of which input file a run lands: files known by their content.

A file is identified by the SHA-256 of its bytes (``file_key``: the first 32 hex digits),
not by its name or modification time, and the ``ingested_files`` table keeps one row per
landed piece (:data:`snap_spark.schemas.tables.INGESTED_FILES`). Given that ledger,
:func:`plan_files` decides for each listed file:

- ``same``: these exact bytes were landed already (under this name or another: a copy, a
  rename, a symbolic link, a touched file), or earlier in this run: not landed again;
- ``grown``: the file starts with the bytes of its latest landed piece (same name) and has
  more: only the new bytes are landed, with line numbers continuing. When that piece ended
  in the middle of a line (no final newline: its writer was still appending), its last
  line was landed as it stood then; the continuation starts at that line again (same byte,
  same line number) and lands it completed, and the plan names the landed row it replaces
  (:attr:`FilePlan.replaces`, a :class:`PartialLine`), which the commit removes
  (:func:`snap_spark.pipeline.commit.commit_pass`). Lines that ended with a newline are
  never landed again;
- ``changed``: the landed bytes of that name changed: landed again whole as a new version
  (said in the run's output, naming the old key);
- ``new``: never seen: landed whole.

A file the stream picked up but found gone before it could read it has a ledger row
without lines or bytes, keyed :func:`vanished_key` (``vanished:…``): if it comes back, it
is ``changed`` and lands whole.

Each run lands exactly the bytes it hashed (``end_byte`` is the size when hashed), even if
the file grows meanwhile: what grew is the next run's. A file that ends without a newline
lands its last line too: a one-off run over such a file gets every line, and a later run
that finds the line completed replaces its row. In the ledger a piece that replaces the
last line of the piece it continues starts before that piece's end
(:func:`replaced_lines` reads them back); every other continuation starts at its end.

Examples:
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "a.jsonl")
    >>> _ = open(path, "wb").write(b"one\\n")
    >>> first = plan_files([path], [])[0]
    >>> first.action, first.start_byte, first.end_byte
    ('new', 0, 4)
    >>> _ = open(path, "ab").write(b"two\\n")
    >>> landed = LandedPiece(path, first.file_key, None, 0, 4, 1, 1)
    >>> grown = plan_files([path], [landed])[0]
    >>> grown.action, grown.start_byte, grown.first_line, grown.prefix_key == first.file_key
    ('grown', 4, 2, True)

    A piece that ended in the middle of a line is continued from that line's start:

    >>> _ = open(path, "ab").write(b"thr")
    >>> cut = plan_files([path], [grown.piece(1)])[0]
    >>> cut.action, cut.start_byte, cut.end_byte, cut.replaces is None
    ('grown', 8, 11, True)
    >>> _ = open(path, "ab").write(b"ee\\n")
    >>> done = plan_files([path], [grown.piece(1), cut.piece(1)])[0]
    >>> done.action, done.start_byte, done.first_line, done.replaces.line_no
    ('grown', 8, 3, 3)
    >>> done.replaces.file_key == cut.file_key
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from snap_spark.files import storage

#: ``file_key`` prefix of the ledger row of a file that vanished before it was landed.
VANISHED_PREFIX = "vanished:"


def vanished_key(path: str, batch_id: int) -> str:
    """The ledger ``file_key`` of ``path`` vanished in micro-batch ``batch_id``."""
    digest = hashlib.sha256(f"{path}\n{batch_id}".encode()).hexdigest()[:23]
    return VANISHED_PREFIX + digest


def is_vanished_key(file_key: str) -> bool:
    """True for the ledger row of a file that vanished before it was landed."""
    return file_key.startswith(VANISHED_PREFIX)


#: Delta app transaction ids of the batch job's commits: this prefix and a digest of the
#: file keys a commit holds (:func:`batch_app_id`).
APP_ID_PREFIX = "snap-spark/verify_messages/"


def batch_app_id(keys: Sequence[str]) -> str:
    """Delta app transaction id naming one set of files (order does not matter).

    Examples:
        >>> batch_app_id(["b", "a"]) == batch_app_id(["a", "b"])
        True
        >>> batch_app_id(["a"]).startswith(APP_ID_PREFIX)
        True
    """
    digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:32]
    return APP_ID_PREFIX + digest


#: Bytes read per call while hashing.
HASH_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class LandedPiece:
    """One row of ``ingested_files``: bytes ``[start_byte, end_byte)`` of ``source_file``,
    lines ``first_line`` .. ``first_line + lines - 1``, landed under ``file_key`` (the hash
    of the file's bytes ``[0, end_byte)``)."""

    source_file: str
    file_key: str
    prefix_key: str | None
    start_byte: int
    end_byte: int
    first_line: int
    lines: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> LandedPiece:
        return cls(row["source_file"], row["file_key"], row["prefix_key"],
                   int(row["start_byte"]), int(row["end_byte"]), int(row["first_line"]),
                   int(row["lines"]))


@dataclass(frozen=True)
class PartialLine:
    """The unterminated last line of a landed piece, which a continuation lands again
    completed: row ``line_no`` of ``file_key`` in ``raw_messages`` and ``messages``, bytes
    ``[start_byte, end_byte)`` of ``source_file`` (its bytes as they were landed)."""

    source_file: str
    file_key: str
    line_no: int
    start_byte: int
    end_byte: int


@dataclass(frozen=True)
class FilePlan:
    """What a run does with one listed file (see the module doc for ``action``)."""

    source_file: str
    file_key: str
    action: str  # "new" | "grown" | "changed" | "same"
    start_byte: int
    end_byte: int
    first_line: int
    prefix_key: str | None = None
    note: str = ""
    #: ``grown`` from a piece that ended in the middle of a line: the row of that line,
    #: which this plan lands again completed (the commit removes the old row)
    replaces: PartialLine | None = None

    @property
    def lands(self) -> bool:
        return self.action != "same"

    def piece(self, lines: int) -> LandedPiece:
        """The ledger row of this plan once ``lines`` lines were landed."""
        return LandedPiece(self.source_file, self.file_key, self.prefix_key, self.start_byte,
                           self.end_byte, self.first_line, lines)


def replaced_lines(ledger: Iterable[LandedPiece]) -> dict[str, int]:
    """The landed rows that later pieces replaced, read from the ledger: for each piece whose
    last line a continuation landed again (the continuation starts before the end of the
    piece its ``prefix_key`` names), that piece's ``file_key`` and how many of its lines,
    at its end, are in the continuation's rows instead (one: the unfinished last line).

    Examples:
        >>> first = LandedPiece("a", "k1", None, 0, 10, 1, 3)  # line 3 unfinished
        >>> then = LandedPiece("a", "k2", "k1", 7, 20, 3, 2)   # lands line 3 again
        >>> replaced_lines([first, then])
        {'k1': 1}
        >>> replaced_lines([first, LandedPiece("a", "k2", "k1", 10, 20, 4, 2)])
        {}
    """
    pieces = list(ledger)
    by_key = {piece.file_key: piece for piece in pieces}
    replaced: dict[str, int] = {}
    for piece in pieces:
        prefix = by_key.get(piece.prefix_key) if piece.prefix_key is not None else None
        if prefix is not None and piece.start_byte < prefix.end_byte:
            lines = prefix.first_line + prefix.lines - piece.first_line
            if lines > 0:
                replaced[prefix.file_key] = max(replaced.get(prefix.file_key, 0), lines)
    return replaced


def file_digest(location: str, end: int, marks: Iterable[int] = ()) -> tuple[str, dict[int, str]]:
    """The key of bytes ``[0, end)`` of a file, and the key of each prefix ``[0, mark)``.

    Raw bytes are hashed (a gzip file is not decompressed). A file shorter than ``end`` is
    hashed as far as it goes.

    Examples:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        ...     _ = f.write(b"ab\\ncd\\n"); f.flush()
        ...     key, prefixes = file_digest(f.name, 6, [3])
        >>> key == hashlib.sha256(b"ab\\ncd\\n").hexdigest()[:32]
        True
        >>> prefixes[3] == hashlib.sha256(b"ab\\n").hexdigest()[:32]
        True
    """
    wanted = sorted(m for m in set(marks) if 0 <= m <= end)
    hasher = hashlib.sha256()
    prefixes: dict[int, str] = {}
    offset = 0
    with storage.open_range(location) as stream:
        while offset < end:
            step = min(HASH_CHUNK_BYTES, end - offset)
            if wanted and wanted[0] - offset < step:
                step = wanted[0] - offset
            if step:
                chunk = stream.read(step)
                if not chunk:
                    break
                hasher.update(chunk)
                offset += len(chunk)
            while wanted and wanted[0] == offset:
                prefixes[wanted.pop(0)] = hasher.hexdigest()[:32]
    while wanted and wanted[0] <= offset:
        prefixes[wanted.pop(0)] = hasher.hexdigest()[:32]
    return hasher.hexdigest()[:32], prefixes


def _byte_at(location: str, offset: int) -> bytes:
    with storage.open_range(location, offset) as stream:
        return stream.read(1) or b""


#: Bytes read per step while looking back for the start of a piece's last line.
_BACK_STEP_BYTES = 1024 * 1024


def last_line_start(location: str, start: int, end: int) -> int:
    """Where the last line of bytes ``[start, end)`` of a file starts: just after its last
    ``b"\\n"`` before ``end - 1``, else ``start``.

    Examples:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        ...     _ = f.write(b"ab\\ncd\\nef"); f.flush()
        ...     last_line_start(f.name, 0, 8), last_line_start(f.name, 6, 8)
        (6, 6)
    """
    stop = end - 1  # the byte at end - 1 belongs to the last line, newline or not
    with storage.open_range(location, start) as stream:
        while stop > start:
            step = min(_BACK_STEP_BYTES, stop - start)
            stream.seek(stop - step)
            chunk = stream.read(step)
            at = chunk.rfind(b"\n")
            if at >= 0:
                return stop - step + at + 1
            stop -= step
    return start


def _continuation(path: str, key: str, size: int, previous: LandedPiece) -> FilePlan:
    """The ``grown`` plan of ``path`` (``size`` bytes, key ``key``), whose first
    ``previous.end_byte`` bytes are those of the landed piece ``previous``."""
    next_line = previous.first_line + previous.lines
    if _byte_at(path, previous.end_byte - 1) == b"\n":
        return FilePlan(
            path, key, "grown", previous.end_byte, size, next_line,
            prefix_key=previous.file_key,
            note=f"grew by {size - previous.end_byte} bytes: landing lines from "
            f"{next_line} on")
    # the piece ended in the middle of its last line, which was landed as it stood: land
    # it again from its start, completed (or longer), and replace its row
    start = last_line_start(path, previous.start_byte, previous.end_byte)
    line_no = next_line - 1
    return FilePlan(
        path, key, "grown", start, size, line_no, prefix_key=previous.file_key,
        replaces=PartialLine(path, previous.file_key, line_no, start, previous.end_byte),
        note=f"grew by {size - previous.end_byte} bytes after a line landed unfinished: "
        f"landing lines from {line_no} on, line {line_no} replacing the row landed "
        "before")


def plan_files(files: Sequence[str], landed: Iterable[LandedPiece],
               upto: Mapping[str, int] | None = None) -> list[FilePlan]:
    """Decide what to land of each file (in the order given) against the ledger rows; a
    file named in ``upto`` is taken as its first ``upto[path]`` bytes (what the stream's
    landing watch lands of a file whose writer is still on its last line)."""
    index = LedgerIndex(landed)
    in_run: dict[str, str] = {}
    limits = upto or {}
    return [index.plan(path, in_run, limits.get(path)) for path in files]


class LedgerIndex:
    """The ledger rows ``landed`` indexed for :func:`plan_files`: by key, and each file's
    latest piece (the one that ends last). The stream plans each file Spark lists with one
    (:mod:`snap_spark.stream.stream_job`)."""

    def __init__(self, landed: Iterable[LandedPiece]) -> None:
        self.by_key: dict[str, LandedPiece] = {}
        self.latest: dict[str, LandedPiece] = {}
        for piece in landed:
            self.by_key.setdefault(piece.file_key, piece)
            known = self.latest.get(piece.source_file)
            if known is None or piece.end_byte > known.end_byte:
                self.latest[piece.source_file] = piece

    def plan(self, path: str, in_run: dict[str, str] | None = None, upto: int | None = None
             ) -> FilePlan:
        """What to land of ``path`` as it is now (its bytes hashed here; only the first
        ``upto`` when given); ``in_run`` maps the keys planned earlier in the same run to
        their files, and gets this one's.

        Raises:
            FileNotFoundError: ``path`` is gone.
        """
        in_run = {} if in_run is None else in_run
        size = storage.file_size(path)
        if upto is not None:
            size = min(size, upto)
        previous = self.latest.get(path)
        gz = path.lower().endswith(".gz")
        can_grow = (previous is not None and not gz and 0 < previous.end_byte < size)
        key, prefixes = file_digest(path, size,
                                    [previous.end_byte] if can_grow and previous else [])
        if key in self.by_key:
            other = self.by_key[key]
            where = "" if other.source_file == path else f" as {other.source_file}"
            return FilePlan(path, key, "same", 0, size, 1,
                            note=f"same bytes already landed{where}")
        if key in in_run:
            return FilePlan(path, key, "same", 0, size, 1,
                            note=f"same bytes as {in_run[key]} in this run")
        in_run[key] = path
        if (previous is not None and can_grow and previous.lines > 0
                and prefixes.get(previous.end_byte) == previous.file_key):
            return _continuation(path, key, size, previous)
        if previous is not None:
            return FilePlan(
                path, key, "changed", 0, size, 1,
                note="came back after it vanished before it was landed: landed whole"
                if is_vanished_key(previous.file_key) else
                f"changed since it was landed as {previous.file_key}: landed again "
                "whole as a new version")
        return FilePlan(path, key, "new", 0, size, 1)
