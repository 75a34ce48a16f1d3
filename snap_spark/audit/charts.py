"""The audit's charts (matplotlib's Agg backend: no display needed).

Each chart function takes the figures of :mod:`snap_spark.audit.figures` and returns one
matplotlib figure; :func:`render_all` turns them into PNG bytes. A chart whose data is
absent says so in the picture instead of being left out, so a report always has the same
sections. Counts carry thousands separators, legends stand outside the data, and
:func:`crowded_labels` finds tick labels that run into each other (the tests hold every
chart to none).
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from snap_spark.audit.figures import short
from snap_spark.protocol.errors import ERROR_NAMES

#: Colours: valid, rejected, and one per error code (colour-blind friendly tab10 order).
VALID_COLOUR = "#2f9e44"
REJECTED_COLOUR = "#e03131"
CODE_COLOURS = {1003: "#868e96", 1004: "#495057", 2001: "#e03131", 2002: "#f08c00",
                2003: "#9c36b5", 2004: "#1971c2", 2005: "#0c8599", 2006: "#c2255c"}
WIDTH = 9.0  # inches at 100 dpi: fits a laptop screen next to nothing else


def _png(fig: Figure) -> bytes:
    out = io.BytesIO()
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()


def _empty(ax: Axes, why: str) -> None:
    ax.text(0.5, 0.5, why, ha="center", va="center", fontsize=12, color="#868e96",
            transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _figure(height: float = 3.6, columns: int = 1) -> tuple[Figure, list[Axes]]:
    fig, axes = plt.subplots(1, columns, figsize=(WIDTH, height), squeeze=False)
    return fig, list(axes[0])


#: Counts on an axis: whole numbers with thousands separators (1,500, not 1500).
THOUSANDS = FuncFormatter(lambda value, _pos: f"{round(value):,}")
#: Where the bar of lines without a receipt time stands, after the last day.
UNDATED_GAP = 1.0
UNDATED_LABEL = "no receipt\ntime"


def _daily_axes(ax: Axes, ylabel: str, title: str, dates: Sequence[str], undated: bool
                ) -> None:
    """Labels, count axis, legend and day ticks of a per-day chart."""
    ax.set_ylabel(ylabel)
    _count_axis(ax.yaxis)
    ax.set_title(title)
    _legend_outside(ax)
    _date_ticks(ax, dates, undated)


def _count_axis(axis: Any, bins: int = 5) -> None:
    axis.set_major_locator(MaxNLocator(integer=True, nbins=bins, min_n_ticks=2))
    axis.set_major_formatter(THOUSANDS)
    axis.set_tick_params(labelsize=8)


def _legend_outside(ax: Axes) -> None:
    """The legend to the right of the plot, never over the bars."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _undated(messages: Mapping[str, Any]) -> Mapping[str, Any]:
    undated = messages.get("undated") or {}
    return undated if undated.get("valid") or undated.get("rejected") else {}


def verdict_mix(messages: Mapping[str, Any]) -> Figure:
    """Valid and rejected messages per receipt day (stacked bars); lines without a receipt
    time (malformed, unreadable) stand apart in a hatched bar of their own."""
    fig, (ax,) = _figure()
    daily = messages.get("daily") or []
    undated = _undated(messages)
    if not daily and not undated:
        _empty(ax, "no messages in the window" if messages else "no messages table")
        return fig
    dates = [d["date"] for d in daily]
    positions = list(range(len(dates)))
    ax.bar(positions, [d["valid"] for d in daily], color=VALID_COLOUR, label="valid")
    ax.bar(positions, [d["rejected"] for d in daily], bottom=[d["valid"] for d in daily],
           color=REJECTED_COLOUR, label="rejected")
    if undated:
        at = _undated_spot(len(dates))
        ax.bar([at], [undated["valid"]], color=VALID_COLOUR, hatch="//", edgecolor="white")
        ax.bar([at], [undated["rejected"]], bottom=[undated["valid"]], color=REJECTED_COLOUR,
               hatch="//", edgecolor="white")
    _daily_axes(ax, "messages", "Verdict mix per day (receipt date)", dates, bool(undated))
    return fig


def _day_step(days: int) -> int:
    return max(1, -(-days // 12))  # at most 12 day labels


def _undated_spot(days: int) -> float:
    """The x of the bar of lines without a receipt time: one label step after the last
    day, so that neither bar nor label runs into the days."""
    return float(days - 1 + max(UNDATED_GAP, _day_step(days)) + 0.5) if days else 0.0


def _date_ticks(ax: Axes, dates: Sequence[str], undated: bool = False) -> None:
    ticks: list[float] = [float(i) for i in range(0, len(dates), _day_step(len(dates)))]
    labels = [dates[int(i)] for i in ticks]
    if undated:
        ticks.append(_undated_spot(len(dates)))
        labels.append(UNDATED_LABEL)
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=90, fontsize=8)


def rejections_by_code(messages: Mapping[str, Any]) -> Figure:
    """Rejections per receipt day by SNAP error code (stacked bars); lines without a
    receipt time stand apart in a hatched bar of their own."""
    fig, (ax,) = _figure()
    rows = messages.get("daily_by_code") or []
    undated = {r["code"]: r["count"] for r in _undated(messages).get("by_code") or []}
    if not rows and not undated:
        _empty(ax, "no rejections in the window" if messages else "no messages table")
        return fig
    dates = sorted({r["date"] for r in rows})
    codes = sorted({r["code"] for r in rows} | set(undated))
    at = {(r["date"], r["code"]): r["count"] for r in rows}
    spot = _undated_spot(len(dates))
    bottom = [0] * len(dates)
    apart = 0
    for code in codes:
        heights = [at.get((d, code), 0) for d in dates]
        ax.bar(range(len(dates)), heights, bottom=bottom, label=f"{code} {ERROR_NAMES[code]}",
               color=CODE_COLOURS.get(code))
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        if undated.get(code):
            ax.bar([spot], [undated[code]], bottom=[apart], color=CODE_COLOURS.get(code),
                   hatch="//", edgecolor="white")
            apart += undated[code]
    _daily_axes(ax, "rejected messages", "Rejections per day by error code", dates, bool(undated))
    return fig


def _barh(ax: Axes, labels: Sequence[str], values: Sequence[int], colour: str,
          title: str) -> None:
    positions = list(range(len(labels)))[::-1]
    ax.barh(positions, values, color=colour)
    ax.set_yticks(positions)
    ax.set_yticklabels(labels, fontsize=8, family="monospace")
    ax.set_title(title, fontsize=10)
    _count_axis(ax.xaxis, bins=4)
    ax.set_xlim(0, max(values, default=0) * 1.25 or 1)  # room for the value labels
    for y, v in zip(positions, values, strict=True):
        ax.text(v, y, f" {v:,}", va="center", fontsize=8)


def top_senders(messages: Mapping[str, Any]) -> Figure:
    """Senders with the most rejections, and with the most replay attempts."""
    fig, axes = _figure(height=3.8, columns=2)
    senders = messages.get("senders") or {}
    for ax, key, metric, colour, title in (
            (axes[0], "by_rejections", "rejections", REJECTED_COLOUR, "Most rejections"),
            (axes[1], "by_replays", "replays", CODE_COLOURS[2006], "Most replay attempts (2006)")):
        rows = senders.get(key) or []
        if not rows:
            _empty(ax, f"{title.lower()}: none")
            continue
        _barh(ax, [short(r["sender"]) for r in rows], [r[metric] for r in rows], colour, title)
    return fig


def signature_failures(messages: Mapping[str, Any]) -> Figure:
    """Forged (2001) and missing (2002) signatures per sender (stacked bars)."""
    fig, (ax,) = _figure(height=3.4)
    rows = (messages.get("senders") or {}).get("by_signature_failures") or []
    if not rows:
        _empty(ax, "no signature failures" if messages else "no messages table")
        return fig
    labels = [short(r["sender"], 22) for r in rows]
    positions = list(range(len(rows)))[::-1]
    forged = [r["forged"] for r in rows]
    unsigned = [r["unsigned"] for r in rows]
    ax.barh(positions, forged, color=CODE_COLOURS[2001], label="2001 forged signature")
    ax.barh(positions, unsigned, left=forged, color=CODE_COLOURS[2002],
            label="2002 missing signature")
    ax.set_yticks(positions)
    ax.set_yticklabels(labels, fontsize=8, family="monospace")
    ax.set_title("Signature failures by sender")
    _count_axis(ax.xaxis)
    _legend_outside(ax)
    return fig


def tasks(task_figures: Mapping[str, Any]) -> Figure:
    """Tasks by state, and illegal transitions by from → to."""
    fig, axes = _figure(height=3.6, columns=2)
    states = task_figures.get("by_state") or {}
    if states:
        _barh(axes[0], list(states), list(states.values()), "#1971c2", "Tasks by state")
    else:
        _empty(axes[0], "no tasks table" if "tasks" not in task_figures else "no tasks")
    illegal = (task_figures.get("illegal_by_transition") or [])[:10]
    if illegal:
        _barh(axes[1], [f"{r['from']} → {r['to']}" for r in illegal],
              [r["count"] for r in illegal], REJECTED_COLOUR, "Illegal transitions")
    else:
        _empty(axes[1], "no illegal transitions" if "reports" in task_figures
               else "no task_events table")
    return fig


def agent_directory(agents: Mapping[str, Any]) -> Figure:
    """Per identity: new, updated, and impersonation attempts (grouped bars)."""
    rows = (agents.get("per_identity") or [])[:12]
    fig, (ax,) = _figure(height=max(3.0, 0.32 * len(rows) + 1.2))
    if not rows:
        _empty(ax, "no agent_card_history table (make run-nostr)"
               if "per_identity" not in agents else "no agent cards in the window")
        return fig
    base = list(range(len(rows)))[::-1]
    height = 0.27
    for offset, key, colour, label in ((height, "new", VALID_COLOUR, "new"),
                                       (0.0, "updated", "#1971c2", "updated"),
                                       (-height, "impersonations", REJECTED_COLOUR,
                                        "impersonation attempts")):
        ax.barh([b + offset for b in base], [r[key] for r in rows], height=height,
                color=colour, label=label)
    ax.set_yticks(base)
    ax.set_yticklabels([short(r["identity"], 22) for r in rows], fontsize=8,
                       family="monospace")
    ax.set_title("Agent directory changes per identity")
    _count_axis(ax.xaxis)
    _legend_outside(ax)
    return fig


#: Chart file name → (section of the figures it draws, how).
CHARTS: dict[str, tuple[str, Callable[[Mapping[str, Any]], Figure]]] = {
    "verdict_mix.png": ("messages", verdict_mix),
    "rejections_by_code.png": ("messages", rejections_by_code),
    "top_senders.png": ("messages", top_senders),
    "signature_failures.png": ("messages", signature_failures),
    "tasks.png": ("tasks", tasks),
    "agent_directory.png": ("agents", agent_directory),
}


def render_all(figures: Mapping[str, Any]) -> dict[str, bytes]:
    """Every chart of :data:`CHARTS`, as ``{file name: PNG bytes}``."""
    return {name: _png(draw(figures.get(section) or {}))
            for name, (section, draw) in CHARTS.items()}


def crowded_labels(fig: Figure) -> list[str]:
    """What a reader could not read in ``fig`` as it is saved (tight layout, 100 dpi):
    tick labels of one axis whose boxes intersect, and legends that cover a bar.

    Examples:
        >>> crowded_labels(tasks({"by_state": {"completed": 61_500, "working": 3}}))
        []
    """
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    found: list[str] = []
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            boxes = [(label.get_text(), label.get_window_extent(renderer))
                     for label in axis.get_ticklabels()
                     if label.get_visible() and label.get_text()]
            for (a, box_a), (b, box_b) in itertools.pairwise(boxes):
                if box_a.overlaps(box_b):
                    found.append(f"{ax.get_title()!r}: {name} tick labels {a!r} and {b!r} "
                                 "overlap")
        legend = ax.get_legend()
        if legend is not None:
            area = legend.get_window_extent(renderer)
            for patch in ax.patches:
                box = patch.get_window_extent(renderer)
                if box.width > 0 and box.height > 0 and area.overlaps(box):
                    found.append(f"{ax.get_title()!r}: the legend covers a bar")
                    break
    plt.close(fig)
    return found
