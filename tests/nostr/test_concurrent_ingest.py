"""Two Nostr writers on one lake at once leave the Nostr tables of one sequential run.

Each archive holds only some of the cards of every identity (the standing card and which
cards are ``superseded`` are only right when the other archive's cards are seen), and a third
of the other events are in both (their relays and origins grow from both). The race is
forced, in one process: writer A runs in a thread and is stopped just before its first
commit, with every decision taken; writer B runs meanwhile. Without the commit lease around
the Nostr tables, B commits and A then overwrites B's rows with a decision that never saw
them; with it, B waits for A and decides against A's rows. The second test runs the live
stream (a job process, against a relay process) and an archive ingest at once, unforced.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from snap_spark.files import storage
from snap_spark.lake import lease
from snap_spark.nostr import ingest as ingest_module
from snap_spark.nostr.ingest import IngestResult, ingest
from snap_spark.nostr.lines import event_from_line
from snap_spark.nostr.stored import Keyring
from snap_spark.protocol.nostr import CARD_KIND
from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample
from tests.lake.helpers import delta_rows, use_backend

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: Columns that name the run, not what was decided.
PER_RUN = ("ingest_id", "ingest_time")
KEYS = {"nostr_events": "event_key", "agent_card_history": "card_key",
        "agent_cards": "identity"}


def _split(events: Path, first: Path, second: Path) -> int:
    """Write two overlapping archives of ``events``: the cards of each identity alternate
    between them (the first of each in both), every third other line is in both. Returns how
    many identities have cards in both archives but not all of them in either."""
    cards: dict[str, list[bytes]] = {}
    a: list[bytes] = []
    b: list[bytes] = []
    for n, line in enumerate(events.read_bytes().splitlines(keepends=True)):
        found = event_from_line(line.rstrip(b"\n"))
        event = found.event
        if event is not None and event.get("kind") == CARD_KIND:
            identity = next((t[1] for t in event.get("tags") or []
                             if len(t) > 1 and t[0] == "d"), "")
            cards.setdefault(str(identity), []).append(line)
            continue
        if n % 3 != 2:
            a.append(line)
        if n % 3 != 0:
            b.append(line)
    split = 0
    for lines in cards.values():
        for i, line in enumerate(lines):
            if i == 0 or i % 2 == 1:
                a.append(line)
            if i == 0 or i % 2 == 0:
                b.append(line)
        split += len(lines) >= 3
    first.write_bytes(b"".join(a))
    second.write_bytes(b"".join(b))
    return split


def _tables(lake: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The three Nostr tables by key, without the per-run columns and the lake's path."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, key in KEYS.items():
        rows = delta_rows(lake / name)
        by_key = {}
        for row in rows:
            for column in PER_RUN:
                row.pop(column, None)
            if isinstance(row.get("error_detail"), str):  # a 2006 names the earlier copy
                row["error_detail"] = row["error_detail"].replace(str(lake), "LAKE")
            by_key[row[key]] = row
        assert len(by_key) == len(rows), f"{name}: a key twice"
        out[name] = by_key
    return out


def test_two_archive_ingests_at_once_equal_one_sequential_run(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stem = str(tmp_path / "s")
    write_nostr_sample(NostrSampleConfig(cards=40, messages=60, well_known=4, seed=11), stem)
    paths = output_paths(stem)
    keyring = Keyring.load(paths["keyring"])
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert _split(Path(paths["events"]), first, second) >= 3

    def run_a_then_b(lake: Path) -> None:
        ingest(spark, str(lake), inputs=[str(first)], keyring=keyring)
        ingest(spark, str(lake), inputs=[str(second)], keyring=keyring)

    with use_backend(spark, "delta-rs"):
        sequential = tmp_path / "sequential"
        run_a_then_b(sequential)
        expected = _tables(sequential)

        together = tmp_path / "together"
        lake_key = storage.normalize(str(together))
        reached, go, b_waits = threading.Event(), threading.Event(), threading.Event()
        real_replace, real_acquire = ingest_module._replace, lease._acquire

        def replace(*args: Any, **kwargs: Any) -> Any:
            # A stops before its first commit, every row it will write decided
            if threading.current_thread().name == "writer-a" and not reached.is_set():
                reached.set()
                assert go.wait(600)
            return real_replace(*args, **kwargs)

        def acquire(*args: Any, **kwargs: Any) -> Any:
            # B asks for the lease while A holds it: B waits for A (the fix)
            if threading.current_thread().name == "writer-b" and any(
                    lake == lake_key and ident != threading.get_ident()
                    for lake, ident in lease._HELD):
                b_waits.set()
            return real_acquire(*args, **kwargs)

        monkeypatch.setattr(ingest_module, "_replace", replace)
        monkeypatch.setattr(lease, "_acquire", acquire)
        outcome: dict[str, Any] = {}

        def writer(name: str, archive: Path) -> threading.Thread:
            def body() -> None:
                try:
                    outcome[name] = ingest(spark, str(together), inputs=[str(archive)],
                                           keyring=keyring)
                except BaseException as error:  # re-raised in the test's thread
                    outcome[name] = error
                    reached.set()

            thread = threading.Thread(target=body, name=name)
            thread.start()
            return thread

        a = writer("writer-a", first)
        assert reached.wait(300), "writer A never reached its commit"
        b = writer("writer-b", second)
        deadline = time.monotonic() + 300
        while b.is_alive() and not b_waits.is_set() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert b_waits.is_set() or not b.is_alive(), "writer B neither finished nor waited"
        go.set()
        a.join(600)
        b.join(600)
        assert not a.is_alive() and not b.is_alive()
        for name in ("writer-a", "writer-b"):
            if isinstance(outcome.get(name), BaseException):
                raise outcome[name]
            assert isinstance(outcome[name], IngestResult)
        got = _tables(together)

    assert b_waits.is_set(), "writer B never waited for A's commit lease"
    superseded = [r for r in expected["nostr_events"].values() if r["verdict"] == "superseded"]
    assert len(superseded) >= 3
    assert sum(1 for r in expected["nostr_events"].values() if len(r["origins"]) > 1) >= 5
    for name in KEYS:
        assert set(got[name]) == set(expected[name]), name
        differ = sorted(k for k in expected[name] if got[name][k] != expected[name][k])
        assert not differ, (name, len(differ), json.dumps(
            {c: [expected[name][differ[0]][c], got[name][differ[0]][c]]
             for c in expected[name][differ[0]]
             if expected[name][differ[0]][c] != got[name][differ[0]][c]}, default=str))


@pytest.mark.relay
def test_the_live_stream_and_an_archive_ingest_at_once_equal_one_sequential_run(
        spark: Any, tmp_path: Path) -> None:
    # The stream lands a relay's events micro-batch by micro-batch while an archive run of
    # the whole sample (the same events and more, from another origin) lands in this
    # process. The Nostr tables and the stored messages' verdicts equal the archive of what
    # the relay took, then the sample archive, landed one after the other.
    from tests.nostr.live import (
        LiveJob,
        Published,
        job_args,
        sample_events,
        verdicts,
        wait_landed,
    )
    from tests.nostr.relays import start_relay_process

    stem = str(tmp_path / "s")
    write_nostr_sample(NostrSampleConfig(cards=16, messages=72, well_known=0, seed=13), stem)
    paths = output_paths(stem)
    keyring = Keyring.load(paths["keyring"])
    texts = sample_events(paths)
    lake, checkpoint = tmp_path / "lake", tmp_path / "ckpt"
    relay = start_relay_process()
    job: LiveJob | None = None
    try:
        published = Published()
        job = LiveJob(job_args(lake, checkpoint, [relay], paths, "--all-messages"))
        job.live(1)
        sender = threading.Thread(target=published.send, args=(relay, texts))
        sender.start()
        archived = ingest(spark, str(lake), inputs=[paths["events"]], keyring=keyring)
        sender.join(120)
        assert archived.new_events > 0
        assert len(published.accepted) > 40
        wait_landed(job, lake, published)
        assert "micro-batches:" in job.stop()
    finally:
        if job is not None and job.proc.poll() is None:
            job.kill()
        relay.stop()
    reference = tmp_path / "sequential"
    ingest(spark, str(reference), inputs=[published.archive(tmp_path / "published.jsonl")],
           keyring=keyring)
    ingest(spark, str(reference), inputs=[paths["events"]], keyring=keyring)
    got, expected = verdicts(lake), verdicts(reference)
    assert got["events"] == expected["events"]
    assert got["cards"] == expected["cards"]
    assert got["messages"] == expected["messages"]
    history = {name: {r["card_key"]: (r["verdict"], r["identity"])
                      for r in delta_rows(where / "agent_card_history")}
               for name, where in (("got", lake), ("expected", reference))}
    assert history["got"] == history["expected"]
