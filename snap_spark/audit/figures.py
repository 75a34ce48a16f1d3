"""The audit's figures: counts over the lake's tables, as plain values for ``summary.json``,
the charts and the HTML report.

Every figure is a Spark aggregation over one table read at a pinned version (the versions
go into the summary); the definitions are the tables' own columns, documented in
docs/audit.md, and nothing is decided again here (re-verification is
:mod:`snap_spark.audit.reverify`).

The window (``--from``/``--to``, inclusive dates, UTC) applies to each table's own time:
``messages.event_date``, ``task_events.event_time``, ``tasks.state_time``,
``nostr_events.created_time`` and ``agent_card_history.created_time``. ``agent_cards`` is
the directory as it stands and is never cut.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from snap_spark.protocol.errors import ERROR_NAMES, ErrorCode

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Rows in each worst-offender list.
TOP = 10
#: Message ids shown per offender.
EXAMPLES = 3

FORGED = int(ErrorCode.SIGNATURE_INVALID)
UNSIGNED = int(ErrorCode.SIGNATURE_MISSING)
REPLAY = int(ErrorCode.DUPLICATE_MESSAGE)
SIGNATURE_CODES = (FORGED, UNSIGNED)
#: ``agent_card_history`` verdicts of a card the directory accepted (it stands or stood).
ACCEPTED_CARD = ("valid", "superseded")
#: ``agent_card_history`` verdict of a card whose signer is not the identity it claims.
IMPERSONATION = "identity_mismatch"


def short(address: str | None, keep: int = 10) -> str:
    """A long address cut for a chart label (the tables keep it whole).

    Examples:
        >>> short("bc1pqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq5x3k2")
        'bc1pqqqqqq…5x3k2'
        >>> short(None)
        '(no sender)'
    """
    if address is None:
        return "(no sender)"
    return address if len(address) <= keep + 8 else f"{address[:keep]}…{address[-5:]}"


@dataclass(frozen=True)
class Window:
    """Inclusive UTC dates; ``None`` leaves that side open."""

    start: dt.date | None = None
    end: dt.date | None = None

    def as_record(self) -> dict[str, str | None]:
        return {"from": self.start.isoformat() if self.start else None,
                "to": self.end.isoformat() if self.end else None}

    def on_date(self, column: Column) -> Column:
        """A filter keeping rows whose date ``column`` is inside the window (nulls only when
        the window is open on both sides)."""
        from pyspark.sql import functions as F

        keep = F.lit(True)
        if self.start is not None:
            keep = keep & (column >= F.lit(self.start))
        if self.end is not None:
            keep = keep & (column <= F.lit(self.end))
        return keep

    def on_time(self, column: Column) -> Column:
        from pyspark.sql import functions as F

        return self.on_date(F.to_date(column))


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date | dt.datetime) else value


def _examples(column: str, condition: Column | None = None) -> Column:
    """The first :data:`EXAMPLES` message ids (sorted) of a group, under ``condition``."""
    from pyspark.sql import functions as F

    value = F.col(column) if condition is None else F.when(condition, F.col(column))
    return F.slice(F.array_sort(F.collect_set(value)), 1, EXAMPLES)


def message_figures(messages: DataFrame) -> dict[str, Any]:
    """Verdict mix, rejections by code (overall and per day), and the senders with the most
    rejections, replay attempts (2006) and signature failures (2001, 2002)."""
    from pyspark.sql import functions as F

    m = messages.select("event_date", "verdict", "error_code", "sender", "msg_id",
                        F.col("received_at").isNotNull().alias("_received")).cache()
    try:
        groups = [MessageGroup(**row) for row in _rows(
            m.groupBy("event_date", "_received", "verdict", "error_code").count())]
        senders = _worst_senders(m)
    finally:
        m.unpersist()
    counts = _message_counts(groups)
    total = counts["total"]
    return {
        "total": total, "valid": counts["valid"], "rejected": counts["rejected"],
        "forged_signatures": counts["forged"], "missing_signatures": counts["unsigned"],
        "replays": counts["replays"],
        "rates": {name: (counts[key] / total if total else 0.0) for name, key in (
            ("rejection", "rejected"), ("forged_signature", "forged"), ("replay", "replays"))},
        "by_code": _rejections_by_code(groups), "daily": _daily_verdicts(groups),
        "daily_by_code": _daily_codes(groups), "undated": _undated(groups),
        "senders": senders,
    }


@dataclass(frozen=True)
class MessageGroup:
    """The ``messages`` rows of one receipt day, receipt state, verdict and error code:
    the message figures but the senders' come from these groups, counted in one Spark job
    instead of a job per figure (docs/speed.md, *Figures behind the code*)."""

    event_date: dt.date | None
    _received: bool
    verdict: str | None
    error_code: int | None
    count: int


def _message_counts(groups: list[MessageGroup]) -> dict[str, int]:
    """All lines, valid, rejected, forged, unsigned and replays.

    Examples:
        >>> _message_counts([MessageGroup(None, True, "valid", None, 5),
        ...                  MessageGroup(None, True, "rejected", REPLAY, 2)])
        {'total': 7, 'valid': 5, 'rejected': 2, 'forged': 0, 'unsigned': 0, 'replays': 2}
    """
    def where(keep: Any) -> int:
        return sum(g.count for g in groups if keep(g))

    return {"total": where(lambda g: True), "valid": where(lambda g: g.verdict == "valid"),
            "rejected": where(lambda g: g.verdict == "rejected"),
            "forged": where(lambda g: g.error_code == FORGED),
            "unsigned": where(lambda g: g.error_code == UNSIGNED),
            "replays": where(lambda g: g.error_code == REPLAY)}


def _summed(groups: Iterable[MessageGroup], key: Any) -> dict[Any, int]:
    """The groups' counts summed by ``key(group)``."""
    sums: dict[Any, int] = {}
    for group in groups:
        sums[key(group)] = sums.get(key(group), 0) + group.count
    return sums


def _rejections_by_code(groups: list[MessageGroup]) -> list[dict[str, Any]]:
    """The rejections counted by error code, with each code's name, by code."""
    by_code = _summed((g for g in groups if g.error_code is not None), lambda g: g.error_code)
    return [{"code": code, "name": ERROR_NAMES.get(code, "?"), "count": n}
            for code, n in sorted(by_code.items())]


def _daily_verdicts(groups: list[MessageGroup]) -> list[dict[str, Any]]:
    """Valid and rejected lines per receipt day, by day. Only lines with a receipt time:
    lines without one (malformed, unreadable) are counted apart (:func:`_undated`), not
    under the day they were landed."""
    received = [g for g in groups if g._received]
    days = sorted({_iso(g.event_date) for g in received})
    valid = _summed((g for g in received if g.verdict == "valid"), lambda g: _iso(g.event_date))
    rejected = _summed((g for g in received if g.verdict == "rejected"),
                       lambda g: _iso(g.event_date))
    return [{"date": day, "valid": valid.get(day, 0), "rejected": rejected.get(day, 0)}
            for day in days]


def _daily_codes(groups: list[MessageGroup]) -> list[dict[str, Any]]:
    """Rejections per receipt day and error code, by day then code."""
    by_day = _summed((g for g in groups if g._received and g.error_code is not None),
                     lambda g: (_iso(g.event_date), g.error_code))
    return [{"date": day, "code": code, "count": n} for (day, code), n in sorted(by_day.items())]


def _undated(groups: list[MessageGroup]) -> dict[str, Any]:
    """The lines without a receipt time: valid, rejected, and rejections by code."""
    undated_codes = _summed((g for g in groups if not g._received), lambda g: g.error_code)
    return {"valid": undated_codes.pop(None, 0),
            "rejected": sum(undated_codes.values()),
            "by_code": [{"code": c, "count": n} for c, n in sorted(undated_codes.items())]}


def _worst_senders(m: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """The :data:`TOP` senders of ``m`` by rejections, by replay attempts and by signature
    failures, each with its counts and example message ids."""
    from pyspark.sql import functions as F

    code = F.col("error_code")
    rejected = F.col("verdict") == "rejected"
    per_sender = m.groupBy("sender").agg(
        F.count(F.lit(1)).alias("messages"),
        F.count(F.when(rejected, 1)).alias("rejections"),
        F.count(F.when(code == REPLAY, 1)).alias("replays"),
        F.count(F.when(code == FORGED, 1)).alias("forged"),
        F.count(F.when(code == UNSIGNED, 1)).alias("unsigned"),
        _examples("msg_id", rejected).alias("rejected_ids"),
        _examples("msg_id", code == REPLAY).alias("replay_ids"),
        _examples("msg_id", code.isin(*SIGNATURE_CODES)).alias("signature_ids"),
    ).cache()
    try:
        def top(rank: Column, ids: str) -> list[dict[str, Any]]:
            picked = (per_sender.withColumn("_rank", rank).filter(F.col("_rank") > 0)
                      .orderBy(F.desc("_rank"), F.asc_nulls_first("sender")).limit(TOP))
            return [{"sender": r["sender"], "messages": r["messages"],
                     "rejections": r["rejections"], "replays": r["replays"],
                     "forged": r["forged"], "unsigned": r["unsigned"],
                     "examples": r[ids]} for r in _rows(picked)]

        return {
            "by_rejections": top(F.col("rejections"), "rejected_ids"),
            "by_replays": top(F.col("replays"), "replay_ids"),
            "by_signature_failures": top(F.col("forged") + F.col("unsigned"),
                                         "signature_ids"),
        }
    finally:
        per_sender.unpersist()


def task_figures(tasks: DataFrame | None, events: DataFrame | None) -> dict[str, Any]:
    """Task states, illegal transitions (by from → to) and reports from non-owners, and the
    tasks with the most of both."""
    from pyspark.sql import functions as F

    out: dict[str, Any] = {}
    if tasks is not None:
        by_state = {(r["state"] or "none"): r["count"]
                    for r in _rows(tasks.groupBy("state").count())}
        out["tasks"] = sum(by_state.values())
        out["by_state"] = dict(sorted(by_state.items()))
    if events is not None:
        anomaly = F.col("anomaly")
        # one job: the reports counted by anomaly and transition
        moves = _rows(events.groupBy("anomaly", "previous_state", "new_state").count())
        illegal = [r for r in moves if r["anomaly"] == "illegal_transition"]
        out["reports"] = sum(r["count"] for r in moves)
        out["illegal_transitions"] = sum(r["count"] for r in illegal)
        out["foreign_reports"] = sum(r["count"] for r in moves if r["anomaly"] == "non_owner")
        out["illegal_by_transition"] = sorted(
            ({"from": r["previous_state"] or "none", "to": r["new_state"], "count": r["count"]}
             for r in illegal),
            key=lambda r: (-r["count"], r["from"], r["to"]))
        worst = (events.filter(anomaly.isNotNull()).groupBy("task_id").agg(
            F.count(F.when(anomaly == "illegal_transition", 1)).alias("illegal"),
            F.count(F.when(anomaly == "non_owner", 1)).alias("foreign"),
            _examples("message_id").alias("examples"))
            .orderBy(F.desc(F.col("illegal") + F.col("foreign")), "task_id").limit(TOP))
        out["worst_tasks"] = _rows(worst)
    return out


def agent_figures(history: DataFrame | None, cards: DataFrame | None,
                  events: DataFrame | None, window: Window) -> dict[str, Any]:
    """The agent directory's changes per identity — new (its first accepted card falls in
    the window), updated (further accepted cards in the window), impersonation attempts
    (cards claiming it signed by another key) — and the Nostr events by verdict."""
    from pyspark.sql import functions as F

    out: dict[str, Any] = {}
    if cards is not None:
        out["identities"] = cards.count()
    if events is not None:
        out["nostr_events_by_verdict"] = dict(sorted(
            (r["verdict"], r["count"]) for r in _rows(
                events.filter(window.on_time(F.col("created_time")))
                .groupBy("verdict").count())))
    if history is not None:
        accepted = F.col("verdict").isin(*ACCEPTED_CARD)
        first = history.filter(accepted).groupBy("identity").agg(
            F.min("created_time").alias("first_time"))
        inside = history.filter(window.on_time(F.col("created_time")))
        per = inside.groupBy("identity").agg(
            F.count(F.when(accepted, 1)).alias("accepted"),
            F.count(F.when(F.col("verdict") == IMPERSONATION, 1)).alias("impersonations"),
            _examples("card_key", F.col("verdict") == IMPERSONATION).alias("examples"),
        ).join(first, "identity", "left").withColumn(
            "new", F.when(window.on_time(F.col("first_time")) & F.col("first_time").isNotNull(),
                          1).otherwise(0)
        ).withColumn("updated", F.greatest(F.col("accepted") - F.col("new"), F.lit(0)))
        rows = _rows(per.select("identity", "new", "updated", "impersonations", "examples"))
        rows.sort(key=lambda r: (-r["impersonations"], -(r["new"] + r["updated"]),
                                 r["identity"] or ""))
        out["per_identity"] = rows
        out["history_by_verdict"] = dict(sorted(
            (r["verdict"], r["count"]) for r in _rows(inside.groupBy("verdict").count())))
        out["new_identities"] = sum(r["new"] for r in rows)
        out["updated_cards"] = sum(r["updated"] for r in rows)
        out["impersonation_attempts"] = sum(r["impersonations"] for r in rows)
        out["identities_impersonated"] = sum(1 for r in rows if r["impersonations"])
    return out


def all_figures(tables: Mapping[str, DataFrame], window: Window) -> dict[str, Any]:
    """Every figure of the report from the present ``tables`` (name → DataFrame at its
    pinned version): ``messages``, ``tasks`` and ``agents`` sections (empty dicts for the
    parts whose tables are absent)."""
    from pyspark.sql import functions as F

    def cut(name: str, column: str, on_date: bool = False) -> DataFrame | None:
        df = tables.get(name)
        if df is None:
            return None
        return df.filter((window.on_date if on_date else window.on_time)(F.col(column)))

    messages = cut("messages", "event_date", on_date=True)
    return {
        "messages": message_figures(messages) if messages is not None else {},
        "tasks": task_figures(cut("tasks", "state_time"), cut("task_events", "event_time")),
        "agents": agent_figures(tables.get("agent_card_history"), tables.get("agent_cards"),
                                tables.get("nostr_events"), window),
    }


def landing_figures(ledger: list[dict[str, Any]]) -> dict[str, Any]:
    """What the ``ingested_files`` ledger says about the input files, over the whole lake
    (bookkeeping: the window does not cut it): files landed, pieces that continued a file
    that grew, new versions of files that changed after they were landed, and files the
    stream picked up that vanished before they could be read (none of their lines landed;
    listed by name, newest first). ``lines`` counts a line landed unfinished and again
    completed once (``lines_replaced``: how many such lines).

    Examples:
        >>> rows = [
        ...     {"source_file": "a", "file_key": "k1", "prefix_key": None, "start_byte": 0,
        ...      "lines": 3, "ingest_time": 1},
        ...     {"source_file": "a", "file_key": "k2", "prefix_key": "k1", "start_byte": 9,
        ...      "lines": 2, "ingest_time": 2},
        ...     {"source_file": "b", "file_key": "vanished:x", "prefix_key": None,
        ...      "start_byte": 0, "lines": 0, "ingest_time": 3}]
        >>> figures = landing_figures(rows)
        >>> figures["files"], figures["continuations"], figures["vanished"]
        (1, 1, 1)
        >>> figures["vanished_files"][0]["source_file"]
        'b'
    """
    from snap_spark.pipeline.ledger import LandedPiece, is_vanished_key, replaced_lines

    vanished = [r for r in ledger if is_vanished_key(r["file_key"])]
    landed = [r for r in ledger if not is_vanished_key(r["file_key"])]
    # an unfinished last line landed again completed counts once: in the later piece
    replaced = replaced_lines(LandedPiece(
        r["source_file"], r["file_key"], r["prefix_key"], int(r["start_byte"]),
        int(r.get("end_byte", 0)), int(r.get("first_line", 1)), int(r["lines"]))
        for r in landed)
    whole: dict[str, int] = {}
    for row in landed:
        if row["prefix_key"] is None:
            whole[row["source_file"]] = whole.get(row["source_file"], 0) + 1
    newest = sorted(vanished, key=lambda r: r["ingest_time"], reverse=True)
    return {
        "files": len({r["source_file"] for r in landed}),
        "pieces": len(landed),
        "lines": sum(int(r["lines"]) for r in landed) - sum(replaced.values()),
        "lines_replaced": sum(replaced.values()),
        "continuations": sum(1 for r in landed if r["prefix_key"] is not None),
        "new_versions": sum(n - 1 for n in whole.values()),
        "vanished": len(vanished),
        "vanished_files": [{"source_file": r["source_file"], "noticed": str(r["ingest_time"])}
                           for r in newest[:TOP]],
    }

