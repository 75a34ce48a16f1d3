"""Builders for signed test messages (keys are the spec vectors' agents A, B, C)."""

from __future__ import annotations

import json
from typing import Any

from snap_spark.protocol import keys
from snap_spark.protocol.signing import sign_message

PRIV_A = bytes.fromhex("0a" * 32)
PRIV_B = bytes.fromhex("0b" * 32)
PRIV_C = bytes.fromhex("0c" * 32)
ADDR_A = keys.p2tr_address(keys.internal_pubkey(PRIV_A))
ADDR_B = keys.p2tr_address(keys.internal_pubkey(PRIV_B))
ADDR_C_TEST = keys.p2tr_address(keys.internal_pubkey(PRIV_C), "testnet")
T0 = 1_770_163_200


def message(**overrides: Any) -> dict[str, Any]:
    """An unsigned request from A to B; ``overrides`` replace fields (value None deletes)."""
    msg: dict[str, Any] = {
        "id": "msg-001",
        "version": "0.1",
        "from": ADDR_A,
        "to": ADDR_B,
        "type": "request",
        "method": "message/send",
        "payload": {"message": {"messageId": "i1", "role": "user", "parts": [{"text": "hi"}]}},
        "timestamp": T0,
    }
    for key, value in overrides.items():
        if value is None:
            msg.pop(key, None)
        else:
            msg[key] = value
    return msg


def signed(priv: bytes = PRIV_A, **overrides: Any) -> dict[str, Any]:
    """A message signed by ``priv`` (aux = zero bytes, deterministic)."""
    return sign_message(message(**overrides), priv, aux=bytes(32))


def envelope(msg: Any, received_at: float = T0, source: str = "test") -> bytes:
    """One NDJSON envelope line."""
    return json.dumps({"received_at": received_at, "source": source, "message": msg}).encode()


# Private keys as text that every entry point taking a key must refuse (issue 47): too short
# (a truncated paste), one digit short or long, not hex, and numbers outside 1..n-1.
_N = keys.CURVE_ORDER
BAD_KEY_TEXTS: dict[str, str] = {
    "2 digits": "01",
    "48 bits": "deadbeefcafe",
    "63 digits": "0a" * 31 + "0",
    "65 digits": "0a" * 32 + "0",
    "not hex": "0a" * 31 + "zg",
    "0x prefix": "0x" + "0a" * 31,
    "spaces inside": " ".join(["0a0a0a0a"] * 8),
    "non-ASCII digits": "\uff10\uff41" * 32,  # fullwidth 0 and a
    "zero": "00" * 32,
    "n": f"{_N:064x}",
    "n+1": f"{_N + 1:064x}",
    "2^256-1": "ff" * 32,
}
#: Private keys as bytes that every function taking one must refuse: not 32 bytes (short
#: byte strings were padded with zeros before), or a number outside 1..n-1.
BAD_KEY_BYTES: dict[str, bytes] = {
    "empty": b"",
    "1 byte": b"\x01",
    "48 bits": bytes.fromhex("deadbeefcafe"),
    "31 bytes": bytes.fromhex("0a" * 31),
    "33 bytes": bytes.fromhex("0a" * 33),
    "zero": bytes(32),
    "n": _N.to_bytes(32, "big"),
    "n+1": (_N + 1).to_bytes(32, "big"),
    "2^256-1": b"\xff" * 32,
}
#: The smallest and the largest valid keys, as 64 hex digits.
EDGE_KEY_TEXTS: dict[str, str] = {"1": f"{1:064x}", "n-1": f"{_N - 1:064x}"}


def assert_not_quoted(key_text: str, *said: str | bytes) -> None:
    """Neither ``key_text`` nor any 8 characters of it in a row (either case) is in
    ``said`` (output or error text): a refusal never quotes the key, not even a part."""
    key = key_text.lower()
    pieces = {key} | {key[i:i + 8] for i in range(max(0, len(key) - 7))}
    for text in said:
        plain = (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).lower()
        if any(piece and piece in plain for piece in pieces):
            # no assert: pytest would print the pieces it found
            raise AssertionError("a refusal quotes (part of) the key")
