"""The tap of a live relay stream: relay subscriptions written, delivery by delivery, to a spool.

:class:`RelayTap` holds one connection per relay (nostr-sdk) on a thread of its own and
appends every event a relay delivers to a :class:`~snap_spark.nostr.spool.SpoolWriter` the
moment it arrives, as an archive envelope ``{"received_at", "relay", "event"}``. The
streaming query reads the spool by position (:mod:`snap_spark.nostr.live`), so nothing a
relay sent while the tap was connected is lost when the query, or the whole process, stops.

Per relay:

- **live subscriptions** (``limit 0``: no stored events, only what is published from now
  on): agent cards (kind 31337), and SNAP messages (kinds 4339 and 21339) to the keyring's
  recipients (``#p``), or to anyone when no recipients are given;
- **the backlog of stored kinds** (31337 and 4339) since the relay's resume point minus
  ``overlap`` seconds, page by page with ``until`` (a relay answers one request with at
  most its limit, 500 on nostr-sdk's relay), opened *after* the live subscriptions, so an
  event published in between comes at least once. Ephemeral events (21339) are stored by
  no relay: only the live subscription sees them;
- **a relay that fails** (cannot connect, drops the connection, closes a live
  subscription) is reported and tried again after 1, 2, 4 ... seconds (at most
  ``max_backoff``); each new connection takes the backlog again from the newest stored
  event this tap spooled from that relay, minus ``overlap``.

The same event from several relays, or twice from one, is spooled as often as it came:
the ingest folds copies by event id (``nostr_events.relays`` names every relay).

A hostile relay costs neither a crash nor a good event (``docs/nostr.md``, *Following
relays live*, says what nostr-sdk drops before the tap sees it): every event delivered on
one of the tap's subscriptions is spooled as sent (a kind nobody asked for, a forged copy,
a duplicate: the ingest gives each its verdict); ``NOTICE``, ``AUTH`` (the tap does not
authenticate) and ``CLOSED`` of a backlog request are logged once per connection, their
repeats counted in one line when it ends; a relay that never answers the handshake
(``connect_seconds``) or says nothing at all after the subscriptions (``answer_seconds``)
is left and tried again with backoff, and :meth:`RelayTap.stop` never waits for one.

Examples:
    >>> import tempfile
    >>> from snap_spark.nostr.spool import SpoolWriter
    >>> with SpoolWriter(tempfile.mkdtemp()) as spool:
    ...     tap = RelayTap(["ws://127.0.0.1:9"], spool, max_backoff=1)
    ...     tap.start(); _ = tap.wait_connected(0.5); tap.stop()
    >>> status = tap.status()[0]
    >>> status["relay"], status["connected"], status["error"].startswith("cannot connect")
    ('ws://127.0.0.1:9', False, True)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson

from snap_spark.nostr._sdk import reason_of
from snap_spark.nostr.stored import EPHEMERAL_KIND, STORED_KIND
from snap_spark.protocol.nostr import CARD_KIND

if TYPE_CHECKING:
    from nostr_sdk import Filter

    from snap_spark.nostr.client import RelayConnection
    from snap_spark.nostr.spool import SpoolWriter

#: A connection that lasted this long (seconds) ends a streak of failures: the next try
#: after it fails waits the shortest backoff again.
HEALTHY_SECONDS: Final = 60.0
#: Seconds allowed to connect to a relay, per try.
CONNECT_SECONDS: Final = 10.0
#: Seconds a relay may take, after the subscriptions are sent, to say anything at all (an
#: event, an ``EOSE``, a ``NOTICE`` ...); one that stays silent is left and tried again.
ANSWER_SECONDS: Final = 10.0


class _Complaints:
    """What one connection's relay did wrong, each kind logged the first time only and
    counted; :meth:`summary` logs the counts of the repeats when the connection ends, so a
    relay repeating itself costs at most two log lines per kind and connection."""

    def __init__(self, url: str, totals: dict[str, int]) -> None:
        self.url = url
        self.totals = totals
        self.counts: dict[str, int] = {}

    def note(self, kind: str, text: str) -> None:
        from snap_spark.common.console import log

        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.totals[kind] = self.totals.get(kind, 0) + 1
        if self.counts[kind] == 1:
            log(f"tap: relay {self.url}: {text} (repeats are counted, not logged)")

    def summary(self) -> None:
        from snap_spark.common.console import log

        repeats = {kind: n - 1 for kind, n in self.counts.items() if n > 1}
        if repeats:
            counted = ", ".join(f"{kind} x{n}" for kind, n in sorted(repeats.items()))
            log(f"tap: relay {self.url}: repeated on this connection: {counted}")


@dataclass
class _Page:
    """One backlog request: its filter, the oldest ``created_at`` it brought, and how many
    events it brought that no earlier page of the chain had (none: the chain ends)."""

    request: Filter
    oldest: int | None = None
    new: int = 0


@dataclass
class _RelayStatus:
    url: str
    connected: bool = False
    connects: int = 0
    losses: int = 0
    deliveries: int = 0
    backlog_done: bool = False
    error: str | None = None
    #: newest ``created_at`` (not in the future) of a stored-kind event spooled from it
    newest_stored: int | None = None
    #: what the relay did wrong, by kind (``notice``, ``auth``, ``closed_backlog``,
    #: ``silent``), over every connection
    complaints: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"relay": self.url, "connected": self.connected, "connects": self.connects,
                "losses": self.losses, "deliveries": self.deliveries,
                "backlog_done": self.backlog_done, "error": self.error,
                "newest_stored": self.newest_stored, "complaints": dict(self.complaints)}


def _shown(text: object, size: int = 200) -> str:
    """A relay's text for a log line: one line, at most ``size`` characters.

    Examples:
        >>> _shown("two\\nlines"), _shown("x" * 300)[-4:]
        ('two lines', 'x...')
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= size else flat[:size] + "..."


def envelope_line(event_json: str, relay: str, received_at: float) -> bytes:
    """The spool line of one delivery: an archive envelope holding the event as sent on.

    Examples:
        >>> envelope_line('{"id":"ab"}', "ws://r", 1.5)
        b'{"received_at":1.5,"relay":"ws://r","event":{"id":"ab"}}'
    """
    return (b'{"received_at":' + orjson.dumps(received_at) + b',"relay":'
            + orjson.dumps(relay) + b',"event":' + event_json.encode("utf-8") + b"}")


class RelayTap:
    """Subscriptions to ``relays`` written to ``spool`` (see the module docstring).

    Args:
        relays: relay URLs; each distinct one is followed on its own connection.
        spool: the spool's writer (the tap never closes it).
        recipients: hex public keys whose SNAP messages to take (``#p``); ``None`` takes
            every SNAP message the relay forwards.
        since: per relay, where its stored backlog starts (unix seconds) before
            ``overlap`` is taken off; a relay missing here is read from its beginning.
        overlap: seconds taken off every resume point (relays keep events published late
            with an older ``created_at``).
        max_backoff: longest wait between two tries of a failing relay.
        on_change: called (from the tap's thread) with a relay's :meth:`status` and
            ``change``: ``connected``, ``backlog`` (its stored backlog is read), ``lost``
            (the connection failed), ``closed`` (the tap stopped) or ``failed`` (a try to
            connect failed).
        connect_seconds: seconds allowed for a try to connect (TCP and the WebSocket
            handshake).
        answer_seconds: seconds a connected relay may take to send anything at all after
            the subscriptions; one that sends nothing is left and tried again.
    """

    def __init__(self, relays: Sequence[str], spool: SpoolWriter, *,
                 recipients: Sequence[str] | None = None,
                 since: Mapping[str, int] | None = None, overlap: int = 600,
                 max_backoff: float = 30.0,
                 on_change: Callable[[dict[str, Any]], None] | None = None,
                 connect_seconds: float = CONNECT_SECONDS,
                 answer_seconds: float = ANSWER_SECONDS) -> None:
        self.relays = list(dict.fromkeys(relays))
        self.spool = spool
        self.recipients = None if recipients is None else sorted(set(recipients))
        self.since = dict(since or {})
        self.overlap = overlap
        self.max_backoff = max_backoff
        self.on_change = on_change
        self.connect_seconds = connect_seconds
        self.answer_seconds = answer_seconds
        self._status = {url: _RelayStatus(url) for url in self.relays}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._connected = threading.Condition()

    # -- control ---------------------------------------------------------------------------

    def start(self) -> None:
        """Connect to every relay, on a thread of the tap's own."""
        if self._thread is not None:
            raise RuntimeError("the tap is started already")
        self._thread = threading.Thread(target=self._run, name="snap-spark-nostr-tap",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Close every connection and end the thread (what was spooled stays spooled)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_connected(self, timeout: float) -> bool:
        """Wait until every relay is connected and its backlog read (``True``), or
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._connected:
            while not all(s.connected and s.backlog_done for s in self._status.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._connected.wait(left)
        return True

    def status(self) -> list[dict[str, Any]]:
        """Per relay: connected now, connections made and lost, deliveries spooled, its
        last error, and the newest stored-kind ``created_at`` spooled from it."""
        return [self._status[url].as_dict() for url in self.relays]

    # -- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        await asyncio.gather(*(self._follow(url) for url in self.relays))

    def _changed(self, status: _RelayStatus, change: str) -> None:
        with self._connected:
            self._connected.notify_all()
        if self.on_change is not None:
            with contextlib.suppress(Exception):
                self.on_change({**status.as_dict(), "change": change})

    async def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stop.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(min(0.1, max(deadline - time.monotonic(), 0.0)))

    async def _open(self, url: str) -> RelayConnection | None:
        """A connection to ``url``, or ``None`` when the tap stopped first (a relay that
        never answers the handshake does not hold :meth:`stop` up)."""
        from snap_spark.nostr.client import RelayConnection

        opening = asyncio.ensure_future(
            RelayConnection.open(url, time.monotonic() + self.connect_seconds))
        while not opening.done():
            await asyncio.wait({opening}, timeout=0.1)
            if self._stop.is_set() and not opening.done():
                opening.cancel()  # RelayConnection.open shuts its client down
                with contextlib.suppress(BaseException):
                    await opening
                return None
        return opening.result()

    async def _follow(self, url: str) -> None:
        from snap_spark.nostr.client import RelayProblem

        status = self._status[url]
        delay = 1.0
        while not self._stop.is_set():
            try:
                connection = await self._open(url)
                if connection is None:
                    break
            except RelayProblem as exc:
                status.error = str(exc)
                self._changed(status, "failed")
                await self._sleep(delay)
                delay = min(delay * 2, self.max_backoff)
                continue
            except Exception as exc:  # a nostr-sdk failure this module did not foresee
                status.error = f"{type(exc).__name__}: {reason_of(exc)}"
                self._changed(status, "failed")
                await self._sleep(delay)
                delay = min(delay * 2, self.max_backoff)
                continue
            status.connected, status.backlog_done = True, False
            status.connects += 1
            status.error = None
            self._changed(status, "connected")
            opened = time.monotonic()
            try:
                await self._session(connection, status)
                delay = 1.0
            except RelayProblem as exc:
                status.losses += 1
                status.error = str(exc)
            except Exception as exc:  # a nostr-sdk failure this module did not foresee
                status.losses += 1
                status.error = f"{type(exc).__name__}: {reason_of(exc)}"
            finally:
                status.connected = False
                await connection.close()
            self._changed(status, "lost" if status.error else "closed")
            if time.monotonic() - opened >= HEALTHY_SECONDS:
                delay = 1.0  # a connection that lasted: its failure is no streak
            if not self._stop.is_set():
                await self._sleep(delay)
                delay = min(delay * 2, self.max_backoff)

    def _message_filter(self, kinds: Sequence[int]) -> Filter:
        from nostr_sdk import Filter, Kind, PublicKey

        request = Filter().kinds([Kind(k) for k in kinds])  # type: ignore[no-untyped-call]
        if self.recipients is not None:
            request = request.pubkeys([PublicKey.parse(k) for k in self.recipients])
        return request

    def _backlog_filters(self, start: int | None, until: int | None) -> list[Filter]:
        from nostr_sdk import Filter, Kind, Timestamp

        cards = Filter().kinds([Kind(CARD_KIND)])  # type: ignore[no-untyped-call]
        stored = self._message_filter([STORED_KIND])
        out = []
        for request in (cards, stored):
            if start is not None:
                request = request.since(Timestamp.from_secs(start))
            if until is not None:
                request = request.until(Timestamp.from_secs(until))
            out.append(request)
        return out

    async def _session(self, connection: RelayConnection, status: _RelayStatus) -> None:
        """One connection's life: live subscriptions, the backlog page by page, then
        deliveries until the tap stops or the relay fails."""
        from nostr_sdk import Filter, Kind

        live_cards = Filter().kinds([Kind(CARD_KIND)]).limit(0)  # type: ignore[no-untyped-call]
        live_messages = self._message_filter([STORED_KIND,
                                              EPHEMERAL_KIND]).limit(0)
        complaints = _Complaints(status.url, status.complaints)
        try:
            await self._converse(connection, status, complaints, live_cards, live_messages)
        finally:
            complaints.summary()

    async def _converse(self, connection: RelayConnection, status: _RelayStatus,
                        complaints: _Complaints, live_cards: Filter,
                        live_messages: Filter) -> None:
        from nostr_sdk import RelayMessageEnum

        from snap_spark.nostr.client import RelayProblem

        live = {await connection.relay.subscribe(f) for f in (live_cards, live_messages)}
        pages = await self._request_backlog(connection, status)
        seen_backlog: set[str] = set()
        # a relay that completed the handshake and then says nothing at all is left (and
        # one that goes silent later is ended by nostr-sdk's pings, after about a minute)
        answer_by: float | None = time.monotonic() + self.answer_seconds
        while not self._stop.is_set():
            message = await connection.next_message(time.monotonic() + 1.0)
            if message is None:
                if answer_by is not None and time.monotonic() > answer_by:
                    complaints.note("silent", "sent nothing after the subscriptions")
                    raise RelayProblem(f"no answer within {self.answer_seconds:g}s "
                                       "after the subscriptions")
                continue
            answer_by = None
            if isinstance(message, RelayMessageEnum.EVENT_MSG):
                self._delivered(message, status, live, pages, seen_backlog)
            elif isinstance(message, RelayMessageEnum.END_OF_STORED_EVENTS):
                sub = message.subscription_id
                if sub in pages:
                    await self._next_page(connection, pages, sub)
                    self._backlog_read_if_done(pages, status)
            elif isinstance(message, RelayMessageEnum.CLOSED):
                self._closed(message, status, complaints, live, pages)
            elif isinstance(message, RelayMessageEnum.NOTICE):
                complaints.note("notice", f"notice: {_shown(message.message)}")
            elif isinstance(message, RelayMessageEnum.AUTH):
                complaints.note("auth", "asks to authenticate (AUTH "
                                f"{_shown(message.challenge)}); the tap does not: what "
                                "the relay keeps for authenticated clients is not read")

    async def _request_backlog(self, connection: RelayConnection, status: _RelayStatus
                               ) -> dict[str, _Page]:
        """Ask for the first backlog page of each stored kind, from the relay's resume
        point minus ``overlap``; returns the backlog chains by subscription id."""
        newest = status.newest_stored
        resume = self.since.get(status.url) if newest is None else newest
        start = None if resume is None else max(0, resume - self.overlap)
        # backlog chains: subscription id -> the page it asks for
        pages: dict[str, _Page] = {}
        for request in self._backlog_filters(start, None):
            pages[await connection.relay.subscribe(request)] = _Page(request)
        return pages

    def _delivered(self, message: Any, status: _RelayStatus, live: set[str],
                   pages: dict[str, _Page], seen_backlog: set[str]) -> None:
        """Spool an event delivered on one of the tap's subscriptions (others are ignored);
        one on a backlog page also moves the page's oldest time and counts as new there
        when no earlier page brought it."""
        sub = message.subscription_id
        if sub not in live and sub not in pages:
            return
        event = message.event
        self._spool(event, status)
        if sub in pages:
            key = event.id().to_hex()
            page = pages[sub]
            created = event.created_at().as_secs()
            page.oldest = created if page.oldest is None else min(page.oldest, created)
            if key not in seen_backlog:
                seen_backlog.add(key)
                page.new += 1

    def _closed(self, message: Any, status: _RelayStatus, complaints: _Complaints,
                live: set[str], pages: dict[str, _Page]) -> None:
        """A relay closed a subscription: a live one fails the connection; a backlog one
        is noted and its chain ends."""
        from snap_spark.nostr.client import RelayProblem

        if message.subscription_id in live:
            raise RelayProblem(f"relay closed the live subscription: "
                               f"{message.message}")
        if message.subscription_id in pages:
            complaints.note("closed_backlog", "closed a backlog request: "
                            f"{_shown(message.message)}; its stored events are "
                            "not read on this connection")
            del pages[message.subscription_id]
            self._backlog_read_if_done(pages, status)

    def _backlog_read_if_done(self, pages: dict[str, _Page], status: _RelayStatus) -> None:
        """Once no backlog chain is left, mark the relay's backlog read and report it (once
        per connection)."""
        if not pages and not status.backlog_done:
            status.backlog_done = True
            self._changed(status, "backlog")

    async def _next_page(self, connection: RelayConnection, pages: dict[str, _Page],
                         sub: str) -> None:
        """After a backlog page's end: ask for the page before it when this one brought
        new events, else close the chain."""
        from nostr_sdk import Timestamp

        page = pages.pop(sub)
        with contextlib.suppress(Exception):
            await connection.relay.unsubscribe(sub)
        if page.new == 0 or page.oldest is None:
            return
        following = page.request.until(Timestamp.from_secs(page.oldest))
        pages[await connection.relay.subscribe(following)] = _Page(following)

    def _spool(self, event: Any, status: _RelayStatus) -> None:
        received_at = time.time()
        self.spool.append([envelope_line(event.as_json(), status.url, received_at)])
        status.deliveries += 1
        kind = event.kind().as_u16()
        if kind in (CARD_KIND, STORED_KIND):
            created = event.created_at().as_secs()
            if created <= received_at and (status.newest_stored is None
                                           or created > status.newest_stored):
                status.newest_stored = created
