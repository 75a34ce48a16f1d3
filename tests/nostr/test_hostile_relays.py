"""Relays that misbehave on purpose, against the live stream's tap (in this process, to a
temporary spool). ``jobs/stream_nostr.py`` itself next to a hostile relay is checked in
``tests/nostr/test_live.py`` (its run over two relays has a hostile one beside them).

What nostr-sdk 0.45 does before the tap sees anything (pinned here, stated in
``docs/nostr.md``): it drops frames that are not JSON or not a relay message, events whose
id or signature does not verify (unless a valid event with that id came first on the same
connection: then the copy is let through as it is), and messages over 5 MB; it passes on
duplicates, kinds nobody asked for, events of about 1 MB, NOTICE, AUTH and CLOSED.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from snap_spark.nostr.client import publish_events
from snap_spark.nostr.ingest import check_copy
from snap_spark.nostr.spool import SpoolWriter, read_lines
from snap_spark.nostr.tap import RelayTap
from tests.nostr.conftest import card_event, message_event
from tests.nostr.relays import SUB, RelayProcess, ScriptedRelay


def ev(event: dict[str, Any]) -> str:
    """A raw ``EVENT`` frame of ``event`` on the ``REQ``'s subscription."""
    return f'["EVENT",{SUB},{json.dumps(event)}]'


class Tap:
    """A :class:`RelayTap` running in this process, writing to a spool of its own."""

    def __init__(self, relays: Sequence[str], **options: Any) -> None:
        self.folder = tempfile.mkdtemp(prefix="hostile-spool-")
        self.spool = SpoolWriter(self.folder)
        options.setdefault("max_backoff", 30.0)
        self.tap = RelayTap(list(relays), self.spool, **options)
        self.tap.start()

    def status(self, url: str) -> dict[str, Any]:
        return next(s for s in self.tap.status() if s["relay"] == url)

    def wait(self, test: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not test():
            assert time.monotonic() < deadline, f"timed out: {self.tap.status()}"
            time.sleep(0.05)

    def events(self) -> list[dict[str, Any]]:
        """The events spooled so far, in order."""
        return [json.loads(line)["event"] for _, line in read_lines(self.folder, 0).lines]

    def checked(self) -> list[dict[str, Any]]:
        """Each spooled line as the stream's ingest checks it."""
        return [check_copy(line, f"spool:{pos}")
                for pos, line in read_lines(self.folder, 0).lines]

    def stop(self) -> float:
        """Stop the tap; the seconds it took."""
        started = time.monotonic()
        self.tap.stop()
        took = time.monotonic() - started
        assert self.tap._thread is not None and not self.tap._thread.is_alive()
        self.spool.close()
        return took


@pytest.fixture
def taps() -> Iterator[list[Tap]]:
    started: list[Tap] = []
    yield started
    for tap in started:
        if tap.tap._thread is not None and tap.tap._thread.is_alive():
            tap.stop()


def tap_lines(err: str, url: str) -> list[str]:
    return [line for line in err.splitlines() if f"tap: relay {url}:" in line]


def test_junk_frames_are_dropped_and_big_and_unrequested_events_spooled(
        taps: list[Tap], now: int) -> None:
    genuine = message_event(created_at=now, content="genuine")
    big = message_event(created_at=now, content="x" * (1 << 20))  # about 1 MB
    other_kind = message_event(created_at=now, content="a note", kind=1)
    huge = message_event(created_at=now, content="y" * (6 << 20))  # over nostr-sdk's 5 MB
    frames = ["not json", "[", '["EVENT"]', '["WHAT",1]', '{"a":1}', "\u00e9\u00e8",
              ev(big), ev(other_kind), ev(huge), '["EVENT",' + SUB + ',{"id":"short"}]',
              ev(genuine)]
    with ScriptedRelay("serve", frames=frames) as url:
        tap = Tap([url])
        taps.append(tap)
        assert tap.tap.wait_connected(20), tap.tap.status()
        tap.stop()
    status = tap.status(url)
    assert status["losses"] == 0 and status["connects"] == 1, status
    spooled = tap.events()
    assert {e["id"] for e in spooled} == {genuine["id"], big["id"], other_kind["id"]}
    assert next(e for e in spooled if e["id"] == big["id"]) == big  # whole, unchanged
    # the ingest's checks of each line: all real events (kind 1 becomes `malformed` when
    # it lands, as a kind that is not SNAP's)
    assert {row["verdict"] for row in tap.checked()} == {"ok"}


def test_duplicates_and_forged_copies_reach_the_spool_as_sent(
        taps: list[Tap], now: int) -> None:
    genuine = message_event(created_at=now, content="genuine")
    bad_sig = {**genuine, "sig": "cd" * 64}
    changed = {**genuine, "content": "changed, id kept"}
    forged_new = {**message_event(created_at=now, content="never valid"), "sig": "ab" * 64}
    frames = [ev(forged_new), ev(genuine), ev(genuine), ev(bad_sig), ev(changed)]
    with ScriptedRelay("serve", frames=frames) as url:
        tap = Tap([url])
        taps.append(tap)
        assert tap.tap.wait_connected(20), tap.tap.status()
        tap.stop()
    checked = tap.checked()
    by_verdict = Counter(row["verdict"] for row in checked)
    # every REQ of the connection got the frames: each copy is spooled as often as it came
    assert by_verdict["ok"] == 2 * by_verdict["bad_event_sig"] > 0, by_verdict
    assert by_verdict["bad_event_sig"] == by_verdict["bad_event_id"], by_verdict
    assert set(by_verdict) == {"ok", "bad_event_sig", "bad_event_id"}
    # one event id, three distinct texts (the ingest keys forged copies by their bytes)
    assert {row["event_id"] for row in checked} == {genuine["id"]}
    assert len({row["line_key"] for row in checked if row["verdict"] != "ok"}) >= 2
    # nostr-sdk dropped the forged event whose id it had never seen valid
    assert forged_new["id"] not in {e["id"] for e in tap.events()}


def test_notice_auth_and_closed_backlog_give_one_line_each_per_connection(
        taps: list[Tap], now: int, capsys: pytest.CaptureFixture[str]) -> None:
    genuine = card_event(created_at=now)
    frames = (['["NOTICE","slow down\\nplease"]'] * 30 + ['["AUTH","challenge-1"]'] * 10
              + [ev(genuine)])
    with ScriptedRelay("close_subscription", frames=frames) as closing, \
            ScriptedRelay("serve", frames=frames) as noisy:
        tap = Tap([closing, noisy])
        taps.append(tap)
        tap.wait(lambda: tap.status(noisy)["backlog_done"]
                 and tap.status(closing)["connects"] >= 2)
        tap.stop()
    err = capsys.readouterr().err
    noisy_lines = tap_lines(err, noisy)
    assert len([x for x in noisy_lines if "notice: slow down please" in x]) == 1, noisy_lines
    assert len([x for x in noisy_lines if "asks to authenticate" in x]) == 1, noisy_lines
    # the repeats are counted in one line when the connection ends
    [summary] = [x for x in noisy_lines if "repeated on this connection" in x]
    counts = dict(re.findall(r"(\w+) x(\d+)", summary))
    assert int(counts["notice"]) >= 30 and int(counts["auth"]) >= 10, summary
    assert len(noisy_lines) == 3, noisy_lines
    status = tap.status(noisy)
    assert status["losses"] == 0
    assert status["complaints"]["notice"] == int(counts["notice"]) + 1
    assert genuine["id"] in {e["id"] for e in tap.events()}
    # a relay that closes the live subscription: at most one line per kind per connection
    closing_status = tap.status(closing)
    connections = closing_status["connects"]
    # (read after the stop: the last connection either lost its subscription, or was
    # connected again, which clears the error, and then ended by the stop without one)
    assert closing_status["losses"] >= 1, closing_status
    assert not closing_status["connected"], closing_status
    assert closing_status["error"] is None or str(closing_status["error"]).startswith(
        "relay closed the live subscription"), closing_status
    assert len(tap_lines(err, closing)) <= 3 * connections, tap_lines(err, closing)


def test_a_relay_closing_the_live_subscription_is_retried_with_backoff(
        taps: list[Tap]) -> None:
    """A relay that closes every subscription is tried again after waits of 1, then 2 s (a
    doubling backoff, no spinning), and each connection is counted lost."""
    changes: list[tuple[str, float]] = []  # each change the tap reports, and when

    def note(status: dict[str, Any]) -> None:
        changes.append((status["change"], time.monotonic()))

    with ScriptedRelay("close_subscription") as url:
        tap = Tap([url], on_change=note)
        taps.append(tap)
        tap.wait(lambda: tap.status(url)["losses"] >= 3)
        tap.stop()
    status = tap.status(url)
    # a fourth try would come 4 s after the third loss: the stop came first
    assert status["connects"] == status["losses"] == 3, status
    connected = [at for change, at in changes if change == "connected"]
    lost = [at for change, at in changes if change == "lost"]
    assert len(connected) == 3 and len(lost) >= 2, changes
    # from each loss to the next connection: at least the wait (1 s, then 2 s)
    assert connected[1] - lost[0] >= 1.0 and connected[2] - lost[1] >= 2.0, changes


def test_silent_relays_hold_up_neither_the_others_nor_stop(
        taps: list[Tap], relay: RelayProcess, now: int) -> None:
    """A relay that never says a word after the subscriptions and one that never answers
    the handshake: the good relay next to them delivers; each is left after its second
    (1 s) and tried again only after the backoff (no spinning); the stop is prompt."""
    event = message_event(created_at=now, content="to the good relay")
    changes: list[tuple[str, str, float]] = []  # relay, change, when

    def note(status: dict[str, Any]) -> None:
        changes.append((status["relay"], status["change"], time.monotonic()))

    with ScriptedRelay("silent") as silent, ScriptedRelay("no_handshake") as mute:
        tap = Tap([silent, mute, relay.url], connect_seconds=1.0, answer_seconds=1.0,
                  on_change=note)
        taps.append(tap)
        tap.wait(lambda: tap.status(relay.url)["backlog_done"])
        [outcome] = publish_events(relay.url, [json.dumps(event)], timeout=10)
        assert outcome.accepted
        tap.wait(lambda: event["id"] in {e["id"] for e in tap.events()}, timeout=10)
        # both silent relays are left and tried again, with backoff
        tap.wait(lambda: tap.status(silent)["complaints"].get("silent", 0) >= 2
                 and len([c for r, c, _ in changes if r == mute and c == "failed"]) >= 2)
        took = tap.stop()
    assert took < 3.0, took
    silent_status, mute_status = tap.status(silent), tap.status(mute)
    assert silent_status["complaints"]["silent"] >= 2, silent_status
    assert silent_status["error"] == "no answer within 1s after the subscriptions"
    assert mute_status["connects"] == 0
    assert mute_status["error"].startswith("cannot connect: no answer within"), mute_status
    # tried again only after the backoff (1 s) from the moment each was left
    seen = [(c, at) for r, c, at in changes if r == silent]
    connected = [at for c, at in seen if c == "connected"]
    lost = [at for c, at in seen if c == "lost"]
    assert len(connected) >= 2 and lost and connected[1] - lost[0] >= 1.0, seen
    failed = [at for r, c, at in changes if r == mute and c == "failed"]
    # (a try waits 1 s for the handshake, after the 1 s backoff)
    assert failed[1] - failed[0] >= 2.0, failed
    good = tap.status(relay.url)
    assert good["losses"] == 0 and good["deliveries"] == 1, good


def test_a_stop_while_connecting_to_a_mute_relay_is_prompt(taps: list[Tap]) -> None:
    mute_relay = ScriptedRelay("no_handshake")
    with mute_relay as mute:
        tap = Tap([mute])  # the default: 10 s to connect
        taps.append(tap)
        tap.wait(lambda: mute_relay.connections >= 1)  # the handshake is under way
        assert tap.stop() < 2.0


def test_a_relay_that_never_ends_its_backlog_still_delivers_live(
        taps: list[Tap], now: int) -> None:
    stored = card_event(created_at=now - 60, name="stored")
    live = card_event(created_at=now, name="live")
    relay = ScriptedRelay("no_eose", events=[json.dumps(stored)])
    with relay as url:
        tap = Tap([url], answer_seconds=1.0)
        taps.append(tap)
        tap.wait(lambda: stored["id"] in {e["id"] for e in tap.events()})
        time.sleep(1.5)  # past answer_seconds: the relay answered, it is not left
        assert relay.push(json.dumps(live)) == 1
        tap.wait(lambda: live["id"] in {e["id"] for e in tap.events()}, timeout=5)
        status = tap.status(url)
        tap.stop()
    assert status["connected"] and not status["backlog_done"], status
    assert status["connects"] == 1 and status["losses"] == 0, status
    assert status["complaints"] == {}
