"""``snap-spark relay`` as a process: ready line, clean stop, LMDB persistence, refusals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from snap_spark.nostr.client import fetch_events, publish_events
from snap_spark.nostr.relay import RelaySettings, RelayThread
from tests.nostr.conftest import message_event
from tests.nostr.relays import CODE_ROOT, cli_env, start_relay_process


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snap_spark.cli", *args],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=cli_env(), cwd=CODE_ROOT)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_relay_prints_its_url_and_stops_cleanly_on_a_signal(stop_signal: int) -> None:
    relay = start_relay_process()
    try:
        assert relay.ready_line == f"relay listening on {relay.url} (in memory)"
        assert fetch_events([relay.url])[0].error is None
        relay.process.send_signal(stop_signal)
        relay.process.wait(10)  # stop() would send SIGTERM to a relay still stopping
    finally:
        status, out, err = relay.stop()
    assert (status, out, err) == (0, "relay stopped\n", "")


def test_lmdb_database_keeps_events_across_restarts(tmp_path: Path, now: int) -> None:
    database = str(tmp_path / "relay-db")
    event = message_event(created_at=now)
    first = start_relay_process(database=database)
    try:
        assert first.ready_line.endswith(f"(database {database})")
        [outcome] = publish_events(first.url, [json.dumps(event)])
        assert outcome.accepted, outcome
    finally:
        assert first.stop()[0] == 0
    second = start_relay_process(database=database)
    try:
        [fetch] = fetch_events([second.url])
        assert fetch.error is None
        assert [json.loads(e.event_json) for e in fetch.events] == [event]
    finally:
        assert second.stop()[0] == 0


def test_a_port_in_use_is_one_line_and_exit_status_1() -> None:
    relay = start_relay_process()
    try:
        proc = run_cli("relay", "--port", str(relay.port))
    finally:
        relay.stop()
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"snap-spark relay: cannot listen on 127.0.0.1 port {relay.port}: "
                           "Address already in use (os error 98)\n")


@pytest.mark.parametrize(("args", "status", "message"), [
    (["--port", "70000"], 2, "--port must be 0-65535"),
    (["--port", "1", "--notes-per-minute", "0"], 2, "--notes-per-minute must be"),
    (["--port", "0", "--host", "localhost"], 1, "bad host 'localhost'"),
])
def test_bad_relay_options(args: list[str], status: int, message: str) -> None:
    proc = run_cli("relay", *args)
    assert proc.returncode == status and message in proc.stderr, proc.stderr


def test_port_0_picks_a_free_port() -> None:
    with RelayThread(RelaySettings(port=0)) as url:
        assert not url.endswith(":0") and fetch_events([url])[0].error is None


def test_an_in_process_relay_with_a_database_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="its own process"):
        RelayThread(RelaySettings(database=str(tmp_path)))


def test_nostr_sdks_rate_limit_is_lifted_unless_asked_for(now: int) -> None:
    events = [json.dumps(message_event(created_at=now, content=str(i))) for i in range(70)]
    with RelayThread() as url:
        assert all(o.accepted for o in publish_events(url, events))
    with RelayThread(RelaySettings(notes_per_minute=60)) as url:
        outcomes = publish_events(url, events)
    assert [o.accepted for o in outcomes] == [True] * 60 + [False] * 10
    assert outcomes[-1].message == "rate-limited: slow down"
