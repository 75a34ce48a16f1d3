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
