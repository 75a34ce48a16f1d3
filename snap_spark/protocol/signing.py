"""Signature input, signing and verification (``docs/authentication.md``).

The signed bytes are seven UTF-8 fields joined by NUL: ``id, from, to ("" when absent),
type, method, JCS(payload), str(timestamp)``; their SHA-256 is signed with BIP-340 Schnorr
under the taproot-tweaked private key. ``version`` and extension fields are not signed.

Examples:
    >>> priv = bytes.fromhex("0a" * 32)
    >>> from snap_spark.protocol.keys import internal_pubkey, p2tr_address
    >>> msg = {"id": "m1", "version": "0.1", "from": p2tr_address(internal_pubkey(priv)),
    ...        "type": "request", "method": "service/call", "payload": {"name": "x"},
    ...        "timestamp": 1770163200}
    >>> signed = sign_message(msg, priv, aux=bytes(32))
    >>> verify_message(signed)
    True
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from snap_spark.protocol.jcs import canonicalize
from snap_spark.protocol.keys import (
    check_private_key,
    decode_p2tr,
    tweak_private_key,
    xonly_key,
)


def signature_input(
    msg_id: str,
    sender: str,
    recipient: str | None,
    msg_type: str,
    method: str,
    canonical_payload: bytes,
    timestamp: int,
) -> bytes:
    """The exact bytes that are hashed and signed (``recipient`` ``None`` means absent)."""
    return b"\x00".join(
        (
            msg_id.encode(),
            sender.encode(),
            (recipient or "").encode(),
            msg_type.encode(),
            method.encode(),
            canonical_payload,
            str(timestamp).encode(),
        )
    )


def message_digest(message: Mapping[str, Any]) -> bytes:
    """SHA-256 of the signature input of a message dict (fields assumed well-typed)."""
    data = signature_input(
        message["id"],
        message["from"],
        message.get("to"),
        message["type"],
        message["method"],
        canonicalize(message["payload"]),
        int(message["timestamp"]),
    )
    return hashlib.sha256(data).digest()


def sign_digest(digest: bytes, private_key: bytes, aux: bytes | None = None) -> str:
    """BIP-340 signature (128 lowercase hex) of a 32-byte digest with the *tweaked* key.

    ``aux`` is the 32-byte auxiliary randomness; ``None`` draws it from ``os.urandom``.

    Raises:
        InvalidPrivateKey: ``private_key`` is not a valid key
            (:func:`~snap_spark.protocol.keys.check_private_key`; the message never quotes it).
    """
    from coincurve import PrivateKey

    tweaked = PrivateKey(tweak_private_key(private_key))
    return tweaked.sign_schnorr(digest, aux if aux is not None else os.urandom(32)).hex()


def sign_message(
    message: Mapping[str, Any], private_key: bytes, aux: bytes | None = None
) -> dict[str, Any]:
    """Return a copy of ``message`` with ``sig`` set (any old ``sig`` is replaced).

    Raises:
        InvalidPrivateKey: ``private_key`` is not a valid key
            (:func:`~snap_spark.protocol.keys.check_private_key`), checked before the message.
    """
    private_key = check_private_key(private_key)
    signed = {k: v for k, v in message.items() if k != "sig"}
    signed["sig"] = sign_digest(message_digest(signed), private_key, aux)
    return signed


def verify_digest(digest: bytes, signature_hex: str, sender: str) -> bool:
    """True when ``signature_hex`` is a valid BIP-340 signature of ``digest`` by ``sender``'s
    tweaked output key. False for any malformed input (never raises)."""
    try:
        program = decode_p2tr(sender).program
        signature = bytes.fromhex(signature_hex)
    except ValueError:
        return False
    key = xonly_key(program)
    if key is None or len(signature) != 64:
        return False
    return bool(key.verify(signature, digest))


def verify_message(message: Mapping[str, Any]) -> bool:
    """True when the message's ``sig`` verifies (structure is not validated here; see
    :func:`snap_spark.protocol.validate.check_message` for the full verdict)."""
    try:
        digest = message_digest(message)
    except (KeyError, TypeError, ValueError):
        return False
    sig = message.get("sig")
    return isinstance(sig, str) and verify_digest(digest, sig, message["from"])
