"""Which bytes of which input file a run lands: files known by their content.

A file is identified by the SHA-256 of its bytes (``file_key``: the first 32 hex digits),
not by its name or modification time, and the ``ingested_files`` table keeps one row per
landed piece (:data:`snap_spark.schemas.tables.INGESTED_FILES`). Given that ledger,
:func:`plan_files` decides for each listed file:

- ``same``: these exact bytes were landed already (under this name or another: a copy, a
  rename, a symbolic link, a touched file), or earlier in this run: not landed again;
- ``grown``: the file starts with the bytes of its latest landed piece (same name, the
  piece ended at a line boundary) and has more: only the new bytes are landed, with line
  numbers continuing;
- ``changed``: the landed bytes of that name changed: landed again whole as a new version
  (said in the run's output, naming the old key);
- ``new``: never seen: landed whole.

A file the stream picked up but found gone before it could read it has a ledger row
without lines or bytes, keyed :func:`vanished_key` (``vanished:…``): if it comes back, it
is ``changed`` and lands whole.

Each run lands exactly the bytes it hashed (``end_byte`` is the size when hashed), even if
the file grows meanwhile: what grew is the next run's.

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
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from snap_spark import storage

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

    @property
    def lands(self) -> bool:
        return self.action != "same"

    def piece(self, lines: int) -> LandedPiece:
        """The ledger row of this plan once ``lines`` lines were landed."""
        return LandedPiece(self.source_file, self.file_key, self.prefix_key, self.start_byte,
                           self.end_byte, self.first_line, lines)


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


def plan_files(files: Sequence[str], landed: Iterable[LandedPiece]) -> list[FilePlan]:
    """Decide what to land of each file (in the order given) against the ledger rows."""
    by_key: dict[str, LandedPiece] = {}
    latest: dict[str, LandedPiece] = {}
    for piece in landed:
        by_key.setdefault(piece.file_key, piece)
        known = latest.get(piece.source_file)
        if known is None or piece.end_byte > known.end_byte:
            latest[piece.source_file] = piece
    in_run: dict[str, str] = {}
    plans: list[FilePlan] = []
    for path in files:
        size = storage.file_size(path)
        previous = latest.get(path)
        gz = path.lower().endswith(".gz")
        can_grow = (previous is not None and not gz and 0 < previous.end_byte < size)
        key, prefixes = file_digest(path, size,
                                    [previous.end_byte] if can_grow and previous else [])
        if key in by_key:
            other = by_key[key]
            where = "" if other.source_file == path else f" as {other.source_file}"
            plans.append(FilePlan(path, key, "same", 0, size, 1,
                                  note=f"same bytes already landed{where}"))
        elif key in in_run:
            plans.append(FilePlan(path, key, "same", 0, size, 1,
                                  note=f"same bytes as {in_run[key]} in this run"))
        elif (previous is not None and can_grow
              and prefixes.get(previous.end_byte) == previous.file_key
              and _byte_at(path, previous.end_byte - 1) == b"\n"):
            in_run[key] = path
            plans.append(FilePlan(
                path, key, "grown", previous.end_byte, size,
                previous.first_line + previous.lines, prefix_key=previous.file_key,
                note=f"grew by {size - previous.end_byte} bytes: landing lines from "
                f"{previous.first_line + previous.lines} on"))
        elif previous is not None:
            in_run[key] = path
            plans.append(FilePlan(
                path, key, "changed", 0, size, 1,
                note="came back after it vanished before it was landed: landed whole"
                if is_vanished_key(previous.file_key) else
                f"changed since it was landed as {previous.file_key}: landed again "
                "whole as a new version"))
        else:
            in_run[key] = path
            plans.append(FilePlan(path, key, "new", 0, size, 1))
    return plans
