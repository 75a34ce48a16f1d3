"""SNAP messages over Nostr (kinds 4339 and 21339): expiry, decryption and the sender binding.

SNAP sends a message over Nostr as one of two kinds (``docs/discovery.md`` "Nostr Event
Types", ``docs/transport.md`` "Nostr Transport"): **4339** (:data:`STORED_KIND`, regular
range) when the sender asks relays to keep it for offline retrieval, and **21339**
(:data:`EPHEMERAL_KIND`, ephemeral range, the reference SDK's default ``send()``), which
relays forward to the subscribers connected at that moment and never store. Both carry one
SNAP message, NIP-44 v2 encrypted between the sender's Nostr key (the event ``pubkey``) and
the recipient's (its ``p`` tag), and the two are checked alike: whichever kind carries it,
a copy of a message is a copy (a 21339 and a 4339 with the same inner message are a replay
pair like any two). :func:`check_stored_event` takes one event of either kind
(:data:`MESSAGE_KINDS`) to the point where its inner message can be verified like any other
message, first failure wins:

1. :func:`snap_spark.protocol.nostr.check_event` (``malformed``, ``bad_event_id``,
   ``bad_event_sig``); a kind other than 4339 and 21339, a ``p`` tag missing, repeated or
   not a 64-hex key, or an ``expiration`` tag that is not a unix time, are ``malformed`` too;
2. ``expired``: the NIP-40 ``expiration`` is earlier than the receipt time (an event that
   expires at the second it is received is still taken);
3. ``encrypted``: the operator's keyring has no key for the ``p`` recipient (counted, never
   decrypted);
4. ``decrypt_failed``: NIP-44 v2 decryption fails (bad MAC, bad padding, wrong version...);
5. ``from_mismatch``: the inner message is not a JSON object whose ``from`` is the taproot
   address of the event ``pubkey`` (on the network ``from``'s prefix names): someone
   re-wrapped a message that is not theirs;
6. ``recipient_mismatch``: its ``to`` is not the taproot address of the ``p`` key;
7. ``bound``: the inner message goes to the message pipeline, which gives the event's final
   verdict: ``valid``, or ``inner_invalid`` with the message's code.

So an event that fails the binding (5, 6) never reaches the replay store: a genuine signed
message re-wrapped by someone else cannot make its real delivery look like a replay.

The keyring (:class:`Keyring`) is a file of private keys, each exactly 64 hex digits, one
per line, ``#`` comments; it is refused when other users may read it or when a line is not
a valid key (:func:`snap_spark.protocol.keys.parse_private_key`), and neither it nor a key
in it ever appears in a message, a ``repr`` or an error.

Examples:
    >>> from snap_spark.protocol.nostr import sign_event
    >>> event = sign_event({"created_at": 1, "kind": 4339, "tags": [["p", "ab" * 32]],
    ...                     "content": "x"}, bytes.fromhex("0a" * 32), aux=bytes(32))
    >>> check_stored_event(event, 10.0, Keyring([])).verdict
    'encrypted'
    >>> check_stored_event({**event, "content": "y"}, 10.0, Keyring([])).verdict
    'bad_event_id'
    >>> ephemeral = sign_event({**event, "kind": EPHEMERAL_KIND}, bytes.fromhex("0a" * 32),
    ...                        aux=bytes(32))
    >>> check_stored_event(ephemeral, 10.0, Keyring([])).verdict
    'encrypted'
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from snap_spark.protocol.errors import IdentityInvalid, SnapError
from snap_spark.protocol.jsonparse import loads
from snap_spark.protocol.keys import (
    InvalidPrivateKey,
    Network,
    check_private_key,
    decode_p2tr,
    internal_pubkey,
    p2tr_address,
    parse_private_key_lines,
)
from snap_spark.protocol.nostr import check_event
from snap_spark.protocol.validate import MissingReceiptTime

#: Storable SNAP message (``docs/discovery.md``: regular range, kept by relays).
STORED_KIND: Final = 4339
#: Ephemeral SNAP message (``docs/discovery.md``: ephemeral range, the SDK's default
#: ``send()``): relays forward it to live subscribers and never store it.
EPHEMERAL_KIND: Final = 21339
#: The kinds that carry a SNAP message, both checked by :func:`check_stored_event`.
MESSAGE_KINDS: Final[tuple[int, ...]] = (STORED_KIND, EPHEMERAL_KIND)

StoredVerdict = Literal["malformed", "bad_event_id", "bad_event_sig", "expired", "encrypted",
                        "decrypt_failed", "from_mismatch", "recipient_mismatch", "bound"]
#: What :func:`check_stored_event` can say, in the order the checks run.
STORED_VERDICTS: Final[tuple[StoredVerdict, ...]] = get_args(StoredVerdict)
#: Final verdicts of a bound event, once its inner message is verified.
INNER_VALID: Final = "valid"
INNER_INVALID: Final = "inner_invalid"

_HEX = frozenset("0123456789abcdef")
_NEEDS_CLOCK: Final = ("archived SNAP message events (kinds 4339 and 21339) without a receipt "
                       "time (raw events or relay frames, no envelope received_at): choose "
                       "their receipt clock with --bare-clock now|message|<unix seconds>")


class KeyringError(ValueError):
    """The keyring file cannot be used (its text never quotes a key)."""


class Keyring:
    """The operator's private keys, by their Nostr (x-only, untweaked) public key.

    Examples:
        >>> ring = Keyring([bytes.fromhex("0a" * 32)])
        >>> ring
        Keyring(1 key)
        >>> internal_pubkey(bytes.fromhex("0a" * 32)).hex() in ring
        True
    """

    def __init__(self, keys: Iterable[bytes]) -> None:
        """A keyring of ``keys`` (32 bytes each).

        Raises:
            InvalidPrivateKey: a key is not valid
                (:func:`~snap_spark.protocol.keys.check_private_key`; never quoted).
        """
        checked = [check_private_key(key) for key in keys]
        self._keys: dict[str, bytes] = {internal_pubkey(key).hex(): key for key in checked}

    @classmethod
    def load(cls, path: str) -> Keyring:
        """Read a keyring file: one private key per line, exactly 64 hex digits
        (:func:`~snap_spark.protocol.keys.parse_private_key`: no shorter key, no zero, none
        at or above the secp256k1 group order); blank lines, blanks around a key and ``#``
        comment lines allowed.

        Raises:
            KeyringError: the file is missing, readable or writable by other users (group
                or others: ``chmod 600`` it), or a line is not a valid private key (named
                by its number and the rule it breaks, never quoted).
        """
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise KeyringError(f"keyring {path}: {exc.strerror}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyringError(
                f"keyring {path} is open to other users (mode {stat.S_IMODE(mode):o}): "
                "run chmod 600 on it")
        with open(path, encoding="utf-8", errors="replace") as handle:
            try:
                keys = parse_private_key_lines(handle, f"keyring {path}")
            except InvalidPrivateKey as exc:  # its message never quotes the key
                raise KeyringError(str(exc)) from None
        return cls(keys)

    def __contains__(self, pubkey_hex: object) -> bool:
        return pubkey_hex in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def recipients(self) -> list[str]:
        """The public keys (x-only hex, as in a ``p`` tag) messages to which this keyring
        decrypts, sorted; no private key."""
        return sorted(self._keys)

    def __repr__(self) -> str:
        return f"Keyring({len(self._keys)} key{'' if len(self._keys) == 1 else 's'})"

    def decrypt(self, recipient_hex: str, sender_hex: str, payload: str) -> str:
        """NIP-44 v2 plaintext of ``payload`` sent by ``sender_hex`` to ``recipient_hex``
        (a key of this keyring).

        Raises:
            KeyError: no key for ``recipient_hex``.
            ValueError: the payload does not decrypt (the reason, never a key).
        """
        import nostr_sdk

        secret = self._keys[recipient_hex]
        try:
            return nostr_sdk.nip44_decrypt(nostr_sdk.SecretKey.from_bytes(secret),
                                           nostr_sdk.PublicKey.parse(sender_hex), payload)
        except Exception as exc:  # nostr-sdk raises its own error classes
            raise ValueError(_sdk_reason(exc)) from None


def _sdk_reason(exc: BaseException) -> str:
    text = str(exc).strip().strip("'\"")
    return text[:200] or type(exc).__name__


@dataclass(frozen=True)
class StoredCheck:
    """What :func:`check_stored_event` found."""

    verdict: StoredVerdict
    detail: str
    #: the ``p`` recipient (hex), when the event names one
    recipient: str | None = None
    #: the inner SNAP message as decrypted text, only when ``verdict == "bound"``
    inner: str | None = None


def expiration_time(text: str | None) -> int | None:
    """The unix time of a NIP-40 ``expiration`` tag value, or ``None`` when it is not one:
    ASCII digits only (``str.isdigit`` alone accepts other scripts' digits), at most 15 of
    them. The stored-message check and the ``nostr_events.expiration`` column both read it
    so.

    Examples:
        >>> expiration_time("1700000000"), expiration_time("\u0661\u0662"), expiration_time("-5")
        (1700000000, None, None)
        >>> expiration_time(None), expiration_time("9" * 16)
        (None, None)
    """
    if not text or not text.isascii() or not text.isdigit() or len(text) > 15:
        return None
    return int(text)


def _tag_values(tags: Sequence[Sequence[str]], name: str) -> list[str]:
    return [tag[1] if len(tag) > 1 else "" for tag in tags if tag[0] == name]


def taproot_of(pubkey_hex: str, claimed: object) -> str:
    """The taproot address of a Nostr key on the network ``claimed``'s prefix names
    (mainnet when ``claimed`` is no P2TR address).

    Examples:
        >>> key = internal_pubkey(bytes.fromhex("0a" * 32)).hex()
        >>> taproot_of(key, "tb1p...")[:4], taproot_of(key, None)[:4]
        ('tb1p', 'bc1p')
    """
    network: Network = ("testnet" if isinstance(claimed, str) and claimed.startswith("tb1")
                        else "mainnet")
    with contextlib.suppress(IdentityInvalid):
        network = decode_p2tr(claimed).network
    return p2tr_address(bytes.fromhex(pubkey_hex), network)


def check_stored_event(event: object, received_at: float | None, keyring: Keyring
                       ) -> StoredCheck:
    """Take one SNAP message event (kind 4339 or 21339), received at ``received_at`` (unix
    seconds), through the checks of the module docstring; both kinds get the same checks.

    ``received_at`` may be ``None`` (an archived event without its receipt time) as long as
    no check needs it: an event with an ``expiration`` tag, or one that passes the binding
    (its inner message is verified against its receipt time), then raises.

    Raises:
        MissingReceiptTime: ``received_at`` is ``None`` and a check needs it.
    """
    verdict, detail = check_event(event)
    if verdict != "ok":
        return StoredCheck(verdict, detail)
    assert isinstance(event, Mapping)  # established by check_event
    if event["kind"] not in MESSAGE_KINDS:
        return StoredCheck("malformed", f"kind {event['kind']} is not a SNAP message kind "
                                        f"({', '.join(map(str, MESSAGE_KINDS))})")
    recipients = _tag_values(event["tags"], "p")
    if len(recipients) != 1:
        return StoredCheck("malformed", f"{len(recipients)} p tags (a SNAP message event "
                                        "names exactly one recipient)")
    recipient = recipients[0]
    if len(recipient) != 64 or not set(recipient) <= _HEX:
        return StoredCheck("malformed", "the p tag is not a 64-hex public key")
    expirations = _tag_values(event["tags"], "expiration")
    if expirations:
        text = expirations[0]
        expires = expiration_time(text)
        if expires is None:
            return StoredCheck("malformed", "the expiration tag is not a unix time",
                               recipient)
        if received_at is None:
            raise MissingReceiptTime(_NEEDS_CLOCK)
        if expires < received_at:
            return StoredCheck("expired", f"expiration {text} is "
                                          f"{received_at - expires:g}s before the receipt "
                                          "time (NIP-40)", recipient)
    if recipient not in keyring:
        return StoredCheck("encrypted", "addressed to a key the keyring does not hold",
                           recipient)
    try:
        plaintext = keyring.decrypt(recipient, event["pubkey"], event["content"])
    except ValueError as exc:
        return StoredCheck("decrypt_failed", f"NIP-44 v2 decryption failed: {exc}",
                           recipient)
    bound = _binding(event["pubkey"], recipient, plaintext)
    if bound.verdict == "bound" and received_at is None:
        raise MissingReceiptTime(_NEEDS_CLOCK)
    return bound


def _binding(sender_hex: str, recipient_hex: str, plaintext: str) -> StoredCheck:
    """Checks 5 and 6 on the decrypted inner message."""
    try:
        inner: Any = loads(plaintext.encode("utf-8", "surrogatepass"))
    except (SnapError, ValueError, RecursionError):
        inner = None
    if not isinstance(inner, dict) or not isinstance(inner.get("from"), str):
        return StoredCheck("from_mismatch", "the inner message is not a JSON object with a "
                                            "from address", recipient_hex)
    sender = taproot_of(sender_hex, inner["from"])
    if inner["from"] != sender:
        return StoredCheck("from_mismatch", f"inner from {inner['from'][:70]} is not "
                                            f"{sender}, the address of the event pubkey",
                           recipient_hex)
    to = inner.get("to")
    expected = taproot_of(recipient_hex, to)
    if to != expected:
        shown = to[:70] if isinstance(to, str) else "missing"
        return StoredCheck("recipient_mismatch", f"inner to {shown} is not {expected}, the "
                                                 "address of the p recipient", recipient_hex)
    return StoredCheck("bound", "the inner message is the event signer's, to the p recipient",
                       recipient_hex, plaintext)
