"""A local Nostr relay (nostr-sdk's ``LocalRelay``), in memory or on an LMDB database folder.

For tests, demos and the ingestion pipeline's development: ``snap-spark relay --port 7447``
runs one until SIGTERM or SIGINT (:func:`run_relay`); :class:`RelayThread` runs one inside
the calling process (a notebook, a test) for as long as a ``with`` block.

What the relay does is nostr-sdk's. Measured with nostr-sdk 0.45.1, in memory and on LMDB
alike (``OK`` is the relay's answer to a publish):

- a forged event is refused: ``OK false "invalid: invalid event signature"``, or
  ``"invalid: invalid event ID"`` when the id is not the hash of the fields;
- a replaceable or addressable event (a kind-31337 card: per pubkey and ``d`` tag) replaces
  the one stored when it is newer, or of the same second with a lower id; an older one, or
  one of the same second with a higher id, is refused with ``OK false "error: unknown"``
  and the stored one stays. Only the current card is ever delivered, so a relay never
  shows the pipeline a ``superseded`` card it accepted first;
- an event whose NIP-40 ``expiration`` has passed is refused (``OK false "blocked: event
  is expired"``); a stored event is no longer delivered once its expiration passes;
- the same event again: ``OK true "duplicate: already have this event"``;
- ``created_at`` is not bounded: an event dated a year ahead is stored and delivered;
- a ``REQ`` without ``limit`` gets at most 500 events, newest first (the client pages
  with ``until``: :func:`snap_spark.nostr.client.fetch_events`).

Without a database folder the events live in memory (nostr-sdk's memory database, which
keeps a bounded number: 75,000 in nostr-sdk's source, not measured here) and are gone when
the relay stops; with ``--database DIR`` they are kept in LMDB files in ``DIR`` across
restarts.

One deliberate change from nostr-sdk's defaults: its relay answers ``OK false
"rate-limited: slow down"`` from the 61st event a connection publishes within a minute
(measured), which would refuse most of any archive replayed into it; here the limit is
:data:`DEFAULT_NOTES_PER_MINUTE` unless given.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, TextIO

from snap_spark.nostr._sdk import reason_of

if TYPE_CHECKING:
    from nostr_sdk import LocalRelay

#: Events a connection may publish per minute (nostr-sdk's relay allows 60): effectively
#: unlimited (the largest value nostr-sdk takes).
DEFAULT_NOTES_PER_MINUTE: Final = 2**32 - 1
#: Subscriptions a connection may hold open at once (nostr-sdk's default).
MAX_SUBSCRIPTIONS: Final = 500


class RelayError(RuntimeError):
    """The relay could not start (address in use, bad address, database not openable)."""


@dataclass(frozen=True)
class RelaySettings:
    """Where and how a local relay runs.

    Attributes:
        host: IP address to listen on (an address, not a host name).
        port: TCP port; 0 picks a free one (see :func:`free_port`).
        database: folder of an LMDB database (created when missing), or ``None`` to keep
            events in memory.
        notes_per_minute: events one connection may publish per minute.
    """

    host: str = "127.0.0.1"
    port: int = 0
    database: str | None = None
    notes_per_minute: int = DEFAULT_NOTES_PER_MINUTE

    def resolved(self) -> RelaySettings:
        """These settings with port 0 replaced by a free port of ``host``."""
        if self.port != 0:
            return self
        return RelaySettings(self.host, free_port(self.host), self.database,
                             self.notes_per_minute)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port of ``host`` nothing listens on right now.

    The port is only free when asked: another process may take it before the relay binds
    it (then the relay fails with "address in use"; start it again).

    Examples:
        >>> 0 < free_port() < 65536
        True
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def relay_url(host: str, port: int) -> str:
    """The ``ws://`` URL of a relay listening on ``host`` and ``port``.

    Examples:
        >>> relay_url("127.0.0.1", 7447), relay_url("::1", 7447)
        ('ws://127.0.0.1:7447', 'ws://[::1]:7447')
    """
    return f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}"


async def start_relay(settings: RelaySettings) -> tuple[LocalRelay, str]:
    """Start a relay listening on ``settings`` (port 0 not allowed here); return it and its URL.

    The relay serves from nostr-sdk's own threads until ``relay.shutdown()`` or until the
    returned object is dropped; the calling event loop only has to stay alive when the
    relay has an LMDB database (its callbacks run on that loop).

    Raises:
        RelayError: the address is in use or not an IP address of this host, the port is
            out of range, or the database folder cannot be opened.
    """
    from nostr_sdk import LocalRelayBuilder, NostrLmdb, RateLimit
    from nostr_sdk.nostr_sdk import uniffi_set_event_loop

    if not 0 < settings.port < 65536:
        raise RelayError(f"port must be 1-65535, not {settings.port}")
    # nostr-sdk's generated constructors lack a return annotation (no-untyped-call).
    builder = (
        LocalRelayBuilder()  # type: ignore[no-untyped-call]
        .port(settings.port)
        .rate_limit(RateLimit(max_reqs=MAX_SUBSCRIPTIONS,
                              notes_per_minute=settings.notes_per_minute))
    )
    try:
        builder = builder.addr(settings.host)
    except Exception as exc:  # nostr-sdk raises its own NostrSdkError subclasses
        raise RelayError(f"bad host {settings.host!r}: {reason_of(exc)}") from None
    if settings.database is not None:
        try:
            os.makedirs(settings.database, exist_ok=True)
            # The LMDB store calls back into Python on this loop; without naming the loop
            # nostr-sdk finds none from its own threads and every publish times out.
            uniffi_set_event_loop(asyncio.get_running_loop())  # type: ignore[arg-type]
            database = await NostrLmdb.open(settings.database)
        except Exception as exc:
            raise RelayError(
                f"cannot open database {settings.database}: {reason_of(exc)}"
            ) from None
        builder = builder.database(database)
    relay = builder.build()
    try:
        await relay.run()
    except Exception as exc:
        raise RelayError(
            f"cannot listen on {settings.host} port {settings.port}: {reason_of(exc)}"
        ) from None
    return relay, relay_url(settings.host, settings.port)


async def serve_relay(
    settings: RelaySettings,
    stop: asyncio.Event,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Run a relay until ``stop`` is set; call ``on_ready(url)`` once it accepts connections.

    Raises:
        RelayError: as :func:`start_relay`.
    """
    try:
        relay, url = await start_relay(settings.resolved())
        try:
            if on_ready is not None:
                on_ready(url)
            await stop.wait()
        finally:
            relay.shutdown()
            del relay  # the last reference: nostr-sdk drops its threads' handles now
            if settings.database is not None:
                await _database_released()
    finally:
        if settings.database is not None:
            _forget_event_loop()


#: Seconds a stopping relay waits for nostr-sdk to release its LMDB store.
RELEASE_SECONDS: Final = 5.0


async def _database_released() -> None:
    """Wait, with the event loop running, until nostr-sdk has let go of the LMDB store.

    nostr-sdk's Python ``NostrLmdb`` is handed to the relay as a Python object behind a
    handle: the relay's threads call back into Python for every read and write, and release
    the handle after ``shutdown()``, a few milliseconds later. A process that exits
    before then crashes in that release (SIGSEGV at exit, in about a third of the stops
    measured); waiting for nostr-sdk's table of such handles to empty (at most
    :data:`RELEASE_SECONDS`) made 76 of 76 stops clean. The tables are nostr-sdk's private
    names: without them, wait half a second instead.
    """
    from nostr_sdk import nostr_sdk as bindings

    converter = getattr(bindings, "_UniffiFfiConverterTypeNostrDatabase", None)
    handles = [getattr(converter, "_handle_map", None),
               getattr(bindings, "_UNIFFI_FOREIGN_FUTURE_HANDLE_MAP", None)]
    if not all(hasattr(table, "__len__") for table in handles):
        await asyncio.sleep(0.5)
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RELEASE_SECONDS
    while any(len(table) for table in handles) and loop.time() < deadline:  # type: ignore[arg-type]
        await asyncio.sleep(0.01)


def _forget_event_loop() -> None:
    """Undo ``uniffi_set_event_loop``: nostr-sdk's async calls use the running loop again.

    While a loop is set, *every* nostr-sdk coroutine of the process, in any thread, has its
    futures made on that loop, so a client running on another loop would never see them
    complete; and once that loop is closed, none would.
    """
    from nostr_sdk.nostr_sdk import uniffi_set_event_loop

    uniffi_set_event_loop(None)  # type: ignore[arg-type]


def run_relay(settings: RelaySettings, out: TextIO = sys.stdout,
              err: TextIO = sys.stderr) -> int:
    """Run a relay in the foreground until SIGTERM or SIGINT; the exit status.

    Prints ``relay listening on ws://HOST:PORT`` (flushed) to ``out`` when the relay accepts
    connections, and ``relay stopped`` when it has shut down after a signal (exit status
    0). A relay that cannot start prints one line to ``err`` and gives 1.
    """

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)

        def ready(url: str) -> None:
            print(f"relay listening on {url}"
                  + (f" (database {settings.database})" if settings.database else " (in memory)"),
                  file=out, flush=True)

        await serve_relay(settings, stop, ready)

    try:
        asyncio.run(main())
    except RelayError as exc:
        print(f"snap-spark relay: {exc}", file=err, flush=True)
        return 1
    print("relay stopped", file=out, flush=True)
    return 0


class RelayThread:
    """A local relay served from a background thread of this process, for a ``with`` block.

    ``with RelayThread() as url:`` starts an in-memory relay on a free port of 127.0.0.1
    and gives its URL; leaving the block stops it and its events are gone. A relay with an
    LMDB database runs in its own process (``snap-spark relay --database DIR``): its store
    needs nostr-sdk's process-wide event loop (see :func:`start_relay`), which would take
    over the nostr-sdk calls of every other loop of this process.

    Examples:
        >>> from snap_spark.nostr.client import fetch_events
        >>> with RelayThread() as url:
        ...     [(f.url == url, f.events, f.error) for f in fetch_events([url])]
        [(True, [], None)]
    """

    def __init__(self, settings: RelaySettings | None = None, timeout: float = 30.0) -> None:
        """Settings of the relay (``settings.database`` must be ``None``); ``timeout``
        bounds its start and stop, in seconds.

        Raises:
            ValueError: ``settings.database`` is set.
        """
        if settings is not None and settings.database is not None:
            raise ValueError("a relay with a database runs in its own process: "
                             "snap-spark relay --database DIR")
        self.settings = (settings or RelaySettings()).resolved()
        self.url = relay_url(self.settings.host, self.settings.port)
        self._timeout = timeout
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    def start(self) -> str:
        """Start the relay; its URL once it accepts connections.

        Raises:
            RelayError: as :func:`start_relay`, or the relay did not start in time.
        """
        self._thread = threading.Thread(target=self._serve, name=f"relay {self.url}",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(self._timeout):
            raise RelayError(f"relay {self.url} did not start within {self._timeout:g}s")
        if self._failure is not None:
            raise self._failure
        return self.url

    def stop(self) -> None:
        """Stop the relay and wait for its thread."""
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(self._timeout)
            self._thread = None

    def _serve(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await serve_relay(self.settings, self._stop, lambda _url: self._ready.set())

        try:
            asyncio.run(main())
        except BaseException as exc:  # handed to start(), which raises it in the caller
            self._failure = exc
        finally:
            self._ready.set()

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
