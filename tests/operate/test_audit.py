"""jobs/audit.py on a lake the real jobs wrote: every figure of summary.json against counts
computed here from the tables (read by delta-rs, counted in plain Python), re-verification
against the pure-Python checker, exit statuses, and the report opened in headless Chromium.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from snap_spark.audit import audit
from snap_spark.audit.audit_job import DEFAULT_THRESHOLDS, main
from snap_spark.audit.figures import Window
from snap_spark.audit.reverify import reverify
from snap_spark.common.placement import DriverLimits
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.errors import ERROR_NAMES
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.settings import VerifySettings
from tests.driver_limits import set_limits
from tests.operate.conftest import AGENTS, SEED, FullLake

pytestmark = [pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
TOP = 10


def rows(lake: Path, name: str) -> list[dict[str, Any]]:
    return DeltaTable(str(lake / name)).to_pyarrow_table().to_pylist()


#: The last day of the submitted audit's window: fixed once, so a module that runs across
#: midnight compares the summary with the day the job was given, not the day it ends.
WINDOW_TO = dt.date.today().isoformat()


@pytest.fixture(scope="module")
def submitted(full_lake: FullLake, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The audit as a scheduler (and ``make audit``) runs it: spark-submit, delta-spark with
    the cached JARs, every archived line re-verified, a window holding every day."""
    from snap_spark.runtime.maven_jars import DELTA

    jars = DELTA.available()
    assert jars, "Delta's JARs are not cached: make setup fetches them"
    out = tmp_path_factory.mktemp("audit") / "report"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.snap.lake.backend=delta-spark",
         "--jars", ",".join(jars), str(ROOT / "jobs" / "audit.py"),
         "--lake", str(full_lake.lake), "--out", str(out), "--reverify-all",
         "--from", "2000-01-01", "--to", WINDOW_TO],
        capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    return done, out


@pytest.fixture(scope="module")
def audited(submitted: tuple[subprocess.CompletedProcess[str], Path]
            ) -> tuple[dict[str, Any], Path]:
    done, out = submitted
    assert done.returncode in (0, 3), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "summary.json").read_text()), out


def ranked(groups: dict[Any, dict[str, Any]], metric: Any, ids: str) -> list[tuple[Any, ...]]:
    """Top senders as the audit defines them: by the metric, then the sender (no sender
    first); the first three of the group's distinct message ids."""
    scored = [(metric(g), sender, sorted(g[ids])[:3]) for sender, g in groups.items()
              if metric(g) > 0]
    scored.sort(key=lambda t: (-t[0], t[1] is not None, t[1] or ""))
    return [(sender, score, examples) for score, sender, examples in scored[:TOP]]


def test_message_figures_equal_independent_counts(audited: tuple[dict[str, Any], Path],
                                                  full_lake: FullLake) -> None:
    summary, _ = audited
    messages = rows(full_lake.lake, "messages")
    figures = summary["figures"]["messages"]
    codes = Counter(m["error_code"] for m in messages)
    assert figures["total"] == len(messages)
    assert figures["valid"] == codes[None]
    assert figures["rejected"] == len(messages) - codes[None]
    assert figures["forged_signatures"] == codes[2001]
    assert figures["missing_signatures"] == codes[2002]
    assert figures["replays"] == codes[2006] > 0
    assert figures["rates"]["forged_signature"] == pytest.approx(codes[2001] / len(messages))
    assert figures["by_code"] == [{"code": c, "name": ERROR_NAMES[c], "count": n}
                                  for c, n in sorted((c, n) for c, n in codes.items() if c)]
    daily: dict[str, Counter[str]] = defaultdict(Counter)
    daily_codes: Counter[tuple[str, int]] = Counter()
    undated: Counter[int | None] = Counter()
    for m in messages:
        if m["received_at"] is None:  # no receipt time: counted apart, not by landing day
            undated[m["error_code"]] += 1
            continue
        day = m["event_date"].isoformat()
        daily[day][m["verdict"]] += 1
        if m["error_code"] is not None:
            daily_codes[(day, m["error_code"])] += 1
    assert figures["daily"] == [{"date": d, "valid": c["valid"], "rejected": c["rejected"]}
                                for d, c in sorted(daily.items())]
    assert figures["daily_by_code"] == [{"date": d, "code": c, "count": n}
                                        for (d, c), n in sorted(daily_codes.items())]
    assert undated[1003] > 0  # the sample's malformed lines
    assert figures["undated"] == {
        "valid": undated.pop(None, 0), "rejected": sum(undated.values()),
        "by_code": [{"code": c, "count": n} for c, n in sorted(undated.items())]}

    groups: dict[Any, dict[str, Any]] = defaultdict(lambda: {
        "rejections": 0, "replays": 0, "forged": 0, "unsigned": 0, "messages": 0,
        "rejected_ids": set(), "replay_ids": set(), "signature_ids": set()})
    for m in messages:
        g = groups[m["sender"]]
        g["messages"] += 1
        code, msg_id = m["error_code"], m["msg_id"]
        if code is not None:
            g["rejections"] += 1
            if msg_id is not None:
                g["rejected_ids"].add(msg_id)
        if code == 2006:
            g["replays"] += 1
            g["replay_ids"].add(msg_id)
        if code in (2001, 2002):
            g["forged" if code == 2001 else "unsigned"] += 1
            if msg_id is not None:
                g["signature_ids"].add(msg_id)
    senders = figures["senders"]

    def got(key: str, metric: Any) -> list[tuple[Any, ...]]:
        return [(r["sender"], metric(r), r["examples"]) for r in senders[key]]

    assert got("by_rejections", lambda r: r["rejections"]) == ranked(
        groups, lambda g: g["rejections"], "rejected_ids")
    assert got("by_replays", lambda r: r["replays"]) == ranked(
        groups, lambda g: g["replays"], "replay_ids")
    assert got("by_signature_failures", lambda r: r["forged"] + r["unsigned"]) == ranked(
        groups, lambda g: g["forged"] + g["unsigned"], "signature_ids")
    for r in senders["by_rejections"]:
        assert r["messages"] == groups[r["sender"]]["messages"]


def test_task_and_agent_figures_equal_independent_counts(
        audited: tuple[dict[str, Any], Path], full_lake: FullLake) -> None:
    summary, _ = audited
    tasks = rows(full_lake.lake, "tasks")
    events = rows(full_lake.lake, "task_events")
    figures = summary["figures"]["tasks"]
    assert figures["tasks"] == len(tasks)
    assert figures["by_state"] == dict(sorted(Counter(t["state"] or "none"
                                                      for t in tasks).items()))
    anomalies = Counter(e["anomaly"] for e in events)
    assert figures["reports"] == len(events)
    assert figures["illegal_transitions"] == anomalies["illegal_transition"] > 0
    assert figures["foreign_reports"] == anomalies["non_owner"] > 0
    # the tasks table's own counters tell the same story
    assert sum(t["illegal_transitions"] for t in tasks) == anomalies["illegal_transition"]
    illegal = Counter((e["previous_state"] or "none", e["new_state"]) for e in events
                      if e["anomaly"] == "illegal_transition")
    assert figures["illegal_by_transition"] == [
        {"from": a, "to": b, "count": n}
        for (a, b), n in sorted(illegal.items(), key=lambda kv: (-kv[1], kv[0]))]
    per_task: dict[str, list[Any]] = defaultdict(lambda: [0, 0, set()])
    for e in events:
        if e["anomaly"]:
            entry = per_task[e["task_id"]]
            entry[0 if e["anomaly"] == "illegal_transition" else 1] += 1
            entry[2].add(e["message_id"])
    worst = sorted(per_task.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))[:TOP]
    assert figures["worst_tasks"] == [
        {"task_id": t, "illegal": i, "foreign": f, "examples": sorted(ids)[:3]}
        for t, (i, f, ids) in worst]

    history = rows(full_lake.lake, "agent_card_history")
    agents = summary["figures"]["agents"]
    assert agents["identities"] == len(rows(full_lake.lake, "agent_cards"))
    # the run's window: 2000-01-01 to today (rows without a time, e.g. a malformed
    # well-known document or a line that is no event, are outside any window)
    def inside(row: dict[str, Any], column: str = "created_time") -> bool:
        return row[column] is not None and (
            dt.date(2000, 1, 1) <= row[column].date() <= dt.date.today())

    assert agents["nostr_events_by_verdict"] == dict(sorted(Counter(
        e["verdict"] for e in rows(full_lake.lake, "nostr_events") if inside(e)).items()))
    seen = [h for h in history if inside(h)]
    assert len(seen) < len(history)  # the window cuts something
    assert agents["history_by_verdict"] == dict(sorted(Counter(
        h["verdict"] for h in seen).items()))
    first: dict[str, Any] = {}
    for h in history:
        if h["verdict"] in ("valid", "superseded") and h["created_time"] is not None:
            first[h["identity"]] = min(first.get(h["identity"], h["created_time"]),
                                       h["created_time"])
    accepted: dict[str, int] = Counter(h["identity"] for h in seen
                                       if h["verdict"] in ("valid", "superseded"))
    impersonations = Counter(h["identity"] for h in seen
                             if h["verdict"] == "identity_mismatch")
    expected = {}
    for identity in {h["identity"] for h in seen}:
        new = int(identity in first and inside({"t": first[identity]}, "t"))
        expected[identity] = (new, max(accepted[identity] - new, 0), impersonations[identity])
    assert {r["identity"]: (r["new"], r["updated"], r["impersonations"])
            for r in agents["per_identity"]} == expected
    assert sum(n for n, _, _ in expected.values()) == agents["new_identities"] > 0
    assert agents["impersonation_attempts"] == sum(impersonations.values()) > 0
    assert agents["identities_impersonated"] == len(impersonations)


def test_table_versions_thresholds_and_clean_reverification(
        audited: tuple[dict[str, Any], Path], full_lake: FullLake) -> None:
    summary, out = audited
    for name, facts in summary["tables"].items():
        table = DeltaTable(str(full_lake.lake / name))
        assert facts == {"present": True, "version": table.version(),
                         "rows": table.to_pyarrow_table().num_rows}
    assert summary["absent"] == []
    # every archived line checked again; the lake was landed by the current core
    assert summary["reverify"]["checked"] == summary["tables"]["raw_messages"]["rows"]
    assert summary["reverify"]["difference_count"] == summary["reverify"]["missing"] == 0
    values = {t["name"]: t for t in summary["thresholds"]}
    assert set(values) == set(DEFAULT_THRESHOLDS)
    figures = summary["figures"]
    assert values["impersonation_attempts"]["value"] == figures["agents"][
        "impersonation_attempts"]
    for check in values.values():
        assert check["crossed"] == (check["value"] > check["limit"])
    assert summary["alert"] is True and summary["exit_status"] == 3
    for chart in ("verdict_mix", "rejections_by_code", "top_senders", "signature_failures",
                  "tasks", "agent_directory"):
        assert (out / f"{chart}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the agents' private keys (plain and taproot-tweaked) appear nowhere in the report
    from snap_spark.protocol.keys import tweak_private_key
    from snap_spark.samples.messages import SampleConfig, sample_agents

    secrets = [k.hex() for a in sample_agents(SampleConfig(agents=AGENTS, seed=SEED))
               for k in (a.private_key, tweak_private_key(a.private_key))]
    written = (out / "report.html").read_text() + (out / "summary.json").read_text()
    assert len(secrets) == 2 * AGENTS and not any(s in written for s in secrets)


def _corrupt(lake: Path, how_many: int) -> dict[tuple[str, int], int | None]:
    """Rewrite ``messages`` with the verdicts of a few lines flipped (valid ↔ 2001), as
    silent corruption would; returns each flipped line's true code."""
    table = DeltaTable(str(lake / "messages")).to_pyarrow_table()
    data = table.to_pylist()
    flipped: dict[tuple[str, int], int | None] = {}
    for row in data:
        if len(flipped) == how_many:
            break
        if row["error_code"] in (None, 2001) and row["msg_id"]:
            flipped[(row["source_file"], row["line_no"])] = row["error_code"]
            if row["error_code"] is None:
                row.update(verdict="rejected", error_code=2001,
                           error_name=ERROR_NAMES[2001], error_detail="flipped")
            else:
                row.update(verdict="valid", error_code=None, error_name=None,
                           error_detail=None)
    write_deltalake(str(lake / "messages"), pa.Table.from_pylist(data, schema=table.schema),
                    mode="overwrite", partition_by=["event_date"])
    return flipped


def test_reverification_lists_corrupted_and_rule_changed_verdicts(
        spark: Any, full_lake: FullLake, tmp_path: Path) -> None:
    """A copy of the lake with the stored verdicts of four lines flipped (valid <-> 2001, as
    silent corruption would) is audited with every archived line checked again under a
    rule that changed: a 5 s drift window instead of the 60 s the lake was landed with.
    The differences listed are exactly the lines whose stored verdict differs from the one
    the pure-Python checker gives, with that window, over the archived lines in the lake's
    own order: the four flipped, and lines the narrower window decides otherwise; the
    audit raises an alert. A seeded sample of the same lake, with the recorded window,
    sees a subset of the flipped four (the same sample for the same seed, whichever way
    the tables are read: test_small_tables_read_on_the_driver_give_what_spark_s_reads_give;
    the recorded window finding nothing on a lake as landed: the clean re-verification of
    test_table_versions_thresholds_and_clean_reverification)."""
    lake = tmp_path / "lake"
    shutil.copytree(full_lake.lake, lake)
    flipped = _corrupt(lake, 4)
    result = audit(spark, str(lake), str(tmp_path / "all"), reverify_all=True,
                   max_drift=5).summary
    assert result["reverify"]["settings"]["max_drift"] == 5

    raw = sorted(rows(lake, "raw_messages"), key=lambda r: (r["source_file"], r["line_no"]))
    lines = [r["raw_bytes"] if r["raw_bytes"] is not None else r["raw_text"].encode()
             for r in raw]
    stored = {(m["source_file"], m["line_no"]): m["error_code"] for m in rows(lake, "messages")}
    today = {(r["source_file"], r["line_no"]): v.error_code for r, v in zip(
        raw, check_lines(lines, ReceiptClock.refuse(), max_drift=5), strict=True)}
    expected = {key: code for key, code in today.items() if code != stored[key]}
    changed = {key for key in expected if key not in flipped}
    assert changed  # the narrower window decides some lines otherwise
    assert set(flipped) <= set(expected)
    assert result["reverify"]["checked"] == len(raw)
    assert result["reverify"]["difference_count"] == len(expected)
    found = {(d["source_file"], d["line_no"]): d for d in result["reverify"]["differences"]}
    assert {key: d["code"] for key, d in found.items()} == expected
    assert all(found[key]["stored_code"] == stored[key] for key in expected)
    for key, code in flipped.items():  # the stored verdict is the flipped one
        assert stored[key] == (2001 if code is None else None) != today[key]
    assert result["alert"] and {t["name"] for t in result["thresholds"] if t["crossed"]} >= {
        "reverify_differences"}

    # a sample sees a subset of the flipped
    from snap_spark.lake import get_lake

    read = get_lake(spark).read
    sampled = reverify(read(spark, str(lake / "raw_messages")),
                       read(spark, str(lake / "messages")), VerifySettings(),
                       fraction=0.4, seed=11)
    assert 0.25 * len(raw) < sampled.checked < 0.55 * len(raw)
    assert {(d["source_file"], d["line_no"]) for d in sampled.differences} <= set(flipped)


def test_reverification_takes_the_windows_the_newest_landing_recorded(
        spark: Any, tmp_path: Path) -> None:
    """A lake landed twice, the second time with other windows than the spec's: an audit
    given none re-checks with the second landing's, read from the log of ``messages``
    (whatever the session's backend), and what it finds equals the checker's verdicts
    under those windows."""
    from snap_spark.pipeline.batch_job import run
    from snap_spark.samples.messages import SampleConfig, write_sample

    lake = tmp_path / "lake"
    for i, settings in enumerate((VerifySettings(), VerifySettings(max_drift=7,
                                                                   replay_window=45))):
        traffic = tmp_path / f"traffic-{i}.jsonl"
        write_sample(SampleConfig(agents=3, messages=150, seed=40 + i), str(traffic),
                     tasks_path=None)
        run(spark, [str(traffic)], str(lake), settings, catch_up_tasks=False)
    summary = audit(spark, str(lake), str(tmp_path / "out"), reverify_all=True).summary
    assert summary["reverify"]["settings"] == {"max_drift": 7, "replay_window": 45}
    # the first landing's lines, decided under the spec's windows, are checked again under
    # the recorded ones: those the 7 s drift decides otherwise are listed, and no other
    raw = sorted(rows(lake, "raw_messages"), key=lambda r: (r["source_file"], r["line_no"]))
    stored = {(m["source_file"], m["line_no"]): m["error_code"] for m in rows(lake, "messages")}
    today: dict[tuple[str, int], int | None] = {}
    for source in sorted({r["source_file"] for r in raw}):
        mine = [r for r in raw if r["source_file"] == source]
        verdicts = check_lines([r["raw_bytes"] if r["raw_bytes"] is not None
                                else r["raw_text"].encode() for r in mine],
                               ReceiptClock.refuse(), max_drift=7, replay_window=45)
        today.update({(r["source_file"], r["line_no"]): v.error_code
                      for r, v in zip(mine, verdicts, strict=True)})
    expected = {key for key, code in today.items() if code != stored[key]}
    assert expected, "the narrower drift decides some first-landing lines otherwise"
    assert {(d["source_file"], d["line_no"]) for d in summary["reverify"]["differences"]
            } == expected


def test_absent_tables_are_named_and_the_window_cuts(spark: Any, full_lake: FullLake,
                                                      tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    for name in ("messages", "raw_messages"):
        shutil.copytree(full_lake.lake / name, lake / name)
    out = tmp_path / "out"
    messages = rows(lake, "messages")
    days = sorted({m["event_date"] for m in messages})
    first = days[0]
    summary = audit(spark, str(lake), str(out), window=Window(first, first)).summary
    assert summary["absent"] == ["tasks", "task_events", "nostr_events", "agent_cards",
                                 "agent_card_history"]
    assert summary["figures"]["tasks"] == {} and summary["figures"]["agents"] == {}
    assert summary["figures"]["messages"]["total"] == sum(
        1 for m in messages if m["event_date"] == first)
    assert summary["window"] == {"from": first.isoformat(), "to": first.isoformat()}
    not_measured = {t["name"] for t in summary["thresholds"] if t["value"] is None}
    assert not_measured == {"impersonation_attempts", "illegal_transitions",
                            "reverify_differences"}
    html = (out / "report.html").read_text()
    assert "Absent from the lake: tasks, task_events" in html
    # a lake folder with no table at all still gets a report
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = audit(spark, str(empty), str(tmp_path / "out2")).summary
    assert len(nothing["absent"]) == 7 and not nothing["alert"]
    assert (tmp_path / "out2" / "report.html").exists()


def test_usage_errors_exit_2_and_write_nothing(full_lake: FullLake, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Bad dates, thresholds files, options and lakes: exit 2 with a message naming the
    problem, no report folder written. (Exit 0, lenient thresholds none of which is
    crossed: test_small_tables_read_on_the_driver_give_what_spark_s_reads_give; exit 3:
    test_the_job_under_spark_submit.)"""
    lake = str(full_lake.lake)
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[max]\nnope = 1\n")
    negative = tmp_path / "neg.toml"
    negative.write_text("[max]\nreplay_rate = -1\n")
    for argv, message in (
            (["--from", "2026-13-01"], "--from"),
            (["--from", "2026-02-02", "--to", "2026-02-01"], "is after"),
            (["--thresholds", str(bad_toml)], "unknown metric 'nope'"),
            (["--thresholds", str(negative)], "must be a number >= 0"),
            (["--thresholds", str(tmp_path / "absent.toml")], "--thresholds"),
            (["--max-drift", "nan", "--reverify-all"], "max"),
            (["--reverify-sample", "0.5", "--seed", str(1 << 63)], "a 64-bit seed"),
    ):
        out = tmp_path / "never"
        assert main(["--lake", lake, "--out", str(out), *argv]) == 2, argv
        assert message in capsys.readouterr().err
        assert not out.exists()
    assert main(["--lake", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2
    assert "no such folder" in capsys.readouterr().err
    # re-verification asked of a lake without raw_messages: refused, never skipped
    only_tasks = tmp_path / "only-tasks"
    shutil.copytree(Path(lake) / "tasks", only_tasks / "tasks")
    for option in (["--reverify-all"], ["--reverify-sample", "0.5"]):
        out = tmp_path / "refused"
        assert main(["--lake", str(only_tasks), "--out", str(out), *option]) == 2
        said = capsys.readouterr().err
        assert option[0] in said and "no raw_messages and no messages" in said
        assert not out.exists()
    for argv in (["--reverify-sample", "0"], ["--reverify-sample", "1.5"],
                 ["--reverify-all", "--reverify-sample", "0.1"]):
        with pytest.raises(SystemExit) as stop:
            main(["--lake", lake, "--out", str(tmp_path / "y"), *argv])
        assert stop.value.code == 2


# -- the report in a browser -------------------------------------------------------------

SECTIONS = ("overview", "verdicts", "senders", "signatures", "tasks", "agents", "landing",
            "reverify")
#: Sections that hold a chart, and the least share of coloured pixels their screenshot has.
CHARTED = {"verdicts", "senders", "signatures", "tasks", "agents"}


@pytest.fixture(scope="session")
def chromium() -> str:
    """The headless Chromium to take screenshots with (its marker: ``browser``)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is missing: `make test` installs Debian's chromium"
    return found


def screenshot(chromium: str, html: Path, png: Path, height: int = 2600) -> Any:
    from PIL import Image

    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--hide-scrollbars",
                    f"--window-size=1100,{height}", f"--screenshot={png}", html.as_uri()],
                   check=True, capture_output=True, timeout=120)
    return Image.open(png).convert("RGB")


def ink(image: Any) -> tuple[float, float]:
    """Shares of the picture that are text-like (dark) and chart-like (saturated colour)."""
    import numpy as np

    pixels = np.asarray(image, dtype=np.int16).reshape(-1, 3)
    brightest, darkest = pixels.max(axis=1), pixels.min(axis=1)
    return float((brightest < 120).mean()), float((brightest - darkest > 90).mean())


BOX = 1300  # px: each section's box in the stacked page below
WHOLE = 3000  # px: the height of the report's own page below them


def rendered(chromium: str, report: Path, work: Path, extra: dict[str, str] | None = None
             ) -> tuple[Any, dict[str, tuple[float, float]]]:
    """One Chromium screenshot, 1100 px wide, of a page holding the report with every
    section in a box of its own height (:data:`BOX`, overflow hidden, stacked without gaps,
    one added style rule), then ``extra`` (a name and a section's HTML each) stacked in
    boxes after them, and below those the report itself, unmodified, in a frame
    :data:`WHOLE` px high. Returns the frame's crop (the report as Chromium shows it) and
    the ink of each box's crop, by section id (``extra``: by its name)."""
    html = report.read_text()
    found = re.findall(r'<section id="([a-z]+)">', html)
    assert found == list(SECTIONS), found
    extra = extra or {}
    names = [*found, *extra]
    style = ("<style>h1, .meta { display: none } main { padding: 0; margin: 0 } "
             f"section {{ height: {BOX}px; margin: 0; box-sizing: border-box; "
             "overflow: hidden }</style>")
    frame = (f'<iframe src="{report.as_uri()}" style="position: absolute; left: 0; '
             f'top: {BOX * len(names)}px; width: 1100px; height: {WHOLE}px; border: 0">'
             "</iframe>")
    stacked = work / "stacked.html"
    stacked.write_text(html.replace("</head>", style + "</head>")
                       .replace("</main>", "".join(extra.values()) + "</main>")
                       .replace("</body>", frame + "</body>"))
    shot = screenshot(chromium, stacked, work / "stacked.png",
                      height=BOX * len(names) + WHOLE)
    whole = shot.crop((0, BOX * len(names), shot.width, BOX * len(names) + WHOLE))
    return whole, {name: ink(shot.crop((0, i * BOX, shot.width, (i + 1) * BOX)))
                   for i, name in enumerate(names)}


def assert_readable(inks: dict[str, tuple[float, float]]) -> None:
    for section, (dark, colour) in inks.items():
        assert dark > 0.002, f"section {section} shows no text"
        if section in CHARTED:
            assert colour > 0.01, f"section {section} shows no chart"


@pytest.mark.slow
def test_report_renders_in_chromium_with_every_section_and_chart(
        audited: tuple[dict[str, Any], Path], tmp_path: Path, chromium: str) -> None:
    """The report, self-contained, renders whole in Chromium (in a frame of the one page
    screenshot: :func:`rendered`), text and charts showing; stacked a section to a box,
    every section shows text and every charted one its chart. The check fails when a
    chart goes missing: the tasks section without its chart, rendered in the same page
    after the report's own sections, does not pass it."""
    _, out = audited
    report = out / "report.html"
    html = report.read_text()
    assert "<link" not in html and "<script" not in html and 'src="http' not in html
    assert html.count('src="data:image/png;base64,') == 6
    start = html.index('<section id="tasks">')
    img = html.index("<img", start)
    end = html.index("</section>", start) + len("</section>")
    chartless = html[start:img] + html[html.index(">", img) + 1:end]
    whole, inks = rendered(chromium, report, tmp_path, {"tasks without its chart": chartless})
    assert whole.size == (1100, WHOLE)
    dark, colour = ink(whole)  # the report as it is: its text and its charts show
    assert dark > 0.002 and colour > 0.01, (dark, colour)
    broken = inks.pop("tasks without its chart")
    assert_readable(inks)
    with pytest.raises(AssertionError, match="section tasks shows no chart"):
        assert_readable({"tasks": broken})


@pytest.mark.slow
def test_the_job_under_spark_submit(submitted: tuple[subprocess.CompletedProcess[str], Path],
                                    full_lake: FullLake) -> None:
    """Exit 3 on the sample's planted attacks, each crossed limit and the report's path on
    stdout, and the run's own settings in summary.json."""
    done, out = submitted
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"report: {out / 'report.html'}" in done.stdout
    assert "ALERT forged_signature_rate = " in done.stdout
    assert done.stdout.rstrip().endswith("alert: thresholds crossed (exit 3)")
    # spark-submit's Python runner merges the driver's stderr (progress) into stdout
    assert "backend=delta-spark" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reverify"]["mode"] == "all" and summary["reverify"]["seed"] is not None
    assert summary["window"] == {"from": "2000-01-01", "to": WINDOW_TO}
    assert summary["lake"] == str(full_lake.lake)


def test_report_and_summary_show_control_and_bidi_characters_escaped(
        audited: tuple[dict[str, Any], Path]) -> None:
    """NUL, other controls and bidirectional overrides in file names, ids and details
    reach neither page nor JSON raw: both show them as escapes."""
    from snap_spark.audit import report

    summary, out = audited
    nasty = {"source_file": "in\x00box\x1b[31m\u202etxt.jsonl", "line_no": 7,
             "msg_id": "m\x07\u2066", "stored_code": 2001, "stored_name": "x\x0b",
             "code": None, "name": None, "detail": "line 3 of a.jsonl\x00fff38dee\x85"}
    changed = json.loads(json.dumps(summary))
    changed["reverify"].update(mode="all", checked=1, difference_count=1, differences=[nasty])
    page = report.render(changed, {png.name: png.read_bytes() for png in out.glob("*.png")})
    text = json.dumps(changed, indent=2, default=str)  # as the job writes summary.json
    hidden = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    for written in (page, text):
        assert not hidden.search(written), hidden.findall(written)
    assert "in\\u0000box\\u001b[31m\\u202etxt.jsonl" in page
    assert "a.jsonl\\u0000fff38dee\\u0085" in page
    assert json.loads(text)["reverify"]["differences"][0] == nasty  # escaped, not lost


def test_charts_have_readable_labels_and_legends_beside_the_data(
        audited: tuple[dict[str, Any], Path]) -> None:
    """Every chart, drawn from the audit's own figures and from large ones (thousands,
    long windows, a bar of lines without a receipt time), has no tick labels running into
    each other and no legend over a bar, as the report shows it."""
    from snap_spark.audit import charts

    summary, _ = audited
    big = json.loads(json.dumps(summary["figures"]))
    days = [(dt.date(2026, 1, 1) + dt.timedelta(days=d)).isoformat() for d in range(75)]
    big["messages"]["daily"] = [{"date": d, "valid": 120_000 + i, "rejected": 3_000}
                                for i, d in enumerate(days)]
    big["messages"]["daily_by_code"] = [{"date": d, "code": 2001 + i % 2, "count": 1_500}
                                        for i, d in enumerate(days)]
    big["messages"]["undated"] = {"valid": 0, "rejected": 2_742,
                                  "by_code": [{"code": 1003, "count": 2_742}]}
    big["tasks"]["by_state"] = {"completed": 6_000, "working": 1_500, "failed": 3_000,
                                "canceled": 4_500, "submitted": 12}
    for figures in (summary["figures"], big):
        for name, (section, draw) in charts.CHARTS.items():
            assert charts.crowded_labels(draw(figures.get(section) or {})) == [], name
    # the check sees what it must: labels forced onto one spot, a legend over the bars
    fig = charts.tasks(big["tasks"])
    fig.axes[0].set_yticks([0, 0.01, 0.02], ["completed", "working", "failed"])
    assert any("overlap" in found for found in charts.crowded_labels(fig))
    fig = charts.signature_failures(big["messages"])
    fig.axes[0].legend(loc="center")
    assert any("legend" in found for found in charts.crowded_labels(fig))


def test_small_tables_read_on_the_driver_give_what_spark_s_reads_give(
        spark: Any, full_lake: FullLake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A small table is read on the driver and handed to Spark as Arrow (read_rows)
    instead of read and cached by Spark: the whole summary, figures, table facts and the
    re-verification of a seeded sample, is the same both ways. The run that reads on the
    driver is the job's entry point (``main``) with lenient thresholds, none of which the
    lake crosses: it exits 0 and says it is clean."""
    from snap_spark.audit import audit_job as job

    lake = str(full_lake.lake)
    lenient = tmp_path / "lenient.toml"
    lenient.write_text("[max]\nforged_signature_rate = 0.5\nimpersonation_attempts = 100\n"
                       "illegal_transitions = 100\nreplay_rate = 0.5\n")
    on_driver, by_spark = tmp_path / "on-driver", tmp_path / "by-spark"
    set_limits(monkeypatch, read_rows=DriverLimits().read_rows)
    assert main(["--lake", lake, "--out", str(on_driver), "--thresholds", str(lenient),
                 "--reverify-sample", "0.3", "--seed", "11"]) == 0
    assert "clean: no threshold crossed" in capsys.readouterr().out
    set_limits(monkeypatch, read_rows="spark")
    audit(spark, lake, str(by_spark), thresholds=job.load_thresholds(str(lenient)),
          reverify_fraction=0.3, seed=11)
    summaries = []
    for out in (on_driver, by_spark):
        summary = json.loads((out / "summary.json").read_text())
        summary.pop("generated_at")
        summaries.append(summary)
    assert summaries[0] == summaries[1]
    assert summaries[0]["reverify"]["checked"] > 100
    assert summaries[0]["alert"] is False and summaries[0]["exit_status"] == 0


def test_a_window_counted_on_the_driver_gives_what_spark_counts(
        spark: Any, full_lake: FullLake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small lake's audit counts its figures and re-verifies in the driver process
    (Spark never starts for it: ``test_a_small_lake_s_audit_starts_no_spark``); with the
    tables sent to Spark instead (``read_rows=spark``), the same audit gives the same
    summary. Here with a window that cuts every table's own time (the traffic's first
    day: the lines landed undated fall on the landing's day, outside it), once with every
    archived line inside it checked again and once without re-verification; the seeded
    sample without a window is
    test_small_tables_read_on_the_driver_give_what_spark_s_reads_give."""
    lake = str(full_lake.lake)
    days = sorted({m["event_date"] for m in rows(full_lake.lake, "messages")
                   if m["event_date"] is not None})
    assert len(days) >= 2, days
    window = Window(days[0], days[0])
    summaries = []
    for limit, again in ((DriverLimits().read_rows, True), ("spark", True),
                         (DriverLimits().read_rows, False), ("spark", False)):
        set_limits(monkeypatch, read_rows=limit)
        out = tmp_path / f"{limit}-{again}"
        summary = audit(spark, lake, str(out), window=window, reverify_all=again,
                        seed=3).summary
        summary.pop("generated_at")
        summaries.append(summary)
    driver, by_spark, driver_only_figures, by_spark_only_figures = summaries
    assert driver == by_spark
    assert driver_only_figures == by_spark_only_figures  # raw_messages counted, not read
    assert driver_only_figures["tables"] == driver["tables"]
    assert driver_only_figures["reverify"]["mode"] == "off"
    assert 0 < driver["figures"]["messages"]["total"] < len(rows(full_lake.lake, "messages"))
    assert driver["reverify"]["checked"] == driver["figures"]["messages"]["total"]
    assert driver["figures"]["tasks"]["reports"] > 0
    assert driver["figures"]["agents"]["per_identity"]


#: Runs the audit's ``main`` in a fresh interpreter, then says whether this process ever
#: started (or connected to) a Spark JVM.
NO_SPARK_PROBE = """
import json, sys
from snap_spark.audit.audit_job import main
code = main(sys.argv[1:])
from pyspark import SparkContext
print(json.dumps({"code": code, "jvm": SparkContext._gateway is not None}))
"""


def test_a_small_lake_s_audit_starts_no_spark(audited: tuple[dict[str, Any], Path],
                                              full_lake: FullLake, tmp_path: Path) -> None:
    """The audit of a lake whose tables all fit ``read_rows`` never starts Spark on a local
    master: no JVM at all when run from Python, and the same summary as the submitted
    audit (a JVM started by spark-submit, delta-spark, the same options)."""
    out = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                "PYTHONPATH": str(ROOT)})
    done = subprocess.run(
        [sys.executable, "-c", NO_SPARK_PROBE, "--master", "local[2]", "--lake",
         str(full_lake.lake), "--out", str(out), "--reverify-all", "--from", "2000-01-01",
         "--to", WINDOW_TO], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"code": 3, "jvm": False}
    assert "counted on the driver (a small lake)" in done.stderr
    submitted, _ = audited
    mine = json.loads((out / "summary.json").read_text())
    for summary in (mine, submitted):
        summary.pop("generated_at")
        summary["reverify"].pop("seed")  # drawn at random, and unused: every line is checked
    assert mine == submitted


def test_the_driver_s_sample_hash_is_spark_s_xxhash64(spark: Any) -> None:
    """:func:`snap_spark.audit.reverify.spark_xxhash64` equals Spark's own
    ``xxhash64(lit(seed), file_key, line_no)`` on keys of every length around XXH64's
    stripes (0-100 bytes, multi-byte characters), null keys and line numbers, and seeds on
    both sides of the 32-bit boundary (an ``int`` literal, then a ``long``), so a small
    lake's sample is the one Spark draws."""
    import random

    from pyspark.sql import functions as F

    from snap_spark.audit.reverify import spark_xxhash64

    rnd = random.Random(5)
    letters = "abcXYZ09-_é€😀"
    rows = [(None if i % 29 == 0 else "".join(rnd.choice(letters) for _ in range(i % 101)),
             None if i % 31 == 0 else rnd.randrange(-(1 << 40), 1 << 40)) for i in range(400)]
    frame = spark.createDataFrame(rows, "file_key string, line_no long")
    for seed in (0, 11, -5, (1 << 31) - 1, 1 << 31, -(1 << 31) - 1, (1 << 62) + 3):
        got = frame.select("file_key", "line_no", F.xxhash64(F.lit(seed), "file_key",
                                                             "line_no").alias("h")).collect()
        assert len(got) == len(rows)
        assert all(spark_xxhash64(seed, r["file_key"], r["line_no"]) == r["h"] for r in got), seed


def test_garbage_lines_are_checked_again_on_the_driver_as_spark_checks_them(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines that are not SNAP at all (not JSON, truncated, wrong types, deeply nested,
    huge, invalid UTF-8, NUL bytes, empty) landed beside real traffic: re-verifying every
    archived line on the driver checks each one again without failing, finds nothing that
    differs from what the job stored, and gives the summary the Spark way gives."""
    from snap_spark.pipeline.batch_job import run
    from snap_spark.samples.messages import SampleConfig, write_sample

    traffic = tmp_path / "traffic.jsonl"
    write_sample(SampleConfig(agents=3, messages=60, seed=8), str(traffic), tasks_path=None)
    garbage = [b"not json at all", b'{"truncated": ', b'{"message": 5}', b"[1, 2, 3]",
               b"[" * 5000 + b"]" * 5000, b'{"message": {"id": "' + b"x" * 300_000 + b'"}}',
               b'{"message": "\xff\xfe caf\xc3"}', b"\xff\xfe\x00\x01", b"nul\x00byte",
               b"", b"   ", b"null", b"true", b"1e999"]
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\n".join(garbage) + b"\n")
    lake = tmp_path / "lake"
    run(spark, [str(traffic), str(junk)], str(lake), catch_up_tasks=False)
    summaries = []
    for limit in (DriverLimits().read_rows, "spark"):
        set_limits(monkeypatch, read_rows=limit)
        summary = audit(spark, str(lake), str(tmp_path / f"out-{limit}"), reverify_all=True,
                        seed=1).summary
        summary.pop("generated_at")
        summaries.append(summary)
    driver, by_spark = summaries
    assert driver == by_spark
    landed = len(rows(lake, "raw_messages"))
    assert landed == 60 + len(garbage)
    assert driver["reverify"]["checked"] == landed
    assert driver["reverify"]["difference_count"] == 0 and driver["reverify"]["missing"] == 0
    junk_rows = [m for m in rows(lake, "messages") if m["source_file"].endswith("junk.jsonl")]
    assert len(junk_rows) == len(garbage)
    assert all(m["verdict"] == "rejected" and m["error_code"] for m in junk_rows)
