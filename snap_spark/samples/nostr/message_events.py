"""The SNAP message part of a Nostr sample (kinds 4339 and 21339), one scenario at a time.

:meth:`MessageEvents.scenario` makes the events of one scenario of
:data:`~snap_spark.samples.nostr.tables.MESSAGE_WEIGHTS` at a given inner timestamp:
genuine deliveries (live, at the drift boundary, fetched late), events the operator cannot
read (``encrypted``), expired ones, re-wrapped messages (``from_mismatch``), replays of an
inner message and forged copies that arrive first. The events that fail one check on
purpose are made by :mod:`~snap_spark.samples.nostr.message_faults`.

Every event's kind is drawn (:meth:`~snap_spark.samples.nostr.wrapping.Wrapper.message_kind`),
except in the second run of each scenario, whose events are all 21339 (when the config's
``ephemeral_share`` is not 0), so the ephemeral kind gets every scenario a sample repeats: a
21339 gets the same scenarios and labels as a 4339, except that only a stored 4339 is
fetched late.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from snap_spark.samples.nostr.config import EPHEMERAL_KIND, STORED_KIND
from snap_spark.samples.nostr.items import Item, Key
from snap_spark.samples.nostr.message_faults import MessageFaults
from snap_spark.samples.nostr.workbench import Workbench
from snap_spark.samples.nostr.wrapping import Wrapper

__all__ = ["MessageEvents"]


class MessageEvents:
    """Makes the SNAP message events of a sample, scenario by scenario."""

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench
        self.rng = bench.rng
        self.wrapper = Wrapper(bench)
        self.faults = MessageFaults(bench, self.wrapper)
        self.delivered: list[tuple[Item, dict[str, Any], Key, Key]] = []
        self.runs: Counter[str] = Counter()
        self._makers = self._scenario_table()

    def deliver(self, ts: int, scenario: str, *, msg_type: str = "request",
                signed: bool = True, why: str = "") -> Item:
        """A genuine, valid message event from an agent to a keyring recipient."""
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts, msg_type=msg_type,
                                   signed=signed)
        created, received = self.wrapper.live(ts)
        expiration = self.wrapper.maybe_expiration(created)
        event = self.wrapper.seal(sender, recipient, inner, created, expiration)
        item = self.bench.add(
            received, scenario, "valid",
            why or f"{sender.name} to {recipient.name} (keyring), received "
                   f"{received - ts}s after the message timestamp",
            event=event, genuine=True,
        )
        self.delivered.append((item, inner, sender, recipient))
        return item

    def scenario(self, name: str, ts: int) -> None:
        """Make the events of scenario ``name`` around inner timestamp ``ts`` (all of kind
        21339 in the scenario's second run, see the module docstring)."""
        self.runs[name] += 1
        ephemeral = self.runs[name] == 2 and self.bench.config.ephemeral_share > 0
        self.wrapper.forced_kind = EPHEMERAL_KIND if ephemeral else None
        try:
            self._scenario(name, ts)
        finally:
            self.wrapper.forced_kind = None

    def _scenario(self, name: str, ts: int) -> None:
        """Make the events of scenario ``name`` at ``ts`` with the method its table names."""
        make = self._makers.get(name)
        if make is None:  # pragma: no cover - the weights table and this dispatch agree
            raise AssertionError(name)
        make(ts)

    def _scenario_table(self) -> dict[str, Callable[[int], None]]:
        """Which method makes the events of each scenario, given the inner timestamp."""
        # the faults of the message itself: MessageFaults' methods of the same names
        faulty = ("decrypt_failed", "misaddressed", "inner_bad_sig", "inner_constraint",
                  "tampered_event", "bad_event_sig")
        # the others made here, each by the method named after it
        own = ("delivered", "unsigned_response", "boundary_drift_60", "offline_recipient",
               "expired", "inner_unsigned_request", "late_fetch")
        return {
            **{name: getattr(self.faults, name) for name in faulty},
            **{name: getattr(self, f"_{name}") for name in own},
            "rewrapped": partial(self.rewrapped, with_genuine=False),
            "rewrapped_with_genuine": partial(self.rewrapped, with_genuine=True),
            "inner_replay": partial(self.inner_replay, late=False),
            "inner_replay_late": partial(self.inner_replay, late=True),
            "inner_forged_first": self.inner_forged_first,
        }

    def _delivered(self, ts: int) -> None:
        """A genuine request or response."""
        self.deliver(ts, "delivered", msg_type=self.rng.choice(("request", "response")))

    def _unsigned_response(self, ts: int) -> None:
        """A genuine response without a signature, which is valid."""
        self.deliver(ts, "unsigned_response", msg_type="response", signed=False,
                     why="an unsigned response (valid: only requests must be signed)")

    def _boundary_drift_60(self, ts: int) -> None:
        """A genuine message received exactly 60 s after its inner timestamp."""
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        event = self.wrapper.seal(sender, recipient, inner, ts)
        item = self.bench.add(ts + 60, "boundary_drift_60", "valid",
                              "received exactly 60s after the inner timestamp (60 passes)",
                              event=event, genuine=True)
        self.delivered.append((item, inner, sender, recipient))

    def _offline_recipient(self, ts: int) -> None:
        """A message between two keys the operator does not hold, so it cannot be read."""
        sender, recipient = self.bench.outside_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        created, received = self.wrapper.live(ts)
        expiration = self.wrapper.maybe_expiration(created)
        event = self.wrapper.seal(sender, recipient, inner, created, expiration)
        item = self.bench.add(received, "offline_recipient", "encrypted",
                              f"{sender.name} to {recipient.name}: neither key is in the "
                              "keyring",
                              event=event, genuine=True, clock_free=expiration is None)
        self.bench.pick_form(item)

    def _expired(self, ts: int) -> None:
        """A message received after the time of its expiration tag."""
        rng = self.rng
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        ttl = rng.randint(60, 3600)
        late = rng.randint(1, 7200)
        event = self.wrapper.seal(sender, recipient, inner, ts, ts + ttl)
        self.bench.add(ts + ttl + late, "expired", "expired",
                       f"expiration tag {ts + ttl} is {late}s before the receipt time",
                       event=event, genuine=True)

    def _inner_unsigned_request(self, ts: int) -> None:
        """A request whose inner message has no signature."""
        name = "inner_unsigned_request"
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts, signed=False)
        self.wrapper.inner_invalid(name, sender, recipient, inner, ts, 2002,
                                   "a request without sig")

    def _late_fetch(self, ts: int) -> None:
        """A stored message fetched from a relay more than 60 s after its inner timestamp;
        its label depends on the config's ``stored_clock``."""
        rng = self.rng
        name = "late_fetch"
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        late = rng.randint(61, 7200)
        # offline retrieval: only a stored event (4339) can be fetched from a relay late
        event = self.wrapper.seal(sender, recipient, inner, ts, kind=STORED_KIND)
        if self.bench.config.stored_clock == "event" and self.bench.variant(name, 2) == 1:
            # wrapped late by its sender: created_at is the receipt time, so 2004
            event = self.wrapper.seal(sender, recipient, inner, ts + late)
            self.bench.add(ts + late + rng.randint(0, 20), name, "inner_invalid",
                           f"wrapped for the relay {late}s after the inner timestamp: its "
                           "created_at is the receipt time (--stored-clock event), so drift "
                           "fails, 2004", event=event, genuine=True, inner_code=2004)
        elif self.bench.config.stored_clock == "event":
            item = self.bench.add(ts + late, name, "valid",
                                  f"fetched from the relay {late}s after the inner timestamp "
                                  "(offline retrieval): drift is checked against the event's "
                                  "created_at (--stored-clock event), which is the timestamp",
                                  event=event, genuine=True)
            self.delivered.append((item, inner, sender, recipient))
        else:
            self.bench.add(ts + late, name, "inner_invalid",
                           f"fetched from the relay {late}s after the inner timestamp "
                           "(offline retrieval): --stored-clock received checks drift "
                           "against received_at, so 2004", event=event, genuine=True,
                           inner_code=2004)

    def rewrapped(self, ts: int, *, with_genuine: bool) -> None:
        """A genuine A→B message wrapped and signed by C (C is not A)."""
        rng = self.rng
        author, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(author, recipient.address, ts)
        rewrapper = self.bench.third_party(author, recipient)
        created, received = self.wrapper.live(ts)
        content = self.wrapper.encrypt(rewrapper, recipient.pubkey, inner)
        event = self.wrapper.wrap(rewrapper, recipient.pubkey, content, created)
        if not with_genuine:
            item = self.bench.add(received, "rewrapped", "from_mismatch",
                                  f"{author.name}'s signed message to {recipient.name}, "
                                  f"wrapped and signed by {rewrapper.name}: inner from is not "
                                  "the event key's taproot address", event=event, genuine=True,
                                  clock_free=True)
            self.bench.pick_form(item)
            return
        genuine_event = self.wrapper.seal(author, recipient, inner, created)
        first, second = sorted((received, received + rng.randint(1, 30)))
        genuine_first = rng.random() < 0.5
        genuine_at, copy_at = (first, second) if genuine_first else (second, first)
        genuine = self.bench.add(genuine_at, "rewrapped_with_genuine", "valid",
                                 f"genuine delivery by {author.name}", event=genuine_event,
                                 genuine=True)
        self.delivered.append((genuine, inner, author, recipient))
        order = "after" if genuine_first else "before"
        self.bench.add(copy_at, "rewrapped_with_genuine", "from_mismatch",
                       f"the message of line {{ref}} re-wrapped by {rewrapper.name} and "
                       f"received {order} it: inner from is not the event key's taproot address "
                       "(it never counts as a replay or shadows the genuine one)",
                       event=event, genuine=True, ref=genuine)
        if not genuine_first:
            genuine.why += " (a re-wrapped copy by another key came first)"

    def inner_replay(self, ts: int, *, late: bool) -> None:
        """A valid delivery, then the same inner message in a second event.

        With ``stored_clock="event"`` the second event is wrapped later than the first (its
        ``created_at`` is its receipt time): two events of one second would be a tie that
        no receipt order can settle, which the labels avoid."""
        first = self.deliver(ts, "inner_replay_late" if late else "inner_replay")
        _, inner, sender, recipient = self.delivered[-1]
        created = first.event["created_at"] if first.event else ts
        by_event = self.bench.config.stored_clock == "event"
        if by_event:
            created = (ts + self.rng.randint(61, 119) if late
                       else created + self.rng.randint(1, 30))
        event = self.wrapper.seal(sender, recipient, inner, created)
        if late:
            at = (created + self.rng.randint(0, 20) if by_event
                  else ts + self.rng.randint(61, 119))
            clock = created if by_event else at
            self.bench.add(at, "inner_replay_late", "inner_invalid",
                           f"same inner message as line {{ref}} in a new event whose receipt "
                           f"time ({'created_at' if by_event else 'received_at'}) is "
                           f"{clock - ts}s after its timestamp: drift fails before the replay "
                           "check, 2004",
                           event=event, genuine=True, inner_code=2004, ref=first)
            return
        if by_event:
            at = max(first.at + 1, created)
            self.bench.add(at, "inner_replay", "inner_invalid",
                           f"same inner message (from, id) as line {{ref}}, wrapped again "
                           f"{created - (first.event or {}).get('created_at', ts)}s later (its "
                           f"created_at is its receipt time); drift {created - ts}s passes, so "
                           "2006 (the first copy was accepted)", event=event, genuine=True,
                           inner_code=2006, ref=first)
            return
        low, high = first.at + 1, min(first.at + 120, ts + 60)
        at = self.rng.randint(low, max(low, high))
        self.bench.add(at, "inner_replay", "inner_invalid",
                       f"same inner message (from, id) as line {{ref}}, accepted "
                       f"{at - first.at}s earlier; drift {at - ts}s passes, so 2006",
                       event=event, genuine=True,
                       inner_code=2006, ref=first)

    def inner_forged_first(self, ts: int) -> None:
        """A forged copy of an inner message (same from and id) arrives before the genuine."""
        sender, recipient = self.bench.keyring_pair()
        inner = self.wrapper.inner(sender, recipient.address, ts)
        forged = orjson.loads(orjson.dumps(inner))
        forged["payload"]["message"]["parts"][0]["text"] = "Wire 2 BTC to the address below"
        created = ts + self.rng.randint(0, 2)
        received = created + self.rng.randint(0, 10)
        forged_event = self.wrapper.seal(sender, recipient, forged, created)
        # with stored_clock="event", created_at orders the two (a tie would settle nothing)
        later = self.rng.randint(1, 20) if self.bench.config.stored_clock == "event" else 0
        genuine_event = self.wrapper.seal(sender, recipient, inner, created + later)
        copy = self.bench.add(received, "inner_forged_first", "inner_invalid",
                              "inner payload forged (same from and id as a genuine message "
                              "received later): 2001, and it never enters the replay store",
                              event=forged_event, genuine=True, inner_code=2001)
        genuine = self.bench.add(received + later + self.rng.randint(1, 20),
                                 "inner_forged_first", "valid",
                                 "genuine message whose forged copy (line {ref}) came first",
                                 event=genuine_event, genuine=True, ref=copy)
        self.delivered.append((genuine, inner, sender, recipient))
