"""Deterministic Nostr traffic with labelled verdicts: ``snap-spark sample --nostr STEM``.

:func:`generate_nostr` builds what an operator archives from SNAP's Nostr side: agent-card
events (kind 31337), stored SNAP messages (kind 4339, NIP-44 encrypted), re-deliveries of
the same event by a second relay, forged copies of genuine event ids, garbage lines, and
signed well-known card documents. Every line gets a :class:`NostrLabel` saying which verdict
(``docs/architecture.md``, *Nostr verdicts*) the verifier must give it, and why. Labels come
from what the generator built on purpose; the generator never asks the protocol's check
functions (the tests do, to cross-check intent against the rules).

:func:`write_nostr_sample` writes, for a stem ``S``:

* ``S.events.jsonl``: one line per event, mostly envelopes ``{"received_at": <unix s>,
  "relay": "wss://…", "event": {…}}``; some raw events and relay frames ``["EVENT", "<sub>",
  {…}]``; garbage lines.
* ``S.labels.jsonl``: one :class:`NostrLabel` per events line, same order.
* ``S.keyring``: the 64-hex private keys of the recipients the operator can read, one a line
  after a ``#`` header, created with mode 0600. Nothing else holds a private key.
* ``S.well-known/<host>/snap-agent.json`` and ``S.well-known-labels.jsonl``.

Same config, same bytes: every choice comes from ``random.Random(seed)``, including BIP-340
auxiliary randomness and NIP-44 nonces (which is why NIP-44 encryption is done here, with a
given nonce: nostr-sdk draws its own; the tests decrypt every payload with nostr-sdk).

Readings where docs/architecture.md, *Nostr verdicts*, and the spec are silent (the labels
follow them):

* **Check order.** Event checks (``bad_event_id``, ``bad_event_sig``) first; then for 4339:
  ``expired``, ``encrypted``, ``decrypt_failed``, ``from_mismatch``, ``recipient_mismatch``,
  ``inner_invalid``, ``valid``. Cases whose label would change under another order are not
  generated: ``encrypted`` events never expire before receipt, ``expired`` ones are addressed
  to keyring recipients, and an event built for one failure passes every other check.
* **Keyring.** An event is ``encrypted`` when the ``p`` key is not in the keyring; such events
  are also *sent* by a key outside it (NIP-44 keys are symmetric), so no checker can read them.
* **Networks.** ``from_mismatch`` and ``recipient_mismatch`` compare with the taproot address
  on the network the inner address's prefix names, as for ``d`` tags (testnet agents talk on
  testnet).
* **NIP-40.** Expired means ``expiration < received_at``; no event sits on the boundary.
* **Receipt clock.** Inner messages are checked with the default strict rule against the
  envelope's ``received_at`` (±60 s, 120 s replay window, ``docs/verdicts.md``). Live
  deliveries arrive within 22 s of the inner timestamp; messages fetched late from a relay
  (offline retrieval) are deliberately more than 60 s late and labelled ``inner_invalid``
  2004. Replays: the same inner message in a second event within the window and the drift
  is 2006; beyond the drift, 2004. Bare events and frames carry no receipt time, so only
  events whose verdict needs none are written that way (all cards; 4339 events that fail
  before the inner message is checked and have no ``expiration`` tag).
* **Duplicates.** A second line with the same id as an earlier line whose id and signature
  verify is ``duplicate_event``, whatever the first one's verdict (its inner message is not
  checked again, so it is no replay). Forged copies (same id, content or sig changed) are
  ``bad_event_id`` / ``bad_event_sig`` before or after the genuine event and never shadow it.
* **Garbage.** Lines that hold no event, or one that breaks NIP-01's shapes, and correctly
  signed events of a kind other than 31337 and 4339, are ``malformed``.
* **inner_code** is set for ``inner_invalid`` only (``None`` for ``valid``, and for events
  decided before their inner message is checked).

Examples:
    >>> sample = generate_nostr(NostrSampleConfig(agents=6, cards=12, messages=30,
    ...                                           well_known=12, seed=3))
    >>> len(sample.lines) == len(sample.labels)
    True
    >>> sample.labels[0].line_no, sample.labels[0].expected in EVENT_LABELS
    (1, True)
    >>> sample.lines == generate_nostr(NostrSampleConfig(agents=6, cards=12, messages=30,
    ...                                                  well_known=12, seed=3)).lines
    True
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import math
import os
import random
import struct
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from coincurve import PrivateKey, PublicKey

from snap_spark.protocol.cards import canonical_card, sample_card, sign_card, signed_card_digest
from snap_spark.protocol.keys import (
    CURVE_ORDER,
    Network,
    encode_p2tr,
    internal_pubkey,
    p2tr_address,
    tweak_private_key,
)
from snap_spark.protocol.nostr import CARD_KIND, card_sort_key, card_tags, sign_event
from snap_spark.protocol.signing import message_digest, sign_message
from snap_spark.sample import SampleConfig, sample_agents

__all__ = [
    "EVENT_LABELS",
    "MESSAGE_KIND",
    "WELL_KNOWN_LABELS",
    "NostrLabel",
    "NostrSample",
    "NostrSampleConfig",
    "WellKnownDocument",
    "generate_nostr",
    "main",
    "nip44_conversation_key",
    "nip44_encrypt",
    "nip44_padded_length",
    "output_paths",
    "read_keyring",
    "summary",
    "write_nostr_sample",
]

#: Storable SNAP message (``discovery.md`` "Nostr Event Types").
MESSAGE_KIND: Final = 4339

#: Every ``expected`` value of an events-file label (docs/architecture.md, *Nostr verdicts*,
#: plus ``malformed`` for garbage lines and ``duplicate_event`` for a relay's re-delivery).
EVENT_LABELS: Final[tuple[str, ...]] = (
    "malformed",
    "duplicate_event",
    "bad_event_id",
    "bad_event_sig",
    "identity_mismatch",
    "invalid_card",
    "card_identity_mismatch",
    "superseded",
    "expired",
    "encrypted",
    "decrypt_failed",
    "from_mismatch",
    "recipient_mismatch",
    "inner_invalid",
    "valid",
)
#: Every ``expected`` value of a well-known label (``cards.verify_signed_card``'s verdicts).
WELL_KNOWN_LABELS: Final[tuple[str, ...]] = (
    "malformed", "bad_sig", "invalid_identity", "key_mismatch", "invalid_card", "valid",
)  # fmt: skip


# --------------------------------------------------------------------------- public types


@dataclass(frozen=True)
class NostrSampleConfig:
    """What to generate. Same config, byte-identical output.

    Attributes:
        agents: SNAP agents (at least 4): the identities of ``snap-spark sample`` with the
            same ``agents``, ``seed`` and ``testnet_share``. Even-numbered agents are the
            operator's (their keys go to the keyring); three extra "stranger" keys, never in
            the keyring, impersonate and re-wrap.
        cards: kind-31337 events (valid, superseded and broken ones).
        messages: kind-4339 events.
        well_known: signed well-known card documents.
        seed: seed of every random choice.
        start_time: unix seconds where the 4339 traffic starts.
        testnet_share: share of agents on testnet.
        duplicate_share, forged_share, garbage_share: extra lines, as shares of
            ``cards + messages``: re-deliveries by a second relay, forged copies of genuine
            event ids, garbage lines.
        stored_clock: the receipt time of a stored message's inner message the labels
            assume (``jobs/ingest_nostr.py --stored-clock``): ``event`` (default: the
            event's ``created_at``) or ``received`` (when the event reached the archive).
    """

    agents: int = 12
    cards: int = 60
    messages: int = 300
    well_known: int = 30
    seed: int = 7
    start_time: int = 1_770_163_200
    testnet_share: float = 0.25
    duplicate_share: float = 0.04
    forged_share: float = 0.04
    garbage_share: float = 0.08
    stored_clock: str = "event"

    def __post_init__(self) -> None:
        if self.stored_clock not in ("event", "received"):
            raise ValueError("stored_clock must be 'event' or 'received'")
        if self.agents < 4:
            raise ValueError("a Nostr sample needs at least 4 agents")
        for name in ("cards", "messages", "well_known"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("testnet_share", "duplicate_share", "forged_share", "garbage_share"):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {share}")


@dataclass(frozen=True)
class NostrLabel:
    """What one events-file line is and the verdict it must get.

    Attributes:
        line_no: 1-based line number in the events file.
        event_id: the ``id`` the line's event claims (64 lowercase hex), else ``None``.
        kind: the event's ``kind`` when it is an integer, else ``None``.
        expected: one of :data:`EVENT_LABELS`.
        inner_code: for ``inner_invalid``, the SNAP error code of the inner message;
            ``None`` otherwise (also for ``valid``).
        why: what the generator did, in a few words.
        scenario: the generator's name for the case (``rewrapped``, ``garbage/truncated``).
        form: ``envelope``, ``event`` (a raw event), ``frame`` (``["EVENT", sub, event]``)
            or ``garbage``.
    """

    line_no: int
    event_id: str | None
    kind: int | None
    expected: str
    inner_code: int | None
    why: str
    scenario: str
    form: str

    def to_plain(self) -> dict[str, Any]:
        """The labels-file line (keys in this order).

        Examples:
            >>> NostrLabel(1, None, None, "malformed", None, "empty line", "garbage/empty",
            ...            "garbage").to_plain()["expected"]
            'malformed'
        """
        return {
            "line_no": self.line_no,
            "event_id": self.event_id,
            "kind": self.kind,
            "expected": self.expected,
            "inner_code": self.inner_code,
            "why": self.why,
            "scenario": self.scenario,
            "form": self.form,
        }


@dataclass(frozen=True)
class WellKnownDocument:
    """One served ``/.well-known/snap-agent.json`` and the verdict it must get.

    Attributes:
        path: where it is written, relative to ``S.well-known/`` (``<host>/snap-agent.json``).
        url: where it would be served.
        data: the document's bytes.
        expected: one of :data:`WELL_KNOWN_LABELS`.
        why: what the generator did.
        scenario: the generator's name for the case.
    """

    path: str
    url: str
    data: bytes = field(repr=False)
    expected: str
    why: str
    scenario: str

    def label(self) -> dict[str, Any]:
        """The well-known-labels line of this document."""
        return {
            "file": self.path,
            "url": self.url,
            "expected": self.expected,
            "why": self.why,
            "scenario": self.scenario,
        }


@dataclass(frozen=True)
class NostrSample:
    """A generated sample (see :func:`generate_nostr`).

    ``keyring`` holds private keys and is left out of ``repr``; write it only with
    :func:`write_nostr_sample`.
    """

    lines: tuple[bytes, ...]
    labels: tuple[NostrLabel, ...]
    well_known: tuple[WellKnownDocument, ...]
    keyring_pubkeys: tuple[str, ...]
    keyring: tuple[bytes, ...] = field(repr=False)

    def counts(self) -> Counter[str]:
        """Events-file lines per expected verdict."""
        return Counter(label.expected for label in self.labels)

    def well_known_counts(self) -> Counter[str]:
        """Well-known documents per expected verdict."""
        return Counter(doc.expected for doc in self.well_known)


# --------------------------------------------------------------------------- NIP-44 v2

_NIP44_SALT: Final = b"nip44-v2"
_NIP44_MAX_PLAINTEXT: Final = 65535
_MASK32: Final = 0xFFFFFFFF


def nip44_conversation_key(private_key: bytes, pubkey_hex: str) -> bytes:
    """NIP-44 v2 conversation key: HKDF-extract(salt ``nip44-v2``, ECDH x coordinate).

    Symmetric: ``key(a, B) == key(b, A)``.

    Examples:
        >>> one, two = (1).to_bytes(32, "big"), (2).to_bytes(32, "big")
        >>> nip44_conversation_key(one, internal_pubkey(two).hex()).hex()[:16]
        'c41c775356fd92ea'
    """
    point = PublicKey(b"\x02" + bytes.fromhex(pubkey_hex)).multiply(private_key)
    shared_x = point.format(compressed=True)[1:]
    return hmac.new(_NIP44_SALT, shared_x, hashlib.sha256).digest()


def nip44_padded_length(length: int) -> int:
    """NIP-44 v2 ``calc_padded_len``: the padded size of ``length`` plaintext bytes.

    Examples:
        >>> [nip44_padded_length(n) for n in (1, 32, 33, 257, 320, 65535)]
        [32, 32, 64, 320, 320, 65536]
    """
    if length <= 32:
        return 32
    next_power = 1 << (length - 1).bit_length()
    chunk = 32 if next_power <= 256 else next_power // 8
    return chunk * ((length - 1) // chunk + 1)


def _hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def _quarter(x: list[int], a: int, b: int, c: int, d: int) -> None:
    x[a] = (x[a] + x[b]) & _MASK32
    x[d] ^= x[a]
    x[d] = ((x[d] << 16) | (x[d] >> 16)) & _MASK32
    x[c] = (x[c] + x[d]) & _MASK32
    x[b] ^= x[c]
    x[b] = ((x[b] << 12) | (x[b] >> 20)) & _MASK32
    x[a] = (x[a] + x[b]) & _MASK32
    x[d] ^= x[a]
    x[d] = ((x[d] << 8) | (x[d] >> 24)) & _MASK32
    x[c] = (x[c] + x[d]) & _MASK32
    x[b] ^= x[c]
    x[b] = ((x[b] << 7) | (x[b] >> 25)) & _MASK32


def _chacha20(key: bytes, nonce: bytes, data: bytes) -> bytes:
    """RFC 8439 ChaCha20 (12-byte nonce, block counter from 0) applied to ``data``."""
    words = struct.unpack("<8I", key)
    nonce_words = struct.unpack("<3I", nonce)
    out = bytearray()
    for counter in range((len(data) + 63) // 64):
        state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574, *words, counter, *nonce_words]
        x = state.copy()
        for _ in range(10):
            _quarter(x, 0, 4, 8, 12)
            _quarter(x, 1, 5, 9, 13)
            _quarter(x, 2, 6, 10, 14)
            _quarter(x, 3, 7, 11, 15)
            _quarter(x, 0, 5, 10, 15)
            _quarter(x, 1, 6, 11, 12)
            _quarter(x, 2, 7, 8, 13)
            _quarter(x, 3, 4, 9, 14)
        stream = struct.pack("<16I", *((a + b) & _MASK32 for a, b in zip(x, state, strict=True)))
        chunk = data[64 * counter : 64 * counter + 64]
        mixed = int.from_bytes(chunk, "little") ^ int.from_bytes(stream[: len(chunk)], "little")
        out += mixed.to_bytes(len(chunk), "little")
    return bytes(out)


def _nip44_payload(conversation_key: bytes, nonce: bytes, padded: bytes, version: int = 2) -> str:
    """``base64(version || nonce || chacha20(padded) || hmac)`` for given padded bytes."""
    keys = _hkdf_expand(conversation_key, nonce, 76)
    ciphertext = _chacha20(keys[:32], keys[32:44], padded)
    mac = hmac.new(keys[44:76], nonce + ciphertext, hashlib.sha256).digest()
    return base64.b64encode(bytes([version]) + nonce + ciphertext + mac).decode("ascii")


def _pad(raw: bytes) -> bytes:
    return len(raw).to_bytes(2, "big") + raw + bytes(nip44_padded_length(len(raw)) - len(raw))


def nip44_encrypt(plaintext: str, conversation_key: bytes, nonce: bytes) -> str:
    """NIP-44 v2 payload of ``plaintext`` with a given 32-byte nonce (deterministic).

    Raises:
        ValueError: the plaintext is empty or over 65,535 UTF-8 bytes, or the key or the
            nonce is not 32 bytes.

    Examples:
        >>> one, two = (1).to_bytes(32, "big"), (2).to_bytes(32, "big")
        >>> key = nip44_conversation_key(one, internal_pubkey(two).hex())
        >>> nip44_encrypt("a", key, (1).to_bytes(32, "big"))[:24]
        'AgAAAAAAAAAAAAAAAAAAAAAA'
    """
    raw = plaintext.encode("utf-8")
    if not 1 <= len(raw) <= _NIP44_MAX_PLAINTEXT:
        raise ValueError(f"NIP-44 plaintext must be 1-{_NIP44_MAX_PLAINTEXT} bytes")
    if len(conversation_key) != 32 or len(nonce) != 32:
        raise ValueError("conversation key and nonce must be 32 bytes")
    return _nip44_payload(conversation_key, nonce, _pad(raw))


# --------------------------------------------------------------------------- files


def output_paths(stem: str) -> dict[str, str]:
    """The files :func:`write_nostr_sample` writes for ``stem``.

    Examples:
        >>> output_paths("out/n")["events"], output_paths("out/n")["well_known"]
        ('out/n.events.jsonl', 'out/n.well-known')
    """
    return {
        "events": f"{stem}.events.jsonl",
        "labels": f"{stem}.labels.jsonl",
        "keyring": f"{stem}.keyring",
        "well_known": f"{stem}.well-known",
        "well_known_labels": f"{stem}.well-known-labels.jsonl",
    }


def read_keyring(path: str) -> list[bytes]:
    """The private keys of a keyring file (``#`` lines and blank lines skipped).

    Raises:
        ValueError: a line is not 64 hex characters.

    Examples:
        >>> import tempfile
        >>> name = os.path.join(tempfile.mkdtemp(), "k")
        >>> with open(name, "w") as handle:
        ...     _ = handle.write("# keys\\n" + "0a" * 32 + "\\n")
        >>> [key.hex()[:4] for key in read_keyring(name)]
        ['0a0a']
    """
    keys = []
    with open(path, encoding="ascii") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            if len(text) != 64:
                raise ValueError(f"{path} line {number}: a key is 64 hex characters")
            keys.append(bytes.fromhex(text))
    return keys


# --------------------------------------------------------------------------- generator data


@dataclass(frozen=True)
class _Key:
    """A Nostr/SNAP key: an agent's or a stranger's."""

    name: str
    private_key: bytes = field(repr=False)
    pubkey: str  # x-only internal key P, hex (the Nostr pubkey)
    network: Network
    address: str  # taproot address of P on ``network``
    keyring: bool

    def address_on(self, network: Network) -> str:
        return p2tr_address(bytes.fromhex(self.pubkey), network)


@dataclass(eq=False)
class _Item:
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
    ref: _Item | None = None
    genuine: bool = False  # the event's id and sig are right (may be re-delivered, forged)
    clock_free: bool = False  # its verdict needs no receipt time (may be written bare)
    line_no: int = 0

    def line(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.form == "event":
            return orjson.dumps(self.event)
        if self.form == "frame":
            return orjson.dumps(["EVENT", self.subscription, self.event])
        return orjson.dumps({"received_at": self.at, "relay": self.relay, "event": self.event})

    def label(self) -> NostrLabel:
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
    return all(c in "0123456789abcdef" for c in text)


_RELAYS: Final = (
    "wss://relay.damus.io",
    "wss://nos.lol",
    "wss://relay.primal.net",
    "wss://relay.nostr.band",
)
_TEXTS: Final = (
    "Summarise yesterday's incident report",
    "Translate the release notes into German",
    "请把这份合同翻译成英文",
    "今日の売上を集計してください",
    "Book a table for four at 19:30 🍽️",
    "Check this invoice for errors",
    "Refactor the payment module to async",
    "Quote: \"ship it\" \\o/ — then run the tests",
)
_AGENT_NAMES: Final = (
    "Code Assistant", "Ledger Bot", "Travel Planner", "Translator", "Data Analyst",
    "Research Agent", "Invoice Checker", "Scheduler",
)  # fmt: skip
_STATES: Final = ("working", "input_required", "completed")

# Scenarios with their weights (a first pass writes each once when the counts allow).
_MESSAGE_WEIGHTS: Final[dict[str, int]] = {
    "delivered": 40,
    "unsigned_response": 4,
    "boundary_drift_60": 2,
    "offline_recipient": 8,
    "expired": 5,
    "decrypt_failed": 8,
    "rewrapped": 5,
    "rewrapped_with_genuine": 3,
    "misaddressed": 5,
    "inner_bad_sig": 4,
    "inner_unsigned_request": 2,
    "inner_constraint": 3,
    "late_fetch": 4,
    "inner_replay": 4,
    "inner_replay_late": 2,
    "inner_forged_first": 2,
    "tampered_event": 3,
    "bad_event_sig": 3,
}
_MESSAGE_SIZES: Final[dict[str, int]] = {
    "rewrapped_with_genuine": 2,
    "inner_replay": 2,
    "inner_replay_late": 2,
    "inner_forged_first": 2,
}
_CARD_WEIGHTS: Final[dict[str, int]] = {
    "card": 30,
    "card_update": 8,
    "card_same_second": 2,
    "impersonation": 6,
    "bad_d_tag": 8,
    "invalid_card": 8,
    "card_identity_mismatch": 5,
    "tampered_card_event": 4,
    "bad_card_sig": 4,
}
_CARD_SIZES: Final[dict[str, int]] = {"card_update": 2, "card_same_second": 2}
_WELL_KNOWN_WEIGHTS: Final[dict[str, int]] = {
    "valid": 8,
    "malformed": 5,
    "bad_sig": 4,
    "invalid_identity": 3,
    "key_mismatch": 3,
    "invalid_card": 3,
}


#: Kinds of garbage lines (all ``malformed``), written in turn.
_GARBAGE: Final = (
    "not_json", "python_repr", "truncated", "invalid_utf8", "empty", "not_object",
    "other_frame", "frame_without_event", "received_at_text", "event_not_object",
    "lone_surrogate", "deep_nesting", "wrong_kind", "missing_sig", "uppercase_id",
    "bad_hex_pubkey", "short_sig", "created_at_text", "created_at_float", "kind_text",
    "kind_out_of_range", "tags_object", "content_number",
)  # fmt: skip


def _break_event(event: dict[str, Any], name: str) -> str:
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
    raise AssertionError(name)  # pragma: no cover - _GARBAGE and this list agree


def _other_network(network: Network) -> Network:
    return "testnet" if network == "mainnet" else "mainnet"


def _derive_key(seed: int, label: str, index: int) -> bytes:
    counter = 0
    while True:
        material = f"snap-spark-nostr-sample|{seed}|{label}|{index}|{counter}".encode()
        key = hashlib.sha256(material).digest()
        if 0 < int.from_bytes(key, "big") < CURVE_ORDER:
            return key
        counter += 1  # pragma: no cover - probability about 2^-128


# --------------------------------------------------------------------------- the generator


class _Generator:
    """Builds the sample; see the module docstring. One instance, one sample."""

    def __init__(self, config: NostrSampleConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        identities = sample_agents(
            SampleConfig(agents=config.agents, seed=config.seed,
                         testnet_share=config.testnet_share)
        )
        self.agents = [
            _Key(f"agent {a.index}", a.private_key, a.internal_key.hex(), a.network, a.address,
                 keyring=a.index % 2 == 0)
            for a in identities
        ]
        self.strangers = []
        for index in range(3):
            secret = _derive_key(config.seed, "stranger", index)
            pub = internal_pubkey(secret)
            self.strangers.append(
                _Key(f"stranger {index}", secret, pub.hex(), "mainnet",
                     p2tr_address(pub, "mainnet"), keyring=False)
            )
        self.items: list[_Item] = []
        self.seq = 0
        self.variants: Counter[str] = Counter()
        self.conversation_keys: dict[tuple[str, str], bytes] = {}
        self.delivered: list[tuple[_Item, dict[str, Any], _Key, _Key]] = []
        self.valid_cards: list[_Item] = []
        self.card_versions: Counter[str] = Counter()
        self.same_second = 0

    # ------------------------------------------------------------------ small helpers

    def aux(self) -> bytes:
        return self.rng.randbytes(32)

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def variant(self, scenario: str, count: int) -> int:
        """Cycle through a scenario's variants, so each appears once the scenario repeats."""
        number = self.variants[scenario] % count
        self.variants[scenario] += 1
        return number

    def add(self, at: int, scenario: str, expected: str, why: str, **kw: Any) -> _Item:
        self.seq += 1
        item = _Item(at=at, seq=self.seq, scenario=scenario, expected=expected, why=why, **kw)
        if not item.relay:
            item.relay = self.rng.choice(_RELAYS)
        if not item.subscription:
            item.subscription = f"snap-{self.rng.randrange(16**6):06x}"
        self.items.append(item)
        return item

    def other_relay(self, relay: str) -> str:
        return self.rng.choice([r for r in _RELAYS if r != relay])

    def pick_form(self, item: _Item) -> None:
        """Write a clock-free event bare or as a relay frame now and then."""
        if item.clock_free and item.raw is None:
            roll = self.rng.random()
            if roll < 0.1:
                item.form = "event"
            elif roll < 0.2:
                item.form = "frame"
            if item.form != "envelope":
                item.why += " (written without envelope: the verdict needs no receipt time)"

    def schedule(self, weights: dict[str, int], total: int, sizes: dict[str, int],
                 single: str) -> list[str]:
        """Scenario names adding up to ``total`` events: each once first, then by weight."""
        names = list(weights)
        self.rng.shuffle(names)
        plan: list[str] = []
        left = total
        for name in names:
            if sizes.get(name, 1) <= left:
                plan.append(name)
                left -= sizes.get(name, 1)
        population, cumulative = list(weights), list(weights.values())
        while left > 0:
            name = self.rng.choices(population, cumulative)[0]
            if sizes.get(name, 1) > left:
                name = single
            plan.append(name)
            left -= sizes.get(name, 1)
        return plan

    def conversation(self, sender: _Key, recipient_pubkey: str) -> bytes:
        key = (sender.pubkey, recipient_pubkey)
        if key not in self.conversation_keys:
            self.conversation_keys[key] = nip44_conversation_key(
                sender.private_key, recipient_pubkey
            )
        return self.conversation_keys[key]

    def keyring_pair(self) -> tuple[_Key, _Key]:
        """A sender and a keyring recipient on the same network."""
        recipient = self.rng.choice([a for a in self.agents if a.keyring])
        senders = [a for a in self.agents if a.network == recipient.network and a is not recipient]
        return self.rng.choice(senders), recipient

    def outside_pair(self) -> tuple[_Key, _Key]:
        """A sender and a recipient both outside the keyring (so no key the operator holds
        decrypts it, whether a checker tries the recipient's key or the sender's)."""
        pools: list[list[_Key]] = []
        for network in ("mainnet", "testnet"):
            pool = [a for a in self.agents if not a.keyring and a.network == network]
            if network == "mainnet":
                pool += self.strangers
            if len(pool) >= 2:
                pools.append(pool)
        pool = self.rng.choice(pools)
        sender, recipient = self.rng.sample(pool, 2)
        return sender, recipient

    def third_party(self, *exclude: _Key) -> _Key:
        return self.rng.choice([k for k in (*self.agents, *self.strangers) if k not in exclude])

    # ------------------------------------------------------------------ SNAP messages

    def inner(self, sender: _Key, to: str, ts: int, *, msg_type: str = "request",
              signed: bool = True) -> dict[str, Any]:
        """A SNAP message from ``sender`` (its address on its network) to ``to``."""
        if msg_type == "request":
            payload: dict[str, Any] = {
                "message": {
                    "messageId": self.uuid(),
                    "role": "user",
                    "parts": [{"text": self.rng.choice(_TEXTS)}],
                }
            }
        else:
            payload = {
                "task": {
                    "id": f"task-{self.uuid()}",
                    "contextId": f"ctx-{self.uuid()}",
                    "status": {"state": self.rng.choice(_STATES)},
                }
            }
        message = {
            "id": self.uuid(),
            "version": "0.1",
            "from": sender.address,
            "to": to,
            "type": msg_type,
            "method": "message/send",
            "payload": payload,
            "timestamp": ts,
        }
        return sign_message(message, sender.private_key, self.aux()) if signed else message

    def wrap(self, wrapper: _Key, recipient_pubkey: str, content: str, created_at: int,
             expiration: int | None = None) -> dict[str, Any]:
        tags = [["p", recipient_pubkey]]
        if expiration is not None:
            tags.append(["expiration", str(expiration)])
        template = {"created_at": created_at, "kind": MESSAGE_KIND, "tags": tags,
                    "content": content}
        return sign_event(template, wrapper.private_key, self.aux())

    def encrypt(self, sender: _Key, recipient_pubkey: str, inner: dict[str, Any]) -> str:
        return nip44_encrypt(
            orjson.dumps(inner).decode(), self.conversation(sender, recipient_pubkey),
            self.rng.randbytes(32),
        )

    def live(self, ts: int) -> tuple[int, int]:
        """``(created_at, received_at)`` of a message sent at ``ts`` and received live."""
        created = ts + self.rng.randint(0, 2)
        return created, created + self.rng.randint(0, 20)

    def maybe_expiration(self, created: int) -> int | None:
        """A far expiration tag on some events (days ahead: never reached here)."""
        if self.rng.random() < 0.4:
            return created + self.rng.randint(86_400, 7 * 86_400)
        return None

    def deliver(self, ts: int, scenario: str, *, msg_type: str = "request",
                signed: bool = True, why: str = "") -> _Item:
        """A genuine, valid 4339 event from an agent to a keyring recipient."""
        sender, recipient = self.keyring_pair()
        inner = self.inner(sender, recipient.address, ts, msg_type=msg_type, signed=signed)
        created, received = self.live(ts)
        expiration = self.maybe_expiration(created)
        event = self.wrap(sender, recipient.pubkey, self.encrypt(sender, recipient.pubkey, inner),
                          created, expiration)
        item = self.add(
            received, scenario, "valid",
            why or f"{sender.name} to {recipient.name} (keyring), received "
                   f"{received - ts}s after the message timestamp",
            event=event, genuine=True,
        )
        self.delivered.append((item, inner, sender, recipient))
        return item

    def message_scenario(self, name: str, ts: int) -> None:
        rng = self.rng
        if name == "delivered":
            self.deliver(ts, name, msg_type=rng.choice(("request", "response")))
        elif name == "unsigned_response":
            self.deliver(ts, name, msg_type="response", signed=False,
                         why="an unsigned response (valid: only requests must be signed)")
        elif name == "boundary_drift_60":
            sender, recipient = self.keyring_pair()
            inner = self.inner(sender, recipient.address, ts)
            event = self.wrap(sender, recipient.pubkey,
                              self.encrypt(sender, recipient.pubkey, inner), ts)
            item = self.add(ts + 60, name, "valid",
                            "received exactly 60s after the inner timestamp (60 passes)",
                            event=event, genuine=True)
            self.delivered.append((item, inner, sender, recipient))
        elif name == "offline_recipient":
            sender, recipient = self.outside_pair()
            inner = self.inner(sender, recipient.address, ts)
            created, received = self.live(ts)
            expiration = self.maybe_expiration(created)
            event = self.wrap(sender, recipient.pubkey,
                              self.encrypt(sender, recipient.pubkey, inner), created, expiration)
            item = self.add(received, name, "encrypted",
                            f"{sender.name} to {recipient.name}: neither key is in the keyring",
                            event=event, genuine=True, clock_free=expiration is None)
            self.pick_form(item)
        elif name == "expired":
            sender, recipient = self.keyring_pair()
            inner = self.inner(sender, recipient.address, ts)
            ttl = rng.randint(60, 3600)
            late = rng.randint(1, 7200)
            event = self.wrap(sender, recipient.pubkey,
                              self.encrypt(sender, recipient.pubkey, inner), ts, ts + ttl)
            self.add(ts + ttl + late, name, "expired",
                     f"expiration tag {ts + ttl} is {late}s before the receipt time",
                     event=event, genuine=True)
        elif name == "decrypt_failed":
            self.decrypt_failed(ts)
        elif name == "rewrapped":
            self.rewrapped(ts, with_genuine=False)
        elif name == "rewrapped_with_genuine":
            self.rewrapped(ts, with_genuine=True)
        elif name == "misaddressed":
            self.misaddressed(ts)
        elif name == "inner_bad_sig":
            self.inner_bad_sig(ts)
        elif name == "inner_unsigned_request":
            sender, recipient = self.keyring_pair()
            inner = self.inner(sender, recipient.address, ts, signed=False)
            self.inner_invalid(name, sender, recipient, inner, ts, 2002, "a request without sig")
        elif name == "inner_constraint":
            self.inner_constraint(ts)
        elif name == "late_fetch":
            sender, recipient = self.keyring_pair()
            inner = self.inner(sender, recipient.address, ts)
            late = rng.randint(61, 7200)
            event = self.wrap(sender, recipient.pubkey,
                              self.encrypt(sender, recipient.pubkey, inner), ts)
            if self.config.stored_clock == "event" and self.variant(name, 2) == 1:
                # wrapped late by its sender: created_at is the receipt time, so 2004
                event = self.wrap(sender, recipient.pubkey,
                                  self.encrypt(sender, recipient.pubkey, inner), ts + late)
                self.add(ts + late + rng.randint(0, 20), name, "inner_invalid",
                         f"wrapped for the relay {late}s after the inner timestamp: its "
                         "created_at is the receipt time (--stored-clock event), so drift "
                         "fails, 2004", event=event, genuine=True, inner_code=2004)
            elif self.config.stored_clock == "event":
                item = self.add(ts + late, name, "valid",
                                f"fetched from the relay {late}s after the inner timestamp "
                                "(offline retrieval): drift is checked against the event's "
                                "created_at (--stored-clock event), which is the timestamp",
                                event=event, genuine=True)
                self.delivered.append((item, inner, sender, recipient))
            else:
                self.add(ts + late, name, "inner_invalid",
                         f"fetched from the relay {late}s after the inner timestamp (offline "
                         "retrieval): --stored-clock received checks drift against "
                         "received_at, so 2004", event=event, genuine=True, inner_code=2004)
        elif name in ("inner_replay", "inner_replay_late"):
            self.inner_replay(ts, late=name == "inner_replay_late")
        elif name == "inner_forged_first":
            self.inner_forged_first(ts)
        elif name == "tampered_event":
            self.tampered_event(ts)
        elif name == "bad_event_sig":
            self.bad_event_sig(ts)
        else:  # pragma: no cover - the weights table and this dispatch agree
            raise AssertionError(name)

    def inner_invalid(self, name: str, sender: _Key, recipient: _Key, inner: dict[str, Any],
                      ts: int, code: int, what: str) -> _Item:
        created, received = self.live(ts)
        event = self.wrap(sender, recipient.pubkey, self.encrypt(sender, recipient.pubkey, inner),
                          created, self.maybe_expiration(created))
        return self.add(received, name, "inner_invalid", f"{what}: inner message gets {code}",
                        event=event, genuine=True, inner_code=code)

    def decrypt_failed(self, ts: int) -> None:
        sender, recipient = self.keyring_pair()
        inner = self.inner(sender, recipient.address, ts)
        conversation = self.conversation(sender, recipient.pubkey)
        nonce = self.rng.randbytes(32)
        plaintext = orjson.dumps(inner)
        variant = self.variant("decrypt_failed", 8)
        if variant == 0:
            payload = bytearray(base64.b64decode(nip44_encrypt(plaintext.decode(), conversation,
                                                               nonce)))
            payload[-1] ^= 0x01
            content, what = base64.b64encode(bytes(payload)).decode(), "MAC tampered"
        elif variant == 1:
            other = self.third_party(sender, recipient)
            content = nip44_encrypt(plaintext.decode(), self.conversation(sender, other.pubkey),
                                    nonce)
            what = f"encrypted for {other.name}, not for the p-tagged recipient"
        elif variant == 2:
            content = "#" + nip44_encrypt(plaintext.decode(), conversation, nonce)[1:]
            what = "payload starts with '#' (unsupported encoding)"
        elif variant == 3:
            content = _nip44_payload(conversation, nonce, _pad(plaintext), version=1)
            what = "version byte 1 (only 2 is defined)"
        elif variant == 4:
            content = "this is not base64! " + inner["id"]
            what = "content is not base64"
        elif variant == 5:
            padded = bytearray(_pad(plaintext))
            padded[0:2] = _NIP44_MAX_PLAINTEXT.to_bytes(2, "big")
            content = _nip44_payload(conversation, nonce, bytes(padded))
            what = "valid MAC, padding declares more plaintext than there is"
        elif variant == 6:
            raw = b"\xff\xfe" + plaintext
            content = _nip44_payload(conversation, nonce, _pad(raw))
            what = "valid MAC, plaintext not UTF-8"
        else:
            junk = bytes([2]) + self.rng.randbytes(120_000)
            content = base64.b64encode(junk).decode()
            what = f"huge content ({len(content)} characters), over NIP-44's size limit"
        created, received = self.live(ts)
        event = self.wrap(sender, recipient.pubkey, content, created)
        item = self.add(received, f"decrypt_failed/{variant}", "decrypt_failed",
                        f"{sender.name} to {recipient.name} (keyring): {what}",
                        event=event, genuine=True, clock_free=True)
        self.pick_form(item)

    def rewrapped(self, ts: int, *, with_genuine: bool) -> None:
        """A genuine A→B message wrapped and signed by C (C is not A)."""
        rng = self.rng
        author, recipient = self.keyring_pair()
        inner = self.inner(author, recipient.address, ts)
        wrapper = self.third_party(author, recipient)
        created, received = self.live(ts)
        content = self.encrypt(wrapper, recipient.pubkey, inner)
        event = self.wrap(wrapper, recipient.pubkey, content, created)
        if not with_genuine:
            item = self.add(received, "rewrapped", "from_mismatch",
                            f"{author.name}'s signed message to {recipient.name}, wrapped and "
                            f"signed by {wrapper.name}: inner from is not the event key's "
                            "taproot address", event=event, genuine=True, clock_free=True)
            self.pick_form(item)
            return
        genuine_event = self.wrap(author, recipient.pubkey,
                                  self.encrypt(author, recipient.pubkey, inner), created)
        first, second = sorted((received, received + rng.randint(1, 30)))
        genuine_first = rng.random() < 0.5
        genuine_at, copy_at = (first, second) if genuine_first else (second, first)
        genuine = self.add(genuine_at, "rewrapped_with_genuine", "valid",
                           f"genuine delivery by {author.name}", event=genuine_event,
                           genuine=True)
        self.delivered.append((genuine, inner, author, recipient))
        order = "after" if genuine_first else "before"
        self.add(copy_at, "rewrapped_with_genuine", "from_mismatch",
                 f"the message of line {{ref}} re-wrapped by {wrapper.name} and received "
                 f"{order} it: inner from is not the event key's taproot address (it never "
                 "counts as a replay or shadows the genuine one)",
                 event=event, genuine=True, ref=genuine)
        if not genuine_first:
            genuine.why += " (a re-wrapped copy by another key came first)"

    def misaddressed(self, ts: int) -> None:
        sender, recipient = self.keyring_pair()
        if self.variant("misaddressed", 2) == 0:
            others = [a for a in self.agents
                      if a.network == sender.network and a not in (sender, recipient)]
            other = self.rng.choice(others) if others else self.strangers[0]
            to = other.address_on(sender.network)  # same network: only the recipient is wrong
            what = f"inner to is {other.name}, p tag is {recipient.name}"
        else:
            to = encode_p2tr(bytes.fromhex(recipient.pubkey), recipient.network)
            what = (f"inner to encodes {recipient.name}'s untweaked key (not its taproot "
                    "address)")
        inner = self.inner(sender, to, ts)
        created, received = self.live(ts)
        event = self.wrap(sender, recipient.pubkey, self.encrypt(sender, recipient.pubkey, inner),
                          created)
        item = self.add(received, "misaddressed", "recipient_mismatch", what, event=event,
                        genuine=True, clock_free=True)
        self.pick_form(item)

    def inner_bad_sig(self, ts: int) -> None:
        sender, recipient = self.keyring_pair()
        inner = self.inner(sender, recipient.address, ts)
        variant = self.variant("inner_bad_sig", 3)
        if variant == 0:
            inner["payload"]["message"]["parts"][0]["text"] += " (edited)"
            what = "payload edited after signing"
        elif variant == 1:
            raw = PrivateKey(sender.private_key).sign_schnorr(message_digest(inner), self.aux())
            inner["sig"] = bytes(raw).hex()
            what = "signed with the untweaked key"
        else:
            other = self.third_party(sender)
            inner = sign_message(inner, other.private_key, self.aux())
            what = f"signed by {other.name}'s key"
        self.inner_invalid("inner_bad_sig", sender, recipient, inner, ts, 2001, what)

    def inner_constraint(self, ts: int) -> None:
        sender, recipient = self.keyring_pair()
        inner = self.inner(sender, recipient.address, ts, signed=False)
        variant = self.variant("inner_constraint", 3)
        if variant == 0:
            inner["method"], what = "Message/Send", "method 'Message/Send' breaks the pattern"
        elif variant == 1:
            inner["version"], what = "1", "version '1' breaks ^\\d+\\.\\d+$"
        else:
            inner["id"], what = "msg@" + inner["id"][:8], "id with '@' breaks the id pattern"
        inner = sign_message(inner, sender.private_key, self.aux())
        self.inner_invalid("inner_constraint", sender, recipient, inner, ts, 1004, what)

    def inner_replay(self, ts: int, *, late: bool) -> None:
        """A valid delivery, then the same inner message in a second event.

        With ``stored_clock="event"`` the second event is wrapped later than the first (its
        ``created_at`` is its receipt time): two events of one second would be a tie that
        no receipt order can settle, which the labels avoid."""
        first = self.deliver(ts, "inner_replay_late" if late else "inner_replay")
        _, inner, sender, recipient = self.delivered[-1]
        created = first.event["created_at"] if first.event else ts
        by_event = self.config.stored_clock == "event"
        if by_event:
            created = ts + self.rng.randint(61, 119) if late else created + self.rng.randint(1, 30)
        event = self.wrap(sender, recipient.pubkey, self.encrypt(sender, recipient.pubkey, inner),
                          created)
        if late:
            at = created + self.rng.randint(0, 20) if by_event else ts + self.rng.randint(61, 119)
            clock = created if by_event else at
            self.add(at, "inner_replay_late", "inner_invalid",
                     f"same inner message as line {{ref}} in a new event whose receipt time "
                     f"({'created_at' if by_event else 'received_at'}) is {clock - ts}s after "
                     "its timestamp: drift fails before the replay check, 2004",
                     event=event, genuine=True, inner_code=2004, ref=first)
            return
        if by_event:
            at = max(first.at + 1, created)
            self.add(at, "inner_replay", "inner_invalid",
                     f"same inner message (from, id) as line {{ref}}, wrapped again "
                     f"{created - (first.event or {}).get('created_at', ts)}s later (its "
                     f"created_at is its receipt time); drift {created - ts}s passes, so 2006 "
                     "(the first copy was accepted)", event=event, genuine=True,
                     inner_code=2006, ref=first)
            return
        low, high = first.at + 1, min(first.at + 120, ts + 60)
        at = self.rng.randint(low, max(low, high))
        self.add(at, "inner_replay", "inner_invalid",
                 f"same inner message (from, id) as line {{ref}}, accepted {at - first.at}s "
                 f"earlier; drift {at - ts}s passes, so 2006", event=event, genuine=True,
                 inner_code=2006, ref=first)

    def inner_forged_first(self, ts: int) -> None:
        """A forged copy of an inner message (same from and id) arrives before the genuine."""
        sender, recipient = self.keyring_pair()
        inner = self.inner(sender, recipient.address, ts)
        forged = orjson.loads(orjson.dumps(inner))
        forged["payload"]["message"]["parts"][0]["text"] = "Wire 2 BTC to the address below"
        created = ts + self.rng.randint(0, 2)
        received = created + self.rng.randint(0, 10)
        forged_event = self.wrap(sender, recipient.pubkey,
                                 self.encrypt(sender, recipient.pubkey, forged), created)
        # with stored_clock="event", created_at orders the two (a tie would settle nothing)
        later = self.rng.randint(1, 20) if self.config.stored_clock == "event" else 0
        genuine_event = self.wrap(sender, recipient.pubkey,
                                  self.encrypt(sender, recipient.pubkey, inner), created + later)
        copy = self.add(received, "inner_forged_first", "inner_invalid",
                        "inner payload forged (same from and id as a genuine message received "
                        "later): 2001, and it never enters the replay store",
                        event=forged_event, genuine=True, inner_code=2001)
        genuine = self.add(received + later + self.rng.randint(1, 20), "inner_forged_first",
                           "valid",
                           "genuine message whose forged copy (line {ref}) came first",
                           event=genuine_event, genuine=True, ref=copy)
        self.delivered.append((genuine, inner, sender, recipient))

    def tampered_event(self, ts: int) -> None:
        sender, recipient = self.keyring_pair()
        inner = self.inner(sender, recipient.address, ts)
        created, received = self.live(ts)
        event = self.wrap(sender, recipient.pubkey, self.encrypt(sender, recipient.pubkey, inner),
                          created)
        variant = self.variant("tampered_event", 3)
        if variant == 0:
            other = self.third_party(sender, recipient)
            event["tags"][0][1], what = other.pubkey, f"p tag redirected to {other.name}"
        elif variant == 1:
            event["created_at"] -= 3600
            what = "created_at moved an hour back"
        else:
            content = event["content"]
            flipped = "A" if content[50] != "A" else "B"
            event["content"] = content[:50] + flipped + content[51:]
            what = "one content character changed"
        item = self.add(received, "tampered_event", "bad_event_id",
                        f"{what} after signing, id kept", event=event, clock_free=True)
        self.pick_form(item)

    def bad_signature(self, event: dict[str, Any], owner: _Key, scenario: str) -> str:
        """Replace ``event["sig"]`` with a signature that does not verify; say how."""
        variant = self.variant(scenario, 3)
        digest = bytes.fromhex(event["id"])
        if variant == 0:
            other = self.third_party(owner)
            event["sig"] = bytes(PrivateKey(other.private_key).sign_schnorr(digest,
                                                                            self.aux())).hex()
            return f"id signed by {other.name}, pubkey kept"
        if variant == 1:
            tweaked = PrivateKey(tweak_private_key(owner.private_key))
            event["sig"] = bytes(tweaked.sign_schnorr(digest, self.aux())).hex()
            return "id signed with the taproot-tweaked key instead of the Nostr key"
        other_digest = hashlib.sha256(digest).digest()
        event["sig"] = bytes(PrivateKey(owner.private_key).sign_schnorr(other_digest,
                                                                        self.aux())).hex()
        return "a signature of another id by the same key"

    def bad_event_sig(self, ts: int) -> None:
        sender, recipient = self.keyring_pair()
        inner = self.inner(sender, recipient.address, ts)
        created, received = self.live(ts)
        event = self.wrap(sender, recipient.pubkey, self.encrypt(sender, recipient.pubkey, inner),
                          created)
        what = self.bad_signature(event, sender, "bad_event_sig")
        item = self.add(received, "bad_event_sig", "bad_event_sig", what, event=event,
                        clock_free=True)
        self.pick_form(item)

    # ------------------------------------------------------------------ agent cards

    def card(self, key: _Key, identity: str, **overrides: Any) -> dict[str, Any]:
        index = int(key.name.split()[-1])
        self.card_versions[key.pubkey] += 1
        card = sample_card(
            identity,
            name=f"{_AGENT_NAMES[index % len(_AGENT_NAMES)]} {index}",
            version=f"1.{self.card_versions[key.pubkey]}.0",
            endpoints=[{"protocol": "http", "url": f"https://agent-{index:03d}.example/snap"}],
            nostrRelays=self.rng.sample(list(_RELAYS), 2),
        )
        card.update(overrides)
        return card

    def card_event(self, key: _Key, card: dict[str, Any], created_at: int,
                   tags: list[list[str]] | None = None) -> dict[str, Any]:
        claimed = card.get("identity")
        identity = claimed if isinstance(claimed, str) else key.address
        template = {
            "created_at": created_at,
            "kind": CARD_KIND,
            "tags": tags if tags is not None else card_tags(card, identity),
            "content": orjson.dumps(card).decode(),
        }
        return sign_event(template, key.private_key, self.aux())

    def card_times(self, end: int) -> tuple[int, int]:
        """``(created_at, received_at)`` of a card: made up to 30 days before the traffic."""
        start = self.config.start_time
        created = self.rng.randint(start - 30 * 86_400, end)
        received = self.rng.randint(max(start, created), max(start, created) + 600)
        return created, received

    def add_card(self, scenario: str, expected: str, why: str, event: dict[str, Any],
                 received: int, *, genuine: bool = True) -> _Item:
        item = self.add(received, scenario, expected, why, event=event, genuine=genuine,
                        clock_free=True)
        if expected == "valid":
            self.valid_cards.append(item)
        self.pick_form(item)
        return item

    def card_scenario(self, name: str, end: int) -> None:
        rng = self.rng
        agent = rng.choice(self.agents)
        created, received = self.card_times(end)
        if name == "card":
            network: Network = agent.network
            if self.variant("card", 5) == 4:  # the same key's card for the other network
                network = _other_network(agent.network)
            identity = agent.address_on(network)
            event = self.card_event(agent, self.card(agent, identity), created)
            self.add_card(name, "valid", f"{agent.name}'s card for {identity[:4]}", event,
                          received)
        elif name in ("card_update", "card_same_second"):
            if name == "card_same_second":
                # Two versions in one second, newer than any other card (updates reach at
                # most a day past ``end``), so the lower-id rule decides which stands.
                self.same_second += 1
                created = end + 86_401 + 3600 * self.same_second
                times = [created, created]
            else:
                times = [created, created + rng.randint(60, 86_400)]
            for at in times:
                event = self.card_event(agent, self.card(agent, agent.address), at)
                self.add_card(name, "valid", f"{agent.name} published a new card version",
                              event, received + rng.randint(0, 600))
        elif name == "impersonation":
            victim = rng.choice([a for a in self.agents if a is not agent])
            attacker = rng.choice([agent, *self.strangers])
            card = self.card(victim, victim.address)
            event = self.card_event(attacker, card, created)
            self.add_card(name, "identity_mismatch",
                          f"{attacker.name} publishes {victim.name}'s card (d tag and identity "
                          f"are {victim.name}'s address)", event, received)
        elif name == "bad_d_tag":
            self.bad_d_tag(agent, created, received)
        elif name == "invalid_card":
            self.invalid_card(agent, created, received)
        elif name == "card_identity_mismatch":
            if self.variant(name, 2) == 0:
                other = rng.choice([a for a in self.agents if a is not agent])
                identity, what = other.address, f"card identity is {other.name}'s address"
            else:
                identity = agent.address_on(_other_network(agent.network))
                what = "card identity is the same key's address on the other network"
            card = self.card(agent, identity)
            event = self.card_event(agent, card, created, card_tags(card, agent.address))
            self.add_card(name, "card_identity_mismatch", f"{what}; d tag is {agent.name}'s",
                          event, received)
        elif name == "tampered_card_event":
            event = self.card_event(agent, self.card(agent, agent.address), created)
            variant = self.variant(name, 3)
            if variant == 0:
                card = orjson.loads(event["content"])
                card["description"] = "Trusted payments agent, send funds here"
                event["content"], what = orjson.dumps(card).decode(), "card description edited"
            elif variant == 1:
                event["created_at"] += 86_400
                what = "created_at moved a day ahead (to win replacement)"
            else:
                event["tags"].append(["relay", "wss://evil.example"])
                what = "a relay tag added"
            self.add_card(name, "bad_event_id", f"{what} after signing, id kept", event,
                          received, genuine=False)
        elif name == "bad_card_sig":
            event = self.card_event(agent, self.card(agent, agent.address), created)
            what = self.bad_signature(event, agent, "bad_card_sig")
            self.add_card(name, "bad_event_sig", what, event, received, genuine=False)
        else:  # pragma: no cover - the weights table and this dispatch agree
            raise AssertionError(name)

    def bad_d_tag(self, agent: _Key, created: int, received: int) -> None:
        card = self.card(agent, agent.address)
        tags = card_tags(card, agent.address)
        key = agent
        variant = self.variant("bad_d_tag", 6)
        if variant == 0:
            untweaked = encode_p2tr(bytes.fromhex(agent.pubkey), agent.network)
            tags[0][1] = card["identity"] = untweaked
            what = "d tag encodes the untweaked key (not its taproot address)"
        elif variant == 1:
            tags[0][1], what = f"agent-{agent.name.split()[-1]}", "d tag is not a P2TR address"
        elif variant == 2:
            tags[0][1], what = agent.address.upper(), "d tag is the address in upper case"
        elif variant == 3:
            tags = tags[1:]
            what = "no d tag"
        elif variant == 4:
            other = self.rng.choice([a for a in self.agents if a is not agent])
            tags.insert(1, ["d", other.address])
            what = f"a second d tag names {other.name}"
        else:
            key = _Key(agent.name, tweak_private_key(agent.private_key), "", agent.network,
                       agent.address, False)
            what = "signed with the taproot-tweaked key: pubkey is Q, d is the address of P"
        event = self.card_event(key, card, created, tags)
        self.add_card(f"bad_d_tag/{variant}", "identity_mismatch", f"{agent.name}: {what}",
                      event, received)

    def invalid_card(self, agent: _Key, created: int, received: int) -> None:
        card = self.card(agent, agent.address)
        tags = card_tags(card, agent.address)
        variant = self.variant("invalid_card", 6)
        content: str | None = None
        if variant == 0:
            card["version"], what = "1.0", "version '1.0' is not semver"
        elif variant == 1:
            card["price"], what = "free", "unknown top-level field 'price'"
        elif variant == 2:
            card["skills"][0]["tags"], what = ["Code"], "skill tag 'Code' breaks ^[a-z0-9-]+$"
        elif variant == 3:
            content, what = "{'name': 'not JSON'}", "content is not JSON"
        elif variant == 4:
            card["x-blob"] = "z" * 70_000
            what = "huge content (over 64 KiB)"
        else:
            card["skills"], what = [], "no skills"
        template = {
            "created_at": created,
            "kind": CARD_KIND,
            "tags": tags,
            "content": content if content is not None else orjson.dumps(card).decode(),
        }
        event = sign_event(template, agent.private_key, self.aux())
        self.add_card(f"invalid_card/{variant}", "invalid_card", f"{agent.name}: {what}", event,
                      received)

    def resolve_superseded(self) -> None:
        """Among the valid cards of one pubkey and d, all but the standing one are superseded."""
        groups: dict[tuple[str, str], list[_Item]] = {}
        for item in self.valid_cards:
            assert item.event is not None
            groups.setdefault((item.event["pubkey"], item.event["tags"][0][1]), []).append(item)
        for group in groups.values():
            standing = min(group, key=lambda item: card_sort_key(item.event or {}))
            for item in group:
                if item is standing:
                    continue
                assert item.event is not None and standing.event is not None
                item.expected = "superseded"
                item.ref = standing
                tie = item.event["created_at"] == standing.event["created_at"]
                item.why = ("same created_at as line {ref}, whose id is lower" if tie
                            else "an older card than line {ref} for the same pubkey and d")

    # ------------------------------------------------------------------ extra lines

    def duplicates(self, count: int) -> None:
        pool = [i for i in self.items if i.genuine and i.form == "envelope" and i.raw is None]
        for original in self.rng.sample(pool, min(count, len(pool))):
            self.add(original.at + self.rng.randint(1, 600), "duplicate", "duplicate_event",
                     "the event of line {ref} again, from another relay",
                     event=original.event, relay=self.other_relay(original.relay),
                     ref=original)

    def forged_copies(self, count: int) -> None:
        pool = [i for i in self.items if i.genuine and i.scenario != "duplicate"]
        for original in self.rng.sample(pool, min(count, len(pool))):
            assert original.event is not None
            forged = orjson.loads(orjson.dumps(original.event))
            owners = [k for k in (*self.agents, *self.strangers) if k.pubkey == forged["pubkey"]]
            owner = owners[0] if owners and self.rng.random() < 0.5 else None
            if owner is None:
                forged["content"] = forged["content"][:-8] + "AAAAAAA="
                if forged["content"] == original.event["content"]:
                    forged["content"] = forged["content"][:-8] + "BBBBBBB="
                expected, what = "bad_event_id", "content changed"
            else:
                expected = "bad_event_sig"
                what = self.bad_signature(forged, owner, "forged_copy")
            before = self.rng.random() < 0.5
            at = original.at - self.rng.randint(1, 30) if before else (
                original.at + self.rng.randint(1, 600))
            self.add(at, "forged_copy", expected,
                     f"forged copy of the event of line {{ref}} ({what}, same id), received "
                     f"{'before' if before else 'after'} it: must not shadow the genuine event",
                     event=forged, ref=original)

    def garbage(self, count: int, start: int, end: int) -> None:
        order = list(_GARBAGE)
        self.rng.shuffle(order)
        for n in range(count):
            name = order[n % len(order)]
            raw, event, why = self.garbage_line(name)
            self.add(self.rng.randint(start, end), f"garbage/{name}", "malformed", why,
                     raw=raw, event=event, form="garbage")

    def some_event(self) -> dict[str, Any]:
        """A correctly signed card event, to be broken."""
        key = self.rng.choice(self.agents)
        created = self.config.start_time + self.rng.randint(0, 3600)
        return self.card_event(key, self.card(key, key.address), created)

    def envelope(self, event: Any) -> bytes:
        return orjson.dumps({"received_at": self.config.start_time,
                             "relay": self.rng.choice(_RELAYS), "event": event})

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
            raw = orjson.dumps({"received_at": "soon", "relay": _RELAYS[0], "event": event})
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
            key = rng.choice(self.agents)
            kind = (1, 0, 4, 31338)[self.variant("wrong_kind", 4)]
            template = {"created_at": self.config.start_time, "kind": kind, "tags": [],
                        "content": "gm"}
            event = sign_event(template, key.private_key, self.aux())
            return (self.envelope(event), event,
                    f"a correctly signed kind-{kind} event: neither 31337 nor 4339")
        event = self.some_event()
        why = _break_event(event, name)
        return self.envelope(event), event, why

    # ------------------------------------------------------------------ well-known cards

    def well_known(self) -> list[WellKnownDocument]:
        plan = self.schedule(_WELL_KNOWN_WEIGHTS, self.config.well_known, {}, "valid")
        docs = []
        for number, name in enumerate(plan, start=1):
            host = f"agent-{number:04d}.example"
            data, expected, why, scenario = self.well_known_doc(name)
            docs.append(WellKnownDocument(
                path=f"{host}/snap-agent.json",
                url=f"https://{host}/.well-known/snap-agent.json",
                data=data, expected=expected, why=why, scenario=scenario,
            ))
        return docs

    def well_known_doc(self, name: str) -> tuple[bytes, str, str, str]:
        rng = self.rng
        agent = rng.choice(self.agents)
        timestamp = self.config.start_time - rng.randint(0, 86_400)
        card = self.card(agent, agent.address)

        def dump(doc: Any) -> bytes:
            return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"

        def signed(c: dict[str, Any]) -> dict[str, Any]:
            return sign_card(c, agent.private_key, timestamp, self.aux())

        if name == "valid":
            if self.variant(name, 3) == 2:
                other = _other_network(agent.network)
                card["identity"] = agent.address_on(other)
                return (dump(signed(card)), "valid",
                        f"{agent.name}, identity on {other} (same key: passes)", "valid/network")
            return dump(signed(card)), "valid", f"{agent.name}'s signed card", "valid"
        if name == "malformed":
            variant = self.variant(name, 8)
            doc = signed(card)
            if variant == 0:
                data, what = b"<html><body>404 Not Found</body></html>\n", "an HTML error page"
            elif variant == 1:
                data, what = dump(doc)[:-40], "truncated JSON"
            elif variant == 2:
                data, what = dump([doc]), "a JSON array"
            elif variant == 3:
                del doc["sig"]
                data, what = dump(doc), "sig missing"
            elif variant == 4:
                doc["sig"] = doc["sig"].upper()
                data, what = dump(doc), "sig in upper-case hex"
            elif variant == 5:
                doc["timestamp"] = str(doc["timestamp"])
                data, what = dump(doc), "timestamp is a string"
            elif variant == 6:
                doc["card"]["x-rating"] = "@@OVERFLOW@@"
                data = dump(doc).replace(b'"@@OVERFLOW@@"', b"1e400")
                what = "a number no double holds (1e400): the card has no JCS form"
            else:
                doc["publicKey"] = doc["publicKey"][:62]
                data, what = dump(doc), "publicKey is 62 hex characters"
            return data, "malformed", what, f"malformed/{variant}"
        if name == "bad_sig":
            variant = self.variant(name, 4)
            doc = signed(card)
            if variant == 0:
                doc["card"] = {**card, "description": "Now accepts payments at bc1q…"}
                what = "card edited after signing"
            elif variant == 1:
                doc["timestamp"] = timestamp + 1
                what = "timestamp changed after signing"
            elif variant == 2:
                digest = signed_card_digest(canonical_card(card), timestamp)
                doc["sig"] = bytes(PrivateKey(agent.private_key).sign_schnorr(
                    digest, self.aux())).hex()
                what = "signed with the untweaked key, publicKey is the tweaked key"
            else:
                signer = self.third_party(agent)
                doc["sig"] = sign_card(card, signer.private_key, timestamp, self.aux())["sig"]
                what = f"signed by {signer.name}, publicKey is {agent.name}'s"
            return dump(doc), "bad_sig", what, f"bad_sig/{variant}"
        if name == "invalid_identity":
            variant = self.variant(name, 3)
            if variant == 0:
                card["identity"], what = agent.address.upper(), "identity in upper case"
            elif variant == 1:
                card["identity"], what = f"agent-{agent.name.split()[-1]}", "identity not P2TR"
            else:
                last = "q" if agent.address[-1] != "q" else "p"
                card["identity"] = agent.address[:-1] + last
                what = "identity with a bad bech32m checksum"
            return dump(signed(card)), "invalid_identity", what, f"invalid_identity/{variant}"
        if name == "key_mismatch":
            if self.variant(name, 2) == 0:
                other_agent = rng.choice([a for a in self.agents if a is not agent])
                card["identity"] = other_agent.address
                what = f"{agent.name} signs a card claiming {other_agent.name}'s identity"
                return dump(signed(card)), "key_mismatch", what, "key_mismatch/0"
            digest = signed_card_digest(canonical_card(card), timestamp)
            doc = {
                "card": card,
                "sig": bytes(PrivateKey(agent.private_key).sign_schnorr(digest,
                                                                         self.aux())).hex(),
                "publicKey": agent.pubkey,
                "timestamp": timestamp,
            }
            what = "publicKey is the untweaked key (signature by it verifies)"
            return dump(doc), "key_mismatch", what, "key_mismatch/1"
        if name == "invalid_card":
            variant = self.variant(name, 3)
            if variant == 0:
                card["version"], what = "1.0", "version '1.0' is not semver"
            elif variant == 1:
                card["price"], what = "free", "unknown field 'price'"
            else:
                card["skills"], what = [], "no skills"
            return dump(signed(card)), "invalid_card", what, f"invalid_card/{variant}"
        raise AssertionError(name)  # pragma: no cover

    # ------------------------------------------------------------------ assembly

    def run(self) -> NostrSample:
        config = self.config
        clock = config.start_time
        for name in self.schedule(_MESSAGE_WEIGHTS, config.messages, _MESSAGE_SIZES,
                                  "delivered"):
            clock += self.rng.randint(1, 5)
            self.message_scenario(name, clock)
        end = max(clock, config.start_time + 600)
        for name in self.schedule(_CARD_WEIGHTS, config.cards, _CARD_SIZES, "card"):
            self.card_scenario(name, end)
        self.resolve_superseded()
        base = config.cards + config.messages
        self.duplicates(math.ceil(config.duplicate_share * base))
        self.forged_copies(math.ceil(config.forged_share * base))
        self.garbage(math.ceil(config.garbage_share * base), config.start_time, end)

        self.items.sort(key=lambda item: (item.at, item.seq))
        for line_no, item in enumerate(self.items, start=1):
            item.line_no = line_no
        well_known = self.well_known()
        keyring = [a for a in self.agents if a.keyring]
        return NostrSample(
            lines=tuple(item.line() for item in self.items),
            labels=tuple(item.label() for item in self.items),
            well_known=tuple(well_known),
            keyring_pubkeys=tuple(a.pubkey for a in keyring),
            keyring=tuple(a.private_key for a in keyring),
        )


# --------------------------------------------------------------------------- public API


def generate_nostr(config: NostrSampleConfig) -> NostrSample:
    """Build a labelled Nostr sample in memory (see the module docstring).

    Examples:
        >>> sample = generate_nostr(NostrSampleConfig(agents=4, cards=4, messages=20,
        ...                                           well_known=6, seed=1))
        >>> sorted(set(sample.well_known_counts())) == sorted(WELL_KNOWN_LABELS)
        True
    """
    return _Generator(config).run()


def _write_private(path: str, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the start (an old file is removed first)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def write_nostr_sample(config: NostrSampleConfig, stem: str) -> NostrSample:
    """Generate a sample and write it beside ``stem`` (:func:`output_paths`); return it.

    Examples:
        >>> import tempfile
        >>> stem = os.path.join(tempfile.mkdtemp(), "n")
        >>> sample = write_nostr_sample(NostrSampleConfig(agents=4, cards=4, messages=8,
        ...                                               well_known=2), stem)
        >>> oct(os.stat(stem + ".keyring").st_mode & 0o777)
        '0o600'
    """
    sample = generate_nostr(config)
    paths = output_paths(stem)
    folder = os.path.dirname(stem)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(paths["events"], "wb") as handle:
        handle.write(b"".join(line + b"\n" for line in sample.lines))
    with open(paths["labels"], "wb") as handle:
        handle.write(b"".join(orjson.dumps(label.to_plain()) + b"\n" for label in sample.labels))
    header = (
        f"# snap-spark nostr sample keyring (seed {config.seed}): private keys of the "
        f"{len(sample.keyring)} recipients the operator can read, 64 hex each. Test data.\n"
    )
    _write_private(paths["keyring"], (header + "".join(k.hex() + "\n" for k in sample.keyring))
                   .encode("ascii"))
    root = paths["well_known"]
    os.makedirs(root, exist_ok=True)
    written = set()
    for doc in sample.well_known:
        target = os.path.join(root, doc.path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(doc.data)
        written.add(doc.path)
    _remove_stale_documents(root, written)
    with open(paths["well_known_labels"], "wb") as handle:
        handle.write(b"".join(orjson.dumps(doc.label()) + b"\n" for doc in sample.well_known))
    return sample


def _remove_stale_documents(root: str, keep: set[str]) -> None:
    """Remove documents an earlier, larger run left (only names this module writes)."""
    for host in sorted(os.listdir(root)):
        path = f"{host}/snap-agent.json"
        if (host.startswith("agent-") and host.endswith(".example") and path not in keep
                and os.path.isfile(os.path.join(root, path))):
            os.unlink(os.path.join(root, path))
            if not os.listdir(os.path.join(root, host)):
                os.rmdir(os.path.join(root, host))


def summary(sample: NostrSample, stem: str) -> str:
    """Counts by label, for people (no key material).

    Examples:
        >>> s = generate_nostr(NostrSampleConfig(agents=4, cards=2, messages=2, well_known=1))
        >>> summary(s, "x").splitlines()[0].startswith("wrote ")
        True
    """
    paths = output_paths(stem)
    rows = [
        f"wrote {len(sample.lines)} lines to {paths['events']} (labels in {paths['labels']}), "
        f"{len(sample.well_known)} well-known documents under {paths['well_known']}/, "
        f"{len(sample.keyring)} keys in {paths['keyring']} (mode 0600)"
    ]
    counts = sample.counts()
    for verdict in EVENT_LABELS:
        if counts[verdict]:
            rows.append(f"  {verdict:24s} {counts[verdict]:7d}")
    rows.append("well-known:")
    wk = sample.well_known_counts()
    for verdict in WELL_KNOWN_LABELS:
        if wk[verdict]:
            rows.append(f"  {verdict:24s} {wk[verdict]:7d}")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.sample_nostr STEM [--cards N] [--messages N] ...``."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("stem")
    defaults = NostrSampleConfig()
    for name in ("agents", "cards", "messages", "well_known", "seed", "start_time"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int,
                            default=getattr(defaults, name))
    args = parser.parse_args(argv)
    try:
        config = NostrSampleConfig(agents=args.agents, cards=args.cards, messages=args.messages,
                                   well_known=args.well_known, seed=args.seed,
                                   start_time=args.start_time)
    except ValueError as exc:
        print(f"snap-spark sample --nostr: {exc}", file=sys.stderr)
        return 2
    sample = write_nostr_sample(config, args.stem)
    print(summary(sample, args.stem), file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
