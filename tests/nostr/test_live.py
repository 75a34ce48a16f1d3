"""jobs/stream_nostr.py end to end: real relay processes, the stream as a separate process
(``python jobs/stream_nostr.py``, delta-rs), events published while it runs.

What is checked against what:

- every event a relay accepted while the tap was connected is in ``nostr_events`` once,
  naming every relay that delivered it, and every inner message is in ``messages`` once
  (one ``raw_messages`` line per ``nostr:<event id>``);
- the tables equal an archive run (``ingest`` in this process) over an archive the test
  writes itself from what it published (each accepted event, once per relay that took it):
  same verdicts and codes per event, same ``agent_cards``, same ``messages`` verdicts;
- SIGKILL of the stream's process group at three moments (while the stored messages
  land, between the Nostr tables' commits, while the tap writes), each followed by a
  restart on the same checkpoint, changes none of that, and leaves no Parquet file outside
  a table's log;
- a relay killed mid-stream and started again on the same port and database: the events
  it stored while the tap was away arrive after the reconnect, with no duplicate.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote

import pytest

from snap_spark.nostr.client import fetch_events, publish_events
from snap_spark.nostr.ingest import ingest
from snap_spark.nostr.lines import event_from_line
from snap_spark.nostr.stored import Keyring
from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample
from tests.hold import HOLDING
from tests.jobs import logged_files, parquet_files, start_job
from tests.lake.helpers import delta_rows
from tests.nostr.relays import RelayProcess, start_relay_process

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.relay]

TABLES = ("nostr_events", "agent_card_history", "agent_cards", "messages", "raw_messages")
SNAP_KINDS = (31337, 4339, 21339)
#: Seconds a live stream gets to land what was published.
LAND_SECONDS = 120.0


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    stem = str(tmp_path_factory.mktemp("nostr-live") / "s")
    write_nostr_sample(NostrSampleConfig(cards=16, messages=72, well_known=0, seed=13), stem)
    return output_paths(stem)


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

    #: every job started, so that a failing test leaves none running (:func:`no_job_left`)
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


@pytest.fixture(autouse=True)
def no_job_left() -> Iterator[None]:
    """Kill whatever stream a test left running (a failed assertion before its stop)."""
    yield
    while LiveJob.started:
        job = LiveJob.started.pop()
        if job.proc.poll() is None:
            job.kill()


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


@pytest.fixture
def two_relays() -> Iterator[list[RelayProcess]]:
    relays = [start_relay_process(), start_relay_process()]
    try:
        yield relays
    finally:
        for relay in relays:
            relay.stop()


def test_events_over_two_relays_land_once_as_an_archive_run_gives(
        spark: Any, tmp_path: Path, sample: dict[str, str],
        two_relays: list[RelayProcess]) -> None:
    texts = sample_events(sample)
    lake, checkpoint = tmp_path / "lake", tmp_path / "ckpt"
    published = Published()
    # some events are on a relay before the stream starts: its backlog brings them
    first, second = two_relays
    published.send(first, texts[:10])
    # every SNAP message, also those to keys the keyring does not hold (encrypted)
    job = LiveJob(job_args(lake, checkpoint, two_relays, sample, "--all-messages"))
    job.live(2)
    half = len(texts) // 2
    published.send(first, texts[10:half])
    published.send(second, texts[half:])
    published.send(second, texts[10:half:4])  # also on the other relay
    assert len(published.accepted) > 40  # the relays refuse forged and expired events
    wait_landed(job, lake, published)
    summary = job.stop()
    assert "micro-batches:" in summary
    check_once(lake, published)
    check_no_stray_files(lake)
    check_equals_archive_run(spark, lake, published, sample, tmp_path)
    progress = [json.loads(line) for line in
                (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert sum(p["copies"] for p in progress) >= sum(
        len(r) for r in published.accepted.values())
    assert all(set(p["relays_connected"]) == {first.url, second.url} for p in progress)


def test_killed_three_times_and_restarted_every_event_lands_once(
        spark: Any, tmp_path: Path, sample: dict[str, str],
        two_relays: list[RelayProcess]) -> None:
    texts = sample_events(sample)
    chunks = [texts[i::4] for i in range(4)]
    lake, checkpoint = tmp_path / "lake", tmp_path / "ckpt"
    args = job_args(lake, checkpoint, two_relays, sample)
    mine = set(Keyring.load(sample["keyring"]).recipients())
    published = Published()
    first, second = two_relays
    # 1 and 2: held still right after a log line of the commit, then killed
    for chunk, hold in ((chunks[0], "stage 3/4 raw_messages"),
                        (chunks[1], "agent_card_history: +")):
        job = LiveJob(args, hold_at=hold)
        job.live(2)
        published.send(first, chunk[: len(chunk) // 2])
        published.send(second, chunk[len(chunk) // 2:])
        job.wait_for(HOLDING)
        job.kill()
    # 3: killed while the tap writes what a relay sends. An ephemeral event that reaches
    # no live subscriber is gone for good, so those are published first, while the tap is
    # surely up; the stored kinds then come back through the backlog after the restart.
    job = LiveJob(args)
    job.live(2)
    ephemeral = [t for t in chunks[2] if json.loads(t)["kind"] == 21339]
    published.send(first, ephemeral)
    time.sleep(1.0)
    sender = threading.Thread(target=published.send,
                              args=(first, [t for t in chunks[2] if t not in ephemeral]))
    sender.start()
    time.sleep(0.05)
    job.kill()
    sender.join()
    # the last run goes on to the end
    job = LiveJob(args)
    job.live(2)
    published.send(second, chunks[3])
    wait_landed(job, lake, published, mine)
    job.stop()
    check_once(lake, published, mine)
    check_no_stray_files(lake)
    check_equals_archive_run(spark, lake, published, sample, tmp_path, mine)


def test_a_relay_restarted_mid_stream_gives_its_stored_events_after_the_reconnect(
        spark: Any, tmp_path: Path, sample: dict[str, str]) -> None:
    texts = sample_events(sample)
    database = tmp_path / "relay-db"
    relay = start_relay_process(database=str(database))
    port = relay.port
    lake, checkpoint = tmp_path / "lake", tmp_path / "ckpt"
    mine = set(Keyring.load(sample["keyring"]).recipients())
    published = Published()
    # the sample's events span more than the default overlap of 600 s: an overlap that
    # takes in all of them makes every stored event one the reconnect's backlog asks for
    job = LiveJob(job_args(lake, checkpoint, [relay], sample, "--overlap", "100000000"))
    try:
        job.live(1)
        published.send(relay, texts[:30])
        wait_landed(job, lake, published, mine)
        relay.stop()
        job.wait_for("connection lost")
        # back on the same port and database; what is published before the tap is back
        # is stored, and the reconnect's backlog brings it
        # events the relay stores while the tap cannot reach it (published through another
        # port on the same database): only the reconnect's backlog can bring them
        aside = start_relay_process(database=str(database))
        stored = [t for t in texts[30:] if json.loads(t)["kind"] != 21339]
        while_away = Published()
        while_away.send(aside, stored)
        aside.stop()
        relay = start_relay_process(database=str(database), port=port)
        # what the relay still holds of them (it keeps only the newest card of a key and
        # identity): asked of the relay itself, apart from the stream
        held = {json.loads(e.event_json)["id"]
                for e in fetch_events([relay.url], timeout=20)[0].events}
        assert held
        for text, relays in while_away.accepted.items():
            if json.loads(text)["id"].lower() in held:
                published.accepted[text] = {relay.url: min(relays.values())}
        job.wait_for("stored backlog read", 2)
        published.send(relay, [t for t in texts[30:] if t not in stored])  # live again
        wait_landed(job, lake, published, mine)
        job.stop()
    finally:
        if job.proc.poll() is None:
            job.kill()
        relay.stop()
    check_once(lake, published, mine)
    check_no_stray_files(lake)
