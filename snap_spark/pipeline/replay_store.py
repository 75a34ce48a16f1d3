"""The lake as the durable replay store: decide a run's 2006 verdicts against ``messages``.

A landing run (or a stream's micro-batch) first decides replays among its own lines
(:func:`snap_spark.pipeline.land.fold_landed`). Copies of the same message may already be in
the lake, landed by earlier runs, and may even have been received *after* this run's lines
(archives arrive out of order). :func:`decide_against_lake` settles both:

1. a bounded lookup: the replay candidates already in ``messages`` (rows that passed checks
   1-5: valid, 2001, 2002 or 2006) with receipt time at or after the run's earliest
   candidate minus the window (partition-pruned by ``event_date``, the receipt date), and
   whose ``(sender, msg_id)`` is one of the run's;
2. for each such key, the lake's rows and the run's candidates are folded together in
   receipt order by the protocol's fold (:func:`snap_spark.protocol.replay.fold_candidates`),
   starting from the lake's stored verdicts before the run's first copy (those cannot
   change: a fold's verdicts before an inserted row stay as they were);
3. the result: the final verdict of each of the run's candidates of those keys
   (``redecided`` rows, replacing what the run decided alone) and every lake row whose
   verdict or 2006 detail changed (``change`` rows), which the caller commits in the same
   Delta commit as the run's new rows (:class:`snap_spark.lake.RowUpdates`).

So the verdicts in the lake equal one batch run over all lines in receipt order, however
the lines were cut into runs and in whatever order the runs came (ties in receipt time are
taken in ``(source_file, line_no)`` order). ``docs/verdicts.md`` says which verdicts can
change after they were written.

Example (a SparkSession ``spark``, a :class:`~snap_spark.lake.Lake` ``lake``)::

    decided = decide_against_lake(spark, lake, "data/lake/messages", candidates_df,
                                  since=1770163080.0, window=120.0)
    decided.changes.num_rows  # lake rows whose verdict this run changes
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from snap_spark.common.pyarrow_compat import sort_nulls_first
from snap_spark.protocol.errors import ERROR_NAMES
from snap_spark.protocol.replay import (
    ReplayCandidate,
    ReplayKeyState,
    duplicate_detail,
    fold_candidates,
    line_name,
)
from snap_spark.protocol.verdict import (
    CANDIDATE_CODES,
    candidate_code,
    took_part_in_replay,
    verdict_name,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from snap_spark.lake import Lake, Where


#: Rows the joint fold reads (lake rows and the run's candidates, ``origin`` telling which).
_FOLD_COLUMNS = ["origin", "sender", "msg_id", "received_at", "code", "source_file",
                 "file_key", "line_no", "stored_code", "stored_detail", "signature_detail"]

#: What the joint fold returns: ``redecided`` (a candidate of this run) or ``change`` (a
#: lake row whose verdict changes).
DECIDED_SCHEMA = pa.schema([
    pa.field("kind", pa.string(), False),
    pa.field("source_file", pa.string()),
    pa.field("file_key", pa.string()),
    pa.field("line_no", pa.int64()),
    pa.field("received_at", pa.float64()),
    pa.field("code", pa.int32()),  # the final code
    # redecided: the candidate's check 7-8 code; change: the code the lake row had
    pa.field("prior_code", pa.int32()),
    pa.field("detail", pa.string()),  # 2006 detail, or the row's own check 7-8 detail
])


@dataclass(frozen=True)
class LakeDecisions:
    """What :func:`decide_against_lake` found."""

    #: ``redecided`` rows: the final verdict of each run candidate whose key the lake holds.
    redecided: list[dict[str, Any]]
    #: ``messages`` column updates of lake rows whose verdict changes, keyed by
    #: ``(file_key, line_no)`` with their ``event_date`` (see :func:`update_rows`).
    changes: pa.Table
    #: keys ``(sender, msg_id)`` found in the lake
    keys: int = 0
    #: what ``changes`` does to the table's count of each code (``None``: valid), zeros
    #: left out: an accepted row made a replay is ``{None: -1, 2006: 1}``
    code_changes: dict[int | None, int] = field(default_factory=dict)


def decide_against_lake(spark: SparkSession, lake: Lake, msg_path: str,
                        candidates: DataFrame, *, since: float, window: float,
                        also_keys: DataFrame | pa.Table | None = None,
                        version: int | None = None,
                        local: pa.Table | None = None,
                        refold: pa.Table | None = None) -> LakeDecisions:
    """Decide the run's ``candidates`` (:data:`~snap_spark.pipeline.land.CANDIDATE_SCHEMA`)
    against the replay candidates ``messages`` holds from receipt time ``since`` on (the
    run's earliest candidate minus ``window``). Keys ``(sender, msg_id)`` in ``also_keys``
    are folded again even when the lake holds none of their rows (a stream's rows its state
    could not decide exactly; a DataFrame, or an Arrow table gathered on the driver).
    Returns nothing to change when there is nothing to fold.

    ``version`` pins the ``messages`` version read (``-1``: as if there were no table; the
    latest when ``None``): the commit that follows names it, so that a commit by another
    writer since is noticed (:func:`keys_landed_since`).

    ``local``: the same candidates as an Arrow table, for a small run (a stream's
    micro-batch): the lake's rows of their keys are then read on the driver by delta-rs
    (no Spark job), and the joint fold runs there over the few rows found, instead of in
    Spark stages. The decisions are the same either way (:func:`fold_with_lake` takes them).

    ``refold``: keys ``(sender, msg_id)`` with a receipt time ``received_at`` each, whose
    stored rows from that time on are folded again though the run may hold no copy of
    them: a row removed from ``messages`` (an unfinished line landed again completed) may
    have made later copies 2006. ``since`` must reach back to those times.
    """
    if local is not None:
        return _decide_locally(spark, lake, msg_path, local, since=since, window=window,
                               also_keys=also_keys, version=version, refold=refold)
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    empty = LakeDecisions([], update_rows([]))
    run_keys = candidates.select("sender", "msg_id").distinct()
    markers = None
    if refold is not None and refold.num_rows:
        markers = spark.createDataFrame(_refold_markers(refold))
        run_keys = run_keys.unionByName(markers.select("sender", "msg_id")).distinct()
    parts = []
    keys = None
    if (version is None or version >= 0) and lake.exists(msg_path):
        hits = _stored_candidates(spark, lake, msg_path, since, version).join(
            run_keys, ["sender", "msg_id"], "left_semi")
        parts.append(hits)
        keys = hits.select("sender", "msg_id")
    if also_keys is not None:
        forced = (spark.createDataFrame(also_keys) if isinstance(also_keys, pa.Table)
                  else also_keys).select("sender", "msg_id")
        keys = forced if keys is None else keys.unionByName(forced)
    if keys is None:
        return empty
    mine = (
        candidates.join(keys.distinct(), ["sender", "msg_id"], "left_semi")
        .select(F.lit("run").alias("origin"), "sender", "msg_id", "received_at", "code",
                "source_file", "file_key", "line_no",
                F.lit(None).cast("int").alias("stored_code"),
                F.lit(None).cast("string").alias("stored_detail"),
                F.lit(None).cast("string").alias("signature_detail"))
    )
    rows_in = mine if not parts else parts[0].unionByName(mine)
    if markers is not None:
        rows_in = rows_in.unionByName(markers)
    decided = (
        rows_in
        .repartition("sender", "msg_id")
        .sortWithinPartitions(*FOLD_ORDER)
        .mapInArrow(functools.partial(fold_with_lake, window), from_arrow_schema(DECIDED_SCHEMA))
        .toArrow()
    )
    return _decisions(decided)


def _decisions(decided: pa.Table) -> LakeDecisions:
    """:class:`LakeDecisions` of the joint fold's rows (:data:`DECIDED_SCHEMA`)."""
    rows = decided.to_pylist()
    changes = [r for r in rows if r["kind"] == "change"]
    return LakeDecisions(
        redecided=[r for r in rows if r["kind"] == "redecided"],
        changes=update_rows(changes),
        keys=sum(1 for r in rows if r["kind"] == "key"),
        code_changes=code_changes(changes),
    )


def code_changes(changes: Iterable[Mapping[str, Any]]) -> dict[int | None, int]:
    """The change in the count of each code (``None``: valid) that ``change`` rows make,
    each moving a lake row from its ``prior_code`` to its ``code``; zeros left out.

    Examples:
        >>> code_changes([{"prior_code": None, "code": 2006},
        ...               {"prior_code": 2006, "code": 2006}])
        {None: -1, 2006: 1}
    """
    shift: dict[int | None, int] = {}
    for change in changes:
        if change["prior_code"] != change["code"]:
            shift[change["prior_code"]] = shift.get(change["prior_code"], 0) - 1
            shift[change["code"]] = shift.get(change["code"], 0) + 1
    return {code: n for code, n in shift.items() if n}


#: The order the joint fold (:func:`fold_with_lake`) takes a key's rows in: ascending,
#: nulls first, as Spark's ``sortWithinPartitions`` sorts and
#: :func:`~snap_spark.common.pyarrow_compat.sort_nulls_first` on the driver.
FOLD_ORDER = ("sender", "msg_id", "received_at", "source_file", "line_no")


def stored_candidates_where(since: float) -> Where:
    """The rows of ``messages`` that are replay candidates received from ``since`` on, for
    the Spark scan and the driver's delta-rs scan alike. Only predicates on partitions,
    numbers and nulls: a Delta log's string statistics may be truncated prefixes
    (delta-spark keeps 32 characters), which a scan that trusts them as bounds would prune
    wrongly, so keys are matched after the scan.

    Examples:
        >>> stored_candidates_where(86400.5)
        (((((event_date >= datetime.date(1970, 1, 2)) & (received_at >= 86400.5)) & \
(error_code is null | error_code in [2001, 2002, 2006])) & sender is not null) & \
msg_id is not null)
    """
    from snap_spark.lake import col

    return ((col("event_date") >= _utc_date(since)) & (col("received_at") >= float(since))
            & (col("error_code").is_null() | col("error_code").isin(sorted(CANDIDATE_CODES)))
            & col("sender").is_valid() & col("msg_id").is_valid())


def _stored_candidates(spark: SparkSession, lake: Lake, msg_path: str, since: float,
                       version: int | None) -> DataFrame:
    """The replay candidates ``messages`` holds (at ``version``) received from ``since``
    on, as rows of :data:`_FOLD_COLUMNS` (``origin`` ``lake``)."""
    from pyspark.sql import functions as F

    return (
        lake.read(spark, msg_path, version)
        .filter(stored_candidates_where(since).spark())
        .select(F.lit("lake").alias("origin"), "sender", "msg_id", "received_at",
                F.col("signature_code").alias("code"), "source_file", "file_key",
                "line_no", F.col("error_code").alias("stored_code"),
                F.col("error_detail").alias("stored_detail"), "signature_detail")
    )


#: :data:`_FOLD_COLUMNS` as Arrow types (the driver-side joint fold's input).
_FOLD_SCHEMA = pa.schema([
    pa.field("origin", pa.string()), pa.field("sender", pa.string()),
    pa.field("msg_id", pa.string()), pa.field("received_at", pa.float64()),
    pa.field("code", pa.int32()), pa.field("source_file", pa.string()),
    pa.field("file_key", pa.string()), pa.field("line_no", pa.int64()),
    pa.field("stored_code", pa.int32()), pa.field("stored_detail", pa.string()),
    pa.field("signature_detail", pa.string()),
])


def _stored_locally(msg_path: str, since: float, version: int | None, keys: pa.Table
                    ) -> pa.Table:
    """:func:`_stored_candidates` of the keys ``(sender, msg_id)`` in ``keys`` only, read on
    the driver by delta-rs (one filtered scan, no Spark job), as :data:`_FOLD_SCHEMA`."""
    from snap_spark.lake import read_arrow

    columns = ["sender", "msg_id", "received_at", "signature_code", "source_file", "file_key",
               "line_no", "error_code", "error_detail", "signature_detail"]
    rows = read_arrow(msg_path, columns, version, where=stored_candidates_where(since).arrow())
    if rows is None:
        return _FOLD_SCHEMA.empty_table()
    rows = rows.join(keys.cast(pa.schema([("sender", rows.schema.field("sender").type),
                                          ("msg_id", rows.schema.field("msg_id").type)])),
                     ["sender", "msg_id"], join_type="left semi")
    n = rows.num_rows
    return pa.table([pa.array(["lake"] * n, pa.string()), rows["sender"], rows["msg_id"],
                     rows["received_at"], rows["signature_code"], rows["source_file"],
                     rows["file_key"], rows["line_no"], rows["error_code"],
                     rows["error_detail"], rows["signature_detail"]],
                    names=_FOLD_COLUMNS).cast(_FOLD_SCHEMA)


#: A message key ``(sender, msg_id)``.
_KEY_SCHEMA = pa.schema([("sender", pa.string()), ("msg_id", pa.string())])
#: ``origin`` of a marker row of the joint fold (:func:`fold_key`): the stored rows of its key
#: from its receipt time on are folded again, though no copy of the run is among them.
REFOLD_ORIGIN = "refold"


def _refold_markers(refold: pa.Table) -> pa.Table:
    """Marker rows of :data:`REFOLD_ORIGIN` for ``refold`` (``sender, msg_id, received_at``),
    as :data:`_FOLD_SCHEMA`: sorted before every row of the same key and time (an empty
    ``source_file``, line 0)."""
    n = refold.num_rows
    return pa.table({
        "origin": pa.array([REFOLD_ORIGIN] * n, pa.string()),
        "sender": refold["sender"].cast(pa.string()), "msg_id": refold["msg_id"].cast(pa.string()),
        "received_at": refold["received_at"].cast(pa.float64()),
        "code": pa.nulls(n, pa.int32()), "source_file": pa.array([""] * n, pa.string()),
        "file_key": pa.array([""] * n, pa.string()), "line_no": pa.array([0] * n, pa.int64()),
        "stored_code": pa.nulls(n, pa.int32()), "stored_detail": pa.nulls(n, pa.string()),
        "signature_detail": pa.nulls(n, pa.string()),
    }, schema=_FOLD_SCHEMA)


def _decide_locally(spark: SparkSession, lake: Lake, msg_path: str, local: pa.Table, *,
                    since: float, window: float, also_keys: DataFrame | pa.Table | None,
                    version: int | None, refold: pa.Table | None = None) -> LakeDecisions:
    """:func:`decide_against_lake` for a small run whose candidates are in ``local``: the
    lake's candidates of the run's keys read on the driver (:func:`_stored_locally`), then
    the joint fold on the driver."""
    mine = local.filter(pc.and_(pc.is_valid(local["sender"]), pc.is_valid(local["msg_id"])))
    markers = (_refold_markers(refold) if refold is not None and refold.num_rows
               else _FOLD_SCHEMA.empty_table())
    run_keys = pa.concat_tables([
        mine.select(["sender", "msg_id"]).cast(_KEY_SCHEMA),
        markers.select(["sender", "msg_id"]).cast(_KEY_SCHEMA),
    ]).group_by(["sender", "msg_id"]).aggregate([])
    parts: list[pa.Table] = [markers]
    found: list[pa.Table] = [markers.select(["sender", "msg_id"])]
    if run_keys.num_rows and (version is None or version >= 0) and lake.exists(msg_path):
        stored = _stored_locally(msg_path, since, version, run_keys)
        parts.append(stored)
        found.append(stored.select(["sender", "msg_id"]))
    if also_keys is not None:
        found.append(also_keys.select(["sender", "msg_id"]) if isinstance(also_keys, pa.Table)
                     else also_keys.select("sender", "msg_id").toArrow())
    keys = [t.cast(pa.schema([("sender", pa.string()), ("msg_id", pa.string())]))
            for t in found if t.num_rows]
    if not keys:
        return LakeDecisions([], update_rows([]))
    wanted = pa.concat_tables(keys).group_by(["sender", "msg_id"]).aggregate([])
    ours = mine.join(wanted, ["sender", "msg_id"], join_type="left semi")
    n = ours.num_rows
    parts.append(pa.table({
        "origin": pa.array(["run"] * n, pa.string()), "sender": ours["sender"],
        "msg_id": ours["msg_id"], "received_at": ours["received_at"], "code": ours["code"],
        "source_file": ours["source_file"], "file_key": ours["file_key"],
        "line_no": ours["line_no"], "stored_code": pa.nulls(n, pa.int32()),
        "stored_detail": pa.nulls(n, pa.string()),
        "signature_detail": pa.nulls(n, pa.string()),
    }, schema=_FOLD_SCHEMA))
    # Spark's order (sortWithinPartitions): ascending, nulls first
    rows_in = sort_nulls_first(pa.concat_tables(parts), FOLD_ORDER)
    decided = pa.Table.from_batches(list(fold_with_lake(window, rows_in.to_batches())),
                                    schema=DECIDED_SCHEMA)
    return _decisions(decided)


@dataclass(frozen=True)
class LandedSince:
    """What other writers committed to ``messages`` after a version (:func:`keys_landed_since`)."""

    #: the table's latest version when looked at
    version: int
    #: replay candidates' keys ``(sender, msg_id)`` received at or after ``since``
    keys: frozenset[tuple[str, str]]
    #: the file keys of every row added
    file_keys: frozenset[str]


def keys_landed_since(msg_path: str, version: int, since: float) -> LandedSince:
    """The keys of replay candidates (verdicts a 2006 may depend on) that commits after
    ``version`` added to ``messages`` or rewrote in it, received at or after ``since``: a
    decision taken against ``version`` for any of them must be taken again.

    Examples:
        >>> keys_landed_since("/nowhere/lake/messages", -1, 0.0).keys
        frozenset()
    """
    from snap_spark.lake import rows_added_since

    latest, rows = rows_added_since(
        msg_path, version, ["sender", "msg_id", "received_at", "error_code", "file_key"])
    keys: set[tuple[str, str]] = set()
    file_keys: set[str] = set()
    if rows.num_rows:
        columns = [rows.column(n).to_pylist() for n in
                   ("sender", "msg_id", "received_at", "error_code", "file_key")]
        for sender, msg_id, at, code, file_key in zip(*columns, strict=True):
            file_keys.add(file_key)
            if (sender is not None and msg_id is not None and at is not None and at >= since
                    and took_part_in_replay(code)):
                keys.add((sender, msg_id))
    return LandedSince(latest, frozenset(keys), frozenset(file_keys))


def fold_with_lake(window: float, batches: Iterable[pa.RecordBatch]
                   ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function of the joint fold: rows of :data:`_FOLD_COLUMNS` partitioned
    by ``(sender, msg_id)`` and sorted by key, ``received_at, source_file, line_no``."""
    rows: list[dict[str, Any]] = []
    for batch in batches:
        rows.extend(batch.to_pylist())
    out: list[dict[str, Any]] = []
    start = 0
    while start < len(rows):
        end = start
        key = (rows[start]["sender"], rows[start]["msg_id"])
        while end < len(rows) and (rows[end]["sender"], rows[end]["msg_id"]) == key:
            end += 1
        out.extend(fold_key(rows[start:end], window))
        start = end
    if out:
        yield pa.RecordBatch.from_pylist(out, schema=DECIDED_SCHEMA)


def fold_key(rows: list[dict[str, Any]], window: float) -> list[dict[str, Any]]:
    """Decide one key's rows (lake and run, in fold order); see the module docstring.

    Examples:
        >>> lake = {"origin": "lake", "received_at": 100.0, "code": None, "source_file": "b",
        ...         "file_key": "kb", "line_no": 1, "stored_code": None, "stored_detail": None,
        ...         "signature_detail": None}
        >>> run = {**lake, "origin": "run", "received_at": 50.0, "source_file": "a",
        ...        "file_key": "ka"}
        >>> [(r["kind"], r.get("code")) for r in fold_key([run, lake], 120)]
        [('key', None), ('redecided', None), ('change', 2006)]
    """
    first_run = next((i for i, r in enumerate(rows) if r["origin"] in ("run", REFOLD_ORIGIN)),
                     None)
    if first_run is None:
        return []
    out: list[dict[str, Any]] = [{"kind": "key"}]
    # The lake's verdicts before the run's first copy stand; the last accepted one of them
    # is where the fold starts. A candidate's ref is its position in ``rows``.
    anchor: float | None = None
    anchor_row: int | None = None
    for i in range(first_run):
        if rows[i]["stored_code"] is None:
            anchor, anchor_row = rows[i]["received_at"], i
    state = ReplayKeyState(anchor=anchor, last_accepted=anchor)
    # from there on every row is folded (a refold marker only says where to start)
    folded = [i for i in range(first_run, len(rows)) if rows[i]["origin"] != REFOLD_ORIGIN]
    tail = [rows[i] for i in folded]
    candidates = [ReplayCandidate(float(rows[i]["received_at"]), rows[i]["code"], i)
                  for i in folded]
    fold = fold_candidates(state, candidates, window, in_order=True, track_accepted=True,
                           accepted=anchor_row)
    accepted_rows = fold.accepted
    for i, decision in enumerate(fold.decisions):
        row, at, seen = tail[i], candidates[i].received_at, decision.duplicate_of
        code = candidate_code(row["code"], seen is not None)
        detail: str | None
        if seen is not None:
            accepted = accepted_rows[i]
            named = None if accepted is None else rows[cast(int, accepted)]
            detail = duplicate_detail(seen, at, window, None if named is None else line_name(
                named["source_file"], named["line_no"]))
        else:
            detail = row["signature_detail"] if row["origin"] == "lake" else None
        common = {"source_file": row["source_file"], "file_key": row["file_key"],
                  "line_no": row["line_no"], "received_at": at, "code": code}
        if row["origin"] == "run":
            out.append({"kind": "redecided", **common, "prior_code": row["code"],
                        "detail": detail if seen is not None else None})
        elif (code, detail) != (row["stored_code"], row["stored_detail"]):
            out.append({"kind": "change", **common, "prior_code": row["stored_code"],
                        "detail": detail})
    return out


#: Columns of the ``messages`` updates a change sets, with the keys that find the row.
UPDATE_SCHEMA = pa.schema([
    pa.field("file_key", pa.string(), False),
    pa.field("line_no", pa.int64(), False),
    pa.field("event_date", pa.date32(), False),
    pa.field("verdict", pa.string(), False),
    pa.field("error_code", pa.int32()),
    pa.field("error_name", pa.string()),
    pa.field("error_detail", pa.string()),
])
UPDATE_KEYS = ("file_key", "line_no")


def update_rows(changes: Iterable[dict[str, Any]]) -> pa.Table:
    """``change`` rows as ``messages`` column updates (:data:`UPDATE_SCHEMA`).

    Examples:
        >>> update_rows([{"file_key": "k", "line_no": 3, "received_at": 0.0, "code": 2006,
        ...               "detail": "same (from, id) ..."}]).column("verdict").to_pylist()
        ['rejected']
    """
    rows = [
        {"file_key": c["file_key"], "line_no": c["line_no"],
         "event_date": _utc_date(c["received_at"]), "verdict": verdict_name(c["code"]),
         "error_code": c["code"],
         "error_name": None if c["code"] is None else ERROR_NAMES.get(c["code"]),
         "error_detail": c["detail"]}
        for c in changes
    ]
    return pa.Table.from_pylist(rows, schema=UPDATE_SCHEMA)


def _utc_date(seconds: float) -> dt.date:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).date()
