"""The extra lines of a Nostr sample: re-deliveries, forged copies and garbage.

A second relay delivers some genuine events again (``duplicate_event``); forged copies of
genuine event ids arrive before or after them (``bad_event_id`` / ``bad_event_sig``); and
garbage lines hold no event, or one that breaks NIP-01's shapes (``malformed``), one kind
of garbage of :data:`~snap_spark.samples.nostr.tables.GARBAGE` after another.
"""

from __future__ import annotations

from typing import Any

import orjson

from snap_spark.protocol.nostr import sign_event
from snap_spark.samples.nostr.tables import GARBAGE, RELAYS
from snap_spark.samples.nostr.workbench import Workbench

__all__ = ["ExtraLines", "break_event"]


def break_event(event: dict[str, Any], name: str) -> str:
    """Break one field of a signed event the way ``name`` says; return why it is malformed."""
    if name == "missing_sig":
        del event["sig"]
        return "sig missing"
    if name == "uppercase_id":
        event["id"] = event["id"].upper()
        return "id in upper-case hex"
    if name == "bad_hex_pubkey":
        event["pubkey"] = "g" + event["pubkey"][1:]
        return "pubkey holds a non-hex character"
    if name == "short_sig":
        event["sig"] = event["sig"][:126]
        return "sig is 126 hex characters"
    if name == "created_at_text":
        event["created_at"] = str(event["created_at"])
        return "created_at is a string"
    if name == "created_at_float":
        event["created_at"] = float(event["created_at"])
        return "created_at written as 1770163200.0 (not a JSON integer)"
    if name == "kind_text":
        event["kind"] = str(event["kind"])
        return "kind is a string"
    if name == "kind_out_of_range":
        event["kind"] = 70_000
        return "kind 70000 is over 65535"
    if name == "tags_object":
        event["tags"] = {"d": event["tags"][0][1]}
        return "tags is an object"
    if name == "content_number":
        event["content"] = 42
        return "content is a number"
    raise AssertionError(name)  # pragma: no cover - GARBAGE and this list agree


class ExtraLines:
    """Adds re-deliveries, forged copies and garbage to the lines made so far."""

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench
        self.rng = bench.rng

    def duplicates(self, count: int) -> None:
        """Up to ``count`` genuine enveloped events delivered again by another relay."""
        pool = [i for i in self.bench.items
                if i.genuine and i.form == "envelope" and i.raw is None]
        for original in self.rng.sample(pool, min(count, len(pool))):
            self.bench.add(original.at + self.rng.randint(1, 600), "duplicate", "duplicate_event",
                           "the event of line {ref} again, from another relay",
                           event=original.event, relay=self.bench.other_relay(original.relay),
                           ref=original)

    def forged_copies(self, count: int) -> None:
        """Up to ``count`` forged copies of genuine events: same id, content changed or a
        signature that does not verify."""
        pool = [i for i in self.bench.items if i.genuine and i.scenario != "duplicate"]
        for original in self.rng.sample(pool, min(count, len(pool))):
            assert original.event is not None
            forged = orjson.loads(orjson.dumps(original.event))
            owners = [k for k in (*self.bench.agents, *self.bench.strangers)
                      if k.pubkey == forged["pubkey"]]
            owner = owners[0] if owners and self.rng.random() < 0.5 else None
            if owner is None:
                forged["content"] = forged["content"][:-8] + "AAAAAAA="
                if forged["content"] == original.event["content"]:
                    forged["content"] = forged["content"][:-8] + "BBBBBBB="
                expected, what = "bad_event_id", "content changed"
            else:
                expected = "bad_event_sig"
                what = self.bench.bad_signature(forged, owner, "forged_copy")
            before = self.rng.random() < 0.5
            at = original.at - self.rng.randint(1, 30) if before else (
                original.at + self.rng.randint(1, 600))
            self.bench.add(at, "forged_copy", expected,
                           f"forged copy of the event of line {{ref}} ({what}, same id), "
                           f"received {'before' if before else 'after'} it: must not shadow "
                           "the genuine event",
                           event=forged, ref=original)

    def garbage(self, count: int, start: int, end: int) -> None:
        """``count`` garbage lines received between ``start`` and ``end``."""
        order = list(GARBAGE)
        self.rng.shuffle(order)
        for n in range(count):
            name = order[n % len(order)]
            raw, event, why = self.garbage_line(name)
            self.bench.add(self.rng.randint(start, end), f"garbage/{name}", "malformed", why,
                           raw=raw, event=event, form="garbage")

    def some_event(self) -> dict[str, Any]:
        """A correctly signed card event, to be broken."""
        key = self.rng.choice(self.bench.agents)
        created = self.bench.config.start_time + self.rng.randint(0, 3600)
        return self.bench.card_event(key, self.bench.card(key, key.address), created)

    def envelope(self, event: Any) -> bytes:
        """An envelope line around ``event`` (whatever it is)."""
        return orjson.dumps({"received_at": self.bench.config.start_time,
                             "relay": self.rng.choice(RELAYS), "event": event})

    def garbage_line(
        self, name: str
    ) -> tuple[bytes, dict[str, Any] | None, str]:
        """``(line, the event object in it if any, why)`` for one kind of garbage."""
        rng = self.rng
        if name == "not_json":
            return b"relay said: rate-limited, slow down", None, "not JSON"
        if name == "python_repr":
            return repr(self.some_event()).encode(), None, "a Python repr, not JSON"
        if name == "truncated":
            line = self.envelope(self.some_event())
            return line[: rng.randint(10, len(line) - 10)], None, "truncated envelope"
        if name == "invalid_utf8":
            line = self.envelope(self.some_event())
            at = line.index(b'"content":"') + 11
            return line[:at] + b"\xff\xfe" + line[at:], None, "invalid UTF-8 in content"
        if name == "empty":
            return b"", None, "empty line"
        if name == "not_object":
            raw = rng.choice((b"42", b"null", b'"EVENT"', b"[1,2,3]"))
            return raw, None, "JSON, but neither an event, an envelope nor a frame"
        if name == "other_frame":
            raw = rng.choice((b'["EOSE","snap-inbox"]', b'["NOTICE","slow down"]',
                              b'["OK","' + b"ab" * 32 + b'",true,""]'))
            return raw, None, "a relay frame other than EVENT (no event in it)"
        if name == "frame_without_event":
            return b'["EVENT","snap-inbox"]', None, "EVENT frame without an event"
        if name == "received_at_text":
            event = self.some_event()
            raw = orjson.dumps({"received_at": "soon", "relay": RELAYS[0], "event": event})
            return raw, event, "envelope received_at is a string"
        if name == "event_not_object":
            return self.envelope("an event"), None, "envelope event is a string"
        if name == "lone_surrogate":
            event = self.some_event()
            event["content"] = "@@SURROGATE@@"
            line = self.envelope(event).replace(b'"@@SURROGATE@@"', b'"\\ud800"')
            return line, event, "content is an escaped lone surrogate (no UTF-8 form)"
        if name == "deep_nesting":
            depth = 20_000
            line = self.envelope("@@DEEP@@").replace(b'"@@DEEP@@"', b"[" * depth + b"]" * depth)
            return line, None, f"event is arrays nested {depth} deep"
        if name == "wrong_kind":
            key = rng.choice(self.bench.agents)
            kind = (1, 0, 4, 31338)[self.bench.variant("wrong_kind", 4)]
            template = {"created_at": self.bench.config.start_time, "kind": kind, "tags": [],
                        "content": "gm"}
            event = sign_event(template, key.private_key, self.bench.aux())
            return (self.envelope(event), event,
                    f"a correctly signed kind-{kind} event: not a SNAP kind (31337, 4339, "
                    "21339)")
        event = self.some_event()
        why = break_event(event, name)
        return self.envelope(event), event, why
