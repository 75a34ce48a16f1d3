"""Split input files into lines exactly as every snap-spark reader does (Spark or not).

Lines end at ``\\n`` only; the final newline of a file does not start an extra line, an
empty line in the middle is a line, a ``\\r`` before ``\\n`` stays in the line (JSON treats
it as whitespace). ``.gz`` files are decompressed. A file that cannot be read to the end
yields the lines read so far and then one row with ``raw=None`` and the error, so that the
failure is visible in the tables instead of silently shortening the file.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from typing import BinaryIO

INPUT_SUFFIXES = (".jsonl", ".ndjson", ".json")


def is_input_file(name: str) -> bool:
    """True for ``.jsonl``, ``.ndjson``, ``.json`` and the same with ``.gz``."""
    lower = name.lower()
    if lower.endswith(".gz"):
        lower = lower[:-3]
    return lower.endswith(INPUT_SUFFIXES)


def open_input(path: str) -> BinaryIO:
    """Open a file for binary reading, decompressing ``.gz``."""
    if path.lower().endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def iter_file_lines(path: str) -> Iterator[tuple[int, bytes | None, str | None]]:
    """Yield ``(line_no, raw, read_error)`` for each line of ``path`` (1-based numbers)."""
    line_no = 0
    try:
        with open_input(path) as handle:
            pending: bytes | None = None
            for chunk in _lines(handle):
                if pending is not None:
                    line_no += 1
                    yield line_no, pending, None
                pending = chunk
            if pending is not None:
                line_no += 1
                yield line_no, pending, None
    except (OSError, EOFError, zlib.error) as exc:
        yield line_no + 1, None, f"{type(exc).__name__}: {exc}"


def _lines(handle: BinaryIO) -> Iterator[bytes]:
    """Lines without their ``\\n`` (binary iteration splits on ``\\n`` only)."""
    for line in handle:
        yield line[:-1] if line.endswith(b"\n") else line
