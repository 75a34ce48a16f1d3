"""Fixtures for the Nostr tests: ``snap-spark relay`` running as a separate process on a
free port of 127.0.0.1 (stopped with SIGTERM, then killed, also when a test fails), the URL
of a relay that is down, and signed events.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from snap_spark.nostr.relay import free_port
from snap_spark.protocol.cards import sample_card
from snap_spark.protocol.keys import internal_pubkey, p2tr_address
from snap_spark.protocol.nostr import build_card_event, sign_event
from tests.nostr.relays import RelayProcess, start_relay_process

#: Fixed test keys (never real ones): agents A and B of the spec vectors.
PRIV_A = bytes.fromhex("0a" * 32)
PRIV_B = bytes.fromhex("0b" * 32)


@pytest.fixture
def relay() -> Iterator[RelayProcess]:
    """A fresh in-memory ``snap-spark relay`` process; ``.url`` is its ``ws://`` URL."""
    process = start_relay_process()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def down_relay_url() -> str:
    """The URL of a relay that is down: a free port of 127.0.0.1 nothing listens on."""
    return f"ws://127.0.0.1:{free_port()}"


@pytest.fixture
def now() -> int:
    return int(time.time())


def message_event(private_key: bytes = PRIV_A, *, created_at: int, content: str = "hi",
                  tags: list[list[str]] | None = None, kind: int = 4339) -> dict[str, Any]:
    """A signed event (kind 4339 by default; the content is not really encrypted)."""
    return sign_event({"created_at": created_at, "kind": kind, "tags": tags or [],
                       "content": content}, private_key, aux=bytes(32))


def card_event(private_key: bytes = PRIV_A, *, created_at: int, name: str = "Agent"
               ) -> dict[str, Any]:
    """A signed kind-31337 card of ``private_key``'s identity."""
    card = {**sample_card(p2tr_address(internal_pubkey(private_key))), "name": name}
    return build_card_event(card, private_key, created_at, aux=bytes(32))


@pytest.fixture(autouse=True)
def no_job_left() -> Iterator[None]:
    """Kill whatever ``jobs/stream_nostr.py`` a test left running (a failed assertion
    before its stop): :class:`tests.nostr.live.LiveJob` remembers every one it started."""
    yield
    from tests.nostr.live import LiveJob

    while LiveJob.started:
        job = LiveJob.started.pop()
        if job.proc.poll() is None:
            job.kill()
