"""``jobs/verify_messages.py``: land SNAP message archives into Delta with a verdict per line.

Usage (see ``--help``)::

    spark-submit jobs/verify_messages.py --input PATH [--input PATH ...] --lake DIR

Re-runs are idempotent: every input file is keyed by the SHA-256 of its bytes
(:mod:`snap_spark.pipeline.ledger`); files whose key is already in a table are not written
to it again, and each commit carries a Delta app transaction naming the exact set of files
it holds.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from snap_spark import __version__
from snap_spark.common.console import UsageError, log
from snap_spark.common.placement import limits
from snap_spark.common.remote import refuse_remote
from snap_spark.files import storage
from snap_spark.pipeline.commit import (
    LANDED_TABLES,
    CommitPlan,
    JobResult,
    commit_pass,
    fold_pass,
    format_summary,
    land_on_driver,
    refuse_bare_lines,
    table_versions,
)
from snap_spark.pipeline.ledger import batch_app_id
from snap_spark.runner import Context, Job
from snap_spark.runner import main as run_job
from snap_spark.settings import VerifySettings

if TYPE_CHECKING:
    import threading

    from pyspark.sql import SparkSession

    from snap_spark.lake import Lake
    from snap_spark.pipeline.ledger import FilePlan
    from snap_spark.pipeline.read import RangesAhead

__all__ = ["LANDED_TABLES", "JobResult", "VerifyMessages", "auto_verify_threads",
           "decided_settings", "format_summary", "listed_inputs", "main", "prepare_landing",
           "reverify", "run"]


def auto_verify_threads(spark: SparkSession) -> int:
    """Verification threads per task: the cores a task owns. libsecp256k1 releases the GIL,
    so a task given several cores (``spark.task.cpus``), or one slot of a local master on a
    machine with more cores, verifies on all of them; with one task per core it is 1.

    On 2 cores, a second thread speeds up a one-slot master (``local[1]``) and makes no
    difference with two slots (``local[2]``) (docs/speed.md, *Figures behind the code*).
    """
    from snap_spark.runtime.scope import local_parallelism

    task_cpus = int(spark.conf.get("spark.task.cpus", "1") or 1)
    master = str(spark.sparkContext.master)
    # local[N] and local[*] (a bare "local" keeps one thread per task, as it always did)
    slots = local_parallelism(master) if master != "local" else None
    if slots is not None:
        return max(task_cpus, (os.cpu_count() or 1) // max(1, slots))
    return max(1, task_cpus)


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
    *,
    catch_up_tasks: bool = True,
    upto: Mapping[str, int] | None = None,
) -> JobResult:
    """Verify ``inputs`` and append new files' lines to ``raw_messages`` and ``messages``.

    One pass reads, checks and writes every line (:mod:`snap_spark.pipeline.land`); the
    replay fold runs on a narrow projection after one shuffle; the ``messages`` files get
    their final verdicts; the driver commits each table once. With ``catch_up_tasks``
    (the default) the task tables are then brought up to ``messages``
    (:func:`snap_spark.pipeline.task_tables.catch_up_tasks`); a caller that keeps them caught up
    on a thread of its own (:class:`snap_spark.pipeline.task_tables.TasksFollower`) passes
    ``False``. ``upto`` lands only the first ``upto[path]`` bytes of the files it names
    (the stream's landing watch: the complete lines of a file whose writer is still on its
    last line).

    Raises:
        FileNotFoundError: an input path does not exist, or holds no input files.
        MissingReceiptTime: a bare line needs ``settings.bare_clock`` (nothing is
            committed then).
        SettingsError: ``settings`` are out of range.

    Examples:
        >>> import json
        >>> from snap_spark.protocol.keys import internal_pubkey, p2tr_address
        >>> from snap_spark.protocol.signing import sign_message
        >>> key = bytes.fromhex("0a" * 32)
        >>> message = sign_message({"id": "m1", "version": "0.1", "type": "request",
        ...     "from": p2tr_address(internal_pubkey(key)), "method": "service/call",
        ...     "payload": {"name": "x"}, "timestamp": 1770163200}, key)
        >>> late = {"received_at": 1770163245, "message": message}  # received 45 s after
        >>> (tmp / "in").mkdir()
        >>> _ = (tmp / "in" / "a.jsonl").write_text(json.dumps(late) + "\\nnot json\\n")
        >>> result = run(spark, [str(tmp / "in")], str(tmp / "lake"))
        >>> result.lines_read, result.valid, result.rejected
        (2, 1, 1)
        >>> result.counts == {None: 1, 1003: 1}  # valid, and "not JSON"
        True

        The same bytes again land nothing:

        >>> run(spark, [str(tmp / "in")], str(tmp / "lake")).files_skipped
        1
    """
    refuse_remote(spark, "the batch job", "jobs/verify_messages.py")
    from snap_spark.lake import get_lake

    settings = decided_settings(settings, spark)
    started = time.monotonic()
    result = JobResult()
    lake = get_lake(spark)
    prepare_landing(lake_dir)
    found = _found_inputs(spark, inputs, lake_dir, upto)
    result.files_seen = len(found.files)
    done = _landed_before(spark, lake, lake_dir, settings, found, result)
    result.files_skipped = len(found.files) - len(found.todo)
    log(f"stage 1/4 inputs: {len(found.files)} files ({result.files_skipped} already "
        f"ingested) lake={lake_dir} backend={lake.name}")
    if not found.todo:
        found.ahead.cancel()
        if found.warming is not None:
            found.warming.join()
        log("nothing new to ingest")
        result.seconds = time.monotonic() - started
        return result
    result.files_processed = len(found.todo)
    _land_and_commit(spark, lake, lake_dir, settings, found, done, started, result,
                     catch_up_tasks=catch_up_tasks)
    result.seconds = time.monotonic() - started
    return result


@dataclasses.dataclass
class _FoundInputs:
    """What a run found to land (:func:`_found_inputs`)."""

    #: every input file listed
    files: list[str]
    #: the files' plans, for those that land (their bytes not all in the lake)
    plans: list[FilePlan]
    #: source file -> file key, of the files that land
    keys: dict[str, str]
    #: the line ranges of the files the ledger has never seen, planned on a thread
    ahead: RangesAhead
    #: Spark's Python workers starting for a large landing (``None`` for a small one)
    warming: threading.Thread | None

    @property
    def todo(self) -> list[str]:
        """The files that land, in order."""
        return list(self.keys)

    @property
    def pieces(self) -> dict[str, tuple[int, int | None, int]]:
        """Each landing file's bytes to land and its first line number."""
        return {plan.source_file: (plan.start_byte, plan.end_byte, plan.first_line)
                for plan in self.plans}


def _found_inputs(spark: SparkSession, inputs: Sequence[str], lake_dir: str,
                  upto: Mapping[str, int] | None) -> _FoundInputs:
    """List the inputs and plan each against the lake's ledger: files are known by their
    bytes, so what the lake holds is skipped and what grew lands from where it stopped
    (:mod:`snap_spark.pipeline.ledger`). The files the ledger has never seen are most
    likely landed whole: their line ranges are planned on a thread while ``plan_files``
    hashes them (both read every byte), and for a large landing Spark's Python workers
    start meanwhile."""
    from snap_spark.lake import table_rows
    from snap_spark.pipeline.ledger import LandedPiece, plan_files
    from snap_spark.pipeline.read import RangesAhead, small_input, warm_workers

    files = listed_inputs(inputs)
    ledger = [LandedPiece.from_row(row)
              for row in table_rows(storage.join(lake_dir, "ingested_files"))]
    seen = {piece.source_file for piece in ledger}
    unseen = [path for path in files if path not in seen]
    warming = warm_workers(spark) if not small_input(unseen, {}, limits().land_bytes) else None
    ahead = RangesAhead(unseen, spark.sparkContext.defaultParallelism)
    try:
        plans = plan_files(files, ledger, upto)
    except BaseException:
        ahead.cancel()
        raise
    for plan in plans:
        if plan.note:
            log(f"{plan.source_file}: {plan.note}")
    landing = [plan for plan in plans if plan.lands]
    return _FoundInputs(files, landing, {plan.source_file: plan.file_key for plan in landing},
                        ahead, warming)


@dataclasses.dataclass(frozen=True)
class _LandedBefore:
    """The lake's state a run lands against (:func:`_landed_before`)."""

    #: the ``messages`` version found without the files to land: at commit, files another
    #: writer landed since are noticed (``_commit_messages``)
    msg_version: int
    #: file keys ``raw_messages`` and ``messages`` hold
    raw: set[str]
    msg: set[str]


def _landed_before(spark: SparkSession, lake: Lake, lake_dir: str, settings: VerifySettings,
                   found: _FoundInputs, result: JobResult) -> _LandedBefore:
    """The file keys the lake's two tables hold; files with ``raw_messages`` rows and no
    ``messages`` rows (a run stopped between its commits) whose bytes the input no longer
    holds are completed from ``raw_messages`` itself first. A run still writing (another
    writer between its two commits) completes its own files."""
    from snap_spark.lake import CommitContention, table_uri, table_version
    from snap_spark.pipeline.runs import running_runs

    raw_path = storage.join(lake_dir, "raw_messages")
    msg_path = storage.join(lake_dir, "messages")
    msg_version = table_version(table_uri(msg_path))
    done_msg = lake.distinct_values(spark, msg_path, "file_key")
    done_raw = lake.distinct_values(spark, raw_path, "file_key")
    orphans = done_raw - done_msg - set(found.keys.values())
    if orphans:
        orphans -= _files_of_runs(raw_path, orphans, running_runs(lake_dir))
    if orphans:
        log(f"{len(orphans)} landed file(s) have raw_messages rows but no messages rows: "
            "verifying them from raw_messages")
        try:
            result.completed_rows = reverify(spark, lake_dir, settings, keys=orphans,
                                             files_absent_at=msg_version
                                             ).message_rows_written
        except CommitContention:
            # Another run that found the same files completed them first (runs started
            # together after a killed one): done, and this run lands its own input.
            if orphans - lake.distinct_values(spark, msg_path, "file_key"):
                raise
            log(f"{len(orphans)} of those file(s) were completed meanwhile by another "
                "writer: nothing to do for them")
    return _LandedBefore(msg_version, done_raw, done_msg)


def _land_and_commit(spark: SparkSession, lake: Lake, lake_dir: str, settings: VerifySettings,
                     found: _FoundInputs, done: _LandedBefore, started: float,
                     result: JobResult, *, catch_up_tasks: bool) -> None:
    """Land the files ``found`` holds and commit them (stages 2-4), under a run marker;
    whatever fails leaves no staging file, and no table folder this run created empty."""
    from snap_spark.lake import table_uri
    from snap_spark.pipeline.runs import clean_leftovers, run_marker

    raw_path = storage.join(lake_dir, "raw_messages")
    msg_path = storage.join(lake_dir, "messages")
    ingest_id = uuid.uuid4().hex
    existed = [p for p in (lake_dir, raw_path, msg_path) if storage.exists(p)]
    marker = contextlib.ExitStack()
    marker.enter_context(run_marker(lake_dir, ingest_id))
    staging = table_uri(storage.join(lake_dir, "_staging", ingest_id))
    try:
        _land_pass(spark, lake, lake_dir, settings, found, done, ingest_id, staging,
                   started, result, catch_up_tasks=catch_up_tasks)
    except BaseException:
        _remove_tree(staging)
        marker.close()
        _remove_if_empty(*[p for p in (raw_path, msg_path, lake_dir) if p not in existed])
        raise
    _remove_tree(staging)
    marker.close()
    # Sweep again: workers of a run killed just before this one may have finished a file
    # after the first sweep (they die a moment after their driver).
    clean_leftovers(lake_dir, LANDED_TABLES)


def _land_pass(spark: SparkSession, lake: Lake, lake_dir: str, settings: VerifySettings,
               found: _FoundInputs, done: _LandedBefore, ingest_id: str, staging: str,
               started: float, result: JobResult, *, catch_up_tasks: bool) -> None:
    """Stages 2-4 of a run: land the files' lines (on the driver for a small input, else
    in one Spark job that also folds the replays), then commit every table."""
    from snap_spark.common.processes import current_owner
    from snap_spark.pipeline.land import LandSpec, fold_blocks, land_part, landed_struct
    from snap_spark.pipeline.read import over_ranges, plan_ranges, small_input

    todo, keys = found.todo, found.keys
    raw_keys = [keys[p] for p in todo if keys[p] not in done.raw]
    msg_keys = [keys[p] for p in todo if keys[p] not in done.msg]
    raw_root = lake.data_root(storage.join(lake_dir, "raw_messages"), staging)
    spec = LandSpec(
        ingest_id=ingest_id, ingest_time_us=int(time.time() * 1_000_000),
        file_keys={p: keys[p] for p in todo},
        raw_keys=frozenset(raw_keys), msg_keys=frozenset(msg_keys),
        raw_root=raw_root, staging=f"{staging}/messages",
        settings=settings, owner=current_owner(),
    )
    pieces = found.pieces
    ranges = plan_ranges(spark, todo, pieces=pieces, ahead=found.ahead)
    candidates_dir = storage.join(staging, "candidates")
    if small_input(todo, pieces, limits().land_bytes):
        # a few thousand lines: landed in this process, no Spark stage (commit.py)
        landed = land_on_driver(spec, ranges, settings.replay_window, candidates_dir)
    else:
        # One job: land every range, shuffle the replay candidates by (from, id) (a block
        # per fold partition and task), fold replays.
        blocks = fold_blocks(spark)
        landed = fold_pass(over_ranges(
            spark, ranges,
            functools.partial(land_part, dataclasses.replace(spec, fold_blocks=blocks)),
            landed_struct()), settings.replay_window, candidates_dir, blocks)
    if found.warming is not None:
        found.warming.join()  # long done: its tasks ran before the landing's
    if landed.bare:  # refused before any progress line claims lines were written
        from snap_spark.lake import delete_data_files

        delete_data_files(raw_root, landed.raw_files)
        refuse_bare_lines()
    log(f"stage 2/4 read, checked and wrote {sum(landed.lines.values())} lines from "
        f"{len(todo)} files ({landed.replays} replays found) "
        f"[{time.monotonic() - started:.1f}s]")
    # What decided this run's verdicts, kept in both commits for audits.
    info = {"job": "verify_messages", "ingest_id": ingest_id, "snap_spark": __version__,
            "settings": settings.as_record(), "files": len(todo)}
    commit_pass(spark, lake, landed, CommitPlan(
        lake_dir=lake_dir, ingest_id=ingest_id, ingest_time_us=spec.ingest_time_us,
        staging=staging, settings=settings, raw_keys=raw_keys, msg_keys=msg_keys,
        txn=lambda _table, these: (batch_app_id(these), 1), info=info,
        raw_root=raw_root,
        ledger=[plan.piece(landed.lines.get(plan.file_key, 0)) for plan in found.plans],
        ledger_keys=list(keys.values()), files_absent_at=done.msg_version, started=started,
        catch_up_tasks=catch_up_tasks,
        # unfinished last lines landed before that these lines complete: their rows go
        replaced=[plan.replaces for plan in found.plans if plan.replaces is not None]),
        result)


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
    the commit refuse, :func:`~snap_spark.pipeline.commit.commit_pass`).

    Examples:
        Every line of a labelled sample, landed, then verified again under the same
        settings: the same verdicts, with ``messages`` replaced in one commit.

        >>> from snap_spark.samples.messages import SampleConfig, write_sample
        >>> _ = write_sample(SampleConfig(agents=3, messages=40, seed=3),
        ...                  str(tmp / "a.jsonl"), tasks_path=None)
        >>> landed = run(spark, [str(tmp / "a.jsonl")], str(tmp / "lake"))
        >>> again = reverify(spark, str(tmp / "lake"))
        >>> (again.lines_read, again.counts) == (landed.lines_read, landed.counts)
        True
        >>> again.message_rows_written == landed.lines_read == 40
        True
    """
    refuse_remote(spark, "re-verifying", "jobs/verify_messages.py")
    from pyspark.sql import functions as F

    from snap_spark.lake import get_lake, table_uri
    from snap_spark.pipeline.land import LandSpec, landed_struct, reland_rows
    from snap_spark.pipeline.runs import run_marker

    settings = decided_settings(settings, spark)
    started = time.monotonic()
    lake = get_lake(spark)
    raw_path = storage.join(lake_dir, "raw_messages")
    if not lake.exists(raw_path):
        raise UsageError(f"no raw_messages table under {lake_dir}: nothing to verify again")
    wanted = sorted(keys) if keys is not None else sorted(
        lake.distinct_values(spark, raw_path, "file_key"))
    ingest_id = uuid.uuid4().hex
    staging = table_uri(storage.join(lake_dir, "_staging", ingest_id))
    spec = LandSpec(ingest_id=ingest_id, ingest_time_us=int(time.time() * 1_000_000),
                    file_keys={}, msg_keys=frozenset(wanted), staging=f"{staging}/messages",
                    settings=settings)
    plan = CommitPlan(
        lake_dir=lake_dir, ingest_id=ingest_id, ingest_time_us=spec.ingest_time_us,
        staging=staging, settings=settings, raw_keys=(), msg_keys=wanted,
        txn=lambda _table, _keys: (batch_app_id([ingest_id]), 1),
        info={"job": "verify_messages", "action": "reprocess" if keys is None else "complete",
              "ingest_id": ingest_id, "snap_spark": __version__,
              "settings": settings.as_record(), "files": len(wanted)},
        files_absent_at=files_absent_at, started=started)
    raw = lake.read(spark, raw_path).select("source_file", "file_key", "line_no", "raw_text",
                                            "raw_bytes", "read_error")
    if keys is not None:
        raw = raw.filter(F.col("file_key").isin(wanted))
    landed_df = (raw.repartition("file_key").sortWithinPartitions("file_key", "line_no")
                 .mapInArrow(functools.partial(reland_rows, spec), landed_struct()))
    with run_marker(lake_dir, ingest_id):
        try:
            # Every landed line at once decides replays among them all; with ``keys``,
            # those files' lines are decided against the lake's other rows too.
            if keys is None:
                plan = dataclasses.replace(plan, replace_from=table_versions(lake_dir))
            landed = fold_pass(landed_df, settings.replay_window,
                               None if keys is None else storage.join(staging, "candidates"))
            log(f"verified {sum(landed.lines.values())} landed lines of {len(wanted)} files "
                f"again ({landed.replays} replays found) [{time.monotonic() - started:.1f}s]")
            result = commit_pass(spark, lake, landed, plan)
        finally:
            with contextlib.suppress(OSError):
                storage.delete_tree(staging)
    if result.tasks_refreshed is None:
        result.tasks_refreshed = 0
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
