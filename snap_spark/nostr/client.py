"""Fetch stored events from Nostr relays and publish events to one, with nostr-sdk.

:func:`fetch_events` asks every relay on its own connection, at the same time, for the
events it stores of the given kinds (by default SNAP's agent cards, 31337, and stored
messages, 4339), and gives one :class:`RelayFetch` per relay: the events as received, or
the reason the relay failed and whatever it sent before. A relay that is down, refuses,
is slow or drops the connection never affects another relay and never raises. SNAP's
ephemeral messages (21339, :data:`EPHEMERAL_KIND`) are not asked for by default: relays
forward them to the subscribers connected when they are published and never store them, so
a fetch of what a relay holds never returns one (only a live subscription sees them).

:func:`publish_events` sends event JSON texts to one relay and reports, per event, whether
the relay accepted it and what it said (a forged event is refused with the relay's
reason; a text nostr-sdk cannot read as an event is refused before sending).

Both are plain functions that run their own event loop (from a thread of their own when
the caller already runs one, as a notebook does); :func:`fetch_events_async` and
:func:`publish_events_async` are the coroutines.

What reaches :attr:`FetchedEvent.event_json` is what nostr-sdk lets through, written back
by nostr-sdk (``Event.as_json()``), measured with nostr-sdk 0.45.1:

- NIP-01's seven fields in NIP-01's order (``id, pubkey, created_at, kind, tags, content,
  sig``); members NIP-01 does not define are dropped, the values are unchanged.
- An event nostr-sdk cannot parse (a field missing, a malformed value) is dropped by
  nostr-sdk. So is an event whose id or signature does not verify, *unless* nostr-sdk has
  already seen a valid event with that id on the same fetch: then the copy comes through
  with its bad signature (and ``check_event`` says ``bad_event_sig``).

Examples:
    >>> [(f.url, f.events, f.error) for f in fetch_events(["ws://127.0.0.1:9"], timeout=5)]
    [('ws://127.0.0.1:9', [], 'cannot connect: Connection refused (os error 111)')]
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from snap_spark.nostr._sdk import reason_of
from snap_spark.protocol.jsonparse import loads
from snap_spark.protocol.nostr import CARD_KIND, MAX_KIND

if TYPE_CHECKING:
    from nostr_sdk import (
        Client,
        ClientNotification,
        ClientNotificationStream,
        Event,
        Filter,
        Relay,
        RelayMessageEnum,
    )

#: NIP-44-encrypted SNAP messages stored on relays (``docs/transport.md``).
STORED_KIND: Final = 4339
#: NIP-44-encrypted SNAP messages relays forward to live subscribers and never store (the
#: SDK's default ``send()``, ``docs/transport.md``).
EPHEMERAL_KIND: Final = 21339
#: The kinds that carry a SNAP message (a listening agent subscribes to both).
MESSAGE_KINDS: Final[tuple[int, ...]] = (STORED_KIND, EPHEMERAL_KIND)
#: The kinds :func:`fetch_events` asks for unless told otherwise: what relays store (asking
#: for 21339 too would only catch one published during the fetch, by chance).
DEFAULT_KINDS: Final[tuple[int, ...]] = (CARD_KIND, STORED_KIND)
#: Seconds between checks of the connection while waiting for a relay.
_POLL_SECONDS: Final = 0.2
#: Seconds allowed for closing a connection.
_CLOSE_SECONDS: Final = 5.0
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: How :attr:`PublishOutcome.message` starts when the connection was lost before the relay
#: answered (the event may or may not have reached it) or before the event was sent.
NOT_CONFIRMED: Final = "not confirmed: "
NOT_SENT: Final = "not sent: "

T = TypeVar("T")


@dataclass(frozen=True)
class FetchedEvent:
    """One event as a relay delivered it.

    Attributes:
        event_json: the event as JSON text (see the module docstring for what nostr-sdk
            does to it on the way).
        received_at: unix seconds when this client received it.
        relay: the URL of the relay that sent it, as given to :func:`fetch_events`.
    """

    event_json: str
    received_at: float
    relay: str


@dataclass(frozen=True)
class RelayFetch:
    """What one relay gave :func:`fetch_events`.

    Attributes:
        url: the relay URL as given.
        events: the events received, in the order received, each distinct text once.
        newest_created_at: the largest ``created_at`` among ``events`` (``None`` when there
            are none): the ``since`` of the next fetch from this relay. ``since`` includes
            its second, so events of that second come again; keep them apart by event id.
        error: why the relay failed (down, refused, timed out, dropped the connection,
            closed the subscription), or ``None`` when it sent all its stored events.
            ``events`` holds what arrived before the failure.
        seconds: how long this relay took.
    """

    url: str
    events: list[FetchedEvent]
    newest_created_at: int | None
    error: str | None
    seconds: float


@dataclass(frozen=True)
class PublishOutcome:
    """What became of one event given to :func:`publish_events`.

    Attributes:
        event_id: the event's id (64 hex; the id the text claims when nostr-sdk could not
            read it as an event, ``None`` when it claims none).
        accepted: the relay answered ``OK true`` (``duplicate: ...`` included: it has it).
        message: the relay's message (``invalid: ...``, ``duplicate: ...``, often empty on
            success), or why the event was not sent or not answered.
    """

    event_id: str | None
    accepted: bool
    message: str

    @property
    def connection_lost(self) -> bool:
        """The connection to the relay was lost before it answered for this event."""
        return self.message.startswith((NOT_CONFIRMED, NOT_SENT))


class RelayUnreachable(ConnectionError):
    """:func:`publish_events` could not connect to the relay; nothing was sent."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class RelayProblem(Exception):
    """A relay failed while a fetch or publish was talking to it (the reason is the text)."""


# --------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------


def _check_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
        math.isfinite(timeout) and timeout > 0
    ):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout)


def _check_since(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be unix seconds (an integer >= 0), not {value!r}")
    return value


def _check_kinds(kinds: Iterable[int]) -> list[int]:
    checked = list(kinds)
    for kind in checked:
        if isinstance(kind, bool) or not isinstance(kind, int) or not 0 <= kind <= MAX_KIND:
            raise ValueError(f"kinds must be integers 0..{MAX_KIND}, not {kind!r}")
    return checked


def _since_of(since: int | Mapping[str, int] | None, url: str) -> int | None:
    if since is None:
        return None
    if isinstance(since, Mapping):
        value = since.get(url)
        return None if value is None else _check_since(value, f"since[{url!r}]")
    return _check_since(since, "since")


# --------------------------------------------------------------------------------------
# One connection to one relay
# --------------------------------------------------------------------------------------


class RelayConnection:
    """A nostr-sdk client holding one relay, and the stream of what the relay says."""

    def __init__(self, client: Client, relay: Relay, notes: ClientNotificationStream) -> None:
        self.client = client
        self.relay = relay
        self.notes = notes
        self.notice: str | None = None
        self._pending: asyncio.Future[ClientNotification | None] | None = None

    @classmethod
    async def open(cls, url: str, deadline: float) -> RelayConnection:
        """Connect to ``url`` by ``deadline`` (a ``time.monotonic()`` value).

        Raises:
            RelayProblem: not a relay URL, or the connection failed or timed out.
        """
        from nostr_sdk import ClientBuilder, RelayOptions, RelayUrl

        try:
            relay_url = RelayUrl.parse(url)
        except Exception as exc:
            raise RelayProblem(f"not a relay URL: {reason_of(exc)}") from None
        # nostr-sdk's generated constructors lack a return annotation (no-untyped-call).
        client = ClientBuilder().build()  # type: ignore[no-untyped-call]
        try:
            # No reconnection: a dropped connection must end the fetch with an error, not
            # be re-established behind its back with the subscriptions replayed.
            options = RelayOptions().reconnect(False)  # type: ignore[no-untyped-call]
            await client.add_relay(relay_url, opts=options)
            relay = await client.relay(relay_url)
            if relay is None:  # pragma: no cover - add_relay just added it
                raise RelayProblem("nostr-sdk lost the relay it was given")
            notes = client.notifications()  # before connecting: nothing is missed
            connection = cls(client, relay, notes)
            remaining = max(deadline - time.monotonic(), 0.001)
            try:
                await relay.try_connect(timedelta(seconds=remaining))
            except Exception as exc:
                reason = reason_of(exc)
                if reason == "timeout":
                    reason = f"no answer within {remaining:.1f}s"
                raise RelayProblem(f"cannot connect: {reason}") from None
            return connection
        except BaseException:
            await _close_client(client)
            raise

    async def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        await _close_client(self.client)

    async def next_message(self, deadline: float) -> RelayMessageEnum | None:
        """The next relay message (a ``RelayMessageEnum`` variant), or ``None`` after a
        short wait without one.

        Raises:
            RelayProblem: the connection is gone.
        """
        from nostr_sdk import ClientNotification, RelayMessageEnum

        if self._pending is None:
            self._pending = asyncio.ensure_future(self.notes.next())
        wait = min(_POLL_SECONDS, max(deadline - time.monotonic(), 0.0))
        done, _ = await asyncio.wait({self._pending}, timeout=wait)
        if not done:
            self.check_connected()
            return None
        note = self._pending.result()
        self._pending = None
        if note is None or note.is_shutdown():
            raise RelayProblem("the client shut down")
        if not isinstance(note, ClientNotification.MESSAGE):
            return None
        message = note.message.as_enum()
        if isinstance(message, RelayMessageEnum.NOTICE):
            self.notice = message.message
        return message

    def check_connected(self) -> None:
        from nostr_sdk import RelayStatus

        status = self.relay.status()
        if status != RelayStatus.CONNECTED:
            reason = f"connection lost ({status.name.lower()})"
            if self.notice:
                reason += f"; last notice: {self.notice}"
            raise RelayProblem(reason)


async def _close_client(client: Client) -> None:
    with contextlib.suppress(Exception):  # a timeout included
        await asyncio.wait_for(client.shutdown(), _CLOSE_SECONDS)


# --------------------------------------------------------------------------------------
# Fetching
# --------------------------------------------------------------------------------------


class _Collector:
    """The events of one relay's fetch, each distinct text once, and their newest time."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.events: list[FetchedEvent] = []
        self.newest: int | None = None
        self._seen: set[str] = set()

    def add(self, event: Event) -> tuple[bool, int]:
        """Record a nostr-sdk ``Event``; ``(whether it was new, its created_at)``."""
        received_at = time.time()
        text = event.as_json()
        created_at = event.created_at().as_secs()
        if text in self._seen:
            return False, created_at
        self._seen.add(text)
        self.events.append(FetchedEvent(text, received_at, self.url))
        if self.newest is None or created_at > self.newest:
            self.newest = created_at
        return True, created_at


def _filter(kinds: list[int], since: int | None, until: int | None) -> Filter:
    from nostr_sdk import Filter, Kind, Timestamp

    request = Filter()  # type: ignore[no-untyped-call]
    if kinds:
        request = request.kinds([Kind(k) for k in kinds])
    if since is not None:
        request = request.since(Timestamp.from_secs(since))
    if until is not None:
        request = request.until(Timestamp.from_secs(until))
    return request


async def _fetch_page(connection: RelayConnection, request: Filter, collected: _Collector,
                      deadline: float, timeout: float) -> tuple[int, int | None]:
    """One ``REQ`` until its ``EOSE``: ``(events new to this fetch, oldest created_at)``.

    Raises:
        RelayProblem: the relay closed the subscription, the connection was lost, or
            ``deadline`` passed.
    """
    from nostr_sdk import RelayMessageEnum

    try:
        subscription = await asyncio.wait_for(connection.relay.subscribe(request),
                                              max(deadline - time.monotonic(), 0.001))
    except TimeoutError:
        raise RelayProblem(f"timed out after {timeout:g}s sending the request") from None
    new, oldest = 0, None
    try:
        while True:
            if time.monotonic() >= deadline:
                raise RelayProblem(
                    f"timed out after {timeout:g}s waiting for the end of stored events"
                )
            message = await connection.next_message(deadline)
            if isinstance(message, RelayMessageEnum.EVENT_MSG) and (
                message.subscription_id == subscription
            ):
                is_new, created_at = collected.add(message.event)
                new += is_new
                oldest = created_at if oldest is None else min(oldest, created_at)
            elif isinstance(message, RelayMessageEnum.END_OF_STORED_EVENTS) and (
                message.subscription_id == subscription
            ):
                return new, oldest
            elif isinstance(message, RelayMessageEnum.CLOSED) and (
                message.subscription_id == subscription
            ):
                raise RelayProblem(f"relay closed the subscription: {message.message}")
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(connection.relay.unsubscribe(subscription), _CLOSE_SECONDS)


async def _fetch_one(url: str, kinds: list[int], since: int | None,
                     timeout: float) -> RelayFetch:
    started = time.monotonic()
    deadline = started + timeout
    collected = _Collector(url)
    error: str | None = None
    connection: RelayConnection | None = None
    try:
        connection = await RelayConnection.open(url, deadline)
        # A relay answers one REQ with at most its limit of events, newest first (500 on
        # nostr-sdk's relay): ask again for those at or before the oldest one received
        # until a page brings nothing new. (More events of one second than the limit
        # cannot be paged past; the rest of that second is not fetched.)
        until: int | None = None
        while True:
            new, oldest = await _fetch_page(connection, _filter(kinds, since, until),
                                            collected, deadline, timeout)
            if new == 0 or oldest is None:
                break
            until = oldest
    except RelayProblem as exc:
        error = str(exc)
    except Exception as exc:  # a nostr-sdk failure this module did not foresee
        error = f"{type(exc).__name__}: {reason_of(exc)}"
    finally:
        if connection is not None:
            await connection.close()
    return RelayFetch(url=url, events=collected.events, newest_created_at=collected.newest,
                      error=error, seconds=time.monotonic() - started)


async def fetch_events_async(
    relays: Sequence[str],
    *,
    kinds: Iterable[int] = DEFAULT_KINDS,
    since: int | Mapping[str, int] | None = None,
    timeout: float = 10.0,
) -> list[RelayFetch]:
    """The coroutine of :func:`fetch_events` (same arguments and result)."""
    if isinstance(relays, str):
        raise TypeError("relays must be a sequence of URLs, not one string")
    timeout = _check_timeout(timeout)
    checked_kinds = _check_kinds(kinds)
    urls = list(dict.fromkeys(relays))
    starts = [_since_of(since, url) for url in urls]
    return list(await asyncio.gather(
        *(_fetch_one(url, checked_kinds, start, timeout) for url, start in zip(urls, starts,
                                                                             strict=True))
    ))


def fetch_events(
    relays: Sequence[str],
    *,
    kinds: Iterable[int] = DEFAULT_KINDS,
    since: int | Mapping[str, int] | None = None,
    timeout: float = 10.0,
) -> list[RelayFetch]:
    """Every stored event of ``kinds`` from each relay, one :class:`RelayFetch` per relay.

    Each relay is asked on its own connection, all at the same time; a relay's failure
    (down, refusing, slower than ``timeout``, dropping the connection, closing the
    subscription) becomes its ``error`` with the events received before it, and never
    affects another relay or raises. A relay is done at its end of stored events
    (``EOSE``); relays that cap a reply are asked again, page by page.

    Args:
        relays: relay URLs (``ws://`` or ``wss://``); each distinct URL is asked once, in
            the order given. Results are in the same order.
        kinds: event kinds to ask for; empty asks for every kind.
        since: only events with ``created_at >= since``: one value for all relays, or a
            value per relay URL (relays missing from the mapping are read in full) -- the
            ``newest_created_at`` of a previous fetch, to resume.
        timeout: seconds each relay may take in all, connecting included.

    Raises:
        ValueError, TypeError: bad arguments (never for a relay's behaviour).

    Examples:
        >>> from snap_spark.nostr.relay import RelayThread
        >>> with RelayThread() as url:
        ...     fetched = fetch_events([url, "ws://127.0.0.1:9"], timeout=5)
        >>> [(f.url == url, len(f.events), f.error) for f in fetched]
        [(True, 0, None), (False, 0, 'cannot connect: Connection refused (os error 111)')]
    """
    return _run(lambda: fetch_events_async(relays, kinds=kinds, since=since, timeout=timeout))


# --------------------------------------------------------------------------------------
# Publishing
# --------------------------------------------------------------------------------------


def _claimed_id(text: str) -> str | None:
    """The id an event text claims, if it parses and has one that looks like an id."""
    try:
        value = loads(text)
    except Exception:
        return None
    claimed = value.get("id") if isinstance(value, dict) else None
    return claimed if isinstance(claimed, str) and _HEX64.fullmatch(claimed) else None


async def publish_one(connection: RelayConnection, text: str, timeout: float) -> PublishOutcome:
    """Send one event text on an open connection and wait up to ``timeout`` seconds for the
    relay's ``OK`` (what :func:`publish_events` does for each event).

    Raises:
        RelayProblem: the connection is gone.
    """
    from nostr_sdk import ClientMessage, Event, RelayMessageEnum

    try:
        event = Event.from_json(text)
    except Exception as exc:  # NostrSdkError, or a str nostr-sdk cannot take (UTF-8)
        return PublishOutcome(_claimed_id(text), False, f"not a Nostr event: {reason_of(exc)}")
    event_id = event.id().to_hex()
    connection.check_connected()
    await connection.relay.send_msg(ClientMessage.event(event))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = await connection.next_message(deadline)
        if isinstance(message, RelayMessageEnum.OK) and message.event_id.to_hex() == event_id:
            return PublishOutcome(event_id, message.status, message.message)
    return PublishOutcome(event_id, False, f"no answer from the relay within {timeout:g}s")


async def publish_events_async(
    relay: str,
    events: Iterable[str],
    timeout: float = 10.0,
    *,
    on_outcome: Callable[[PublishOutcome], None] | None = None,
) -> list[PublishOutcome]:
    """The coroutine of :func:`publish_events` (same arguments and result)."""
    timeout = _check_timeout(timeout)
    try:
        connection = await RelayConnection.open(relay, time.monotonic() + timeout)
    except RelayProblem as exc:
        raise RelayUnreachable(relay, str(exc)) from None
    outcomes: list[PublishOutcome] = []
    lost: str | None = None
    try:
        for text in events:
            if lost is not None:
                outcome = PublishOutcome(_claimed_id(text), False, NOT_SENT + lost)
            else:
                try:
                    outcome = await publish_one(connection, text, timeout)
                except RelayProblem as exc:
                    lost = str(exc)
                    outcome = PublishOutcome(_claimed_id(text), False, NOT_CONFIRMED + lost)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
    finally:
        await connection.close()
    return outcomes


def publish_events(
    relay: str,
    events: Iterable[str],
    timeout: float = 10.0,
    *,
    on_outcome: Callable[[PublishOutcome], None] | None = None,
) -> list[PublishOutcome]:
    """Publish each event JSON text to ``relay``, one after another; one outcome each.

    Each text is sent as the event it is (nostr-sdk parses it and writes it to the relay
    as its NIP-01 fields; nothing is re-signed). The relay checks it and answers; a text
    nostr-sdk cannot read as an event is refused without sending it. A relay that stops
    answering or drops the connection turns the rest into refusals saying so; nothing
    raises for an event.

    Args:
        relay: the relay URL.
        events: event JSON texts (e.g. :attr:`EventLine.event_json
            <snap_spark.nostr.lines.EventLine.event_json>`); read as they are sent.
        timeout: seconds for connecting, and for the relay's answer to each event.
        on_outcome: called with each outcome as soon as it is known (for progress).

    Raises:
        RelayUnreachable: the relay could not be reached; nothing was sent.
        ValueError: a bad ``timeout``.

    Examples:
        >>> from snap_spark.nostr.relay import RelayThread
        >>> from snap_spark.protocol.nostr import sign_event
        >>> import json
        >>> event = sign_event({"created_at": 1770163200, "kind": 4339, "tags": [],
        ...                     "content": "hi"}, bytes.fromhex("0a" * 32), aux=bytes(32))
        >>> forged = {**event, "content": "changed"}
        >>> with RelayThread() as url:
        ...     outcomes = publish_events(url, [json.dumps(event), json.dumps(forged), "{}"])
        >>> [(o.event_id == event["id"], o.accepted) for o in outcomes]
        [(True, True), (True, False), (False, False)]
        >>> outcomes[1].message, outcomes[2].message[:18]
        ('invalid: invalid event ID', 'not a Nostr event:')
    """
    return _run(lambda: publish_events_async(relay, events, timeout, on_outcome=on_outcome))


def _run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end: here, or in a thread when this thread runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="snap-spark-nostr") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
