"""``jobs/verify_messages.py``: land SNAP message archives into Delta with a verdict per line.

Usage (see ``--help``)::

    spark-submit jobs/verify_messages.py --input PATH [--input PATH ...] --lake DIR

Re-runs are idempotent: every input file is keyed by the SHA-256 of its bytes
(:mod:`snap_spark.pipeline.ingest`); files whose key is already in a table are not written
to it again, and each commit carries a Delta app transaction naming the exact set of files
it holds.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import functools
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from snap_spark import __version__, storage
from snap_spark.pipeline.ingest import batch_app_id
from snap_spark.protocol.verdict import DUPLICATE
from snap_spark.runner import Context, Job, UsageError, log
from snap_spark.runner import main as run_job
from snap_spark.settings import VerifySettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from snap_spark.lake import Lake

#: The tables a landing run writes.
LANDED_TABLES = ("raw_messages", "messages", "ingested_files")


@dataclass
class JobResult:
    """What a run did: per-table rows written and verdict counts of this run's lines."""

    files_seen: int = 0
    files_processed: int = 0
    #: files whose bytes the lake already holds (or that repeat another file of the run)
    files_skipped: int = 0
    #: messages rows written for lines an earlier, stopped run landed in raw_messages only
    completed_rows: int = 0
    #: earlier rows of ``messages`` whose verdict this run changed (an earlier-received copy
    #: of their message arrived late: docs/verdicts.md), in the same commit
    rows_redecided: int = 0
    #: tasks whose ``task_events``/``tasks`` rows this run folded again (None: not refreshed)
    tasks_refreshed: int | None = None
    #: message keys ``(from, id)`` decided again at commit because another writer had
    #: committed copies of them since this run's replay lookup (docs/verdicts.md)
    keys_redecided: int = 0
    lines_read: int = 0
    raw_rows_written: int = 0
    message_rows_written: int = 0
    counts: dict[int | None, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: the ``messages`` commit of these lines had been made already, by an earlier run of
    #: the same pass that was stopped before it finished (a stream's micro-batch re-run
    #: after a restart): ``counts``/``lines_read`` are the figures that commit recorded,
    #: and nothing new was written
    already_committed: bool = False

    @property
    def valid(self) -> int:
        return self.counts.get(None, 0)

    def add(self, other: JobResult) -> None:
        """Count ``other``'s lines, rows written, rows re-decided and verdicts into these
        (a stream sums its micro-batches, and what its landing watch landed)."""
        self.lines_read += other.lines_read
        self.raw_rows_written += other.raw_rows_written
        self.message_rows_written += other.message_rows_written
        self.rows_redecided += other.rows_redecided
        for code, n in other.counts.items():
            self.counts[code] = self.counts.get(code, 0) + n

    @property
    def rejected(self) -> int:
        return sum(n for code, n in self.counts.items() if code is not None)


def verdict_figures(lines: int, counts: Mapping[int | None, int], redecided: int
                    ) -> dict[str, Any]:
    """A pass's figures as its ``messages`` commit records them (JSON: codes as strings,
    ``valid`` for accepted lines); :func:`read_figures` reads them back.

    Examples:
        >>> verdict_figures(3, {None: 2, 2006: 1}, 0)
        {'lines': 3, 'counts': {'valid': 2, '2006': 1}, 'rows_redecided': 0}
        >>> read_figures(verdict_figures(3, {None: 2, 2006: 1}, 0))
        (3, {None: 2, 2006: 1}, 0)
    """
    return {"lines": lines,
            "counts": {("valid" if code is None else str(code)): n
                       for code, n in counts.items() if n},
            "rows_redecided": redecided}


def read_figures(figures: Mapping[str, Any]) -> tuple[int, dict[int | None, int], int]:
    """``(lines, counts, rows_redecided)`` of :func:`verdict_figures`."""
    counts = {(None if code == "valid" else int(code)): int(n)
              for code, n in figures["counts"].items()}
    return int(figures["lines"]), counts, int(figures.get("rows_redecided", 0))




def auto_verify_threads(spark: SparkSession) -> int:
    """Verification threads per task: the cores a task owns. libsecp256k1 releases the GIL,
    so a task given several cores (``spark.task.cpus``), or one slot of a local master on a
    machine with more cores, verifies on all of them; with one task per core it is 1.

    Measured on 2 cores, 200k lines: local[1] 13.5 s -> 10.6 s with 2 threads; local[2]
    7.6 s either way (bench/README.md).
    """
    task_cpus = int(spark.conf.get("spark.task.cpus", "1") or 1)
    master = str(spark.sparkContext.master)
    if master.startswith("local["):
        spec = master[len("local["):].split(",")[0].rstrip("]")
        cores = os.cpu_count() or 1
        slots = cores if spec == "*" else max(1, int(spec))
        return max(task_cpus, cores // slots)
    return max(1, task_cpus)


@dataclass
class LandedPass:
    """What the landing pass reported to the driver (see :mod:`snap_spark.pipeline.land`)."""

    lines: dict[str, int] = field(default_factory=dict)  # per file key
    counts: Counter[int | None] = field(default_factory=Counter)
    bare: int = 0
    raw_files: list[Any] = field(default_factory=list)  # DataFile
    staged: list[tuple[str, str, str]] = field(default_factory=list)  # (file, key, info)
    duplicates: dict[str, dict[int, str]] = field(default_factory=dict)
    replays: int = 0
    #: earliest receipt time among the run's replay candidates, and where they were kept
    earliest: float | None = None
    candidate_files: list[str] = field(default_factory=list)

    def snapshot(self) -> tuple[dict[str, dict[int, str]], Counter[int | None], int]:
        """The run's own verdicts, to go back to (:meth:`restore`) before deciding against
        another version of the lake."""
        return ({key: dict(lines) for key, lines in self.duplicates.items()},
                Counter(self.counts), self.replays)

    def restore(self, saved: tuple[dict[str, dict[int, str]], Counter[int | None], int]
                ) -> None:
        """Go back to verdicts :meth:`snapshot` saved."""
        duplicates, counts, replays = saved
        self.duplicates = {key: dict(lines) for key, lines in duplicates.items()}
        self.counts = Counter(counts)
        self.replays = replays

    def apply_lake_decisions(self, redecided: list[dict[str, Any]]) -> None:
        """Take the final verdicts of candidates whose key the lake holds
        (:func:`snap_spark.pipeline.replay_store.decide_against_lake`) over the run's own."""
        for row in redecided:
            key, line_no, own = row["file_key"], row["line_no"], row["prior_code"]
            if self.duplicates.get(key, {}).pop(line_no, None) is not None:
                self.counts[DUPLICATE] -= 1
                self.counts[own] += 1
                self.replays -= 1
            if row["code"] == DUPLICATE:
                self.duplicates.setdefault(key, {})[line_no] = row["detail"]
                self.counts[own] -= 1
                self.counts[DUPLICATE] += 1
                self.replays += 1

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> LandedPass:
        from snap_spark.pipeline.land import data_file

        landed = cls()
        for row in rows:
            kind = row["kind"]
            if kind == "count":
                key = row["file_key"]
                landed.lines[key] = landed.lines.get(key, 0) + row["lines"]
                if row["lines"]:
                    landed.counts[row["code"]] += row["lines"]
            elif kind == "bare":
                landed.bare += row["lines"]
            elif kind == "raw_file":
                landed.raw_files.append(data_file(row["info"]))
            elif kind == "staged":
                landed.staged.append((row["source_file"], row["file_key"], row["info"]))
            elif kind == "span":
                at = row["received_at"]
                landed.earliest = at if landed.earliest is None else min(landed.earliest, at)
                landed.candidate_files.append(row["info"])
            elif kind == "duplicate":
                landed.duplicates.setdefault(row["file_key"], {})[row["line_no"]] = row["info"]
                landed.counts[row["prior_code"]] -= 1
                landed.counts[row["code"]] += 1
                landed.replays += 1
            else:
                raise ValueError(f"unexpected landed row kind {kind!r}")
        return landed


def _remove_tree(uri: str) -> None:
    with contextlib.suppress(OSError):
        storage.delete_tree(uri)


def _remove_if_empty(*paths: str) -> None:
    """Remove local folders this run created and left empty (cleanup after a refusal)."""
    for path in paths:
        if storage.is_local(path) and os.path.isdir(path):
            with contextlib.suppress(OSError):
                for folder, _dirs, _files in sorted(os.walk(path), reverse=True):
                    os.rmdir(folder)  # fails (and stops) at the first non-empty folder


def run(
    spark: SparkSession,
    inputs: Sequence[str],
    lake_dir: str,
    settings: VerifySettings | None = None,
) -> JobResult:
    """Verify ``inputs`` and append new files' lines to ``raw_messages`` and ``messages``.

    One pass reads, checks and writes every line (:mod:`snap_spark.pipeline.land`); the
    replay fold runs on a narrow projection after one shuffle; the ``messages`` files get
    their final verdicts; the driver commits each table once.

    Raises:
        FileNotFoundError: an input path does not exist, or holds no input files.
        MissingReceiptTime: a bare line needs ``settings.bare_clock`` (nothing is
            committed then).
        SettingsError: ``settings`` are out of range.

    Examples:
        >>> result = run(spark, ["data/sample"], "data/lake",
        ...              VerifySettings(bare_clock="message"))  # doctest: +SKIP
        >>> result.lines_read == result.valid + result.rejected  # doctest: +SKIP
        True
    """
    from snap_spark.lake import (
        get_lake,
        table_rows,
        table_uri,
        table_version,
    )
    from snap_spark.pipeline.ingest import LandedPiece, plan_files
    from snap_spark.pipeline.land import (
        LandSpec,
        land_part,
        landed_struct,
    )
    from snap_spark.pipeline.read import over_ranges, plan_ranges
    from snap_spark.pipeline.runs import (
        RUNS_FOLDER,
        clean_leftovers,
        run_marker,
        running_runs,
    )
    from snap_spark.processes import current_owner

    settings = decided_settings(settings, spark)
    started = time.monotonic()
    result = JobResult()
    lake = get_lake(spark)
    raw_path = storage.join(lake_dir, "raw_messages")
    msg_path = storage.join(lake_dir, "messages")
    prepare_landing(lake_dir)
    ledger_path = storage.join(lake_dir, "ingested_files")

    files = listed_inputs(inputs)
    result.files_seen = len(files)
    # Files are known by their bytes: what this lake already holds is skipped, what grew
    # lands from where it stopped (pipeline/ingest.py).
    ledger = [LandedPiece.from_row(row) for row in table_rows(ledger_path)]
    plans = plan_files(files, ledger)
    for plan in plans:
        if plan.note:
            log(f"{plan.source_file}: {plan.note}")
    todo_plans = [plan for plan in plans if plan.lands]
    keys = {plan.source_file: plan.file_key for plan in todo_plans}
    todo = list(keys)
    # The version of messages that was found without the files to land: at commit, files
    # another writer landed since are noticed (_commit_messages).
    msg_version = table_version(table_uri(msg_path))
    done_msg = lake.distinct_values(spark, msg_path, "file_key")
    done_raw = lake.distinct_values(spark, raw_path, "file_key")
    # raw_messages committed, messages not (a run stopped between its commits) and the input
    # no longer holds those bytes: complete the messages from raw_messages itself. A run
    # still writing (another writer between its two commits) completes its own files.
    orphans = done_raw - done_msg - set(keys.values())
    if orphans:
        orphans -= _files_of_runs(raw_path, orphans, running_runs(lake_dir))
    if orphans:
        log(f"{len(orphans)} landed file(s) have raw_messages rows but no messages rows: "
            "verifying them from raw_messages")
        result.completed_rows = reverify(spark, lake_dir, settings, keys=orphans,
                                         files_absent_at=msg_version).message_rows_written
    result.files_skipped = len(files) - len(todo)
    log(f"stage 1/4 inputs: {len(files)} files ({result.files_skipped} already ingested) "
        f"lake={lake_dir} backend={lake.name}")
    if not todo:
        log("nothing new to ingest")
        result.seconds = time.monotonic() - started
        return result
    result.files_processed = len(todo)

    ingest_id = uuid.uuid4().hex
    existed = [p for p in (lake_dir, raw_path, msg_path) if storage.exists(p)]
    marker = contextlib.ExitStack()
    marker.enter_context(run_marker(lake_dir, ingest_id))
    staging = table_uri(storage.join(lake_dir, "_staging", ingest_id))
    raw_keys = [keys[p] for p in todo if keys[p] not in done_raw]
    msg_keys = [keys[p] for p in todo if keys[p] not in done_msg]
    raw_root = lake.data_root(raw_path, staging)
    spec = LandSpec(
        ingest_id=ingest_id, ingest_time_us=int(time.time() * 1_000_000),
        file_keys={p: keys[p] for p in todo},
        raw_keys=frozenset(raw_keys), msg_keys=frozenset(msg_keys),
        raw_root=raw_root, staging=f"{staging}/messages",
        settings=settings, owner=current_owner(),
    )
    # What decided this run's verdicts, kept in both commits for audits.
    info = {"job": "verify_messages", "ingest_id": ingest_id, "snap_spark": __version__,
            "settings": settings.as_record(), "files": len(todo)}
    pieces = {plan.source_file: (plan.start_byte, plan.end_byte, plan.first_line)
              for plan in todo_plans}
    landed_df = over_ranges(spark, plan_ranges(spark, todo, pieces=pieces),
                            functools.partial(land_part, spec), landed_struct())
    try:
        # One job: land every range, shuffle the narrow rows by (from, id), fold replays.
        landed = _fold(landed_df, settings.replay_window, storage.join(staging, "candidates"))
        if landed.bare:  # refused before any progress line claims lines were written
            from snap_spark.lake import delete_data_files

            delete_data_files(raw_root, landed.raw_files)
            refuse_bare_lines()
        log(f"stage 2/4 read, checked and wrote {sum(landed.lines.values())} lines from "
            f"{len(todo)} files ({landed.replays} replays found) "
            f"[{time.monotonic() - started:.1f}s]")
        commit_landed(
            spark, lake, lake_dir, landed, result, candidates=candidate_frame(spark, landed),
            raw_keys=raw_keys, msg_keys=msg_keys, ingest_id=ingest_id,
            ingest_time_us=spec.ingest_time_us, staging=staging, raw_root=raw_root,
            settings=settings, txn=lambda _table, these: (batch_app_id(these), 1), info=info,
            ledger=[plan.piece(landed.lines.get(plan.file_key, 0)) for plan in todo_plans],
            ledger_keys=list(keys.values()), started=started, files_absent_at=msg_version)
    except BaseException:
        _remove_tree(staging)
        marker.close()
        _remove_if_empty(storage.join(lake_dir, "_staging"), storage.join(lake_dir, RUNS_FOLDER),
                         *[p for p in (raw_path, msg_path, lake_dir) if p not in existed])
        raise
    _remove_tree(staging)
    marker.close()
    # Sweep again: workers of a run killed just before this one may have finished a file
    # after the first sweep (they die a moment after their driver).
    clean_leftovers(lake_dir, LANDED_TABLES)
    _remove_if_empty(storage.join(lake_dir, "_staging"), storage.join(lake_dir, RUNS_FOLDER))
    result.seconds = time.monotonic() - started
    return result


def reverify(
    spark: SparkSession,
    lake_dir: str,
    settings: VerifySettings | None = None,
    *,
    keys: Collection[str] | None = None,
    files_absent_at: int | None = None,
) -> JobResult:
    """Verify lines already in ``raw_messages`` again and write their ``messages`` rows.

    With ``keys=None`` every landed line is checked again under ``settings`` (new windows,
    a new core version), replay decided across all of them in receipt order, and the whole
    ``messages`` table replaced in one commit (earlier versions stay in Delta history).
    With ``keys``, only those files' lines are verified and appended: how a run completes
    files whose ``raw_messages`` commit landed but whose ``messages`` commit did not.
    ``raw_messages`` is never rewritten. ``files_absent_at``: a version of ``messages``
    known to hold none of the ``keys`` files (another writer landing them since makes
    the commit refuse, :func:`_commit_messages`).

    Examples:
        >>> reverify(spark, "data/lake", VerifySettings(max_drift=30))  # doctest: +SKIP
    """
    from pyspark.sql import functions as F

    from snap_spark.lake import (
        CommitContention,
        commit_lease,
        delete_data_files,
        get_lake,
        table_uri,
    )
    from snap_spark.pipeline.land import LandSpec, landed_struct, reland_rows
    from snap_spark.pipeline.runs import RUNS_FOLDER, run_marker
    from snap_spark.schemas.tables import MESSAGES, MESSAGES_PARTITION

    settings = decided_settings(settings, spark)
    started = time.monotonic()
    result = JobResult()
    lake = get_lake(spark)
    raw_path = storage.join(lake_dir, "raw_messages")
    msg_path = storage.join(lake_dir, "messages")
    if not lake.exists(raw_path):
        raise UsageError(f"no raw_messages table under {lake_dir}: nothing to verify again")
    wanted = sorted(keys) if keys is not None else sorted(
        lake.distinct_values(spark, raw_path, "file_key"))
    ingest_id = uuid.uuid4().hex
    staging = table_uri(storage.join(lake_dir, "_staging", ingest_id))
    msg_root = lake.data_root(msg_path, staging)
    spec = LandSpec(ingest_id=ingest_id, ingest_time_us=int(time.time() * 1_000_000),
                    file_keys={}, msg_keys=frozenset(wanted), staging=f"{staging}/messages",
                    settings=settings)
    info = {"job": "verify_messages", "action": "reprocess" if keys is None else "complete",
            "ingest_id": ingest_id, "snap_spark": __version__,
            "settings": settings.as_record(), "files": len(wanted)}
    raw = lake.read(spark, raw_path).select("source_file", "file_key", "line_no", "raw_text",
                                            "raw_bytes", "read_error")
    if keys is not None:
        raw = raw.filter(F.col("file_key").isin(wanted))
    landed_df = (raw.repartition("file_key").sortWithinPartitions("file_key", "line_no")
                 .mapInArrow(functools.partial(reland_rows, spec), landed_struct()))
    msg_files: list[Any] = []
    uncommitted: list[tuple[str, list[Any]]] = []
    with run_marker(lake_dir, ingest_id):
        try:
            # Every landed line at once decides replays among them all; some files' lines
            # are decided against the lake's other rows too.
            versions = _versions(lake_dir, ("raw_messages", "messages"))
            landed = _fold(landed_df, settings.replay_window,
                           None if keys is None else storage.join(staging, "candidates"))
            candidates = None if keys is None else candidate_frame(spark, landed)
            result.lines_read = sum(landed.lines.values())
            log(f"verified {result.lines_read} landed lines of {len(wanted)} files again "
                f"({landed.replays} replays found) [{time.monotonic() - started:.1f}s]")
            if keys is None:
                result.counts = {code: n for code, n in landed.counts.items() if n}
                msg_files = _write_messages(spark, landed, msg_root, ingest_id)
                with commit_lease(lake_dir, "reprocess"):
                    # The whole table is replaced from what raw_messages held when it was
                    # read: a commit by another writer since would be lost or repeated.
                    if _versions(lake_dir, ("raw_messages", "messages")) != versions:
                        raise CommitContention(
                            f"another writer committed to {lake_dir} while --reprocess "
                            "verified it; nothing was replaced: run --reprocess again")
                    committed = lake.replace_files(
                        spark, msg_path, msg_root, msg_files, schema=MESSAGES,
                        partition_by=list(MESSAGES_PARTITION),
                        app_id=batch_app_id([ingest_id]), version=1, commit_info=info)
                if committed:
                    result.message_rows_written = result.lines_read
                msg_files = []
                from snap_spark.pipeline.tasks import rebuild_tasks

                # every verdict may have changed: fold every task again
                result.tasks_refreshed = rebuild_tasks(spark, lake_dir).tasks
            else:
                updates = _commit_messages(
                    spark, lake, lake_dir, landed, result, settings=settings,
                    candidates=candidates, also_keys=None, msg_root=msg_root,
                    ingest_id=ingest_id, msg_keys=wanted,
                    txn=lambda _table, _keys: (batch_app_id([ingest_id]), 1), info=info,
                    uncommitted=uncommitted, files_absent_at=files_absent_at)
                uncommitted.clear()
                result.counts = {code: n for code, n in landed.counts.items() if n}
                result.tasks_refreshed = (
                    0 if candidates is None
                    else refresh_landed_tasks(spark, lake, lake_dir, landed.candidate_files,
                                              updates))
        finally:
            delete_data_files(msg_root, msg_files)  # nothing, once committed
            for root, leftovers in uncommitted:
                delete_data_files(root, leftovers)
            with contextlib.suppress(OSError):
                storage.delete_tree(staging)
    _remove_if_empty(storage.join(lake_dir, "_staging"), storage.join(lake_dir, RUNS_FOLDER))
    result.files_processed = len(wanted)
    result.seconds = time.monotonic() - started
    return result


def _files_of_runs(raw_path: str, file_keys: Collection[str], ingest_ids: Collection[str]
                   ) -> set[str]:
    """Which of ``file_keys`` have ``raw_messages`` rows of the runs ``ingest_ids``."""
    if not file_keys or not ingest_ids:
        return set()
    from snap_spark.lake import distinct_rows

    pairs = distinct_rows(raw_path, ["file_key", "ingest_id"])
    runs = set(ingest_ids)
    wanted = set(file_keys)
    return {key for key, run_id in pairs if key in wanted and run_id in runs}


def _versions(lake_dir: str, tables: Sequence[str]) -> list[int]:
    """The latest versions of the lake's ``tables`` (-1 for an absent one)."""
    from snap_spark.lake import table_uri, table_version

    return [table_version(table_uri(storage.join(lake_dir, name))) for name in tables]


def prepare_landing(lake_dir: str) -> None:
    """What every landing run (the batch job, the stream) does before it reads or writes
    anything: refuse a ``--lake`` that is not a folder, remove what killed runs left behind
    (each run's marker says "writing" until it ends; one line says what was removed), and
    refuse a table location that holds something else than its table.

    Raises:
        LakeLocationError: ``lake_dir`` is not a folder, or a table location is wrong.
        LakeSchemaError: a table there has other columns.
    """
    from snap_spark.lake import LakeLocationError, check_table_location
    from snap_spark.pipeline.runs import clean_leftovers
    from snap_spark.schemas.tables import (
        INGESTED_FILES,
        MESSAGES,
        MESSAGES_PARTITION,
        RAW_MESSAGES,
    )

    if storage.path_kind(lake_dir) not in ("missing", "dir"):
        raise LakeLocationError(f"--lake {lake_dir} is not a folder; nothing was written")
    cleaned = clean_leftovers(lake_dir, LANDED_TABLES, forget=False)
    if cleaned.runs:
        log(f"cleaned up after killed runs: {cleaned.summary()}")
    check_table_location(storage.join(lake_dir, "raw_messages"), RAW_MESSAGES)
    check_table_location(storage.join(lake_dir, "messages"), MESSAGES, MESSAGES_PARTITION)
    check_table_location(storage.join(lake_dir, "ingested_files"), INGESTED_FILES)


def refuse_bare_lines() -> None:
    """Stop a pass that met bare lines while no receipt clock was set.

    Raises:
        MissingReceiptTime: always, with the option that decides it.
    """
    from snap_spark.protocol.validate import MissingReceiptTime

    raise MissingReceiptTime(
        "input has bare message lines (no envelope received_at): choose their "
        "receipt clock with --bare-clock now|message|<unix seconds>")


def listed_inputs(inputs: Sequence[str]) -> list[str]:
    """The input files under ``inputs`` (files, or folders read recursively for
    ``.jsonl/.ndjson/.json`` and their ``.gz``), as every job lists them.

    Raises:
        UsageError: an input cannot be listed (the reason).
        FileNotFoundError: no input file at all.
    """
    from snap_spark.pipeline.read import list_input_files

    try:
        files = list_input_files(inputs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not files:
        raise FileNotFoundError(f"no .jsonl/.ndjson/.json(.gz) files under {', '.join(inputs)}")
    return files


def decided_settings(settings: VerifySettings | None, spark: SparkSession) -> VerifySettings:
    """Validated settings with the driver's "now" and the verification threads fixed."""
    chosen = (settings or VerifySettings()).validated().with_clock_now()
    return dataclasses.replace(
        chosen, verify_threads=chosen.verify_threads or auto_verify_threads(spark))


def _fold(landed_df: Any, window: float, candidates_dir: str | None = None) -> LandedPass:
    """Run the landing job: shuffle the narrow rows by (from, id) and fold replays; with
    ``candidates_dir`` keep the candidates there for :func:`_decide_against_lake`."""
    from snap_spark.pipeline.land import fold_landed, landed_struct

    folded = (
        landed_df.repartition("sender", "msg_id")
        .sortWithinPartitions("received_at", "source_file", "line_no")
        .mapInArrow(functools.partial(fold_landed, window, candidates_dir=candidates_dir),
                    landed_struct())
        .filter("kind <> 'candidate'")
    )
    return LandedPass.from_rows(folded.toArrow().to_pylist())


def commit_landed(
    spark: SparkSession, lake: Lake, lake_dir: str, landed: LandedPass, result: JobResult, *,
    candidates: Any, raw_keys: Collection[str], msg_keys: Collection[str], ingest_id: str,
    ingest_time_us: int, staging: str, raw_root: str, settings: VerifySettings,
    txn: Callable[[str, list[str]], tuple[str, int]], info: dict[str, Any],
    ledger: Sequence[Any] | None, ledger_keys: Sequence[str] = (), started: float,
    also_keys: Any = None, files_absent_at: int | None = None,
) -> None:
    """Commit what a landing pass wrote (the batch job's run, a stream's micro-batch), in
    order: ``raw_messages`` (files of ``raw_keys``); ``messages`` (files of ``msg_keys``),
    decided against the lake first (:func:`_decide_against_lake`: ``candidates`` are the
    pass's replay candidates) with the earlier rows that changes in the same commit; the
    task tables of the tasks touched; last the ``ingested_files`` rows ``ledger`` (none
    when ``None``). Each commit carries the app transaction ``txn(table, keys)``, so a pass
    run again commits nothing twice. Fills ``result``; deletes uncommitted files on failure.
    ``files_absent_at``: a version of ``messages`` known to hold none of ``msg_keys``.

    Raises:
        MissingReceiptTime: the pass met bare lines while no receipt clock was set.
    """
    from snap_spark.lake import delete_data_files
    from snap_spark.schemas.tables import RAW_MESSAGES

    raw_path = storage.join(lake_dir, "raw_messages")
    msg_path = storage.join(lake_dir, "messages")
    msg_root = lake.data_root(msg_path, staging)
    uncommitted: list[tuple[str, list[Any]]] = [(raw_root, landed.raw_files)]
    try:
        result.lines_read = sum(landed.lines.values())
        if landed.bare:
            refuse_bare_lines()
        result.counts = {code: n for code, n in landed.counts.items() if n}
        if raw_keys:
            app_id, version = txn("raw_messages", sorted(raw_keys))
            if lake.add_files(spark, raw_path, raw_root, landed.raw_files, schema=RAW_MESSAGES,
                              partition_by=[], app_id=app_id, version=version,
                              commit_info=info):
                result.raw_rows_written = sum(landed.lines.get(k, 0) for k in raw_keys)
            else:
                delete_data_files(raw_root, landed.raw_files)
        uncommitted.clear()
        log(f"stage 3/4 raw_messages: +{result.raw_rows_written} rows "
            f"[{time.monotonic() - started:.1f}s]")
        updates = None
        if msg_keys:
            updates = _commit_messages(
                spark, lake, lake_dir, landed, result, settings=settings,
                candidates=candidates, also_keys=also_keys, msg_root=msg_root,
                ingest_id=ingest_id, msg_keys=msg_keys, txn=txn, info=info,
                uncommitted=uncommitted, files_absent_at=files_absent_at)
            uncommitted.clear()
            result.counts = {code: n for code, n in landed.counts.items() if n}
        log(f"stage 4/4 messages: +{result.message_rows_written} rows"
            + (f", {result.rows_redecided} earlier rows re-decided" if result.rows_redecided
               else "") + f" [{time.monotonic() - started:.1f}s]")
        # The tasks these lines report on (and those of rows re-decided) are folded again,
        # before the ledger: a pass stopped in between refreshes them when run again.
        if candidates is not None:
            result.tasks_refreshed = refresh_landed_tasks(spark, lake, lake_dir,
                                                          landed.candidate_files, updates)
            log(f"tasks: {result.tasks_refreshed} refreshed "
                f"[{time.monotonic() - started:.1f}s]")
        if ledger is not None:
            app_id, version = txn("ingested_files", sorted(ledger_keys))
            _commit_ledger(spark, lake, storage.join(lake_dir, "ingested_files"), staging,
                           ingest_id, ingest_time_us, ledger, app_id=app_id, version=version,
                           info=info)
    except BaseException:
        for root, data_files in uncommitted:
            delete_data_files(root, data_files)
        raise


#: Times a writer decides again and retries when commits of writers that bypass the commit
#: lease keep taking the version its decision was taken against.
MAX_DECIDE_ATTEMPTS = 5


def _commit_messages(
    spark: SparkSession, lake: Lake, lake_dir: str, landed: LandedPass, result: JobResult, *,
    settings: VerifySettings, candidates: Any, also_keys: Any, msg_root: str, ingest_id: str,
    msg_keys: Collection[str], txn: Callable[[str, list[str]], tuple[str, int]],
    info: dict[str, Any], uncommitted: list[tuple[str, list[Any]]],
    files_absent_at: int | None = None,
) -> Any:
    """Decide the pass's replays against ``messages`` and commit its rows, serializably
    with other writers of the lake; returns the updates of earlier rows it committed.

    1. The replay lookup reads one version ``v`` of ``messages`` (no lease held) and the
       ``messages`` files are written with those verdicts.
    2. Under the lake's commit lease (:func:`snap_spark.lake.commit_lease`): when
       ``messages`` moved past ``v``, the rows other writers committed since are read;
       if any is a replay candidate of one of this pass's keys in the window, or one of its
       files, the pass decides again against the new version and rewrites its
       ``messages`` files (``result.keys_redecided``). Then the commit, which names the
       version decided against (:class:`~snap_spark.lake.VersionConflict` if another
       commit took its place: decided again, up to :data:`MAX_DECIDE_ATTEMPTS` times).

    ``files_absent_at`` is a version of ``messages`` the caller found without any of
    ``msg_keys``: if another writer landed one of those files since, nothing is committed.

    Raises:
        CommitContention: no lease in time, or other writers landed the same files.
    """
    from snap_spark.lake import (
        CommitContention,
        VersionConflict,
        check_held,
        commit_lease,
        delete_data_files,
        table_uri,
        table_version,
    )
    from snap_spark.pipeline.replay_store import keys_landed_since
    from snap_spark.schemas.tables import MESSAGES, MESSAGES_PARTITION

    msg_path = storage.join(lake_dir, "messages")
    deciding = candidates is not None and landed.earliest is not None
    saved = landed.snapshot()
    read_version = table_version(table_uri(msg_path))
    updates = _decide_against_lake(spark, lake, msg_path, landed, settings, candidates,
                                   also_keys, version=read_version)
    msg_files = _write_messages(spark, landed, msg_root, ingest_id)
    uncommitted.append((msg_root, msg_files))
    run_keys: set[tuple[str, str]] | None = None
    app_id, version = txn("messages", sorted(msg_keys))
    for _attempt in range(MAX_DECIDE_ATTEMPTS):
        with commit_lease(lake_dir, "messages") as held:
            since = (landed.earliest - settings.replay_window
                     if landed.earliest is not None else 0.0)
            landed_since = keys_landed_since(msg_path, read_version, since)
            if files_absent_at is not None and landed_since.version != files_absent_at:
                same = (keys_landed_since(msg_path, files_absent_at, since).file_keys
                        & set(msg_keys))
                done = lake.txn_version(msg_path, app_id)
                if same and (done is None or done < version):
                    raise CommitContention(
                        f"another writer landed {len(same)} of the same input files into "
                        f"{msg_path} meanwhile; nothing more of this run was committed: "
                        "run it again")
            if landed_since.version != read_version:
                if run_keys is None and deciding:
                    run_keys = _run_keys(landed, also_keys)
                clash = landed_since.keys & run_keys if run_keys else frozenset()
                if clash:
                    log(f"replay store: another writer committed {len(clash)} of this run's "
                        f"message id(s) since version {read_version}: deciding again against "
                        f"version {landed_since.version}")
                    result.keys_redecided += len(clash)
                    landed.restore(saved)
                    updates = _decide_against_lake(spark, lake, msg_path, landed, settings,
                                                   candidates, also_keys,
                                                   version=landed_since.version)
                    delete_data_files(msg_root, msg_files)
                    msg_files = _write_messages(spark, landed, msg_root, ingest_id)
                    uncommitted[-1] = (msg_root, msg_files)
                read_version = landed_since.version
            check_held(held)
            rows = sum(landed.lines.get(k, 0) for k in msg_keys)
            redecided = len(updates) if updates is not None else 0
            try:
                committed = lake.add_files(
                    spark, msg_path, msg_root, msg_files, schema=MESSAGES,
                    partition_by=list(MESSAGES_PARTITION), app_id=app_id, version=version,
                    # the version of messages the replay verdicts were decided against,
                    # and the figures of the lines committed (read back by a re-run)
                    commit_info={**info, "replay_read_version": read_version,
                                 "figures": verdict_figures(
                                     rows, {c: n for c, n in landed.counts.items() if n},
                                     redecided)},
                    updates=updates, read_version=read_version if deciding else None)
            except VersionConflict as conflict:
                log(f"replay store: {conflict}; deciding again")
                continue
        if committed:
            result.message_rows_written = rows
            result.rows_redecided = redecided
        else:
            delete_data_files(msg_root, msg_files)
            committed_figures(msg_path, app_id, version, result)
            landed.counts.clear()
            landed.counts.update(result.counts)
            return None
        return updates
    raise CommitContention(
        f"other writers committed to {msg_path} before this run could, {MAX_DECIDE_ATTEMPTS} "
        "times in a row; nothing more of this run was committed: run it again")


def committed_figures(msg_path: str, app_id: str, version: int, result: JobResult) -> bool:
    """For a pass whose ``messages`` commit ``(app_id, version)`` was made already (by a
    run stopped before it finished): set ``result`` to the figures that commit recorded,
    mark it ``already_committed``, and say so in one line. A re-run must not report the
    verdicts it just decided: they met the pass's own committed rows as earlier copies.
    Returns whether the commit recorded figures (commits of older versions did not: then
    ``result`` reports no lines)."""
    from snap_spark.lake import committed_info

    info = committed_info(msg_path, app_id, version) or {}
    figures = info.get("figures")
    lines, counts, redecided = read_figures(figures) if figures else (0, {}, 0)
    result.already_committed = True
    result.lines_read = lines
    result.counts = counts
    result.rows_redecided = redecided
    log(f"messages: this pass was committed already (app transaction {app_id} "
        f"{version}, by a run stopped before it finished): nothing new written; "
        + (f"its committed figures: {lines} lines" if figures
           else "that commit recorded no figures"))
    return figures is not None


def _run_keys(landed: LandedPass, also_keys: Any) -> set[tuple[str, str]]:
    """The keys ``(sender, msg_id)`` of the pass's replay candidates (read on the driver
    from its candidate files), and those of ``also_keys``."""
    import pyarrow.parquet as pq

    keys: set[tuple[str, str]] = set()
    for location in landed.candidate_files:
        filesystem, path = storage.resolve(location)
        table = pq.read_table(path, columns=["sender", "msg_id"], filesystem=filesystem)
        keys.update(zip(table.column("sender").to_pylist(), table.column("msg_id").to_pylist(),
                        strict=True))
    if also_keys is not None:
        keys.update((row[0], row[1]) for row in also_keys.select("sender", "msg_id").collect())
    return keys


def candidate_frame(spark: SparkSession, landed: LandedPass) -> Any:
    """The pass's replay candidates (kept by :func:`_fold`) as a DataFrame, or ``None``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from snap_spark.lake import read_data_files
    from snap_spark.pipeline.land import CANDIDATE_SCHEMA

    if not landed.candidate_files:
        return None
    return read_data_files(spark, landed.candidate_files, from_arrow_schema(CANDIDATE_SCHEMA))


def refresh_landed_tasks(spark: SparkSession, lake: Lake, lake_dir: str, candidate_files: list[str],
                         updates: Any = None) -> int:
    """Fold again, in ``task_events`` and ``tasks``, every task a landing pass's replay
    candidates (``candidate_files``, :func:`~snap_spark.pipeline.land.write_candidates`;
    they include every valid report, each with the ``task_id`` it reports on) name, and
    every task of a row ``updates`` changed (a re-decided report may now count, or no
    longer); returns how many tasks were folded.
    """
    from pyspark.sql import functions as F

    from snap_spark.pipeline.land import candidate_task_ids
    from snap_spark.pipeline.tasks import refresh_tasks

    msg_path = storage.join(lake_dir, "messages")
    if not lake.exists(msg_path):
        return 0
    # The ids are read on the driver (as many as tasks the pass reports on): a local
    # relation Spark broadcasts, instead of two more stages over the candidates.
    import pyarrow as pa

    ids = spark.createDataFrame(pa.table({"task_id": candidate_task_ids(candidate_files)}))
    if updates is not None and len(updates):
        # rows of earlier runs: their task is only known to messages
        changed = spark.createDataFrame(updates.rows.select(["file_key", "line_no"]))
        ids = ids.unionByName(
            lake.read(spark, msg_path).filter(F.col("task_state").isNotNull())
            .join(changed, ["file_key", "line_no"], "left_semi").select("task_id"))
    return refresh_tasks(spark, lake_dir, ids).tasks


def _decide_against_lake(spark: SparkSession, lake: Lake, msg_path: str, landed: LandedPass,
                         settings: VerifySettings, candidates: Any, also_keys: Any = None,
                         version: int | None = None) -> Any:
    """Decide the run's candidates against the copies ``messages`` already holds (the lake
    is the replay store: :mod:`snap_spark.pipeline.replay_store`); fold the result into
    ``landed`` and return the :class:`~snap_spark.lake.RowUpdates` of earlier rows whose
    verdict changes (``None`` when none do)."""
    from snap_spark.lake import RowUpdates
    from snap_spark.pipeline.replay_store import UPDATE_KEYS, decide_against_lake

    if landed.earliest is None or candidates is None:
        return None
    decided = decide_against_lake(spark, lake, msg_path, candidates,
                                  since=landed.earliest - settings.replay_window,
                                  window=settings.replay_window, also_keys=also_keys,
                                  version=version)
    if decided.keys:
        log(f"replay store: {decided.keys} message id(s) also in the lake; "
            f"{decided.changes.num_rows} earlier row(s) change verdict")
    landed.apply_lake_decisions(decided.redecided)
    return RowUpdates(decided.changes, UPDATE_KEYS) if decided.changes.num_rows else None


def _write_messages(spark: SparkSession, landed: LandedPass, msg_root: str, ingest_id: str
                    ) -> list[Any]:
    """Write the ``messages`` files of staged rows, with the 2006 verdicts applied."""
    from snap_spark.pipeline.land import data_file, landed_struct, write_messages

    if not landed.staged:
        return []
    staged = spark.createDataFrame(landed.staged,
                                   "source_file string, file_key string, info string")
    written = staged.mapInArrow(
        functools.partial(write_messages, msg_root, landed.duplicates, ingest_id),
        landed_struct()).toArrow().to_pylist()
    return [data_file(row["info"]) for row in written]


def _commit_ledger(spark: SparkSession, lake: Lake, path: str, staging: str, ingest_id: str,
                   ingest_time_us: int, pieces: Sequence[Any], *, app_id: str,
                   version: int = 1, info: dict[str, Any]) -> None:
    """Append the run's ``ingested_files`` rows (a few, written on the driver)."""
    import pyarrow as pa

    from snap_spark.lake import commit_rows, to_arrow
    from snap_spark.pipeline.runs import file_prefix
    from snap_spark.schemas.tables import INGESTED_FILES

    when = dt.datetime.fromtimestamp(ingest_time_us / 1_000_000, tz=dt.UTC)
    batch = pa.RecordBatch.from_pylist(
        [{**dataclasses.asdict(piece), "ingest_id": ingest_id, "ingest_time": when}
         for piece in pieces], schema=to_arrow(INGESTED_FILES))
    commit_rows(spark, lake, path, lake.data_root(path, staging), batch,
                schema=INGESTED_FILES, file_prefix=file_prefix(ingest_id, "f"),
                app_id=app_id, version=version, commit_info=info)


def format_summary(result: JobResult) -> str:
    """The end-of-run balance: valid + rejected = lines read, and counts per code."""
    from snap_spark.protocol.checker import format_balance

    rate = result.lines_read / result.seconds if result.seconds else 0.0
    balance = format_balance(result.lines_read, result.counts)
    return "\n".join([
        *(["already committed by an earlier run that was stopped before it finished: "
           "nothing new written; the figures are those it committed"]
          if result.already_committed else []),
        f"files: {result.files_seen} seen, {result.files_processed} processed, "
        f"{result.files_skipped} already landed",
        balance[0],
        f"rows written: raw_messages +{result.raw_rows_written}, "
        f"messages +{result.message_rows_written}   ({result.seconds:.1f}s, {rate:,.0f} lines/s)",
        *balance[1:],
        *([f"completed from raw_messages: messages +{result.completed_rows}"]
          if result.completed_rows else []),
        *([f"earlier messages rows re-decided (late, earlier-received copies): "
           f"{result.rows_redecided}"] if result.rows_redecided else []),
        *([f"tasks refreshed: {result.tasks_refreshed} (task_events and tasks)"]
          if result.tasks_refreshed is not None else []),
        *([f"message keys decided again at commit (another writer committed copies of "
           f"them meanwhile): {result.keys_redecided}"] if result.keys_redecided else []),
    ])


class VerifyMessages(Job):
    """``jobs/verify_messages.py``: archives → ``raw_messages`` and ``messages``."""

    name = "verify_messages"
    description = (
        "Verify SNAP message archives (NDJSON, optionally .gz) and land them into Delta "
        "tables raw_messages and messages under --lake, with a verdict for every line."
    )
    epilog = (
        "Bare lines (no envelope received_at) need --bare-clock. Settings also come from "
        "--config (default conf/pipeline.toml); command-line options win."
    )
    verifies_messages = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--input", "-i", action="append", metavar="PATH",
                            help="input file or folder (repeatable); folders are read "
                            "recursively for .jsonl/.ndjson/.json and their .gz")
        parser.add_argument("--reprocess", action="store_true",
                            help="instead of reading input: verify every line already in "
                            "raw_messages again under the given settings and replace the "
                            "messages table in one commit (raw_messages is never rewritten)")

    def check(self, context: Context) -> None:
        if context.args.reprocess and context.args.input:
            raise UsageError("--reprocess verifies what the lake holds: give no --input")
        if not context.args.reprocess and not context.args.input:
            raise UsageError("give --input PATH (or --reprocess)")
        if context.args.input:
            # a wrong path is refused before Spark starts (listed again by the run)
            try:
                listed_inputs(context.args.input)
            except FileNotFoundError as exc:
                raise UsageError(str(exc)) from None

    def run(self, spark: SparkSession, context: Context) -> JobResult:
        if context.args.reprocess:
            return reverify(spark, context.lake, context.verify)
        return run(spark, context.args.input, context.lake, context.verify)

    def summary(self, result: Any) -> str:
        assert isinstance(result, JobResult)
        return format_summary(result)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``jobs/verify_messages.py``."""
    return run_job(VerifyMessages(), argv)
