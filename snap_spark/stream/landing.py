"""Landing-folder files that change after the stream picked them up.

Spark's file source reads each path of the landing folder once, when it first lists it.
What happens to a file after that is this module's:

- **grown**: the file starts with the bytes the stream landed and has more. The new lines
  land as a continuation (line numbers go on, the ledger row names the piece it continues),
  exactly as the batch job lands a grown file (:mod:`snap_spark.pipeline.ledger`): when
  the stream had landed a last line its writer had not finished, that line lands again
  completed and its earlier row is removed.
- **changed**: the landed bytes were rewritten (or the file got shorter). The file lands
  again whole as a new version, as the batch job does, with a line saying so.
- **vanished**: Spark listed the file for a micro-batch, but it was gone before its lines
  could be read. One line names it and says that none of its lines landed; the ledger
  keeps a row for it (``file_key`` ``vanished:…``, no lines), so the audit counts it and
  the file, if it comes back, lands as a new version.

:func:`watch_landing` finds the grown and changed files by comparing the landing folder
with the ledger (``ingested_files``) and lands them with the batch job's run; the stream
calls it when it starts, after each micro-batch it commits, once per trigger interval
while no micro-batch runs, and when it stops. Those lines are decided against the lake
like every other writer's, so the verdicts are the same as if the whole file had arrived
at once (docs/verdicts.md).

A file whose last line is unfinished and that was modified within :data:`SETTLE_SECONDS`
lands its complete lines only; the last one waits until it is finished or the file has not
changed for that long (then it lands as it stands, and is replaced if it grows later).
Waiting changes no verdict, only how often a line being written is landed.

Examples:
    >>> vanished_key("/landing/a.jsonl", 7).startswith("vanished:")
    True
    >>> is_vanished_key(vanished_key("/landing/a.jsonl", 7)), is_vanished_key("0f" * 16)
    (True, False)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from snap_spark.common.console import log
from snap_spark.files import storage
from snap_spark.pipeline.ledger import is_vanished_key, vanished_key

__all__ = ["LandingChanges", "LandingWatch", "is_vanished_key", "spark_listed_files",
           "vanished_files", "vanished_key"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from snap_spark.pipeline.commit import JobResult
    from snap_spark.settings import VerifySettings

@dataclass
class LandingChanges:
    """What one look at the landing folder found and landed."""

    grown: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    #: the batch job's result for the lines landed (``None``: nothing landed)
    result: JobResult | None = None

    @property
    def files(self) -> int:
        return len(self.grown) + len(self.changed)


#: A grown file whose last line is unfinished (no final newline) and that was modified less
#: than this many seconds ago lands its complete lines only, and is looked at again later:
#: its writer is most likely still on the last line, which would be landed unfinished and
#: replaced a moment later.
SETTLE_SECONDS = 30.0


def still_writing(path: str, now: float | None = None, settle: float = SETTLE_SECONDS
                  ) -> bool:
    """True when ``path`` ends in an unfinished line and was modified within ``settle``
    seconds of ``now``.

    Examples:
        >>> import os, tempfile, time
        >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
        >>> _ = open(path, "wb").write(b'{"a": 1}\\n{"b"')
        >>> still_writing(path), still_writing(path, now=time.time() + 60)
        (True, False)
        >>> _ = open(path, "ab").write(b': 2}\\n')
        >>> still_writing(path)
        False
    """
    import time

    stat = storage.file_stat(path)
    if stat.size == 0 or path.lower().endswith(".gz"):
        return False
    with storage.open_range(path, stat.size - 1) as stream:
        if stream.read(1) == b"\n":
            return False
    modified = (stat.mtime_ns or 0) / 1e9
    return (time.time() if now is None else now) - modified < settle


class LandingWatch:
    """Finds landing-folder files that grew or changed since the stream landed them, and
    lands them (:func:`snap_spark.pipeline.batch_job.run`). Each file's size and modification
    time are remembered once looked at, so an unchanged file is hashed once per process."""

    def __init__(self, landing: str, lake_dir: str, settings: VerifySettings) -> None:
        self.landing, self.lake_dir, self.settings = landing, lake_dir, settings
        self._looked: dict[str, tuple[int, int | None]] = {}

    def suspects(self, ledger: list[dict[str, Any]]) -> list[str]:
        """Files of the landing folder the ledger rows ``ledger`` hold whose size differs
        from what was landed of them, or that were modified after they were landed."""
        from snap_spark.files.lines import list_input_files

        latest: dict[str, dict[str, Any]] = {}
        for row in ledger:
            known = latest.get(row["source_file"])
            if known is None or (row["end_byte"], row["ingest_time"]) > (
                    known["end_byte"], known["ingest_time"]):
                latest[row["source_file"]] = row
        if not latest:
            return []
        try:
            files = list_input_files([self.landing])
        except (OSError, ValueError) as exc:
            log(f"landing: could not list {self.landing} ({exc}); looking again later")
            return []
        found: list[str] = []
        for path in files:
            piece = latest.get(path)
            if piece is None:
                continue  # not picked up yet: Spark's file source lists it
            try:
                stat = storage.file_stat(path)
            except FileNotFoundError:
                continue
            seen = (stat.size, stat.mtime_ns)
            if self._looked.get(path) == seen:
                continue
            self._looked[path] = seen
            landed_at = piece["ingest_time"].timestamp() * 1e9
            if stat.size != piece["end_byte"] or (stat.mtime_ns or 0) > landed_at:
                found.append(path)
        return found

    def land(self, spark: SparkSession) -> LandingChanges:
        """Land what grew or changed (nothing when nothing did)."""
        from snap_spark.lake import table_rows
        from snap_spark.pipeline.batch_job import run
        from snap_spark.pipeline.ledger import LandedPiece, last_line_start, plan_files

        changes = LandingChanges()
        rows = table_rows(storage.join(self.lake_dir, "ingested_files"))
        suspects = self.suspects(rows)
        if not suspects:
            return changes
        present = [path for path in suspects if storage.exists(path)]
        upto: dict[str, int] = {}
        for plan in plan_files(present, [LandedPiece.from_row(row) for row in rows]):
            if plan.action != "same" and still_writing(plan.source_file):
                # its writer is most likely still on the last line: the lines before it
                # land now, the last one when it is finished or the file stops growing
                self._looked.pop(plan.source_file, None)  # looked at again next time
                complete = last_line_start(plan.source_file, plan.start_byte, plan.end_byte)
                if complete <= plan.start_byte:
                    continue
                upto[plan.source_file] = complete
            if plan.action == "grown":
                changes.grown.append(plan.source_file)
            elif plan.action in ("changed", "new"):
                changes.changed.append(plan.source_file)
        todo = changes.grown + changes.changed
        if not todo:
            return changes
        log(f"landing: {len(changes.grown)} file(s) grew and {len(changes.changed)} changed "
            "after the stream landed them: landing them as the batch job does")
        try:
            changes.result = run(spark, todo, self.lake_dir, self.settings, upto=upto)
        except FileNotFoundError as exc:
            log(f"landing: {exc}; looking again later")
            for path in todo:
                self._looked.pop(path, None)
        return changes


def spark_listed_files(checkpoint: str, batch_id: int) -> list[str] | None:
    """The files Spark's file source listed for micro-batch ``batch_id``, read from the
    query's checkpoint (``sources/0/<batch>`` or the compacted ``<batch>.compact``), as
    local paths; ``None`` when that log cannot be read (then nothing is reported)."""
    folder = storage.join(checkpoint, "sources", "0")
    for name in (str(batch_id), f"{batch_id}.compact"):
        location = storage.join(folder, name)
        try:
            with storage.open_input(location) as handle:
                text = handle.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        paths: list[str] = []
        for line in text.splitlines()[1:]:  # the first line is the log's version ("v1")
            try:
                entry = json.loads(line)
            except ValueError:
                return None
            if isinstance(entry, dict) and entry.get("batchId") == batch_id:
                path = str(entry.get("path", ""))
                paths.append(storage.local_path(path) if path.startswith("file:") else path)
        return paths
    return None


def vanished_files(listed: Iterable[str] | None, seen: Iterable[str]) -> list[str]:
    """The files Spark listed for a micro-batch that reached no landing task.

    Examples:
        >>> vanished_files(["/l/a.jsonl", "/l/b.jsonl"], ["/l/a.jsonl"])
        ['/l/b.jsonl']
        >>> vanished_files(None, [])
        []
    """
    if listed is None:
        return []
    reached = set(seen)
    return sorted({path for path in listed if path not in reached})
