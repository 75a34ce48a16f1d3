"""Helpers of the live Nostr stream's tests: ``jobs/stream_nostr.py`` run as a process in
its own group (:class:`LiveJob`), what a test published and which relays took it
(:class:`Published`), and the checks the tests share (each event once, no stray file, equal
to an archive run).

Every :class:`LiveJob` is remembered; the ``no_job_left`` fixture of
``tests/nostr/conftest.py`` kills whichever a test left running.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote

from snap_spark.nostr.client import publish_events
from snap_spark.nostr.ingest import ingest
from snap_spark.nostr.lines import event_from_line
from snap_spark.nostr.stored import Keyring
from tests.jobs import logged_files, parquet_files, start_job
from tests.lake.helpers import delta_rows
from tests.nostr.relays import RelayProcess

TABLES = ("nostr_events", "agent_card_history", "agent_cards", "messages", "raw_messages")
SNAP_KINDS = (31337, 4339, 21339)
#: Seconds a live stream gets to land what was published.
LAND_SECONDS = 120.0


def sample_events(paths: dict[str, str]) -> list[str]:
    """The sample's event texts (each distinct event once), in file order."""
    seen: set[str] = set()
    out = []
    with open(paths["events"], "rb") as handle:
        for line in handle:
            found = event_from_line(line)
            if found.event is None:
                continue
            text = json.dumps(found.event, separators=(",", ":"))
            if text not in seen:
                seen.add(text)
                out.append(text)
    return out


class LiveJob:
    """``jobs/stream_nostr.py`` in its own process group; its stderr is collected by a
    thread (so the pipe never fills) and can be waited on."""

    #: every job started, so that a failing test leaves none running (the ``no_job_left`` fixture)
    started: ClassVar[list[LiveJob]] = []

    def __init__(self, args: list[str], *, hold_at: str | None = None) -> None:
        self.proc = start_job("stream_nostr.py", args, hold_at=hold_at)
        LiveJob.started.append(self)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._cond:
                self.lines.append(raw.decode(errors="replace"))
                self._cond.notify_all()

    def text(self) -> str:
        with self._cond:
            return "".join(self.lines)

    def wait_for(self, text: str, count: int = 1, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(text in line for line in self.lines) < count:
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"never saw {text!r} x{count}:\n"
                                         + "".join(self.lines)[-4000:])
                self._cond.wait(min(left, 1.0))

    def live(self, relays: int) -> None:
        """Wait until the tap follows ``relays`` relays live (their backlogs read)."""
        self.wait_for("stored backlog read", relays)

    def stop(self, timeout: float = 180.0) -> str:
        """SIGTERM (the stream lands what was delivered, then exits 0); its stdout."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=timeout)
        self._reader.join(10)
        assert self.proc.returncode == 0, self.text()[-4000:]
        return out.decode()

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        self._reader.join(10)


def job_args(lake: Path, checkpoint: Path, relays: list[RelayProcess],
             paths: dict[str, str], *more: str) -> list[str]:
    out = ["--lake", str(lake), "--checkpoint", str(checkpoint), "--keyring",
           paths["keyring"], "--trigger", "processing-time=500ms", "--progress-json",
           str(checkpoint.parent / "progress.jsonl"),
           "--duration", "600",  # a stream that outlives its test stops by itself
           *more]
    for relay in relays:
        out += ["--relay", relay.url]
    return out


class Published:
    """What the test published: per event text, the relays that accepted it and when."""

    def __init__(self) -> None:
        self.accepted: dict[str, dict[str, float]] = {}  # event text -> relay -> time

    def send(self, relay: RelayProcess, texts: list[str]) -> None:
        at = time.time()
        for text, outcome in zip(texts, publish_events(relay.url, texts, timeout=20),
                                 strict=True):
            if outcome.accepted:
                self.accepted.setdefault(text, {}).setdefault(relay.url, at)

    def ids(self, recipients: set[str] | None = None) -> dict[str, set[str]]:
        """Accepted events of SNAP's kinds (the tap subscribes to no other), by id (as
        relays keep it: lower case), with their relays; with ``recipients``, SNAP messages
        only when addressed to one of them (what the tap subscribes to then)."""
        out: dict[str, set[str]] = {}
        for text, relays in self.accepted.items():
            event = json.loads(text)
            if event["kind"] not in SNAP_KINDS:
                continue  # not subscribed to
            if recipients is not None and event["kind"] in (4339, 21339) and not any(
                    tag[:1] == ["p"] and tag[1:2][0] in recipients
                    for tag in event["tags"] if len(tag) > 1):
                continue
            out.setdefault(event["id"].lower(), set()).update(relays)
        return out

    def archive(self, path: Path, recipients: set[str] | None = None) -> str:
        """An archive of every accepted event (the tap subscribes to), once per relay that
        accepted it."""
        wanted = set(self.ids(recipients))
        with open(path, "w", encoding="utf-8") as handle:
            for text, relays in self.accepted.items():
                if json.loads(text)["id"].lower() not in wanted:
                    continue
                # as relays keep and forward it: nostr-sdk's relay accepts an id in upper
                # case and stores it in lower case
                event = {**json.loads(text), "id": json.loads(text)["id"].lower()}
                for relay, at in sorted(relays.items()):
                    handle.write(json.dumps({"received_at": at, "relay": relay,
                                             "event": event}) + "\n")
        return str(path)


def wait_landed(job: LiveJob, lake: Path, published: Published,
                recipients: set[str] | None = None, timeout: float = LAND_SECONDS) -> None:
    """Wait until every accepted event (the tap subscribes to) is in ``nostr_events``."""
    deadline = time.monotonic() + timeout
    while missing := set(published.ids(recipients)) - lake_event_ids(lake):
        assert time.monotonic() < deadline and job.proc.poll() is None, (
            f"{len(missing)} events not landed, e.g. {sorted(missing)[:3]}:\n"
            + job.text()[-5000:])
        time.sleep(1.0)


def lake_event_ids(lake: Path) -> set[str]:
    if not (lake / "nostr_events" / "_delta_log").is_dir():
        return set()
    return {r["event_key"] for r in delta_rows(lake / "nostr_events",
                                               "select event_key from t")}


def verdicts(lake: Path) -> dict[str, Any]:
    """What must be equal between two lakes: per event its kind, verdict and code; the
    standing cards; per stored message its verdict and code."""
    events = {r["event_key"]: (r["kind"], r["verdict"], r["error_code"], sorted(r["relays"]))
              for r in delta_rows(lake / "nostr_events")}
    cards = sorted(json.dumps({k: v for k, v in r.items() if k != "ingest_id"},
                              sort_keys=True, default=str)
                   for r in delta_rows(lake / "agent_cards"))
    raw = {(r["file_key"], r["line_no"]): r["source"] for r in delta_rows(lake / "raw_messages")}
    messages = {raw[(r["file_key"], r["line_no"])]: (r["verdict"], r["error_code"])
                for r in delta_rows(lake / "messages")}
    return {"events": events, "cards": cards, "messages": messages}


def check_once(lake: Path, published: Published, recipients: set[str] | None = None
               ) -> None:
    """Every accepted event (the tap subscribes to) once, with every relay that took it;
    each stored message's line once in raw_messages and messages."""
    rows = delta_rows(lake / "nostr_events")
    keys = Counter(r["event_key"] for r in rows)
    assert max(keys.values()) == 1
    ids = published.ids(recipients)
    by_key = {r["event_key"]: r for r in rows}
    assert set(ids) <= set(by_key), sorted(set(ids) - set(by_key))[:5]
    for event_id, relays in ids.items():
        assert relays <= set(by_key[event_id]["relays"]), (event_id, by_key[event_id])
    sources = Counter(r["source"] for r in delta_rows(lake / "raw_messages"))
    assert sources and max(sources.values()) == 1
    landed = {r["message_source"] for r in rows if r["message_source"]}
    assert landed == {s for s in sources if s and s.startswith("nostr:")}
    assert len(delta_rows(lake / "messages")) == len(delta_rows(lake / "raw_messages"))


def ever_logged(table: Path) -> set[str]:
    """Every data file a commit of the table's log added (a later commit may have removed
    it again: a key-replacing merge rewrites files, and only a vacuum deletes them)."""
    added: set[str] = set()
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                added.add(unquote(action["add"]["path"]))
    return added


def check_no_stray_files(lake: Path) -> None:
    """Every Parquet file of a table folder is one its log added; the current ones too."""
    for name in TABLES:
        table = lake / name
        assert logged_files(table) <= parquet_files(table) <= ever_logged(table), name


def check_equals_archive_run(spark: Any, lake: Path, published: Published,
                             paths: dict[str, str], tmp: Path,
                             recipients: set[str] | None = None) -> None:
    archive_lake = tmp / "archive-lake"
    archive = published.archive(tmp / "published.jsonl", recipients)
    ingest(spark, str(archive_lake), inputs=[archive],
           keyring=Keyring.load(paths["keyring"]))
    live, archived = verdicts(lake), verdicts(archive_lake)
    assert live["events"] == archived["events"]
    assert live["cards"] == archived["cards"]
    assert live["messages"] == archived["messages"]
