"""NIP-44 v2 encryption with a given nonce, so the Nostr sample is reproducible.

nostr-sdk draws its own nonces, so the sample encrypts here: ECDH conversation key,
HKDF, RFC 8439 ChaCha20 and HMAC-SHA256, as NIP-44 v2 specifies. The tests decrypt every
payload of the sample with nostr-sdk.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from typing import Final

from coincurve import PublicKey

__all__ = [
    "NIP44_MAX_PLAINTEXT",
    "nip44_conversation_key",
    "nip44_encrypt",
    "nip44_pad",
    "nip44_padded_length",
    "nip44_payload",
]

_NIP44_SALT: Final = b"nip44-v2"
#: The longest plaintext NIP-44 v2 encrypts, in UTF-8 bytes.
NIP44_MAX_PLAINTEXT: Final = 65535
_MASK32: Final = 0xFFFFFFFF


def nip44_conversation_key(private_key: bytes, pubkey_hex: str) -> bytes:
    """NIP-44 v2 conversation key: HKDF-extract(salt ``nip44-v2``, ECDH x coordinate).

    Symmetric: ``key(a, B) == key(b, A)``.

    Examples:
        >>> from snap_spark.protocol.keys import internal_pubkey
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
    """RFC 5869 HKDF-Expand with SHA-256."""
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def _quarter(x: list[int], a: int, b: int, c: int, d: int) -> None:
    """ChaCha20's quarter round on four words of ``x`` (in place)."""
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


def nip44_payload(conversation_key: bytes, nonce: bytes, padded: bytes, version: int = 2) -> str:
    """``base64(version || nonce || chacha20(padded) || hmac)`` for given padded bytes."""
    keys = _hkdf_expand(conversation_key, nonce, 76)
    ciphertext = _chacha20(keys[:32], keys[32:44], padded)
    mac = hmac.new(keys[44:76], nonce + ciphertext, hashlib.sha256).digest()
    return base64.b64encode(bytes([version]) + nonce + ciphertext + mac).decode("ascii")


def nip44_pad(raw: bytes) -> bytes:
    """``raw`` with its 2-byte big-endian length before it and zeros after it, to
    :func:`nip44_padded_length`."""
    return len(raw).to_bytes(2, "big") + raw + bytes(nip44_padded_length(len(raw)) - len(raw))


def nip44_encrypt(plaintext: str, conversation_key: bytes, nonce: bytes) -> str:
    """NIP-44 v2 payload of ``plaintext`` with a given 32-byte nonce (deterministic).

    Raises:
        ValueError: the plaintext is empty or over 65,535 UTF-8 bytes, or the key or the
            nonce is not 32 bytes.

    Examples:
        >>> from snap_spark.protocol.keys import internal_pubkey
        >>> one, two = (1).to_bytes(32, "big"), (2).to_bytes(32, "big")
        >>> key = nip44_conversation_key(one, internal_pubkey(two).hex())
        >>> nip44_encrypt("a", key, (1).to_bytes(32, "big"))[:24]
        'AgAAAAAAAAAAAAAAAAAAAAAA'
    """
    raw = plaintext.encode("utf-8")
    if not 1 <= len(raw) <= NIP44_MAX_PLAINTEXT:
        raise ValueError(f"NIP-44 plaintext must be 1-{NIP44_MAX_PLAINTEXT} bytes")
    if len(conversation_key) != 32 or len(nonce) != 32:
        raise ValueError("conversation key and nonce must be 32 bytes")
    return nip44_payload(conversation_key, nonce, nip44_pad(raw))
