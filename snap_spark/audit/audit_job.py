"""``jobs/audit.py``: a scheduled audit of a lake, as a report people read and an exit
status a scheduler acts on.

    spark-submit jobs/audit.py --lake DIR --out REPORT_DIR [--from DATE] [--to DATE]
        [--reverify-sample FRACTION | --reverify-all] [--thresholds TOML]

Writes ``REPORT_DIR/report.html`` (self-contained), ``summary.json`` (every figure of the
report, the table versions they come from, the thresholds and whether each was crossed)
and one PNG per chart. Exit status: 0 clean, 3 a threshold was crossed, 2 usage error
(nothing written), 1 the lake could not be read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snap_spark.audit.figures import Window
from snap_spark.common.console import UsageError, log
from snap_spark.common.extras import require
from snap_spark.common.remote import refuse_remote
from snap_spark.files import storage
from snap_spark.runner import EXIT_ALERT, EXIT_OK, Context, Job
from snap_spark.runner import main as run_job
from snap_spark.settings import SettingsError, VerifySettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


#: Threshold metrics, their default limits (a value above the limit is an alert), and what
#: they measure. Rates are shares of the window's messages.
DEFAULT_THRESHOLDS: dict[str, float] = {
    "rejection_rate": 0.25,
    "forged_signature_rate": 0.001,
    "replay_rate": 0.01,
    "impersonation_attempts": 0,
    "illegal_transitions": 0,
    "reverify_differences": 0,
}
METRICS: dict[str, str] = {
    "rejection_rate": "rejected messages / messages",
    "forged_signature_rate": "2001 forged signatures / messages",
    "replay_rate": "2006 replay attempts / messages",
    "forged_signatures": "2001 forged signatures",
    "replays": "2006 replay attempts",
    "impersonation_attempts": "agent cards signed by a key other than the identity's",
    "identities_impersonated": "identities with at least one impersonation attempt",
    "illegal_transitions": "task state reports the transition table forbids",
    "foreign_reports": "task state reports by someone other than the task's owner",
    "reverify_differences": "archived lines whose verdict today differs from the stored one",
    "reverify_missing": "archived lines without a messages row",
}

#: Tables the audit reads when present (``ingested_files`` is bookkeeping, not audited).
AUDITED = ("messages", "raw_messages", "tasks", "task_events", "nostr_events", "agent_cards",
           "agent_card_history")


def load_thresholds(path: str | None) -> dict[str, float]:
    """The defaults, overridden by ``[max]`` of the TOML file at ``path``.

    Raises:
        UsageError: unreadable file, unknown metric, or a limit that is no finite number >= 0.

    Examples:
        >>> load_thresholds(None)["impersonation_attempts"]
        0
    """
    limits: dict[str, float] = dict(DEFAULT_THRESHOLDS)
    if path is None:
        return limits
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"--thresholds {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--thresholds {path}: not TOML ({exc})") from None
    unknown_tables = sorted(set(data) - {"max"})
    if unknown_tables:
        raise UsageError(f"--thresholds {path}: unknown table(s) {unknown_tables}; "
                         "limits go under [max]")
    section = data.get("max", {})
    if not isinstance(section, dict):
        raise UsageError(f"--thresholds {path}: [max] must be a table")
    for name, value in section.items():
        if name not in METRICS:
            raise UsageError(f"--thresholds {path}: unknown metric {name!r} "
                             f"(known: {', '.join(sorted(METRICS))})")
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or value < 0):
            raise UsageError(f"--thresholds {path}: {name} must be a number >= 0, got {value!r}")
        limits[name] = value
    return limits


def parse_date(text: str, option: str) -> dt.date:
    """An ISO date (``2026-11-24``).

    Examples:
        >>> parse_date("2026-02-01", "--from")
        datetime.date(2026, 2, 1)
    """
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option}: expected a date like 2026-11-24, got {text!r}") from None


@dataclass
class AuditResult:
    """What one audit wrote and found."""

    out: str
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def alert(self) -> bool:
        return bool(self.summary.get("alert"))


def metric_values(figures: Mapping[str, Any], reverify: Mapping[str, Any]
                  ) -> dict[str, float | None]:
    """Each threshold metric's value (``None`` when its table is absent or re-verification
    did not run)."""
    messages, tasks, agents = figures["messages"], figures["tasks"], figures["agents"]
    rates = messages.get("rates", {})
    ran = reverify["mode"] != "off"
    return {
        "rejection_rate": rates.get("rejection"),
        "forged_signature_rate": rates.get("forged_signature"),
        "replay_rate": rates.get("replay"),
        "forged_signatures": messages.get("forged_signatures"),
        "replays": messages.get("replays"),
        "impersonation_attempts": agents.get("impersonation_attempts"),
        "identities_impersonated": agents.get("identities_impersonated"),
        "illegal_transitions": tasks.get("illegal_transitions"),
        "foreign_reports": tasks.get("foreign_reports"),
        "reverify_differences": reverify["difference_count"] if ran else None,
        "reverify_missing": reverify["missing"] if ran else None,
    }


def _read_tables(spark: SparkSession, lake_dir: str
                 ) -> tuple[dict[str, DataFrame], dict[str, dict[str, Any]]]:
    """The audited tables present, each read at the version it has now (pinned, so every
    figure of one table comes from one snapshot; a small table read on the driver and
    handed to Spark as Arrow, :func:`snap_spark.lake.read_frame`), and their versions and
    row counts. Spark's read of a Delta table plans a job over its log (on delta-spark a
    log replay), and the cache a job of its own: read that way, the seven tables of a small
    lake took most of an audit's time (docs/speed.md, *Figures behind the code*)."""
    from snap_spark.lake import read_frame, table_version

    frames: dict[str, DataFrame] = {}
    facts: dict[str, dict[str, Any]] = {}
    for name in AUDITED:
        path = storage.join(lake_dir, name)
        version = table_version(storage.delta_table_uri(path))
        read = read_frame(spark, path, version)
        if read is None:
            facts[name] = {"present": False, "version": None, "rows": None}
            continue
        frames[name], rows = read  # counted: read with the cache
        facts[name] = {"present": True, "version": version, "rows": rows}
    return frames, facts


def _recorded_settings(lake_dir: str) -> dict[str, Any] | None:
    """The verdict settings of the newest ``messages`` commit that recorded them, read from
    the table's log by delta-rs whatever the session's backend (Delta's own history read
    plans a Spark job over the log, several times slower on a cold driver: docs/speed.md,
    *Figures behind the code*)."""
    from snap_spark.lake import newest_info_with

    info = newest_info_with(storage.delta_table_uri(storage.join(lake_dir, "messages")),
                            "settings")
    settings = (info or {}).get("settings")
    return dict(settings) if isinstance(settings, dict) else None


def audit(spark: SparkSession, lake_dir: str, out_dir: str, *, window: Window | None = None,
          reverify_fraction: float | None = None, reverify_all: bool = False,
          thresholds: Mapping[str, float] | None = None, seed: int | None = None,
          max_drift: float | None = None, replay_window: float | None = None) -> AuditResult:
    """Audit the lake at ``lake_dir``; write the report into ``out_dir``.

    Re-verification runs with ``reverify_all`` or a ``reverify_fraction``; its drift and
    replay windows are ``max_drift``/``replay_window`` when given, else the ones the newest
    ``messages`` commit recorded, else the spec's.

    Example::

        result = audit(spark, "data/lake", "data/audit", reverify_fraction=0.1)
        result.alert                     # True when a threshold was crossed
        result.summary["thresholds"]     # each metric, its value and limit
    """
    refuse_remote(spark, "the audit", "jobs/audit.py")
    started = time.monotonic()
    window = window or Window()
    if not storage.is_dir(lake_dir):
        raise UsageError(f"--lake {lake_dir}: no such folder")
    limits = dict(DEFAULT_THRESHOLDS if thresholds is None else thresholds)
    frames: dict[str, DataFrame] = {}
    held = _held_tables(lake_dir, reverify=reverify_all or reverify_fraction is not None)
    tables: dict[str, DataFrame] | LocalTables
    if held is not None:  # a small lake: counted on the driver, Spark never starts
        rows, arrow, facts = held
        tables = LocalTables(rows, arrow)
    else:
        frames, facts = _read_tables(spark, lake_dir)
        tables = frames
    try:
        return _audit(spark, lake_dir, out_dir, facts, tables, window=window,
                      reverify_fraction=reverify_fraction, reverify_all=reverify_all,
                      limits=limits, seed=seed, max_drift=max_drift,
                      replay_window=replay_window, started=started)
    finally:
        for frame in frames.values():
            frame.unpersist()


@dataclass(frozen=True)
class LocalTables:
    """A small lake's audited tables held in the driver's memory (:func:`_held_tables`):
    each table's rows (the columns the figures read) and, for re-verification, the
    ``raw_messages`` and ``messages`` tables as Arrow."""

    rows: dict[str, list[dict[str, Any]]]
    arrow: dict[str, Any]


#: The columns re-verification reads of ``raw_messages`` and ``messages``.
REVERIFY_COLUMNS: dict[str, tuple[str, ...]] = {
    "raw_messages": ("file_key", "source_file", "line_no", "raw_text", "raw_bytes",
                     "read_error"),
    "messages": ("file_key", "source_file", "line_no", "sender", "msg_id", "received_at",
                 "error_code", "error_detail", "signature_code", "event_date"),
}


def _held_tables(lake_dir: str, *, reverify: bool
                 ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any],
                            dict[str, dict[str, Any]]] | None:
    """When every audited table present holds at most ``read_rows`` rows (by the record
    counts of its log, :mod:`snap_spark.common.placement`): each one read by delta-rs at
    the version it has now, as rows and Arrow (the columns the figures read, and with
    ``reverify`` those re-verification reads), with the versions and row counts; else
    ``None`` (the audit then runs its figures in Spark). Counting a small lake's figures
    in the driver process takes far less than starting Spark to count them
    (docs/speed.md, *Figures behind the code*)."""
    from snap_spark.audit.figures import FIGURE_COLUMNS
    from snap_spark.common.placement import limits
    from snap_spark.lake import read_arrow, rows_at_most, table_version

    bound = limits().read_rows
    versions: dict[str, int] = {}
    for name in AUDITED:
        uri = storage.delta_table_uri(storage.join(lake_dir, name))
        versions[name] = table_version(uri)
        if versions[name] >= 0 and not rows_at_most(uri, bound, versions[name]):
            return None
    rows: dict[str, list[dict[str, Any]]] = {}
    arrow: dict[str, Any] = {}
    facts: dict[str, dict[str, Any]] = {}
    for name in AUDITED:
        version = versions[name]
        columns = list(dict.fromkeys(FIGURE_COLUMNS.get(name, ())
                                     + (REVERIFY_COLUMNS.get(name, ()) if reverify else ())))
        columns = columns or ["file_key"]  # raw_messages, not re-verified: counted only
        table = (read_arrow(storage.join(lake_dir, name), columns=columns, version=version)
                 if version >= 0 else None)
        if table is None:
            facts[name] = {"present": False, "version": None, "rows": None}
            continue
        facts[name] = {"present": True, "version": version, "rows": table.num_rows}
        arrow[name] = table
        if name in FIGURE_COLUMNS:
            rows[name] = table.select(list(FIGURE_COLUMNS[name])).to_pylist()
    return rows, arrow, facts


def _audit(spark: SparkSession, lake_dir: str, out_dir: str,
           facts: dict[str, dict[str, Any]], tables: dict[str, DataFrame] | LocalTables, *,
           window: Window, reverify_fraction: float | None, reverify_all: bool,
           limits: dict[str, float], seed: int | None, max_drift: float | None,
           replay_window: float | None, started: float) -> AuditResult:
    from snap_spark import __version__
    from snap_spark.audit.figures import all_figures, landing_figures, local_figures
    from snap_spark.lake import get_lake, table_rows

    absent = [name for name, fact in facts.items() if not fact["present"]]
    local = isinstance(tables, LocalTables)
    log(f"audit: lake={lake_dir} backend={get_lake(spark).name}; tables "
        f"{', '.join(n for n, fact in facts.items() if fact['present']) or 'none'}"
        + (f"; absent: {', '.join(absent)}" if absent else "")
        + ("; counted on the driver (a small lake)" if local else ""))
    figures = (local_figures(tables.rows, window) if isinstance(tables, LocalTables)
               else all_figures(tables, window))
    figures["landing"] = landing_figures(table_rows(storage.join(lake_dir, "ingested_files")))
    log(f"audit: figures computed [{time.monotonic() - started:.1f}s]")
    reverified = _reverified(lake_dir, tables, window=window,
                             reverify_fraction=reverify_fraction, reverify_all=reverify_all,
                             seed=seed, max_drift=max_drift, replay_window=replay_window,
                             started=started)
    checks = _threshold_checks(limits, metric_values(figures, reverified))
    alert = any(c["crossed"] for c in checks)
    summary: dict[str, Any] = {
        "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "snap_spark": __version__, "lake": lake_dir, "window": window.as_record(),
        "tables": facts, "absent": absent, "figures": figures, "reverify": reverified,
        "thresholds": checks, "alert": alert, "exit_status": EXIT_ALERT if alert else EXIT_OK,
    }
    _write_report(out_dir, summary, figures, started)
    return AuditResult(out=out_dir, summary=summary)


def _reverified(lake_dir: str, tables: dict[str, DataFrame] | LocalTables, *,
                window: Window, reverify_fraction: float | None, reverify_all: bool,
                seed: int | None, max_drift: float | None, replay_window: float | None,
                started: float) -> dict[str, Any]:
    """The re-verification's record for ``summary.json``: archived lines checked again
    when asked (all, or a sample of ``reverify_fraction`` drawn with ``seed``), with the
    drift and replay window given, else those the lake's newest ``messages`` commit
    recorded.

    Raises:
        UsageError: re-verification asked of a lake without ``raw_messages`` or
            ``messages``.
    """
    from snap_spark.audit.reverify import ReverifyResult, reverify, reverify_rows

    checked = ReverifyResult()
    present = set(tables.arrow if isinstance(tables, LocalTables) else tables)
    recorded = _recorded_settings(lake_dir) if "messages" in present else None
    settings = VerifySettings(
        max_drift=max_drift if max_drift is not None
        else float((recorded or {}).get("max_drift", VerifySettings().max_drift)),
        replay_window=replay_window if replay_window is not None
        else float((recorded or {}).get("replay_window", VerifySettings().replay_window)),
    ).validated()
    if (reverify_all or reverify_fraction is not None) and not {"raw_messages", "messages"
                                                                } <= present:
        # never a silent skip: asked for, it is done or the run is refused (exit 2)
        missing = sorted({"raw_messages", "messages"} - present)
        raise UsageError(f"re-verification needs the raw_messages and messages tables; "
                         f"{lake_dir} has no {' and no '.join(missing)}")
    if reverify_all or reverify_fraction is not None:
        seed = random.SystemRandom().randrange(1 << 31) if seed is None else seed
        fraction = None if reverify_all else reverify_fraction
        if isinstance(tables, LocalTables):
            checked = reverify_rows(_inside_window(tables, window), tables.arrow["messages"],
                                    settings, fraction=fraction, seed=seed)
        else:
            from pyspark.sql import functions as F

            raw, messages = tables["raw_messages"], tables["messages"]
            if window.start is not None or window.end is not None:
                inside = messages.filter(window.on_date(F.col("event_date"))).select(
                    "file_key", "line_no")
                raw = raw.join(inside, ["file_key", "line_no"], "left_semi")
            checked = reverify(raw, messages, settings, fraction=fraction, seed=seed)
        log(f"audit: re-verified {checked.checked} archived lines, "
            f"{checked.difference_count} differ [{time.monotonic() - started:.1f}s]")
    return {
        "mode": checked.mode, "fraction": checked.fraction,
        "seed": checked.seed if checked.mode != "off" else None, "checked": checked.checked,
        "missing": checked.missing, "difference_count": checked.difference_count,
        "differences": checked.differences,
        "settings": {"max_drift": settings.max_drift, "replay_window": settings.replay_window},
    }


def _inside_window(tables: LocalTables, window: Window) -> Any:
    """The ``raw_messages`` rows whose ``messages`` row falls in ``window`` (all of them
    when it is open), as Arrow: the Spark path's semi join, on the driver."""
    import pyarrow as pa

    raw = tables.arrow["raw_messages"]
    if window.start is None and window.end is None:
        return raw
    messages = tables.arrow["messages"].select(["file_key", "line_no", "event_date"])
    inside = {(row["file_key"], row["line_no"]) for row in messages.to_pylist()
              if window.keeps_date(row["event_date"])
              and row["file_key"] is not None and row["line_no"] is not None}
    keys = zip(raw.column("file_key").to_pylist(), raw.column("line_no").to_pylist(),
               strict=True)
    return raw.filter(pa.array([key in inside for key in keys], type=pa.bool_()))


def _threshold_checks(limits: dict[str, float], values: dict[str, float | None]
                      ) -> list[dict[str, Any]]:
    """One record per limit: the metric's value, the limit, and whether it was crossed."""
    checks = []
    for name, limit in limits.items():
        value = values[name]
        checks.append({"name": name, "measures": METRICS[name], "value": value,
                       "limit": limit, "crossed": value is not None and value > limit})
    return checks


def _write_report(out_dir: str, summary: dict[str, Any], figures: dict[str, Any],
                  started: float) -> None:
    """Write the charts, ``summary.json`` and ``report.html`` into ``out_dir``."""
    from snap_spark.audit.charts import render_all
    from snap_spark.audit.report import render

    pictures = render_all(figures)
    os.makedirs(out_dir, exist_ok=True)
    for name, png in pictures.items():
        _write(Path(out_dir) / name, png)
    _write(Path(out_dir) / "summary.json",
           json.dumps(summary, indent=2, sort_keys=False, default=str).encode("utf-8"))
    _write(Path(out_dir) / "report.html", render(summary, pictures).encode("utf-8"))
    log(f"audit: report written to {Path(out_dir) / 'report.html'} "
        f"[{time.monotonic() - started:.1f}s]")


def _write(path: Path, data: bytes) -> None:
    """Write a file whole or not at all (a reader never sees half a report)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    return value


class Audit(Job):
    """``jobs/audit.py``."""

    name = "audit"
    description = ("Audit the Delta tables under --lake: verdict mix, rejections, replay "
                   "and signature offenders, task anomalies, agent directory changes, "
                   "and optionally re-verify archived lines; writes report.html, "
                   "summary.json and PNG charts into --out.")
    epilog = ("exit status: 0 clean, 3 a threshold was crossed (see summary.json "
              "'thresholds'), 2 usage error (nothing written), 1 the lake could not be "
              "read. Thresholds: a TOML file with limits under [max], e.g. "
              "'[max]\\nreplay_rate = 0.02\\nimpersonation_attempts = 0'; metrics: "
              + ", ".join(sorted(METRICS)) + ".")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--out", required=True, metavar="REPORT_DIR",
                            help="folder for report.html, summary.json and the charts")
        parser.add_argument("--from", dest="start", metavar="DATE",
                            help="first day audited (UTC, inclusive), e.g. 2026-11-01")
        parser.add_argument("--to", dest="end", metavar="DATE",
                            help="last day audited (UTC, inclusive)")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--reverify-sample", type=_fraction, metavar="FRACTION",
                           help="check this share of raw_messages again with the "
                           "current core, e.g. 0.05")
        which.add_argument("--reverify-all", action="store_true",
                           help="check every archived line again")
        parser.add_argument("--seed", type=int, default=None,
                            help="seed of the re-verification sample (default: random, "
                            "recorded in summary.json)")
        parser.add_argument("--max-drift", type=_seconds, default=None, metavar="S",
                            help="drift window for re-verification (default: the one "
                            "the lake's newest messages commit recorded)")
        parser.add_argument("--replay-window", type=_seconds, default=None, metavar="S",
                            help="replay window for re-verification (default: likewise)")
        parser.add_argument("--thresholds", metavar="TOML",
                            help="alert limits under [max] (defaults: "
                            + ", ".join(f"{k}={v}" for k, v in DEFAULT_THRESHOLDS.items())
                            + ")")

    def check(self, context: Context) -> None:
        require("audit")
        args = context.args
        start = parse_date(args.start, "--from") if args.start else None
        end = parse_date(args.end, "--to") if args.end else None
        if start and end and start > end:
            raise UsageError(f"--from {start} is after --to {end}")
        args.window = Window(start, end)
        args.limits = load_thresholds(args.thresholds)
        if args.seed is not None and not -(1 << 63) <= args.seed < (1 << 63):
            raise UsageError(f"--seed {args.seed}: expected a whole number from -2**63 to "
                             "2**63-1 (a 64-bit seed)")
        try:
            VerifySettings(max_drift=args.max_drift if args.max_drift is not None else 60,
                           replay_window=args.replay_window
                           if args.replay_window is not None else 120).validated()
        except SettingsError as exc:
            raise UsageError(str(exc)) from None
        if not storage.is_dir(context.lake):
            raise UsageError(f"--lake {context.lake}: no such folder")
        if args.reverify_all or args.reverify_sample is not None:
            missing = [name for name in ("raw_messages", "messages") if not storage.is_dir(
                storage.join(context.lake, name, "_delta_log"))]
            if missing:
                option = "--reverify-all" if args.reverify_all else "--reverify-sample"
                raise UsageError(f"{option} checks archived lines again: it needs the "
                                 f"raw_messages and messages tables, and "
                                 f"{context.lake} has no {' and no '.join(missing)}")
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {args.out}: exists and is not a folder")

    def run(self, spark: SparkSession, context: Context) -> AuditResult:
        args = context.args
        return audit(spark, context.lake, args.out, window=args.window,
                     reverify_fraction=args.reverify_sample,
                     reverify_all=args.reverify_all, thresholds=args.limits,
                     seed=args.seed, max_drift=args.max_drift,
                     replay_window=args.replay_window)

    def summary(self, result: Any) -> str:
        assert isinstance(result, AuditResult)
        return format_summary(result)

    def exit_code(self, result: Any) -> int:
        assert isinstance(result, AuditResult)
        return EXIT_ALERT if result.alert else EXIT_OK


def format_summary(result: AuditResult) -> str:
    """The lines printed at the end of a run: the report's place and each crossed limit."""
    summary = result.summary
    lines = [f"report: {Path(result.out).resolve() / 'report.html'}"]
    messages = summary["figures"]["messages"]
    if messages:
        lines.append(f"messages: {messages['total']}   valid: {messages['valid']}   "
                     f"rejected: {messages['rejected']}")
    if summary["absent"]:
        lines.append(f"absent tables: {', '.join(summary['absent'])}")
    landing = summary["figures"].get("landing") or {}
    if landing.get("vanished"):
        lines.append(f"input files that vanished before they were landed: "
                     f"{landing['vanished']} (report.html names them)")
    for check in summary["thresholds"]:
        if check["crossed"]:
            lines.append(f"ALERT {check['name']} = {check['value']:.6g} > {check['limit']:g}")
    lines.append("alert: thresholds crossed (exit 3)" if summary["alert"]
                 else "clean: no threshold crossed")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``jobs/audit.py``."""
    return run_job(Audit(), argv)
