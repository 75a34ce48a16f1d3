"""The audit's ``report.html``: one self-contained page (inline CSS, charts as data URIs)
that opens from disk and reads on a laptop screen; every number in it comes from the
summary (``summary.json``).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from snap_spark.audit.figures import short

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #212529;
       margin: 0; background: #f8f9fa; }
main { max-width: 980px; margin: 0 auto; padding: 24px 20px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 0 0 10px; border-bottom: 2px solid #dee2e6; padding-bottom: 4px; }
section { background: #fff; border: 1px solid #dee2e6; border-radius: 8px; padding: 16px 18px;
          margin: 18px 0; }
.meta { color: #495057; font-size: 13px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border-radius: 6px; padding: 8px 12px; min-width: 170px; border: 1px solid #ced4da; }
.card b { display: block; font-size: 20px; }
.ok { background: #ebfbee; border-color: #8ce99a; }
.alert { background: #fff5f5; border-color: #ffa8a8; }
.idle { background: #f1f3f5; color: #868e96; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 8px 0; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e9ecef;
         vertical-align: top; }
th { background: #f1f3f5; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12px; word-break: break-all; }
img { max-width: 100%; height: auto; display: block; margin: 6px 0; }
.note { color: #868e96; font-style: italic; }
"""


#: Characters a page must show rather than obey: C0/C1 controls (tab, newline and carriage
#: return aside), and the marks that reorder text (bidirectional overrides and isolates).
_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f"
                     "\u202a-\u202e\u2066-\u2069\ufeff]")


def visible(value: Any) -> str:
    """``value`` as text with every control or reordering character written as its
    ``\\uXXXX`` escape, so a file name or detail shows what it holds.

    Examples:
        >>> visible("a.jsonl\\x00ff\\u202egnp.exe")
        'a.jsonl\\\\u0000ff\\\\u202egnp.exe'
    """
    text = "" if value is None else str(value)
    return _HIDDEN.sub(lambda hit: f"\\u{ord(hit.group()):04x}", text)


def _e(value: Any) -> str:
    return html.escape(visible(value))


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{_e(alt)}">'


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = ()
           ) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{_e(v)}</td>' if i in numeric else f"<td>{v}</td>"
            for i, v in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    if not body:
        return '<p class="note">none</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _ids(ids: Iterable[Any] | None) -> str:
    return " ".join(f"<code>{_e(i)}</code>" for i in (ids or []))


def _addr(address: Any) -> str:
    return f'<code title="{_e(address)}">{_e(address) if address else "(no sender)"}</code>'


def _section(ident: str, title: str, body: str) -> str:
    return f'<section id="{ident}"><h2>{_e(title)}</h2>{body}</section>'


def _absent(summary: Mapping[str, Any], *names: str) -> str:
    missing = [n for n in names if n in summary.get("absent", [])]
    if not missing:
        return ""
    return f'<p class="note">Absent from the lake: {", ".join(missing)}.</p>'


def render(summary: Mapping[str, Any], charts: Mapping[str, bytes]) -> str:
    """The whole page for ``summary`` (``summary.json``'s content) and the chart PNGs."""
    messages = summary["figures"]["messages"]
    tasks = summary["figures"]["tasks"]
    agents = summary["figures"]["agents"]
    reverify = summary["reverify"]
    window = summary["window"]
    span = (f"{window['from'] or 'the beginning'} to {window['to'] or 'now'}"
            if window["from"] or window["to"] else "everything in the lake")
    parts = [
        _heading(summary, span),
        _section("overview", "At a glance", _overview(summary)),
        _verdicts_section(summary, messages, charts),
    ]
    senders = messages.get("senders") or {}
    parts.append(_senders_section(summary, senders, charts))
    parts.append(_signatures_section(summary, senders, charts))
    parts.append(_tasks_section(summary, tasks, charts))
    parts.append(_agents_section(summary, agents, charts))
    parts.append(_landing_section(summary["figures"].get("landing") or {}))
    parts.append(_reverify_section(summary, reverify))
    title = f"snap-spark audit — {_e(span)}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{CSS}</style></head><body><main>"
            + "".join(parts) + "</main></body></html>")


def _heading(summary: Mapping[str, Any], span: str) -> str:
    """The page's title line and what it covers: lake, window, when and by which version."""
    return (f"<h1>snap-spark audit</h1><p class=\"meta\">lake <code>{_e(summary['lake'])}</code>"
            f" · window: {_e(span)} · generated {_e(summary['generated_at'])} · snap-spark "
            f"{_e(summary['snap_spark'])}</p>")


def _threshold_cards(summary: Mapping[str, Any]) -> list[str]:
    """One card per threshold check: its value against its limit, coloured by its state."""
    cards = []
    for check in summary["thresholds"]:
        state = ("idle" if check["value"] is None else "alert" if check["crossed"] else "ok")
        rate = check["name"].endswith("_rate")
        value = "not measured" if check["value"] is None else _fmt(check["value"], rate)
        cards.append(f'<div class="card {state}" title="{_e(check["measures"])}">'
                     f'{_e(check["name"])}<b>{_e(value)}</b>'
                     f'limit {_e(_fmt(check["limit"], rate))}</div>')
    return cards


def _overview(summary: Mapping[str, Any]) -> str:
    """The body of the overview section: the overall verdict, the threshold cards and the
    tables with their versions and row counts."""
    cards = _threshold_cards(summary)
    verdict = ("ALERT: a threshold was crossed" if summary["alert"]
               else "clean: no threshold crossed")
    return (
        f'<p><b>{_e(verdict)}</b> (exit status {summary["exit_status"]}).</p>'
        f'<div class="cards">{"".join(cards)}</div>'
        + _table(["table", "present", "version", "rows"],
                 ([_e(name), "yes" if t["present"] else "<b>absent</b>",
                   _e(t["version"]), _e(t["rows"])]
                  for name, t in summary["tables"].items()), numeric=(2, 3)))


def _verdicts_section(summary: Mapping[str, Any], messages: Mapping[str, Any],
                      charts: Mapping[str, bytes]) -> str:
    """The verdicts section: message totals, the verdict charts and rejections by code."""
    if messages:
        totals = (f"<p>{messages['total']:,} messages: {messages['valid']:,} valid, "
                  f"{messages['rejected']:,} rejected ({_pct(messages['rates']['rejection'])})"
                  f"; {messages['forged_signatures']:,} forged signatures, "
                  f"{messages['replays']:,} replay attempts.</p>")
        by_code = _table(["code", "name", "messages"],
                         ([_e(r["code"]), _e(r["name"]), r["count"]]
                          for r in messages["by_code"]), numeric=(2,))
    else:
        totals, by_code = "", ""
    return _section("verdicts", "Verdicts over time", totals
                    + _img(charts["verdict_mix.png"], "verdict mix per day")
                    + _img(charts["rejections_by_code.png"], "rejections by code per day")
                    + by_code + _absent(summary, "messages"))


def _senders_section(summary: Mapping[str, Any], senders: Mapping[str, Any],
                     charts: Mapping[str, bytes]) -> str:
    """The section of the senders with the most rejections and the most replay attempts."""

    def offenders(key: str, metric: str) -> str:
        return _table(["sender", metric, "messages", "message ids"],
                      ([_addr(r["sender"]), r[metric], r["messages"], _ids(r["examples"])]
                       for r in senders.get(key) or []), numeric=(1, 2))

    return _section(
        "senders", "Top senders by rejections and replay attempts",
        _img(charts["top_senders.png"], "top senders")
        + "<h3>Most rejections</h3>" + offenders("by_rejections", "rejections")
        + "<h3>Most replay attempts (2006)</h3>" + offenders("by_replays", "replays")
        + _absent(summary, "messages"))


def _signatures_section(summary: Mapping[str, Any], senders: Mapping[str, Any],
                        charts: Mapping[str, bytes]) -> str:
    """The section of the senders with the most forged or missing signatures."""
    return _section(
        "signatures", "Signature failures by sender",
        _img(charts["signature_failures.png"], "signature failures by sender")
        + _table(["sender", "forged (2001)", "missing (2002)", "message ids"],
                 ([_addr(r["sender"]), r["forged"], r["unsigned"], _ids(r["examples"])]
                  for r in senders.get("by_signature_failures") or []), numeric=(1, 2))
        + _absent(summary, "messages"))


def _tasks_counts(tasks: Mapping[str, Any]) -> str:
    """The paragraph counting tasks, state reports, illegal transitions and foreign
    reports; empty when the task figures are absent."""
    if "tasks" not in tasks and "reports" not in tasks:
        return ""
    return (f"<p>{tasks.get('tasks', 0):,} tasks; {tasks.get('reports', 0):,} state reports, "
            f"of which {tasks.get('illegal_transitions', 0):,} illegal transitions and "
            f"{tasks.get('foreign_reports', 0):,} from someone other than the task's "
            "owner.</p>")


def _directory_counts(agents: Mapping[str, Any]) -> str:
    """The paragraph counting the directory's identities and the window's new identities,
    updated cards and impersonation attempts; empty when the agent figures are absent."""
    if "per_identity" not in agents:
        return ""
    return (f"<p>{agents.get('identities', 0):,} identities in the directory; in the window "
            f"{agents['new_identities']:,} new, {agents['updated_cards']:,} updated cards, "
            f"{agents['impersonation_attempts']:,} impersonation attempts against "
            f"{agents['identities_impersonated']:,} identities.</p>")


def _tasks_section(summary: Mapping[str, Any], tasks: Mapping[str, Any],
                   charts: Mapping[str, bytes]) -> str:
    """The tasks section: task and report counts, the tasks chart and the tasks with the
    most anomalies."""
    return _section(
        "tasks", "Task states and illegal transitions",
        _tasks_counts(tasks) + _img(charts["tasks.png"], "tasks by state and illegal transitions")
        + "<h3>Tasks with the most anomalies</h3>"
        + _table(["task", "illegal transitions", "foreign reports", "message ids"],
                 ([f"<code>{_e(r['task_id'])}</code>", r["illegal"], r["foreign"],
                   _ids(r["examples"])] for r in tasks.get("worst_tasks") or []),
                 numeric=(1, 2))
        + _absent(summary, "tasks", "task_events"))


def _agents_section(summary: Mapping[str, Any], agents: Mapping[str, Any],
                    charts: Mapping[str, bytes]) -> str:
    """The agent directory section: new and updated identities, impersonation attempts,
    and the Nostr events by verdict."""
    return _section(
        "agents", "Agent directory changes",
        _directory_counts(agents) + _img(charts["agent_directory.png"], "agent directory changes")
        + _table(["identity", "new", "updated", "impersonation attempts", "card events"],
                 ([_addr(r["identity"]), r["new"], r["updated"], r["impersonations"],
                   _ids(r["examples"])] for r in agents.get("per_identity") or []),
                 numeric=(1, 2, 3))
        + (_table(["Nostr event verdict", "events"],
                  ([_e(k), v] for k, v in agents["nostr_events_by_verdict"].items()),
                  numeric=(1,)) if agents.get("nostr_events_by_verdict") else "")
        + _absent(summary, "agent_cards", "agent_card_history", "nostr_events"))


def _landing_section(landing: Mapping[str, Any]) -> str:
    """The section on the ``ingested_files`` ledger, or nothing when no piece landed and
    no file vanished."""
    if not (landing.get("pieces") or landing.get("vanished")):
        return ""
    return _section("landing", "Input files (the ingested_files ledger)", (
        f"<p>{landing['files']:,} files landed in {landing['pieces']:,} pieces "
        f"({landing['lines']:,} lines): {landing['continuations']:,} pieces continued a "
        f"file that grew, {landing['new_versions']:,} were new versions of a file that "
        f"changed after it was landed; <b>{landing['vanished']:,}</b> files vanished "
        "before their lines could be read (nothing of them landed).</p>")
        + (_table(["vanished file", "noticed"],
                  ([f"<code>{_e(v['source_file'])}</code>", _e(v["noticed"])]
                   for v in landing["vanished_files"]))
           if landing.get("vanished_files") else ""))


def _reverify_section(summary: Mapping[str, Any], reverify: Mapping[str, Any]) -> str:
    """The re-verification section: what was checked again and the verdicts that differ
    (or a note that it was not run)."""
    if reverify["mode"] == "off":
        body = '<p class="note">Not run (--reverify-sample F or --reverify-all).</p>'
    else:
        body = (f"<p>{reverify['checked']:,} archived lines of <code>raw_messages</code> "
                f"checked again ({_e(reverify['mode'])}, fraction {reverify['fraction']}, "
                f"seed {reverify['seed']}); <b>{reverify['difference_count']:,}</b> verdicts "
                f"differ from <code>messages</code>; {reverify['missing']:,} lines have no "
                "messages row.</p>"
                + _table(["file", "line", "message id", "stored", "today", "reason today"],
                         ([f"<code>{_e(d['source_file'])}</code>", d["line_no"],
                           f"<code>{_e(d['msg_id'])}</code>", _e(d["stored_name"]),
                           _e(d["name"]), _e(d["detail"])] for d in reverify["differences"]),
                         numeric=(1,)))
        if reverify["difference_count"] > len(reverify["differences"]):
            body += (f'<p class="note">The first {len(reverify["differences"])} are listed;'
                     " summary.json has the count.</p>")
    return _section("reverify", "Re-verification of the archive", body
                    + _absent(summary, "raw_messages"))


def _pct(rate: float) -> str:
    return f"{rate * 100:.2f} %"


def _fmt(value: Any, rate: bool) -> str:
    return _pct(value) if rate else f"{value:g}"


__all__ = ["render", "short"]
