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
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snap_spark.nostr.client import fetch_events
from snap_spark.nostr.stored import Keyring
from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample
from tests.hold import HOLDING
from tests.nostr.live import (
    LiveJob,
    Published,
    check_equals_archive_run,
    check_no_stray_files,
    check_once,
    job_args,
    sample_events,
    wait_landed,
)
from tests.nostr.relays import RelayProcess, start_relay_process

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.relay]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    stem = str(tmp_path_factory.mktemp("nostr-live") / "s")
    write_nostr_sample(NostrSampleConfig(cards=16, messages=72, well_known=0, seed=13), stem)
    return output_paths(stem)


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
