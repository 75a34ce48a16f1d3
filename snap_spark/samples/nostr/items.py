"""The pieces a Nostr sample is built from: keys, and lines waiting to be ordered.

A :class:`Key` is an agent's or a stranger's; an :class:`Item` is one events-file line
with what it must be labelled, kept until every line is made and the lines are ordered by
receipt time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from snap_spark.protocol.keys import Network, p2tr_address
from snap_spark.samples.messages.agents import derive_key as agent_key
from snap_spark.samples.nostr.config import NostrLabel

__all__ = ["Item", "Key", "derive_key", "other_network"]


@dataclass(frozen=True)
class Key:
    """A Nostr/SNAP key: an agent's or a stranger's."""

    name: str
    private_key: bytes = field(repr=False)
    pubkey: str  # x-only internal key P, hex (the Nostr pubkey)
    network: Network
    address: str  # taproot address of P on ``network``
    keyring: bool

    def address_on(self, network: Network) -> str:
        """The taproot address of this key on ``network``."""
        return p2tr_address(bytes.fromhex(self.pubkey), network)


@dataclass(eq=False)
class Item:
    """One events-file line before ordering (``at`` orders lines; envelopes write it)."""

    at: int
    seq: int
    scenario: str
    expected: str
    why: str  # "{ref}" is replaced by the line number of ``ref``
    event: dict[str, Any] | None = None
    form: str = "envelope"
    relay: str = ""
    subscription: str = ""
    raw: bytes | None = None  # garbage: the line itself
    kind: int | None = None
    inner_code: int | None = None
    ref: Item | None = None
    genuine: bool = False  # the event's id and sig are right (may be re-delivered, forged)
    clock_free: bool = False  # its verdict needs no receipt time (may be written bare)
    line_no: int = 0

    def line(self) -> bytes:
        """The events-file line: garbage as it is, else the event in its form."""
        if self.raw is not None:
            return self.raw
        if self.form == "event":
            return orjson.dumps(self.event)
        if self.form == "frame":
            return orjson.dumps(["EVENT", self.subscription, self.event])
        return orjson.dumps({"received_at": self.at, "relay": self.relay, "event": self.event})

    def label(self) -> NostrLabel:
        """The line's label (after the lines are numbered)."""
        why = self.why
        if self.ref is not None:
            why = why.replace("{ref}", str(self.ref.line_no))
        claimed = self.event.get("id") if isinstance(self.event, dict) else None
        is_hex = isinstance(claimed, str) and len(claimed) == 64 and _is_lower_hex(claimed)
        kind = self.event.get("kind") if isinstance(self.event, dict) else self.kind
        return NostrLabel(
            line_no=self.line_no,
            event_id=claimed if is_hex else None,
            kind=kind if isinstance(kind, int) and not isinstance(kind, bool) else None,
            expected=self.expected,
            inner_code=self.inner_code,
            why=why,
            scenario=self.scenario,
            form=self.form,
        )


def _is_lower_hex(text: str) -> bool:
    """Whether every character of ``text`` is a lowercase hex digit."""
    return all(c in "0123456789abcdef" for c in text)


def other_network(network: Network) -> Network:
    """Testnet for mainnet, mainnet for testnet."""
    return "testnet" if network == "mainnet" else "mainnet"


def derive_key(seed: int, label: str, index: int) -> bytes:
    """The private key number ``index`` of a kind of key (``label``) under ``seed``, in the
    Nostr sample's own domain (:func:`snap_spark.samples.messages.agents.derive_key`)."""
    return agent_key(seed, label, index, domain="snap-spark-nostr-sample")
