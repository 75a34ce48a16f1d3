"""Nostr events (NIP-01) and SNAP agent-card events (kind 31337, ``docs/discovery.md``).

An event's ``id`` is the SHA-256 of the UTF-8 JSON text
``[0,<pubkey>,<created_at>,<kind>,<tags>,<content>]`` written as NIP-01 "Events and
signatures" prescribes (nostr-protocol/nips ``01.md`` at db5fe3de, 2026-07-22): no
whitespace; in strings, line feed, double quote, backslash, carriage return, tab, backspace
and form feed written as ``\\n \\" \\\\ \\r \\t \\b \\f``; every other character verbatim.
NIP-01 says nothing of the other C0 controls (U+0000-U+001F); written verbatim they would
make invalid JSON, and JavaScript's ``JSON.stringify`` (nostr-tools) and ``serde_json``
(rust-nostr, behind the nostr-sdk package; checked by the tests) write them as ``\\u00XX``
with lowercase hex, so this module does too. DEL, U+2028/U+2029, non-BMP characters and
everything else are written as their UTF-8 bytes.

The ``sig`` is a BIP-340 signature of the 32 id bytes by ``pubkey``, the *untweaked* x-only
internal key ``P``; the SNAP identity in a card's ``d`` tag is the taproot address of that
key (``docs/discovery.md`` "Key Encoding").

Examples:
    >>> priv = bytes.fromhex("0a" * 32)
    >>> from snap_spark.protocol.cards import sample_card
    >>> from snap_spark.protocol.keys import internal_pubkey, p2tr_address
    >>> card = sample_card(p2tr_address(internal_pubkey(priv)))
    >>> event = build_card_event(card, priv, 1770163200, aux=bytes(32))
    >>> check_card_event(event)
    ('valid', 'agent card event verified')
    >>> check_card_event({**event, "content": event["content"] + " "})[0]
    'bad_event_id'
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Final, Literal, get_args

from coincurve import PrivateKey

from snap_spark.protocol.cards import (
    MAX_CARD_BYTES,
    InvalidCard,
    validate_agent_card,
)
from snap_spark.protocol.errors import IdentityInvalid
from snap_spark.protocol.jcs import MAX_SAFE_INTEGER
from snap_spark.protocol.keys import (
    Network,
    check_private_key,
    decode_p2tr,
    internal_pubkey,
    p2tr_address,
    xonly_key,
)

#: SNAP agent card, addressable (NIP-01 "Kinds": 30000 <= n < 40000).
CARD_KIND: Final = 31337
#: NIP-01: "kind": "<integer between 0 and 65535>".
MAX_KIND: Final = 65535
#: Largest ``created_at`` accepted: JavaScript clients cannot write a larger integer exactly,
#: so above it implementations disagree on the id (a SNAP choice, see ``check_event``).
MAX_CREATED_AT: Final = MAX_SAFE_INTEGER

EventVerdict = Literal["ok", "malformed", "bad_event_id", "bad_event_sig"]
CardEventVerdict = Literal[
    "malformed",
    "bad_event_id",
    "bad_event_sig",
    "identity_mismatch",
    "invalid_card",
    "card_identity_mismatch",
    "valid",
]
#: Verdicts of :func:`check_event`, in the order the checks run.
EVENT_VERDICTS: Final[tuple[EventVerdict, ...]] = get_args(EventVerdict)
#: Verdicts of :func:`check_card_event`, in the order the checks run. (``superseded`` is
#: decided across events, at table level, with :func:`card_sort_key`.)
CARD_EVENT_VERDICTS: Final[tuple[CardEventVerdict, ...]] = get_args(CardEventVerdict)

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX128 = re.compile(r"[0-9a-f]{128}")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_EVENT_FIELDS: Final = ("id", "pubkey", "created_at", "kind", "tags", "content", "sig")

# NIP-01's seven named escapes, then \u00XX (lowercase hex) for the remaining C0 controls.
_NAMED_ESCAPES: Final = {
    "\n": "\\n",
    '"': '\\"',
    "\\": "\\\\",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
}
_ESCAPE_TABLE: Final[dict[int, str]] = {
    **{code: f"\\u{code:04x}" for code in range(0x20)},
    **{ord(char): escaped for char, escaped in _NAMED_ESCAPES.items()},
}
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')


def _json_string(text: str) -> str:
    if _NEEDS_ESCAPE.search(text) is None:
        return f'"{text}"'
    return f'"{text.translate(_ESCAPE_TABLE)}"'


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text_problem(value: str, field: str) -> str | None:
    if not value.isascii() and _LONE_SURROGATE.search(value):
        return f"{field} holds a lone surrogate (not encodable as UTF-8)"
    return None


def _commitment_problem(event: Mapping[Any, Any]) -> str | None:
    """Why the five committed fields cannot be serialized, or ``None`` when they can."""
    for name in ("pubkey", "created_at", "kind", "tags", "content"):
        if name not in event:
            return f"required field {name!r} is missing"
    pubkey, created_at, kind = event["pubkey"], event["created_at"], event["kind"]
    if not isinstance(pubkey, str) or _HEX64.fullmatch(pubkey) is None:
        return "pubkey must be 64 lowercase hex characters"
    if not _is_int(created_at) or not 0 <= created_at <= MAX_CREATED_AT:
        return "created_at must be an integer from 0 to 2^53-1"
    if not _is_int(kind) or not 0 <= kind <= MAX_KIND:
        return f"kind must be an integer from 0 to {MAX_KIND}"
    tags = event["tags"]
    if not isinstance(tags, list):
        return "tags must be an array"
    for i, tag in enumerate(tags):
        # NIP-01 "Tags": "Each tag is an array of one or more strings"
        if not isinstance(tag, list) or not tag:
            return f"tags[{i}] must be a non-empty array of strings"
        for j, item in enumerate(tag):
            if not isinstance(item, str):
                return f"tags[{i}][{j}] must be a string"
            problem = _text_problem(item, f"tags[{i}][{j}]")
            if problem:
                return problem
    content = event["content"]
    if not isinstance(content, str):
        return "content must be a string"
    return _text_problem(content, "content")


def _serialize(
    pubkey: str, created_at: int, kind: int, tags: Sequence[Sequence[str]], content: str
) -> bytes:
    tag_text = ",".join("[" + ",".join(map(_json_string, tag)) + "]" for tag in tags)
    text = f'[0,"{pubkey}",{created_at},{kind},[{tag_text}],{_json_string(content)}]'
    return text.encode("utf-8")


def serialize_event(event: Mapping[str, Any]) -> bytes:
    """The exact NIP-01 bytes whose SHA-256 is the event id.

    Raises:
        ValueError: when ``pubkey``, ``created_at``, ``kind``, ``tags`` or ``content`` is
            missing or does not have the shape :func:`check_event` requires.

    Examples:
        >>> serialize_event({"pubkey": "ab" * 32, "created_at": 1, "kind": 1,
        ...                  "tags": [["t", "a\\u2028"]], "content": 'q"\\x01é'}).decode()[-28:]
        '1,[["t","a\\u2028"]],"q\\\\"\\\\u0001é"]'
    """
    problem = _commitment_problem(event)
    if problem is not None:
        raise ValueError(problem)
    return _serialize(
        event["pubkey"], event["created_at"], event["kind"], event["tags"], event["content"]
    )


def event_id(event: Mapping[str, Any]) -> str:
    """The NIP-01 event id (64 lowercase hex) computed from the event's fields.

    ``id`` and ``sig`` of ``event`` are not read, so an unsigned template works too.

    Raises:
        ValueError: as :func:`serialize_event`.

    Examples:
        >>> event_id({"pubkey": "f" * 64, "created_at": 0, "kind": 1, "tags": [],
        ...           "content": ""})[:16]
        '3dffd31a4abf8f15'
    """
    return hashlib.sha256(serialize_event(event)).hexdigest()


def check_event(event: object) -> tuple[EventVerdict, str]:
    """NIP-01 verdict of one parsed event object, with the reason. Never raises.

    Checks, first failure wins:

    1. ``malformed``: not an object; a field missing; ``id``/``pubkey`` not 64 lowercase
       hex; ``sig`` not 128 lowercase hex; ``created_at`` not an integer in 0..2^53-1;
       ``kind`` not an integer in 0..65535; ``tags`` not an array of non-empty arrays of
       strings; ``content`` not a string; a string holding a lone surrogate (no UTF-8
       form, so no id). JSON integers only: ``1.0`` is refused, as nostr-sdk refuses it.
       Other members are ignored.
    2. ``bad_event_id``: ``id`` differs from the id recomputed by :func:`event_id`.
    3. ``bad_event_sig``: ``sig`` is not a BIP-340 signature of the id bytes by ``pubkey``
       (a ``pubkey`` that is not an x coordinate on the curve fails here too).
    4. ``ok``.

    Examples:
        >>> check_event({"kind": 1})
        ('malformed', "required field 'id' is missing")
    """
    if not isinstance(event, Mapping):
        return "malformed", "event must be an object"
    for name in _EVENT_FIELDS:
        if name not in event:
            return "malformed", f"required field {name!r} is missing"
    claimed, sig = event["id"], event["sig"]
    if not isinstance(claimed, str) or _HEX64.fullmatch(claimed) is None:
        return "malformed", "id must be 64 lowercase hex characters"
    if not isinstance(sig, str) or _HEX128.fullmatch(sig) is None:
        return "malformed", "sig must be 128 lowercase hex characters"
    problem = _commitment_problem(event)
    if problem is not None:
        return "malformed", problem

    digest = hashlib.sha256(
        _serialize(
            event["pubkey"], event["created_at"], event["kind"], event["tags"], event["content"]
        )
    ).digest()
    if digest.hex() != claimed:
        return "bad_event_id", f"id is not the NIP-01 hash of the event (expected {digest.hex()})"
    key = xonly_key(bytes.fromhex(event["pubkey"]))
    if key is None:
        return "bad_event_sig", "pubkey is not the x coordinate of a secp256k1 point"
    if not key.verify(bytes.fromhex(sig), digest):
        return "bad_event_sig", "Schnorr signature of the id does not verify against pubkey"
    return "ok", "id and signature verified"


@lru_cache(maxsize=1 << 16)
def _taproot_address(pubkey_hex: str, network: Network) -> str:
    """P2TR identity of a Nostr pubkey (cached: bech32 encoding is pure Python)."""
    return p2tr_address(bytes.fromhex(pubkey_hex), network)


def _d_tag_values(tags: Sequence[Sequence[str]]) -> list[str]:
    # A bare ["d"] has the value "" (NIP-01 treats an absent d value as the empty string).
    return [tag[1] if len(tag) > 1 else "" for tag in tags if tag[0] == "d"]


def _parse_card(content: str) -> object:
    def refuse_constant(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(content, parse_constant=refuse_constant)


def check_card_event(event: object) -> tuple[CardEventVerdict, str]:
    """Verdict of a kind-31337 agent-card event, with the reason. Never raises.

    Checks, first failure wins:

    1. :func:`check_event` (``malformed``, ``bad_event_id``, ``bad_event_sig``); a kind other
       than 31337 is ``malformed`` too.
    2. ``identity_mismatch``: no ``d`` tag; the first ``d`` value is not a strict P2TR
       address; it is not the taproot address of ``pubkey`` on the network its prefix names
       (``bc1p`` mainnet, ``tb1p`` testnet: a testnet card is valid, with a ``tb1p``
       identity); or another ``d`` tag carries a different value (relays index every ``d``
       tag for ``#d`` queries, so a second value could place the card under someone else's
       identity).
    3. ``invalid_card``: ``content`` longer than 64 KiB of UTF-8, not JSON, or failing
       :func:`~snap_spark.protocol.cards.validate_agent_card`.
    4. ``card_identity_mismatch``: ``card.identity`` is not the ``d`` value.
    5. ``valid``. (Several valid cards for one ``pubkey`` and ``d``: see
       :func:`card_sort_key`.)

    The other tags (``name``, ``version``, ``skill``, ``endpoint``, ``relay``) are search
    hints and are not compared with the content: no rule or verdict covers them.

    Examples:
        >>> check_card_event([])
        ('malformed', 'event must be an object')
    """
    verdict, detail = check_event(event)
    if verdict != "ok":
        return verdict, detail
    assert isinstance(event, Mapping)  # established by check_event
    if event["kind"] != CARD_KIND:
        return "malformed", f"kind {event['kind']} is not an agent card ({CARD_KIND})"

    d_values = _d_tag_values(event["tags"])
    if not d_values:
        return "identity_mismatch", "no d tag"
    identity = d_values[0]
    try:
        network = decode_p2tr(identity).network
    except IdentityInvalid as exc:
        return "identity_mismatch", f"d tag is not a P2TR address: {exc}"
    expected = _taproot_address(event["pubkey"], network)
    if identity != expected:
        return (
            "identity_mismatch",
            f"d tag {identity} is not the taproot address {expected} of pubkey",
        )
    if any(value != identity for value in d_values[1:]):
        return "identity_mismatch", "several d tags with different values"

    content: str = event["content"]
    size = len(content.encode("utf-8"))
    if size > MAX_CARD_BYTES:
        return "invalid_card", f"content is {size} bytes, more than {MAX_CARD_BYTES}"
    try:
        card = _parse_card(content)
    except ValueError as exc:
        return "invalid_card", f"content is not JSON: {exc}"
    except RecursionError:
        # The card depth limit (cards.MAX_CARD_DEPTH) would refuse it anyway.
        return "invalid_card", "content nests too deeply to parse"
    try:
        validate_agent_card(card)
    except InvalidCard as exc:
        return "invalid_card", str(exc)
    assert isinstance(card, dict)  # established by validate_agent_card
    if card["identity"] != identity:
        return (
            "card_identity_mismatch",
            f"card identity {card['identity']} is not the d tag {identity}",
        )
    return "valid", "agent card event verified"


def card_sort_key(event: Mapping[str, Any]) -> tuple[int, str]:
    """Sort key putting the card that stands first: newest ``created_at``, then lowest id.

    Among valid cards with the same ``pubkey`` and ``d``, ``min(events, key=card_sort_key)``
    is the current one and the others are superseded (NIP-01 "Kinds": the latest event is
    kept; with equal timestamps, the lowest id in lexical order).

    Examples:
        >>> events = [{"created_at": 5, "id": "b" * 64}, {"created_at": 5, "id": "a" * 64},
        ...           {"created_at": 4, "id": "0" * 64}]
        >>> min(events, key=card_sort_key)["id"][:4]
        'aaaa'
    """
    return -int(event["created_at"]), str(event["id"])


def sign_event(
    template: Mapping[str, Any], private_key: bytes, aux: bytes | None = None
) -> dict[str, Any]:
    """Return ``template`` with ``pubkey``, ``id`` and ``sig`` set (NIP-01, untweaked key).

    ``template`` needs ``created_at``, ``kind``, ``tags`` and ``content``; any ``pubkey``,
    ``id`` or ``sig`` in it is replaced. ``aux`` is BIP-340 auxiliary randomness (random if
    ``None``).

    Raises:
        InvalidPrivateKey: ``private_key`` is not a valid key
            (:func:`~snap_spark.protocol.keys.check_private_key`; the message never quotes it).
        ValueError: when the template's fields do not have NIP-01's shape.

    Examples:
        >>> ev = sign_event({"created_at": 1, "kind": 1, "tags": [], "content": "hi"},
        ...                 bytes.fromhex("0a" * 32), aux=bytes(32))
        >>> check_event(ev)
        ('ok', 'id and signature verified')
    """
    private_key = check_private_key(private_key)
    event = {k: v for k, v in template.items() if k not in ("id", "sig")}
    event["pubkey"] = internal_pubkey(private_key).hex()
    event["id"] = event_id(event)
    randomness = aux if aux is not None else os.urandom(32)
    event["sig"] = (
        PrivateKey(private_key).sign_schnorr(bytes.fromhex(event["id"]), randomness).hex()
    )
    return event


def card_tags(card: Mapping[str, Any], identity: str) -> list[list[str]]:
    """The discovery tags of a card (``discovery.md`` "Publishing an Agent Card").

    ``d`` is ``identity``; ``name``, ``version``, one ``skill`` per skill (id, name), one
    ``endpoint`` per endpoint (protocol, url) and one ``relay`` per ``nostrRelays`` entry
    follow, taken from the card where they are strings (so an invalid card still gets tags).

    Examples:
        >>> card_tags({"name": "A", "skills": [{"id": "s", "name": "S"}]}, "bc1p...")
        [['d', 'bc1p...'], ['name', 'A'], ['skill', 's', 'S']]
    """

    def strings(*values: object) -> bool:
        return all(isinstance(v, str) for v in values)

    tags: list[list[str]] = [["d", identity]]
    for name in ("name", "version"):
        if strings(card.get(name)):
            tags.append([name, card[name]])
    for skill in _list(card.get("skills")):
        if isinstance(skill, Mapping) and strings(skill.get("id"), skill.get("name")):
            tags.append(["skill", skill["id"], skill["name"]])
    for endpoint in _list(card.get("endpoints")):
        if isinstance(endpoint, Mapping) and strings(endpoint.get("protocol"), endpoint.get("url")):
            tags.append(["endpoint", endpoint["protocol"], endpoint["url"]])
    for relay in _list(card.get("nostrRelays")):
        if isinstance(relay, str):
            tags.append(["relay", relay])
    return tags


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def build_card_event(
    card: Mapping[str, Any],
    private_key: bytes,
    created_at: int,
    network: Network = "mainnet",
    *,
    aux: bytes | None = None,
) -> dict[str, Any]:
    """A signed kind-31337 event publishing ``card`` (which is not validated).

    The ``d`` tag is the taproot address of the key on ``network`` (whatever
    ``card.identity`` says, so mismatches can be built on purpose); ``content`` is the card
    as compact JSON in its own key order, non-ASCII kept, like ``JSON.stringify``. The event
    is signed with the *untweaked* key (NIP-01).

    Raises:
        InvalidPrivateKey: ``private_key`` is not a valid key
            (:func:`~snap_spark.protocol.keys.check_private_key`; the message never quotes it).
        ValueError: when the card holds NaN or infinity, or a string with a lone surrogate.

    Examples:
        >>> ev = build_card_event({"name": "A"}, bytes.fromhex("0a" * 32), 1, "testnet",
        ...                       aux=bytes(32))
        >>> ev["kind"], ev["tags"][0][1][:4], ev["content"]
        (31337, 'tb1p', '{"name":"A"}')
    """
    identity = _taproot_address(internal_pubkey(private_key).hex(), network)
    template = {
        "created_at": created_at,
        "kind": CARD_KIND,
        "tags": card_tags(card, identity),
        "content": json.dumps(card, ensure_ascii=False, separators=(",", ":"), allow_nan=False),
    }
    return sign_event(template, private_key, aux)
