"""The audit's figures: counts over the lake's tables, as plain values for ``summary.json``,
the charts and the HTML report.

Every figure is an aggregation over one table read at a pinned version (the versions go
into the summary); the definitions are the tables' own columns, documented in
docs/audit.md, and nothing is decided again here (re-verification is
:mod:`snap_spark.audit.reverify`). Each figure has two ways to be counted, which give the
same values: as Spark aggregations (:func:`all_figures`), and over rows in the driver's
memory (:func:`local_figures`), which the audit takes when every table it reads is small
(the ``read_rows`` limit of :mod:`snap_spark.common.placement`): such an audit starts no
Spark at all.

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

    def keeps_date(self, value: dt.date | None) -> bool:
        """:meth:`on_date` for one value held in memory.

        Examples:
            >>> june = Window(dt.date(2026, 6, 1), dt.date(2026, 6, 30))
            >>> june.keeps_date(dt.date(2026, 6, 30)), june.keeps_date(None)
            (True, False)
            >>> Window().keeps_date(None)
            True
        """
        if value is None:
            return self.start is None and self.end is None
        return ((self.start is None or value >= self.start)
                and (self.end is None or value <= self.end))

    def keeps_time(self, value: dt.datetime | None) -> bool:
        """:meth:`on_time` for one value held in memory (its UTC date, as the session's
        time zone is UTC)."""
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return self.keeps_date(None if value is None else value.date())


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
    return _message_section(groups, senders)


def _message_section(groups: list[MessageGroup], senders: dict[str, list[dict[str, Any]]]
                     ) -> dict[str, Any]:
    """The ``messages`` section of the figures from its groups and worst senders."""
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


# -- the same figures over rows held in the driver's memory ------------------------------------

#: The columns of each table that :func:`local_figures` reads.
FIGURE_COLUMNS: dict[str, tuple[str, ...]] = {
    "messages": ("event_date", "verdict", "error_code", "sender", "msg_id", "received_at"),
    "tasks": ("state", "state_time"),
    "task_events": ("task_id", "message_id", "anomaly", "previous_state", "new_state",
                    "event_time"),
    "nostr_events": ("verdict", "created_time"),
    "agent_cards": ("identity",),
    "agent_card_history": ("identity", "verdict", "card_key", "created_time"),
}


def _first_ids(ids: Iterable[Any]) -> list[Any]:
    """The first :data:`EXAMPLES` distinct ids, sorted, nulls left out (what
    :func:`_examples` collects)."""
    return sorted({value for value in ids if value is not None})[:EXAMPLES]


def _ranked(rows: Iterable[tuple[int, Any, dict[str, Any]]], *, positive: bool = True
            ) -> list[dict[str, Any]]:
    """The :data:`TOP` rows by rank (highest first) then key (nulls first), as Spark
    orders them: ``(rank, key, row)`` in, rows out; with ``positive``, only rows of a rank
    above 0 (the worst senders; the worst tasks are every task with an anomaly)."""
    kept = [row for row in rows if row[0] > 0 or not positive]
    kept.sort(key=lambda r: (-r[0], r[1] is not None, r[1] if r[1] is not None else ""))
    return [row for _, _, row in kept[:TOP]]


def local_message_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`message_figures` over ``messages`` rows held in memory (dicts with at least
    the columns of :data:`FIGURE_COLUMNS`).

    Examples:
        >>> rows = [{"event_date": None, "verdict": "rejected", "error_code": REPLAY,
        ...          "sender": "bc1pa", "msg_id": "m1", "received_at": 1.0},
        ...         {"event_date": None, "verdict": "valid", "error_code": None,
        ...          "sender": "bc1pa", "msg_id": "m1", "received_at": 1.0}]
        >>> figures = local_message_figures(rows)
        >>> figures["total"], figures["replays"], figures["senders"]["by_replays"][0]["examples"]
        (2, 1, ['m1'])
    """
    counted: dict[tuple[Any, bool, Any, Any], int] = {}
    for row in rows:
        key = (row["event_date"], row["received_at"] is not None, row["verdict"],
               row["error_code"])
        counted[key] = counted.get(key, 0) + 1
    groups = [MessageGroup(day, received, verdict, code, n)
              for (day, received, verdict, code), n in counted.items()]
    return _message_section(groups, _local_worst_senders(rows))


def _local_worst_senders(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """:func:`_worst_senders` over rows held in memory."""
    per: dict[Any, dict[str, Any]] = {}
    for row in rows:
        sender = per.get(row["sender"])
        if sender is None:
            sender = per[row["sender"]] = {
                "messages": 0, "rejections": 0, "replays": 0, "forged": 0, "unsigned": 0,
                "rejected_ids": [], "replay_ids": [], "signature_ids": []}
        code = row["error_code"]
        sender["messages"] += 1
        if row["verdict"] == "rejected":
            sender["rejections"] += 1
            sender["rejected_ids"].append(row["msg_id"])
        if code == REPLAY:
            sender["replays"] += 1
            sender["replay_ids"].append(row["msg_id"])
        if code == FORGED:
            sender["forged"] += 1
        if code == UNSIGNED:
            sender["unsigned"] += 1
        if code in SIGNATURE_CODES:
            sender["signature_ids"].append(row["msg_id"])

    def top(rank: Any, ids: str) -> list[dict[str, Any]]:
        return _ranked((rank(s), name, {
            "sender": name, "messages": s["messages"], "rejections": s["rejections"],
            "replays": s["replays"], "forged": s["forged"], "unsigned": s["unsigned"],
            "examples": _first_ids(s[ids])}) for name, s in per.items())

    return {
        "by_rejections": top(lambda s: s["rejections"], "rejected_ids"),
        "by_replays": top(lambda s: s["replays"], "replay_ids"),
        "by_signature_failures": top(lambda s: s["forged"] + s["unsigned"], "signature_ids"),
    }


def local_task_figures(tasks: list[dict[str, Any]] | None,
                       events: list[dict[str, Any]] | None) -> dict[str, Any]:
    """:func:`task_figures` over ``tasks`` and ``task_events`` rows held in memory (``None``
    for an absent table)."""
    out: dict[str, Any] = {}
    if tasks is not None:
        states: dict[Any, int] = {}
        for row in tasks:
            states[row["state"]] = states.get(row["state"], 0) + 1
        by_state = {(state or "none"): n for state, n in states.items()}
        out["tasks"] = sum(by_state.values())
        out["by_state"] = dict(sorted(by_state.items()))
    if events is not None:
        moves: dict[tuple[Any, Any, Any], int] = {}
        per_task: dict[Any, dict[str, Any]] = {}
        for row in events:
            key = (row["anomaly"], row["previous_state"], row["new_state"])
            moves[key] = moves.get(key, 0) + 1
            if row["anomaly"] is None:
                continue
            task = per_task.setdefault(row["task_id"], {"illegal": 0, "foreign": 0, "ids": []})
            task["illegal"] += row["anomaly"] == "illegal_transition"
            task["foreign"] += row["anomaly"] == "non_owner"
            task["ids"].append(row["message_id"])
        illegal = [(key, n) for key, n in moves.items() if key[0] == "illegal_transition"]
        out["reports"] = sum(moves.values())
        out["illegal_transitions"] = sum(n for _, n in illegal)
        out["foreign_reports"] = sum(n for key, n in moves.items() if key[0] == "non_owner")
        out["illegal_by_transition"] = sorted(
            ({"from": previous or "none", "to": new, "count": n}
             for (_, previous, new), n in illegal),
            key=lambda r: (-r["count"], r["from"], r["to"]))
        out["worst_tasks"] = _ranked(
            ((t["illegal"] + t["foreign"], task_id,
              {"task_id": task_id, "illegal": t["illegal"], "foreign": t["foreign"],
               "examples": _first_ids(t["ids"])}) for task_id, t in per_task.items()),
            positive=False)
    return out


def local_agent_figures(history: list[dict[str, Any]] | None,
                        cards: list[dict[str, Any]] | None,
                        events: list[dict[str, Any]] | None, window: Window) -> dict[str, Any]:
    """:func:`agent_figures` over rows held in memory (``None`` for an absent table)."""
    out: dict[str, Any] = {}
    if cards is not None:
        out["identities"] = len(cards)
    if events is not None:
        out["nostr_events_by_verdict"] = _counted_sorted(
            row["verdict"] for row in events if window.keeps_time(row["created_time"]))
    if history is not None:
        first: dict[Any, Any] = {}
        for row in history:  # each identity's first accepted card (a null key joins none)
            when, identity = row["created_time"], row["identity"]
            if (row["verdict"] in ACCEPTED_CARD and when is not None and identity is not None
                    and (identity not in first or when < first[identity])):
                first[identity] = when
        inside = [row for row in history if window.keeps_time(row["created_time"])]
        per: dict[Any, dict[str, Any]] = {}
        for row in inside:
            entry = per.setdefault(row["identity"], {"accepted": 0, "impersonations": 0,
                                                     "ids": []})
            entry["accepted"] += row["verdict"] in ACCEPTED_CARD
            if row["verdict"] == IMPERSONATION:
                entry["impersonations"] += 1
                entry["ids"].append(row["card_key"])
        rows = []
        for identity, entry in per.items():
            first_time = first.get(identity)
            new = 1 if first_time is not None and window.keeps_time(first_time) else 0
            rows.append({"identity": identity, "new": new,
                         "updated": max(entry["accepted"] - new, 0),
                         "impersonations": entry["impersonations"],
                         "examples": _first_ids(entry["ids"])})
        rows.sort(key=lambda r: (-r["impersonations"], -(r["new"] + r["updated"]),
                                 r["identity"] or ""))
        out["per_identity"] = rows
        out["history_by_verdict"] = _counted_sorted(row["verdict"] for row in inside)
        out["new_identities"] = sum(r["new"] for r in rows)
        out["updated_cards"] = sum(r["updated"] for r in rows)
        out["impersonation_attempts"] = sum(r["impersonations"] for r in rows)
        out["identities_impersonated"] = sum(1 for r in rows if r["impersonations"])
    return out


def _counted_sorted(values: Iterable[Any]) -> dict[Any, int]:
    """Each value's count, ordered by value (as ``dict(sorted(...))`` of a Spark count)."""
    counts: dict[Any, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def local_figures(tables: Mapping[str, list[dict[str, Any]]], window: Window
                  ) -> dict[str, Any]:
    """:func:`all_figures` over the present ``tables`` held in memory (name → its rows,
    with at least the columns of :data:`FIGURE_COLUMNS`): the same values, counted in the
    driver process."""
    def cut(name: str, column: str, on_date: bool = False) -> list[dict[str, Any]] | None:
        rows = tables.get(name)
        if rows is None:
            return None
        keep = window.keeps_date if on_date else window.keeps_time
        return [row for row in rows if keep(row[column])]

    messages = cut("messages", "event_date", on_date=True)
    return {
        "messages": local_message_figures(messages) if messages is not None else {},
        "tasks": local_task_figures(cut("tasks", "state_time"),
                                    cut("task_events", "event_time")),
        "agents": local_agent_figures(tables.get("agent_card_history"),
                                      tables.get("agent_cards"), tables.get("nostr_events"),
                                      window),
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

