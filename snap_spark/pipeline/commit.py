"""The commit path of a landing pass: what a pass landed, and how it reaches the lake.

Every job that lands lines goes through :func:`commit_pass`: the batch job
(:func:`snap_spark.pipeline.batch_job.run`), the stream's micro-batches
(:mod:`snap_spark.stream.stream_job`), Nostr's stored messages (through the batch job), completing
files from ``raw_messages`` and ``--reprocess`` (:func:`snap_spark.pipeline.batch_job.reverify`).
A pass is landed first (:func:`fold_pass` gathers what its tasks reported into a
:class:`LandedPass`); then :func:`commit_pass`, with a :class:`CommitPlan` saying what to
commit and under which app transactions:

1. ``raw_messages``: the raw rows of the plan's ``raw_keys`` files; then the rows of
   unfinished last lines the pass lands again completed (:attr:`CommitPlan.replaced`) are
   removed from ``raw_messages`` and from ``messages``, each in a commit of its own
   (:func:`replaced_app_id`);
2. ``messages``: replay decided against the lake (the lake is the replay store:
   :mod:`snap_spark.pipeline.replay_store`), the rows written with their final verdicts
   and committed under the lake's commit lease, with the earlier rows that changes (or,
   for ``--reprocess``, the whole table replaced);
3. ``task_events`` and ``tasks``: the tasks the pass reports on, folded again;
4. ``ingested_files``: the ledger rows, last, so a pass stopped before is landed again.

Each commit carries an app transaction, so a pass run again commits nothing twice; what a
failed or refused commit wrote is deleted. :class:`JobResult` is what the pass did.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from snap_spark.common.console import log
from snap_spark.files import storage
from snap_spark.protocol.verdict import DUPLICATE
from snap_spark.settings import VerifySettings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from snap_spark.files.lines import LineRange
    from snap_spark.lake import Lake
    from snap_spark.pipeline.land import LandSpec
    from snap_spark.pipeline.ledger import LandedPiece, PartialLine

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
    #: what re-deciding those rows did to the table's count of each code (``None``: valid;
    #: zeros left out): a run's counts plus these add up to the change in the table
    redecided_codes: dict[int | None, int] = field(default_factory=dict)
    #: rows an earlier pass landed for an unfinished last line (no newline yet) that this
    #: run landed again completed: removed from ``raw_messages`` and ``messages``, so
    #: ``lines_read`` counts that line once more than the tables grew
    rows_replaced: int = 0
    #: what removing those rows did to ``messages``' count of each code (``None``: valid),
    #: negative: a run's counts plus these and ``redecided_codes`` add up to the change in
    #: the table
    replaced_codes: dict[int | None, int] = field(default_factory=dict)
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
        self.rows_replaced += other.rows_replaced
        for mine, theirs in ((self.redecided_codes, other.redecided_codes),
                             (self.replaced_codes, other.replaced_codes)):
            for code, n in theirs.items():
                total = mine.get(code, 0) + n
                if total:
                    mine[code] = total
                else:
                    mine.pop(code, None)
        for code, n in other.counts.items():
            self.counts[code] = self.counts.get(code, 0) + n

    @property
    def rejected(self) -> int:
        return sum(n for code, n in self.counts.items() if code is not None)


def verdict_figures(lines: int, counts: Mapping[int | None, int], redecided: int,
                    redecided_codes: Mapping[int | None, int] | None = None) -> dict[str, Any]:
    """A pass's figures as its ``messages`` commit records them (JSON: codes as strings,
    ``valid`` for accepted lines); :func:`read_figures` reads them back.

    Examples:
        >>> verdict_figures(3, {None: 2, 2006: 1}, 0)
        {'lines': 3, 'counts': {'valid': 2, '2006': 1}, 'rows_redecided': 0, \
'redecided_codes': {}}
        >>> read_figures(verdict_figures(3, {None: 2, 2006: 1}, 1, {None: -1, 2006: 1}))
        (3, {None: 2, 2006: 1}, 1, {None: -1, 2006: 1})
    """
    return {"lines": lines,
            "counts": coded(counts),
            "rows_redecided": redecided,
            "redecided_codes": coded(redecided_codes or {})}


def coded(counts: Mapping[int | None, int]) -> dict[str, int]:
    """``counts`` per code with JSON keys (``valid`` for ``None``, first), by code, zeros
    left out: how commits and the progress JSON give them.

    Examples:
        >>> coded({2006: 3, None: -3, 1003: 0})
        {'valid': -3, '2006': 3}
    """
    return {("valid" if code is None else str(code)): n
            for code, n in sorted(counts.items(), key=lambda kv: kv[0] or 0) if n}


def read_figures(figures: Mapping[str, Any]
                 ) -> tuple[int, dict[int | None, int], int, dict[int | None, int]]:
    """``(lines, counts, rows_redecided, redecided_codes)`` of :func:`verdict_figures`
    (commits recorded before ``redecided_codes`` existed read as none)."""
    def uncoded(coded: Mapping[str, Any]) -> dict[int | None, int]:
        return {(None if code == "valid" else int(code)): int(n) for code, n in coded.items()}

    return (int(figures["lines"]), uncoded(figures["counts"]),
            int(figures.get("rows_redecided", 0)), uncoded(figures.get("redecided_codes", {})))


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



def table_versions(lake_dir: str, tables: Sequence[str] = ("raw_messages", "messages")
                   ) -> tuple[int, ...]:
    """The latest versions of the lake's ``tables`` (-1 for an absent one): what a
    ``--reprocess`` pass reads first and checks again before it replaces ``messages``
    (:attr:`CommitPlan.replace_from`)."""
    from snap_spark.lake import table_uri, table_version

    return tuple(table_version(table_uri(storage.join(lake_dir, name))) for name in tables)


def refuse_bare_lines() -> None:
    """Stop a pass that met bare lines while no receipt clock was set.

    Raises:
        MissingReceiptTime: always, with the option that decides it.
    """
    from snap_spark.protocol.validate import MissingReceiptTime

    raise MissingReceiptTime(
        "input has bare message lines (no envelope received_at): choose their "
        "receipt clock with --bare-clock now|message|<unix seconds>")



def fold_pass(landed_df: DataFrame, window: float, candidates_dir: str | None = None,
              blocks: tuple[int, ...] = ()) -> LandedPass:
    """Run a landing pass: ``landed_df`` (rows of
    :func:`~snap_spark.pipeline.land.landed_struct`, as the landing tasks report them) is
    shuffled by ``(from, id)`` and its replays folded; what the tasks reported, gathered on
    the driver. With ``candidates_dir`` the pass's replay candidates are kept there, for
    :func:`commit_pass` to decide them against the lake. ``blocks``: the landing tasks sent
    their candidates in blocks (:attr:`~snap_spark.pipeline.land.LandSpec.fold_blocks`)."""
    from snap_spark.pipeline.land import fold_replays

    folded = fold_replays(landed_df, window, candidates_dir, blocks).filter(
        "kind <> 'candidate'")
    return LandedPass.from_rows(folded.toArrow().to_pylist())


def land_on_driver(spec: LandSpec, ranges: Sequence[LineRange], window: float,
                   candidates_dir: str | None = None) -> LandedPass:
    """The landing pass of :func:`fold_pass`, run in the driver process for a small input
    (:class:`~snap_spark.common.placement.DriverLimits` ``land_bytes``): each range landed in
    order by the function the Spark tasks run
    (:func:`~snap_spark.pipeline.land.land_part`, with the same range indices), then one
    replay fold over every key (:func:`~snap_spark.pipeline.land.fold_landed`; the Spark
    path folds each hash partition of the keys, the same fold cut by key). The files
    written and the rows reported are those of the Spark path."""
    from snap_spark.pipeline.land import fold_landed, land_part

    landed = (batch for index, part in enumerate(ranges)
              for batch in land_part(spec, part, index))
    rows = [row for batch in fold_landed(window, landed, candidates_dir)
            for row in batch.to_pylist() if row["kind"] != "candidate"]
    return LandedPass.from_rows(rows)


@dataclass(frozen=True)
class CommitPlan:
    """What :func:`commit_pass` commits of a landed pass, and under which transactions.

    Examples:
        >>> plan = CommitPlan(lake_dir="data/lake", ingest_id="0f" * 16,
        ...                   ingest_time_us=1_700_000_000_000_000,
        ...                   staging="data/lake/_staging/0f", settings=VerifySettings(),
        ...                   raw_keys=["k1"], msg_keys=["k1"],
        ...                   txn=lambda table, keys: ("snap-spark-batch-x", 1))
        >>> plan.replaces_messages
        False
    """

    lake_dir: str
    #: the pass's id (the rows' ``ingest_id``, its run marker, its files' names)
    ingest_id: str
    ingest_time_us: int
    #: the pass's staging folder (``<lake>/_staging/<ingest id>``): the delta-spark
    #: backend writes the data files there; deleted by the caller afterwards
    staging: str
    settings: VerifySettings
    #: the files (by key) whose ``raw_messages`` rows the pass committs (none: no commit)
    raw_keys: Collection[str]
    #: the files whose ``messages`` rows it commits (none: no commit)
    msg_keys: Collection[str]
    #: the app transaction ``(app id, version)`` of a commit of ``table`` holding the
    #: files ``keys``: a pass run again finds it committed and commits nothing twice
    txn: Callable[[str, list[str]], tuple[str, int]]
    #: what decided the verdicts (job, settings, version): kept in each commit's info
    info: Mapping[str, Any] = field(default_factory=dict)
    #: the ``raw_messages`` data folder the landing tasks wrote into (needed with
    #: ``raw_keys``)
    raw_root: str | None = None
    #: ``ingested_files`` rows to commit last (``None``: no ledger commit), and the file
    #: keys their app transaction names
    ledger: Sequence[LandedPiece] | None = None
    ledger_keys: Sequence[str] = ()
    #: message keys ``(sender, msg_id)`` to decide against the lake as well, besides the
    #: pass's candidates (the stream's rows its state could not decide exactly)
    also_keys: DataFrame | pa.Table | None = None
    #: rows of unfinished last lines that this pass lands again completed
    #: (:attr:`snap_spark.pipeline.ledger.FilePlan.replaces`): removed from
    #: ``raw_messages`` after its own rows are committed there, and from ``messages``
    #: before its replays are decided (:func:`remove_replaced`)
    replaced: Sequence[PartialLine] = ()
    #: ``(sender, msg_id, received_at)`` of removed ``replaced`` rows that took part in
    #: replay, whose stored copies are decided again from then on (set by
    #: :func:`commit_pass`; ``decide_against_lake``'s ``refold``)
    refold: pa.Table | None = None
    #: a version of ``messages`` known to hold none of ``msg_keys``: if another writer
    #: landed one of them since, nothing is committed
    files_absent_at: int | None = None
    #: ``--reprocess``: the versions of (``raw_messages``, ``messages``) the pass read
    #: (:func:`table_versions`); ``messages`` is replaced in whole from it, and refused if
    #: another writer committed since
    replace_from: tuple[int, ...] | None = None
    #: when the pass started (its progress lines give the seconds since)
    started: float = field(default_factory=time.monotonic)
    #: catch the task tables up after the ``messages`` commit
    #: (:func:`~snap_spark.pipeline.task_tables.catch_up_tasks`); the stream does it on a thread
    #: of its own instead
    catch_up_tasks: bool = True

    @property
    def replaces_messages(self) -> bool:
        return self.replace_from is not None


def commit_pass(spark: SparkSession, lake: Lake, landed: LandedPass, plan: CommitPlan,
                result: JobResult | None = None) -> JobResult:
    """Commit what a landing pass wrote (the batch job's run, a stream's micro-batch,
    files completed from ``raw_messages``, ``--reprocess``), in order: ``raw_messages``;
    ``messages``, its replays decided against the lake first, with the earlier rows that
    changes in the same commit; the task tables of the tasks touched; last the
    ``ingested_files`` rows. Fills and returns ``result`` (a new one by default). On any
    failure the data files not committed are deleted, and the error raised.

    Raises:
        MissingReceiptTime: the pass met bare lines while no receipt clock was set.
        CommitContention: no commit lease in time, or another writer landed the same files
            (or, for ``--reprocess``, committed anything) meanwhile.

    Examples:
        A whole pass, landed by :func:`fold_pass` and committed here, is what
        :func:`snap_spark.pipeline.batch_job.run` runs (its example lands a file). A pass that
        met bare lines while no receipt clock was set is refused, and nothing is written:

        >>> from snap_spark.lake import get_lake
        >>> plan = CommitPlan(lake_dir=str(tmp / "lake"), ingest_id="0f" * 16,
        ...                   ingest_time_us=1_700_000_000_000_000,
        ...                   staging=str(tmp / "lake" / "_staging" / "0f"),
        ...                   settings=VerifySettings(), raw_keys=[], msg_keys=[],
        ...                   txn=lambda table, keys: ("snap-spark-batch-x", 1))
        >>> commit_pass(spark, get_lake(spark), LandedPass(lines={"k1": 2}, bare=1), plan)
        Traceback (most recent call last):
        ...
        snap_spark.protocol.validate.MissingReceiptTime: input has bare message lines ...
        >>> (tmp / "lake").exists()
        False

        A pass that landed nothing commits nothing:

        >>> commit_pass(spark, get_lake(spark), LandedPass(), plan).lines_read
        0
        >>> (tmp / "lake").exists()
        False
    """
    from snap_spark.lake import delete_data_files

    result = JobResult() if result is None else result
    msg_root = lake.data_root(storage.join(plan.lake_dir, "messages"), plan.staging)
    uncommitted: list[tuple[str, list[Any]]] = []
    if plan.raw_root is not None:
        uncommitted.append((plan.raw_root, landed.raw_files))
    try:
        result.lines_read = sum(landed.lines.values())
        if landed.bare:
            refuse_bare_lines()
        result.counts = {code: n for code, n in landed.counts.items() if n}
        _commit_raw(spark, lake, landed, plan, result)
        uncommitted.clear()
        replaced_keys = _remove_replaced_rows(spark, lake, plan, result)
        if plan.replaces_messages:
            result.tasks_refreshed = _replace_messages(spark, lake, landed, plan, result,
                                                       msg_root, uncommitted)
            return result
        candidates = candidate_frame(spark, landed)
        if replaced_keys is not None and replaced_keys.num_rows and plan.msg_keys:
            # a removed row that took part in replay may have made other rows 2006: its
            # key is decided again with the pass's own
            candidates, plan = _with_replaced_keys(spark, landed, plan, candidates,
                                                   replaced_keys)
        if plan.msg_keys:
            _commit_messages(spark, lake, landed, plan, result, candidates=candidates,
                             msg_root=msg_root, uncommitted=uncommitted)
            uncommitted.clear()
            result.counts = {code: n for code, n in landed.counts.items() if n}
        log(f"stage 4/4 messages: +{result.message_rows_written} rows"
            + (f", {result.rows_redecided} earlier rows re-decided" if result.rows_redecided
               else "") + f" [{time.monotonic() - plan.started:.1f}s]")
        _after_messages(spark, lake, plan, result, refresh=candidates is not None)
    except BaseException:
        for root, data_files in uncommitted:
            delete_data_files(root, data_files)
        raise
    return result


def _commit_raw(spark: SparkSession, lake: Lake, landed: LandedPass, plan: CommitPlan,
                result: JobResult) -> None:
    """Stage 3: commit the pass's ``raw_messages`` files (of the files in
    ``plan.raw_keys``), and say so when the pass wrote any."""
    from snap_spark.lake import commit_data_files
    from snap_spark.schemas.tables import RAW_MESSAGES

    if plan.raw_keys:
        if plan.raw_root is None:
            raise ValueError("a plan with raw_keys needs the raw_root its files are in")
        app_id, version = plan.txn("raw_messages", sorted(plan.raw_keys))
        if commit_data_files(spark, lake, storage.join(plan.lake_dir, "raw_messages"),
                             plan.raw_root, landed.raw_files, schema=RAW_MESSAGES,
                             app_id=app_id, version=version, commit_info=dict(plan.info)):
            result.raw_rows_written = sum(landed.lines.get(k, 0) for k in plan.raw_keys)
    if plan.raw_root is not None:
        log(f"stage 3/4 raw_messages: +{result.raw_rows_written} rows "
            f"[{time.monotonic() - plan.started:.1f}s]")


def _remove_replaced_rows(spark: SparkSession, lake: Lake, plan: CommitPlan,
                          result: JobResult) -> Any:
    """The rows of the unfinished lines the pass's lines complete (``plan.replaced``):
    out of ``raw_messages`` (its completed rows are in), then out of ``messages`` before
    replays are decided. Returns the message keys of the ``messages`` rows removed (an
    Arrow table), ``None`` when the pass replaces nothing."""
    if not plan.replaced:
        return None
    remove_replaced(spark, lake, storage.join(plan.lake_dir, "raw_messages"), plan)
    removed = remove_replaced(spark, lake, storage.join(plan.lake_dir, "messages"), plan)
    result.rows_replaced = -sum(removed.codes.values())
    result.replaced_codes = dict(removed.codes)
    return removed.keys


def _after_messages(spark: SparkSession, lake: Lake, plan: CommitPlan, result: JobResult,
                    *, refresh: bool) -> None:
    """The steps after ``messages``: the task tables caught up with what it holds now (the
    tasks the pass's lines and the rows re-decided report on, and any a writer before
    left; ``refresh``: the pass had lines to check, and the caller does not catch up on its
    own, as the stream does), then last the ``ingested_files`` rows."""
    from snap_spark.pipeline.task_tables import catch_up_tasks

    if refresh and plan.catch_up_tasks:
        result.tasks_refreshed = catch_up_tasks(spark, plan.lake_dir).tasks
        log(f"tasks: {result.tasks_refreshed} refreshed "
            f"[{time.monotonic() - plan.started:.1f}s]")
    if plan.ledger is not None:
        app_id, version = plan.txn("ingested_files", sorted(plan.ledger_keys))
        _commit_ledger(spark, lake, storage.join(plan.lake_dir, "ingested_files"), plan,
                       app_id=app_id, version=version)


def _replace_messages(spark: SparkSession, lake: Lake, landed: LandedPass, plan: CommitPlan,
                      result: JobResult, msg_root: str,
                      uncommitted: list[tuple[str, list[Any]]]) -> int:
    """``--reprocess``: write every landed line's ``messages`` row and replace the table in
    one commit, refused if another writer committed since the pass read the lake; every
    task is folded again. Returns the tasks folded."""
    from snap_spark.lake import CommitContention, commit_data_files, commit_lease
    from snap_spark.pipeline.ledger import batch_app_id
    from snap_spark.pipeline.task_tables import rebuild_tasks
    from snap_spark.schemas.tables import MESSAGES, MESSAGES_PARTITION

    msg_path = storage.join(plan.lake_dir, "messages")
    msg_files = _write_messages(spark, landed, msg_root, plan.ingest_id)
    uncommitted.append((msg_root, msg_files))
    with commit_lease(plan.lake_dir, "reprocess"):
        # The whole table is replaced from what raw_messages held when it was read: a
        # commit by another writer since would be lost or repeated.
        if table_versions(plan.lake_dir) != plan.replace_from:
            raise CommitContention(
                f"another writer committed to {plan.lake_dir} while --reprocess verified "
                "it; nothing was replaced: run --reprocess again")
        committed = commit_data_files(
            spark, lake, msg_path, msg_root, msg_files, schema=MESSAGES,
            partition_by=MESSAGES_PARTITION, app_id=batch_app_id([plan.ingest_id]),
            version=1, commit_info=dict(plan.info), replace=True)
    uncommitted.clear()
    if committed:
        result.message_rows_written = result.lines_read
    # every verdict may have changed: fold every task again
    return rebuild_tasks(spark, plan.lake_dir).tasks


#: Times a writer decides again and retries when commits of writers that bypass the commit
#: lease keep taking the version its decision was taken against.
MAX_DECIDE_ATTEMPTS = 5


def _commit_messages(
    spark: SparkSession, lake: Lake, landed: LandedPass, plan: CommitPlan, result: JobResult,
    *, candidates: DataFrame | None, msg_root: str, uncommitted: list[tuple[str, list[Any]]],
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
    from snap_spark.lake import CommitContention, check_held, commit_lease, table_uri, table_version

    msg_path = storage.join(plan.lake_dir, "messages")
    pending = _MessagesCommit(
        spark, lake, landed, plan, result, candidates, msg_root, msg_path, uncommitted,
        deciding=candidates is not None and landed.earliest is not None,
        saved=landed.snapshot(), read_version=table_version(table_uri(msg_path)))
    _decide_replays(pending, pending.read_version)
    pending.files = _write_messages(spark, landed, msg_root, plan.ingest_id)
    uncommitted.append((msg_root, pending.files))
    app_id, version = plan.txn("messages", sorted(plan.msg_keys))
    for _attempt in range(MAX_DECIDE_ATTEMPTS):
        with commit_lease(plan.lake_dir, "messages") as held:
            _catch_up_with_lake(pending, app_id, version)
            check_held(held)
            rows = sum(landed.lines.get(k, 0) for k in plan.msg_keys)
            redecided = len(pending.updates) if pending.updates is not None else 0
            committed = _commit_decided(pending, app_id, version, rows, redecided)
            if committed is None:  # another commit took the version decided against
                continue
        if committed:
            result.message_rows_written = rows
            result.rows_redecided = redecided
            result.redecided_codes = dict(pending.shift)
        else:  # committed already, by a run stopped before it finished: files deleted
            committed_figures(msg_path, app_id, version, result)
            landed.counts.clear()
            landed.counts.update(result.counts)
            return None
        return pending.updates
    raise CommitContention(
        f"other writers committed to {msg_path} before this run could, {MAX_DECIDE_ATTEMPTS} "
        "times in a row; nothing more of this run was committed: run it again")


@dataclass
class _MessagesCommit:
    """A pass's ``messages`` commit in the making (:func:`_commit_messages`): what it
    commits, the replay decision it stands on so far, and the files written from it."""

    spark: SparkSession
    lake: Lake
    landed: LandedPass
    plan: CommitPlan
    result: JobResult
    candidates: DataFrame | None
    msg_root: str
    msg_path: str
    #: the caller's files to delete if the pass fails; the last entry is the ``messages`` files
    uncommitted: list[tuple[str, list[Any]]]
    #: the pass has replay candidates: the commit names the version they were decided against
    deciding: bool
    #: the pass's own verdicts (:meth:`LandedPass.snapshot`), restored before deciding again
    saved: tuple[dict[str, dict[int, str]], Counter[int | None], int]
    #: the version of ``messages`` the replays were decided against
    read_version: int
    #: the updates of earlier rows the decision makes (:func:`_decide_against_lake`), and
    #: what they do to the table's count of each code
    updates: Any = None
    shift: dict[int | None, int] = field(default_factory=dict)
    #: the ``messages`` files written with the pass's verdicts
    files: list[Any] = field(default_factory=list)
    #: the keys of the pass's replay candidates (:func:`_run_keys`), read when first needed
    run_keys: set[tuple[str, str]] | None = None


def _decide_replays(pending: _MessagesCommit, version: int) -> None:
    """Decide the pass's replays against ``version`` of ``messages`` (folded into
    ``pending.landed``), and keep the updates of earlier rows and their code shift in
    ``pending``."""
    plan = pending.plan
    pending.updates, pending.shift = _decide_against_lake(
        pending.spark, pending.lake, pending.msg_path, pending.landed, plan.settings,
        pending.candidates, plan.also_keys, version=version, ingest_id=plan.ingest_id,
        refold=plan.refold)


def _catch_up_with_lake(pending: _MessagesCommit, app_id: str, version: int) -> None:
    """Under the commit lease: read what other writers committed to ``messages`` since
    ``pending.read_version``, refuse the commit if they landed one of the pass's files
    (``plan.files_absent_at``), decide the pass's replays again if they committed one of its
    keys (:func:`_decide_again`), and move ``pending.read_version`` to the latest version.

    Raises:
        CommitContention: another writer landed some of the same files.
    """
    from snap_spark.pipeline.replay_store import keys_landed_since

    landed, plan = pending.landed, pending.plan
    since = (landed.earliest - plan.settings.replay_window
             if landed.earliest is not None else 0.0)
    landed_since = keys_landed_since(pending.msg_path, pending.read_version, since)
    if plan.files_absent_at is not None and landed_since.version != plan.files_absent_at:
        _refuse_files_landed_meanwhile(pending.lake, pending.msg_path, plan.files_absent_at,
                                       since, plan.msg_keys, app_id, version)
    if landed_since.version != pending.read_version:
        if pending.run_keys is None and pending.deciding:
            pending.run_keys = _run_keys(landed, plan.also_keys, plan.refold)
        clash = landed_since.keys & pending.run_keys if pending.run_keys else frozenset()
        if clash:
            _decide_again(pending, landed_since.version, len(clash))
        pending.read_version = landed_since.version


def _decide_again(pending: _MessagesCommit, version: int, clashes: int) -> None:
    """Go back to the pass's own verdicts, decide its replays again against ``version`` of
    ``messages`` (where other writers committed ``clashes`` of its message ids), and write
    its ``messages`` files again in place of the old ones."""
    from snap_spark.lake import delete_data_files

    log(f"replay store: another writer committed {clashes} of this run's "
        f"message id(s) since version {pending.read_version}: deciding again against "
        f"version {version}")
    pending.result.keys_redecided += clashes
    pending.landed.restore(pending.saved)
    _decide_replays(pending, version)
    delete_data_files(pending.msg_root, pending.files)
    pending.files = _write_messages(pending.spark, pending.landed, pending.msg_root,
                                    pending.plan.ingest_id)
    pending.uncommitted[-1] = (pending.msg_root, pending.files)


def _commit_decided(pending: _MessagesCommit, app_id: str, version: int, rows: int,
                    redecided: int) -> bool | None:
    """Commit the pass's ``messages`` files and the updates of earlier rows as the app
    transaction ``(app_id, version)``, naming the version decided against when deciding.
    Returns whether this call committed (``False``: committed before, the files deleted),
    ``None`` when another commit took the place of the version after it
    (:class:`~snap_spark.lake.VersionConflict`: to decide again)."""
    from snap_spark.lake import VersionConflict, commit_data_files
    from snap_spark.schemas.tables import MESSAGES, MESSAGES_PARTITION

    try:
        # the files are deleted unless committed, but kept on a VersionConflict:
        # decided again (and rewritten when that changes them), then retried
        return commit_data_files(
            pending.spark, pending.lake, pending.msg_path, pending.msg_root, pending.files,
            schema=MESSAGES, partition_by=MESSAGES_PARTITION, app_id=app_id,
            version=version,
            commit_info=_messages_info(pending.plan.info, pending.read_version, rows,
                                       pending.landed, redecided, pending.shift,
                                       pending.result),
            updates=pending.updates,
            read_version=pending.read_version if pending.deciding else None)
    except VersionConflict as conflict:
        log(f"replay store: {conflict}; deciding again")
        return None


def _refuse_files_landed_meanwhile(lake: Lake, msg_path: str, files_absent_at: int,
                                   since: float, msg_keys: Collection[str], app_id: str,
                                   version: int) -> None:
    """Refuse the commit when another writer landed one of the pass's files into
    ``messages`` after ``files_absent_at`` (a version the caller found without them),
    unless that commit is this pass's own ``(app_id, version)`` made before a restart.

    Raises:
        CommitContention: another writer landed some of the same files.
    """
    from snap_spark.lake import CommitContention
    from snap_spark.pipeline.replay_store import keys_landed_since

    same = keys_landed_since(msg_path, files_absent_at, since).file_keys & set(msg_keys)
    done = lake.txn_version(msg_path, app_id)
    if same and (done is None or done < version):
        raise CommitContention(
            f"another writer landed {len(same)} of the same input files into {msg_path} "
            "meanwhile; nothing more of this run was committed: run it again")


def _messages_info(info: Mapping[str, Any], read_version: int, rows: int, landed: LandedPass,
                   redecided: int, shift: Mapping[int | None, int], result: JobResult
                   ) -> dict[str, Any]:
    """The commit info of a ``messages`` commit: the run's ``info``, the version of
    ``messages`` the replay verdicts were decided against, and the figures of the lines
    committed (read back by a re-run, :func:`committed_figures`)."""
    return {**info, "replay_read_version": read_version,
            "figures": {**verdict_figures(rows, {c: n for c, n in landed.counts.items() if n},
                                          redecided, shift),
                        "rows_replaced": result.rows_replaced,
                        "replaced_codes": coded(result.replaced_codes)}}


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
    lines, counts, redecided, shift = read_figures(figures) if figures else (0, {}, 0, {})
    result.already_committed = True
    result.lines_read = lines
    result.counts = counts
    result.rows_redecided = redecided
    result.redecided_codes = shift
    if figures:
        result.rows_replaced = int(figures.get("rows_replaced", 0))
        result.replaced_codes = read_figures(
            {"lines": 0, "counts": figures.get("replaced_codes", {})})[1]
    log(f"messages: this pass was committed already (app transaction {app_id} "
        f"{version}, by a run stopped before it finished): nothing new written; "
        + (f"its committed figures: {lines} lines" if figures
           else "that commit recorded no figures"))
    return figures is not None


def _run_keys(landed: LandedPass, also_keys: Any, refold: Any = None
              ) -> set[tuple[str, str]]:
    """The keys ``(sender, msg_id)`` of the pass's replay candidates (read on the driver
    from its candidate files), and those of ``also_keys`` and ``refold``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys: set[tuple[str, str]] = set()
    for location in landed.candidate_files:
        filesystem, path = storage.resolve(location)
        table = pq.read_table(path, columns=["sender", "msg_id"], filesystem=filesystem)
        keys.update(zip(table.column("sender").to_pylist(), table.column("msg_id").to_pylist(),
                        strict=True))
    if refold is not None:
        keys.update(zip(refold.column("sender").to_pylist(),
                        refold.column("msg_id").to_pylist(), strict=True))
    if also_keys is not None:
        if isinstance(also_keys, pa.Table):
            keys.update(zip(also_keys.column("sender").to_pylist(),
                            also_keys.column("msg_id").to_pylist(), strict=True))
        else:
            keys.update((row[0], row[1])
                        for row in also_keys.select("sender", "msg_id").collect())
    return keys


def candidate_frame(spark: SparkSession, landed: LandedPass) -> Any:
    """The pass's replay candidates (kept by :func:`fold_pass`) as a DataFrame, or ``None``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from snap_spark.lake import read_data_files
    from snap_spark.pipeline.land import CANDIDATE_SCHEMA

    if not landed.candidate_files:
        return None

    def frame() -> DataFrame:
        return read_data_files(spark, landed.candidate_files,
                               from_arrow_schema(CANDIDATE_SCHEMA))

    # a small pass decides its candidates on the driver (_decide_against_lake), and a job
    # whose Spark session has not started yet (snap_spark.runtime.session.deferred_session) need
    # not start it for a frame it never reads
    return _PlannedFrame(frame) if _small(landed) else frame()


class _PlannedFrame:
    """A DataFrame planned the first time it is used (every attribute is the frame's)."""

    def __init__(self, plan: Callable[[], DataFrame]) -> None:
        self._plan: Callable[[], DataFrame] | None = plan
        self._frame: DataFrame | None = None

    def __getattr__(self, name: str) -> Any:
        if self._frame is None:
            assert self._plan is not None
            self._frame, self._plan = self._plan(), None
        return getattr(self._frame, name)


def _decide_against_lake(spark: SparkSession, lake: Lake, msg_path: str, landed: LandedPass,
                         settings: VerifySettings, candidates: Any, also_keys: Any = None,
                         version: int | None = None, ingest_id: str | None = None,
                         refold: Any = None) -> tuple[Any, dict[int | None, int]]:
    """Decide the run's candidates against the copies ``messages`` already holds (the lake
    is the replay store: :mod:`snap_spark.pipeline.replay_store`); fold the result into
    ``landed`` and return the :class:`~snap_spark.lake.RowUpdates` of earlier rows whose
    verdict changes (``None`` when none do), with what they do to the table's count of each
    code (:attr:`~snap_spark.pipeline.replay_store.LakeDecisions.code_changes`)."""
    from snap_spark.lake import RowUpdates
    from snap_spark.pipeline.replay_store import UPDATE_KEYS, decide_against_lake

    if landed.earliest is None or candidates is None:
        return None, {}
    decided = decide_against_lake(spark, lake, msg_path, candidates,
                                  since=landed.earliest - settings.replay_window,
                                  window=settings.replay_window, also_keys=also_keys,
                                  version=version, refold=refold,
                                  local=_read_candidates(landed) if _small(landed) else None)
    if decided.keys:
        log(f"replay store: {decided.keys} message id(s) also in the lake; "
            f"{decided.changes.num_rows} earlier row(s) change verdict")
    landed.apply_lake_decisions(decided.redecided)
    if not decided.changes.num_rows:
        return None, {}
    from snap_spark.pipeline.runs import file_prefix

    # the rewritten files carry the run's tag: a run killed before its commit leaves them
    # to the next sweep (clean_leftovers), as its other files
    return (RowUpdates(decided.changes, UPDATE_KEYS,
                       None if ingest_id is None else file_prefix(ingest_id, "updated")),
            decided.code_changes)


def _small(landed: LandedPass) -> bool:
    """Whether a pass takes its small steps on the driver: it writes its ``messages`` files
    there, and decides its replay candidates against the lake there (the lake's
    candidates read by delta-rs, with no Spark job). A Spark stage costs more than that
    work for a pass of a few thousand lines; a stream's micro-batch is usually that
    small (:class:`~snap_spark.common.placement.DriverLimits` ``pass_lines``)."""
    from snap_spark.common.placement import limits

    return limits().fits("pass_lines", sum(landed.lines.values()))


def _read_candidates(landed: LandedPass) -> Any:
    """The pass's replay candidates, read on the driver as one Arrow table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from snap_spark.pipeline.land import CANDIDATE_SCHEMA

    parts = []
    for location in landed.candidate_files:
        filesystem, path = storage.resolve(location)
        parts.append(pq.read_table(path, filesystem=filesystem, schema=CANDIDATE_SCHEMA))
    return pa.concat_tables(parts) if parts else CANDIDATE_SCHEMA.empty_table()


def _write_messages(spark: SparkSession, landed: LandedPass, msg_root: str, ingest_id: str
                    ) -> list[Any]:
    """Write the ``messages`` files of staged rows, with the 2006 verdicts applied: in a
    Spark stage (one task per staged file), or on the driver for a small pass
    (:func:`_small`). Either way the same function writes them."""
    import pyarrow as pa

    from snap_spark.pipeline.land import data_file, landed_struct, write_messages

    if not landed.staged:
        return []
    write = functools.partial(write_messages, msg_root, landed.duplicates, ingest_id)
    staged = pa.RecordBatch.from_pylist(
        [{"source_file": f, "file_key": k, "info": i} for f, k, i in landed.staged],
        schema=pa.schema([("source_file", pa.string()), ("file_key", pa.string()),
                          ("info", pa.string())]))
    if _small(landed):
        infos = [info for batch in write([staged]) for info in batch.column("info").to_pylist()]
    else:
        # built from Arrow, the file list is a local relation (a list of tuples would be
        # turned into rows by a Python stage of its own, a cost worth avoiding: docs/speed.md,
        # *Figures behind the code*)
        frame = spark.createDataFrame(pa.Table.from_batches([staged]))
        infos = [row["info"] for row in
                 frame.mapInArrow(write, landed_struct()).toArrow().to_pylist()]
    return [data_file(info) for info in infos]


def _commit_ledger(spark: SparkSession, lake: Lake, path: str, plan: CommitPlan, *,
                   app_id: str, version: int) -> None:
    """Append the run's ``ingested_files`` rows (a few, written on the driver)."""
    import pyarrow as pa

    from snap_spark.lake import commit_rows, to_arrow
    from snap_spark.pipeline.runs import file_prefix
    from snap_spark.schemas.tables import INGESTED_FILES

    when = dt.datetime.fromtimestamp(plan.ingest_time_us / 1_000_000, tz=dt.UTC)
    batch = pa.RecordBatch.from_pylist(
        [{**dataclasses.asdict(piece), "ingest_id": plan.ingest_id, "ingest_time": when}
         for piece in plan.ledger or ()], schema=to_arrow(INGESTED_FILES))
    commit_rows(spark, lake, path, lake.data_root(path, plan.staging), batch,
                schema=INGESTED_FILES, file_prefix=file_prefix(plan.ingest_id, "f"),
                app_id=app_id, version=version, commit_info=dict(plan.info))


#: Delta app transaction ids of the commits that remove replaced rows: this prefix and a
#: digest of the rows (:func:`replaced_app_id`).
REPLACED_APP_PREFIX = "snap-spark/replaced-lines/"


def replaced_app_id(lines: Collection[PartialLine]) -> str:
    """The app transaction id (at version 1) of the commits removing the rows of ``lines``
    from ``raw_messages`` and ``messages``: named by the rows alone, as removing them is
    the same whichever pass does it, and a row removed never comes back (its ``file_key``
    is the hash of bytes the ledger holds, which land as ``same`` from then on).

    Examples:
        >>> from snap_spark.pipeline.ledger import PartialLine
        >>> a, b = PartialLine("f", "k1", 3, 10, 14), PartialLine("g", "k2", 1, 0, 5)
        >>> replaced_app_id([a, b]) == replaced_app_id([b, a]) != replaced_app_id([a])
        True
    """
    import hashlib

    names = sorted(f"{line.file_key}:{line.line_no}" for line in lines)
    return REPLACED_APP_PREFIX + hashlib.sha256("\n".join(names).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RemovedRows:
    """What :func:`remove_replaced` removed from a table."""

    #: per code (``None``: valid), the rows removed, as negative counts (``messages``)
    codes: dict[int | None, int] = field(default_factory=dict)
    #: ``(sender, msg_id, received_at)`` of the removed rows that took part in replay
    #: (``messages``): their keys are decided again
    keys: pa.Table | None = None


#: The columns of a removed ``messages`` row its commit records (what a pass run again
#: after that commit needs: the figures, and the keys to decide again).
_REMOVED_COLUMNS = ["file_key", "line_no", "sender", "msg_id", "received_at", "error_code"]


def remove_replaced(spark: SparkSession, lake: Lake, path: str, plan: CommitPlan
                    ) -> RemovedRows:
    """Remove the rows of ``plan.replaced`` (unfinished last lines that the pass lands again
    completed) from the ``raw_messages`` or ``messages`` table at ``path``: one commit
    that adds nothing and copies the data files holding them without them
    (:class:`~snap_spark.lake.RowUpdates` with ``remove``), under the app transaction
    :func:`replaced_app_id`, so a pass run again removes nothing twice. The ``messages``
    commit records the removed rows (codes and keys) in its commit info, where a pass run
    again after it finds them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from snap_spark.lake import (
        RowUpdates,
        commit_data_files,
        committed_info,
        read_arrow,
        table_uri,
    )
    from snap_spark.pipeline.runs import file_prefix
    from snap_spark.protocol.verdict import took_part_in_replay
    from snap_spark.schemas.tables import MESSAGES, MESSAGES_PARTITION, RAW_MESSAGES

    messages = storage.join(plan.lake_dir, "messages") == path
    app_id = replaced_app_id(plan.replaced)
    wanted = sorted({(line.file_key, line.line_no) for line in plan.replaced})
    rows: list[dict[str, Any]] = []
    if lake.txn_version(path, app_id) is not None:
        rows = list((committed_info(table_uri(path), app_id, 1) or {}).get("removed", []))
    else:
        keys: dict[str, list[Any]] = {"file_key": [k for k, _ in wanted],
                                      "line_no": [n for _, n in wanted]}
        if messages:
            found = read_arrow(path, [*_REMOVED_COLUMNS, "event_date"],
                               where=pc.field("file_key").isin([k for k, _ in wanted]))
            named = set(wanted)
            dated = [row for row in (found.to_pylist() if found is not None else [])
                     if (row["file_key"], row["line_no"]) in named]
            rows = [{c: row[c] for c in _REMOVED_COLUMNS} for row in dated]
            if len(dated) == len(wanted):  # the partitions to look in
                dates = {(r["file_key"], r["line_no"]): r["event_date"] for r in dated}
                keys["event_date"] = [dates[key] for key in wanted]
        updates = RowUpdates(
            pa.table({"file_key": pa.array(keys["file_key"], pa.string()),
                      "line_no": pa.array(keys["line_no"], pa.int64()),
                      **({"event_date": pa.array(keys["event_date"], pa.date32())}
                         if "event_date" in keys else {})}),
            ("file_key", "line_no"), file_prefix(plan.ingest_id, "removed"), remove=True)
        commit_data_files(
            spark, lake, path, lake.data_root(path, plan.staging), [],
            schema=MESSAGES if messages else RAW_MESSAGES,
            partition_by=MESSAGES_PARTITION if messages else (), app_id=app_id, version=1,
            commit_info={**plan.info, "action": "remove replaced lines",
                         "lines": [f"{line.source_file}:{line.line_no}"
                                   for line in plan.replaced],
                         **({"removed": rows} if messages else {})},
            updates=updates)
        log(f"{path.rstrip('/').rsplit('/', 1)[-1]}: removed the rows of {len(wanted)} "
            "unfinished last line(s) landed before, now landed completed")
    codes: Counter[int | None] = Counter()
    for row in rows:
        codes[row["error_code"]] -= 1
    candidates = [row for row in rows if took_part_in_replay(row["error_code"])
                  and row["sender"] is not None and row["msg_id"] is not None]
    keys_table = pa.table({
        "sender": pa.array([r["sender"] for r in candidates], pa.string()),
        "msg_id": pa.array([r["msg_id"] for r in candidates], pa.string()),
        "received_at": pa.array([r["received_at"] for r in candidates], pa.float64())})
    return RemovedRows(dict(codes), keys_table if candidates else None)


def _with_replaced_keys(spark: SparkSession, landed: LandedPass, plan: CommitPlan,
                        candidates: DataFrame | None, removed: pa.Table
                        ) -> tuple[DataFrame | None, CommitPlan]:
    """The pass's candidates and plan, such that the stored copies of removed rows that took
    part in replay are decided again from the removed row's receipt on
    (:attr:`CommitPlan.refold`), even when the pass itself has no candidate."""
    import pyarrow.compute as pc

    times = [t for t in removed.column("received_at").to_pylist() if t is not None]
    if not times:
        return candidates, plan
    earliest = min(times)
    landed.earliest = earliest if landed.earliest is None else min(landed.earliest, earliest)
    if candidates is None:
        from pyspark.sql.pandas.types import from_arrow_schema

        from snap_spark.pipeline.land import CANDIDATE_SCHEMA

        candidates = spark.createDataFrame([], from_arrow_schema(CANDIDATE_SCHEMA))
    kept = removed.filter(pc.is_valid(removed.column("received_at")))
    return candidates, dataclasses.replace(plan, refold=kept)


def _moved(shift: Mapping[int | None, int]) -> str:
    """`` (valid -2, 2006 +2)``: what re-decided rows did to the count of each code."""
    moved = ", ".join(f"{'valid' if code is None else code} {n:+d}"
                      for code, n in sorted(shift.items(), key=lambda kv: kv[0] or 0) if n)
    return f" ({moved})" if moved else ""


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
        *([f"unfinished last lines landed before, now landed completed: their "
           f"{result.rows_replaced} earlier row(s) removed" + _moved(result.replaced_codes)]
          if result.rows_replaced else []),
        *([f"earlier messages rows re-decided (late, earlier-received copies): "
           f"{result.rows_redecided}" + _moved(result.redecided_codes)]
          if result.rows_redecided else []),
        *([f"tasks refreshed: {result.tasks_refreshed} (task_events and tasks)"]
          if result.tasks_refreshed is not None else []),
        *([f"message keys decided again at commit (another writer committed copies of "
           f"them meanwhile): {result.keys_redecided}"] if result.keys_redecided else []),
    ])

