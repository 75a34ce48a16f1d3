"""jobs/stream_nostr.py end to end: real relay processes, the stream as a separate process
(``python jobs/stream_nostr.py``, delta-rs), events published while it runs.

Two stories, each one module-scoped run that several tests check (a stream job is a cold
JVM and Spark start: each story starts as few as what it checks needs):

- **over two relays and a hostile one** (``--all-messages``, one job): some events are on
  a relay before the stream starts (its backlog brings them), the rest are published while
  it runs, some on both relays; next to them a scripted relay sends junk frames, NOTICE
  and AUTH floods, forged copies, a big event and a kind nobody asked for;
- **killed and restarted, then a relay restarted** (the keyring's recipients, three jobs on
  one checkpoint): SIGKILL of the stream's process group while the stored messages land,
  then between the Nostr tables' commits while the tap writes what a relay sends; the last
  run goes on to the end, and one relay (with a database) is stopped mid-stream and started
  again on the same port while the tap is away.

What is checked against what:

- every event a relay accepted while the tap was connected is in ``nostr_events`` once,
  naming every relay that delivered it, and every inner message is in ``messages`` once
  (one ``raw_messages`` line per ``nostr:<event id>``);
- the tables equal an archive run (``ingest`` in this process) over an archive the test
  writes itself from what it published (each accepted event, once per relay that took it):
  same verdicts and codes per event, same ``agent_cards``, same ``messages`` verdicts (the
  hostile relay's own events are checked apart: they are none of the archive's);
- the hostile relay's genuine event lands valid, its forged copies with their verdicts, the
  big event whole, the unrequested kind as malformed; its floods give few log lines;
- SIGKILL at those three moments (two kills: the second one while the commit is held and
  the tap is writing), each followed by a restart on the same checkpoint, changes none of
  that, and leaves no Parquet file outside a table's log;
- a relay stopped mid-stream and started again on the same port and database: the events
  it stored while the tap was away arrive after the reconnect, with no duplicate.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from snap_spark.nostr.client import fetch_events
from snap_spark.nostr.ingest import ingest
from snap_spark.nostr.spool import segments
from snap_spark.nostr.stored import Keyring
from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample
from tests.hold import HOLDING
from tests.lake.helpers import delta_rows
from tests.nostr.conftest import card_event, message_event
from tests.nostr.live import (
    LiveJob,
    Published,
    check_equals_archive_run,
    check_no_stray_files,
    check_once,
    job_args,
    lake_event_ids,
    sample_events,
    verdicts,
    wait_landed,
)
from tests.nostr.relays import SUB, RelayProcess, ScriptedRelay, start_relay_process

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.relay]

#: The ephemeral SNAP kind: a relay forwards it to the subscribers connected, stores nothing.
EPHEMERAL = 21339


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The labelled Nostr sample both stories publish (16 cards, 72 messages)."""
    stem = str(tmp_path_factory.mktemp("nostr-live") / "s")
    write_nostr_sample(NostrSampleConfig(cards=16, messages=72, well_known=0, seed=13), stem)
    return output_paths(stem)


def ev(event: dict[str, Any]) -> str:
    """A raw ``EVENT`` frame of ``event`` on the ``REQ``'s subscription."""
    return f'["EVENT",{SUB},{json.dumps(event)}]'


def spooled(checkpoint: Path) -> set[str]:
    """The ids (lower case) of the events in the complete lines of the stream's spool."""
    found = set()
    for _, path in segments(str(checkpoint / "spool")):
        for line in Path(path).read_bytes().split(b"\n")[:-1]:  # the rest: not complete
            found.add(json.loads(line)["event"]["id"].lower())
    return found


def text_ids(texts: list[str]) -> set[str]:
    """The ids (lower case) of event texts."""
    return {json.loads(t)["id"].lower() for t in texts}


def subscribed(texts: list[str], recipients: set[str]) -> set[str]:
    """The ids of those of ``texts`` the tap subscribes to (:meth:`Published.ids`'s rule:
    SNAP's kinds, messages only to ``recipients``)."""
    probe = Published()
    probe.accepted = {text: {"-": 0.0} for text in texts}
    return set(probe.ids(recipients))


# --------------------------------------------------------------------------------------
# Over two relays, next to a hostile one
# --------------------------------------------------------------------------------------


@dataclass
class TwoRelaysRun:
    """What the stream over two relays and a hostile one did, and what was published."""

    folder: Path
    lake: Path
    published: Published
    first: str
    second: str
    hostile: str
    frames: dict[str, dict[str, Any]]  # the hostile relay's events by what they are
    summary: str
    text: str  # the job's stderr


@pytest.fixture(scope="module")
def over_two_relays(sample: dict[str, str], tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[TwoRelaysRun]:
    """One stream job (``--all-messages``) over two relay processes and a scripted hostile
    relay: 10 events on the first relay before it starts, the rest published while it runs
    (half on each relay, some on both); stopped (SIGTERM) once every accepted event and the
    hostile relay's three real events landed."""
    folder = tmp_path_factory.mktemp("two-relays")
    texts = sample_events(sample)
    now = int(time.time())
    genuine = card_event(created_at=now, name="hostile relay's copy")
    frames = {
        "genuine": genuine,
        "bad_sig": {**genuine, "sig": "cd" * 64},
        "changed": {**genuine, "content": genuine["content"].replace("hostile", "forged")},
        "big": message_event(created_at=now, content="z" * (1 << 20)),
        "other_kind": message_event(created_at=now, content="not SNAP", kind=1),
    }
    raw = (["not json", '["WHAT"]'] + ['["NOTICE","rate limited"]'] * 20 + ['["AUTH","c"]'] * 5
           + [ev(frames[name]) for name in ("genuine", "genuine", "bad_sig", "changed", "big",
                                            "other_kind")])
    lake, checkpoint = folder / "lake", folder / "ckpt"
    published = Published()
    relays: list[RelayProcess] = []
    try:
        relays += [start_relay_process(), start_relay_process()]
        first, second = relays
        # some events are on a relay before the stream starts: its backlog brings them
        published.send(first, texts[:10])
        with ScriptedRelay("serve", frames=raw) as hostile:
            # every SNAP message, also those to keys the keyring does not hold (encrypted)
            job = LiveJob([*job_args(lake, checkpoint, relays, sample, "--all-messages"),
                           "--relay", hostile])
            job.live(3)
            half = len(texts) // 2
            published.send(first, texts[10:half])
            published.send(second, texts[half:])
            published.send(second, texts[10:half:4])  # also on the other relay
            assert len(published.accepted) > 40  # the relays refuse forged and expired events
            wait_landed(job, lake, published)
            extra = {frames[name]["id"] for name in ("genuine", "big", "other_kind")}
            deadline = time.monotonic() + 120
            while not extra <= lake_event_ids(lake):
                assert time.monotonic() < deadline and job.proc.poll() is None, \
                    job.text()[-4000:]
                time.sleep(0.5)
            summary = job.stop()
    finally:
        for relay in relays:
            relay.stop()
    yield TwoRelaysRun(folder, lake, published, first.url, second.url, hostile, frames,
                       summary, job.text())


def test_events_over_two_relays_land_once_as_an_archive_run_gives(
        spark: Any, sample: dict[str, str], over_two_relays: TwoRelaysRun) -> None:
    """Every event the two relays accepted lands once, naming each relay that delivered it,
    with no stray file; apart from the hostile relay's own events, the tables equal an
    archive run of what was published; every micro-batch saw both relays connected."""
    run = over_two_relays
    assert "micro-batches:" in run.summary
    check_once(run.lake, run.published)
    check_no_stray_files(run.lake)
    archive_lake = run.folder / "archive-lake"
    ingest(spark, str(archive_lake), inputs=[run.published.archive(run.folder / "p.jsonl")],
           keyring=Keyring.load(sample["keyring"]))
    live, archived = verdicts(run.lake), verdicts(archive_lake)
    # the hostile relay's events (only it sent them) are checked in the next test
    apart = {key for key, (*_, relays) in live["events"].items() if relays == [run.hostile]}
    assert apart and not apart & set(archived["events"])
    assert {k: v for k, v in live["events"].items() if k not in apart} == archived["events"]
    cards = [c for c in live["cards"] if json.loads(c)["card_key"] not in apart]
    assert len(cards) == len(live["cards"]) - 1  # the hostile relay's card stands too
    assert cards == archived["cards"]
    assert {s: v for s, v in live["messages"].items()
            if s.removeprefix("nostr:") not in apart} == archived["messages"]
    progress = [json.loads(line) for line in
                (run.folder / "progress.jsonl").read_text().splitlines()]
    assert sum(p["copies"] for p in progress) >= sum(
        len(r) for r in run.published.accepted.values())
    assert all({run.first, run.second} <= set(p["relays_connected"]) for p in progress)


def test_the_stream_lands_every_good_event_once_next_to_a_hostile_relay(
        over_two_relays: TwoRelaysRun) -> None:
    """Next to a relay that sends junk frames, floods of NOTICE and AUTH, forged copies, a
    1 MB event and a kind nobody asked for: the good relays' events land once; the hostile
    relay's genuine card valid, its forged copies as bad_event_sig and bad_event_id, the
    big event whole, the kind 1 event malformed; a notice gives at most one line per
    connection, and the junk none."""
    run = over_two_relays
    frames, hostile = run.frames, run.hostile
    check_once(run.lake, run.published)
    rows = delta_rows(run.lake / "nostr_events")
    by_key = {r["event_key"]: r for r in rows}
    genuine = frames["genuine"]["id"]
    assert by_key[genuine]["verdict"] == "valid", by_key[genuine]
    assert by_key[genuine]["relays"] == [hostile]
    # landed whole (its content is no NIP-44 text: a verdict saying so, not a lost event)
    assert by_key[frames["big"]["id"]]["verdict"] not in ("bad_event_id", "bad_event_sig")
    assert by_key[frames["other_kind"]["id"]]["verdict"] == "malformed"
    forged = {r["verdict"] for r in rows
              if r["event_id"] == genuine and r["event_key"] != genuine}
    assert forged == {"bad_event_sig", "bad_event_id"}, forged
    text = run.text
    assert len([x for x in text.splitlines() if "notice: rate limited" in x]) <= \
        text.count(f"relay {hostile}: connected"), text[-4000:]
    assert "not json" not in text


# --------------------------------------------------------------------------------------
# Killed and restarted, then a relay restarted
# --------------------------------------------------------------------------------------


@dataclass
class KilledRun:
    """What the killed and restarted stream did, and what was published."""

    folder: Path
    lake: Path
    published: Published
    mine: set[str]  # the keyring's recipients: the messages the tap subscribes to
    #: the stored events a relay was sending when the tap was killed: those in the spool
    #: at the kill, and all of them
    at_kill: set[str]
    sending: set[str]
    relay: str  # the relay stopped mid-stream and started again
    while_away: set[str]  # the ids of the events it stored while the tap was away, kept
    text: str  # the last job's stderr


@pytest.fixture(scope="module")
def killed_and_restarted(sample: dict[str, str], tmp_path_factory: pytest.TempPathFactory
                         ) -> Iterator[KilledRun]:
    """Three stream jobs on one checkpoint over two relays (the first with a database),
    each fifth of the sample published in turn: the first job held right after the stored
    messages' raw_messages commit and killed; the second held right after
    agent_card_history's commit and, while it is held, killed in the middle of a relay's
    deliveries to the tap; the last one goes on to the end, through the first relay
    stopped and started again on the same port and database (the stored fifth published
    to that database while the tap is away, the ephemeral one once it is back)."""
    folder = tmp_path_factory.mktemp("killed")
    texts = sample_events(sample)
    parts = [texts[i::5] for i in range(5)]
    lake, checkpoint = folder / "lake", folder / "ckpt"
    database = str(folder / "relay-db")
    relays = [start_relay_process(database=database), start_relay_process()]
    # the sample's events span more than the default overlap of 600 s: an overlap that takes
    # in all of them makes every stored event one a (re)connection's backlog asks for
    args = job_args(lake, checkpoint, relays, sample, "--overlap", "100000000")
    mine = set(Keyring.load(sample["keyring"]).recipients())
    published = Published()
    try:
        first, second = relays
        # 1: held still right after the raw_messages commit of the stored messages, killed
        job = LiveJob(args, hold_at="stage 3/4 raw_messages")
        job.live(2)
        published.send(first, parts[0][: len(parts[0]) // 2])
        published.send(second, parts[0][len(parts[0]) // 2:])
        job.wait_for(HOLDING)
        job.kill()
        # 2: held still right after agent_card_history's commit
        job = LiveJob(args, hold_at="agent_card_history: +")
        job.live(2)
        published.send(first, parts[1][: len(parts[1]) // 2])
        published.send(second, parts[1][len(parts[1]) // 2:])
        job.wait_for(HOLDING)
        # 2, still held: the tap goes on writing what the relays send. An ephemeral event
        # that reaches no live subscriber is gone for good, so those are published first
        # and waited for in the spool; the stored ones are then sent one by one and the job
        # killed once the first of them is in the spool, the others still on their way
        # (the stored kinds come back through the backlog after the restart)
        ephemeral = [t for t in parts[2] if json.loads(t)["kind"] == EPHEMERAL]
        published.send(first, ephemeral)
        wanted = set(published.ids(mine)) & text_ids(ephemeral)
        assert wanted
        deadline = time.monotonic() + 60
        while not wanted <= spooled(checkpoint):
            assert time.monotonic() < deadline, job.text()[-4000:]
            time.sleep(0.05)
        stored = [t for t in parts[2] if t not in ephemeral]

        def send_one_by_one() -> None:
            for text in stored:
                published.send(first, [text])
                time.sleep(0.1)

        taken = subscribed(stored, mine)
        sender = threading.Thread(target=send_one_by_one)
        sender.start()
        deadline = time.monotonic() + 60
        while not taken & spooled(checkpoint):
            assert time.monotonic() < deadline, job.text()[-4000:]
            time.sleep(0.01)
        job.kill()
        at_kill = taken & spooled(checkpoint)
        sender.join()
        sending = taken & set(published.ids(mine))
        # 3: the last run goes on to the end
        job = LiveJob(args)
        job.live(2)
        published.send(second, parts[3])
        wait_landed(job, lake, published, mine)
        # the first relay stopped mid-stream, then started again on the same port and
        # database; the events it stores while the tap cannot reach it (published through
        # another port on the same database) only the reconnect's backlog can bring
        first.stop()
        job.wait_for("connection lost")
        aside = start_relay_process(database=database)
        relays.append(aside)
        away = [t for t in parts[4] if json.loads(t)["kind"] != EPHEMERAL]
        while_away = Published()
        while_away.send(aside, away)
        aside.stop()
        relays[0] = first = start_relay_process(database=database, port=first.port)
        # what the relay still holds of them (it keeps only the newest card of a key and
        # identity): asked of the relay itself, apart from the stream
        held = {json.loads(e.event_json)["id"].lower()
                for e in fetch_events([first.url], timeout=20)[0].events}
        kept = set()
        for text, by_relay in while_away.accepted.items():
            if json.loads(text)["id"].lower() in held:
                published.accepted[text] = {first.url: min(by_relay.values())}
                kept.add(json.loads(text)["id"].lower())
        job.wait_for("stored backlog read", 3)
        published.send(first, [t for t in parts[4] if t not in away])  # live again
        wait_landed(job, lake, published, mine)
        job.stop()
    finally:
        for relay in relays:
            relay.stop()
    yield KilledRun(folder, lake, published, mine, at_kill, sending, first.url, kept,
                    job.text())


def test_killed_twice_at_three_points_and_restarted_every_event_lands_once(
        spark: Any, sample: dict[str, str], killed_and_restarted: KilledRun) -> None:
    """Killed while the stored messages land, then between the Nostr tables' commits while
    the tap was in the middle of a relay's deliveries (some in the spool, some not), then
    restarted: every accepted event the tap subscribes to lands once, no stray file is
    left, and the tables equal an archive run of what was published."""
    run = killed_and_restarted
    assert 0 < len(run.at_kill) < len(run.sending), (run.at_kill, run.sending)
    check_once(run.lake, run.published, run.mine)
    check_no_stray_files(run.lake)
    check_equals_archive_run(spark, run.lake, run.published, sample, run.folder, run.mine)


def test_a_relay_restarted_mid_stream_gives_its_stored_events_after_the_reconnect(
        killed_and_restarted: KilledRun) -> None:
    """The events a relay stored while the tap could not reach it (it was down) arrive
    after the reconnect, each once, naming that relay; no event lands twice though the
    reconnect's backlog sends every stored event again."""
    run = killed_and_restarted
    assert run.while_away
    assert "connection lost" in run.text
    assert f"relay {run.relay}: connected (connection 2)" in run.text
    rows = delta_rows(run.lake / "nostr_events")
    count = Counter(r["event_key"] for r in rows)
    relays = {r["event_key"]: r["relays"] for r in rows}
    assert all(count[i] == 1 and run.relay in relays[i] for i in run.while_away)
    check_once(run.lake, run.published, run.mine)
    check_no_stray_files(run.lake)
