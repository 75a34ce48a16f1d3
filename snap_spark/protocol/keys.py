"""Keys and identities: BIP-341 taproot tweak and strict P2TR (bech32m) addresses.

A SNAP identity is the P2TR address of the *tweaked* output key ``Q = P + t*G`` where
``t = tagged_hash("TapTweak", P)`` (empty merkle root) and ``P`` is the agent's x-only
internal key. Nostr uses ``P`` itself (``docs/discovery.md``, Key Encoding).

Examples:
    >>> priv = bytes.fromhex("0a" * 32)
    >>> p2tr_address(internal_pubkey(priv))
    'bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397'
    >>> decode_p2tr('bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397').network
    'mainnet'
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from bech32m import codecs as _bech32
from coincurve import PrivateKey, PublicKeyXOnly

from snap_spark.protocol.errors import IdentityInvalid

Network = Literal["mainnet", "testnet"]

#: secp256k1 group order.
CURVE_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

_HRP_TO_NETWORK: dict[str, Network] = {"bc": "mainnet", "tb": "testnet"}
_NETWORK_TO_HRP: dict[Network, str] = {"mainnet": "bc", "testnet": "tb"}
P2TR_LENGTH = 62
_PRIVATE_KEY_HEX = re.compile("[0-9a-fA-F]{64}")


class InvalidPrivateKey(ValueError):
    """A private key was refused: not 32 bytes (64 hex digits), zero, or not below the
    secp256k1 group order. Its message says which rule the key breaks, never the key nor
    any part of it."""


def check_private_key(private_key: bytes) -> bytes:
    """``private_key`` (as ``bytes``) when it is a usable secp256k1 private key.

    A private key is exactly 32 bytes, read as a big-endian number from 1 to ``n - 1``
    (``n``: :data:`CURVE_ORDER`). Shorter byte strings are refused, not padded: a truncated
    key has a trivially forgeable identity. Every function of the project that takes a
    private key checks it here; :func:`parse_private_key` reads one written as text.

    Raises:
        InvalidPrivateKey: the key is not 32 bytes, is zero, or is ``n`` or more (the
            message never quotes the key).

    Examples:
        >>> check_private_key((1).to_bytes(32, "big")).hex()[-4:]
        '0001'
        >>> check_private_key(b"\\x01")
        Traceback (most recent call last):
        ...
        snap_spark.protocol.keys.InvalidPrivateKey: a private key is exactly 32 bytes
        >>> try:
        ...     check_private_key(CURVE_ORDER.to_bytes(32, "big"))
        ... except InvalidPrivateKey as exc:
        ...     print(exc)
        not a valid secp256k1 private key: it must be from 1 to n-1 (n: the group order)
    """
    if not isinstance(private_key, (bytes, bytearray)) or len(private_key) != 32:
        raise InvalidPrivateKey("a private key is exactly 32 bytes")
    if not 0 < int.from_bytes(private_key, "big") < CURVE_ORDER:
        raise InvalidPrivateKey(
            "not a valid secp256k1 private key: it must be from 1 to n-1 (n: the group order)")
    return bytes(private_key)


def parse_private_key(text: str) -> bytes:
    """The private key written as ``text``: exactly 64 hex digits (either case; no ``0x``,
    no spaces), checked by :func:`check_private_key`.

    A caller reading a key from a file strips the line end (and surrounding blanks) first.

    Raises:
        InvalidPrivateKey: ``text`` is not 64 hex digits, or not a valid key (the message
            never quotes it).

    Examples:
        >>> parse_private_key("00" * 31 + "01") == (1).to_bytes(32, "big")
        True
        >>> parse_private_key("01")
        Traceback (most recent call last):
        ...
        snap_spark.protocol.keys.InvalidPrivateKey: a private key is exactly 64 hex digits
        >>> try:
        ...     parse_private_key("00" * 32)
        ... except InvalidPrivateKey as exc:
        ...     print(exc)
        not a valid secp256k1 private key: it must be from 1 to n-1 (n: the group order)
    """
    if not isinstance(text, str) or _PRIVATE_KEY_HEX.fullmatch(text) is None:
        raise InvalidPrivateKey("a private key is exactly 64 hex digits")
    return check_private_key(bytes.fromhex(text))


def parse_private_key_lines(lines: Iterable[str], where: str) -> list[bytes]:
    """The private keys of a key file's ``lines``: one a line, read by
    :func:`parse_private_key` once the blanks around it are stripped; blank lines and lines
    that start with ``#`` are skipped.

    Raises:
        InvalidPrivateKey: a line is not a valid key; the message names ``where`` and the
            line (``"<where>, line 4: ..."``), never the key.

    Examples:
        >>> [k.hex()[:4] for k in parse_private_key_lines(["# mine", "", " " + "0a" * 32], "f")]
        ['0a0a']
        >>> parse_private_key_lines(["# mine", "0a"], "ring")
        Traceback (most recent call last):
        ...
        snap_spark.protocol.keys.InvalidPrivateKey: ring, line 2: a private key is exactly \
64 hex digits
    """
    keys: list[bytes] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            keys.append(parse_private_key(text))
        except InvalidPrivateKey as exc:  # its message never quotes the key
            raise InvalidPrivateKey(f"{where}, line {number}: {exc}") from None
    return keys


def tagged_hash(tag: str, data: bytes) -> bytes:
    """BIP-340 tagged hash: ``SHA256(SHA256(tag) || SHA256(tag) || data)``."""
    tag_digest = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(tag_digest + tag_digest + data).digest()


def taptweak(internal_key: bytes) -> bytes:
    """The BIP-341 tweak scalar ``t`` (32 bytes) for an x-only key with no script tree."""
    return tagged_hash("TapTweak", internal_key)


def internal_pubkey(private_key: bytes) -> bytes:
    """The 32-byte x-only internal public key ``P`` of a private key (also the Nostr key).

    Raises:
        InvalidPrivateKey: ``private_key`` is not a valid key (:func:`check_private_key`).
    """
    return PublicKeyXOnly.from_secret(check_private_key(private_key)).format()


def tweak_public_key(internal_key: bytes) -> bytes:
    """The tweaked output key ``Q`` (x-only, 32 bytes) of an x-only internal key.

    Raises:
        ValueError: if ``internal_key`` is not the x coordinate of a curve point.
    """
    point = PublicKeyXOnly(bytes(internal_key))
    point.tweak_add(taptweak(bytes(internal_key)))
    return point.format()


def tweak_private_key(private_key: bytes) -> bytes:
    """The private key of ``Q``: negate ``d`` if ``d*G`` has odd y, then add ``t`` (mod n).

    Raises:
        InvalidPrivateKey: ``private_key`` is not a valid key (:func:`check_private_key`).
    """
    private_key = check_private_key(private_key)
    xonly = PublicKeyXOnly.from_secret(private_key)
    secret = int.from_bytes(private_key, "big")
    if xonly.parity:  # odd y: BIP-340 uses the even-y representative
        secret = CURVE_ORDER - secret
    even = PrivateKey(secret.to_bytes(32, "big"))
    return even.add(taptweak(xonly.format())).secret


def encode_p2tr(output_key: bytes, network: Network = "mainnet") -> str:
    """Encode a 32-byte tweaked output key as a P2TR address (bech32m, witness v1)."""
    if len(output_key) != 32:
        raise ValueError("a P2TR program is 32 bytes")
    return str(_bech32.encode(_NETWORK_TO_HRP[network], 1, output_key))


def p2tr_address(internal_key: bytes, network: Network = "mainnet") -> str:
    """The SNAP identity (P2TR address) of an x-only internal key ``P``."""
    return encode_p2tr(tweak_public_key(internal_key), network)


@dataclass(frozen=True, slots=True)
class P2TR:
    """A decoded P2TR address: its network and 32-byte witness program (the key ``Q``)."""

    network: Network
    program: bytes


def decode_p2tr(address: object, *, require_point: bool = False) -> P2TR:
    """Decode a strict SNAP P2TR address, or raise :class:`IdentityInvalid` saying why.

    Strict means: a string of exactly 62 lowercase characters, ``bc1p``/``tb1p``, a valid
    bech32m (not bech32) checksum, witness version 1, a 32-byte program, zero padding.
    With ``require_point`` the program must also be a valid x-only key (the x coordinate
    of a curve point). Message verification leaves that to the signature check, which
    reports such an address as 2001 (docs/architecture.md, *Verdict order*). Results are
    cached per address (decoding is pure Python and agents are few).

    Examples:
        >>> decode_p2tr("bc1p" + "q" * 58)
        Traceback (most recent call last):
        ...
        snap_spark.protocol.errors.IdentityInvalid: bad bech32m checksum or character
    """
    if not isinstance(address, str):
        raise IdentityInvalid("address is not a string")
    decoded = _decode_p2tr_cached(address)
    if require_point and xonly_key(decoded.program) is None:
        raise IdentityInvalid("witness program is not a valid x-only public key")
    return decoded


@lru_cache(maxsize=1 << 16)
def _decode_p2tr_cached(address: str) -> P2TR:
    if len(address) != P2TR_LENGTH:
        raise IdentityInvalid(f"P2TR address must be {P2TR_LENGTH} characters, got {len(address)}")
    if not address.isascii() or address != address.lower():
        raise IdentityInvalid("P2TR address must be lowercase ASCII")
    prefix = address[:4]
    if prefix not in ("bc1p", "tb1p"):
        raise IdentityInvalid(f"P2TR address must start with bc1p or tb1p, not {prefix!r}")
    try:
        hrp, data, spec = _bech32.bech32_decode(address)
    except _bech32.DecodeError:
        raise IdentityInvalid("bad bech32m checksum or character") from None
    if spec != _bech32.Encoding.BECH32M:
        raise IdentityInvalid("bech32 (BIP-173) checksum; witness v1 needs bech32m (BIP-350)")
    if len(data) == 0:  # the last '1' is the checksum's separator: no version, no program
        raise IdentityInvalid("no witness version or program before the checksum")
    if data[0] != 1:  # reachable when a later '1' is taken as the separator
        raise IdentityInvalid(f"witness version {data[0]}, P2TR needs version 1")
    try:
        program = bytes(_bech32.convertbits(data[1:], 5, 8, False))
    except _bech32.DecodeError:
        raise IdentityInvalid("non-zero padding bits in the witness program") from None
    if len(program) != 32:
        raise IdentityInvalid(f"witness program is {len(program)} bytes, P2TR needs 32")
    return P2TR(_HRP_TO_NETWORK[hrp], program)


@lru_cache(maxsize=1 << 16)
def xonly_key(program: bytes) -> PublicKeyXOnly | None:
    """The parsed x-only key for a 32-byte program, or ``None`` if it is not on the curve."""
    try:
        return PublicKeyXOnly(program)
    except ValueError:
        return None


def is_valid_p2tr(address: object, *, require_point: bool = True) -> bool:
    """True when ``address`` is a strict P2TR address (and, by default, a real x-only key)."""
    try:
        decode_p2tr(address, require_point=require_point)
    except IdentityInvalid:
        return False
    return True


def generate_private_key() -> bytes:
    """A fresh random 32-byte private key."""
    return PrivateKey().secret
