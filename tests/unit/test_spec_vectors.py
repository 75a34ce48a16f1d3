"""Every public SNAP test vector, reproduced bit for bit (aux randomness = 32 zero bytes)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from snap_spark.protocol import jcs, keys, signing
from tests.conftest import load_vector

KEYS = load_vector("key-encoding.json")["vectors"]
JCS = load_vector("jcs-payloads.json")["vectors"]
SIGS = load_vector("schnorr-signatures.json")


@pytest.mark.parametrize("vec", KEYS, ids=lambda v: v["description"])
def test_key_encoding(vec: dict[str, Any]) -> None:
    internal = keys.internal_pubkey(bytes.fromhex(vec["privateKey"]))
    assert internal.hex() == vec["publicKeyXOnly"] == vec["nostrPubkeyHex"]
    assert keys.tweak_public_key(internal).hex() == vec["tweakedPublicKey"]
    assert keys.p2tr_address(internal, vec["network"]) == vec["p2trAddress"]
    decoded = keys.decode_p2tr(vec["p2trAddress"])
    assert decoded.network == vec["network"]
    assert decoded.program.hex() == vec["tweakedPublicKey"]


@pytest.mark.parametrize("vec", KEYS, ids=lambda v: v["description"])
def test_tweaked_private_key_matches_tweaked_public_key(vec: dict[str, Any]) -> None:
    tweaked_priv = keys.tweak_private_key(bytes.fromhex(vec["privateKey"]))
    assert keys.internal_pubkey(tweaked_priv).hex() == vec["tweakedPublicKey"]


@pytest.mark.parametrize("vec", JCS, ids=lambda v: v["description"])
def test_jcs_vectors(vec: dict[str, Any]) -> None:
    assert jcs.canonicalize(vec["input"]).decode("utf-8") == vec["expected"]
    assert jcs.canonicalize_reference(vec["input"]).decode("utf-8") == vec["expected"]


@pytest.mark.parametrize("vec", SIGS["valid"], ids=lambda v: v["description"])
def test_valid_signature_vectors(vec: dict[str, Any]) -> None:
    msg = vec["message"]
    inter = vec["intermediates"]
    canonical = jcs.canonicalize(msg["payload"])
    assert canonical.decode("utf-8") == inter["canonicalPayload"]
    data = signing.signature_input(
        msg["id"], msg["from"], msg.get("to"), msg["type"], msg["method"], canonical,
        msg["timestamp"],
    )
    assert data.decode("utf-8") == inter["signatureInput"]
    assert data.hex() == inter["signatureInputHex"]
    assert hashlib.sha256(data).hexdigest() == inter["sha256Hash"]
    signed = signing.sign_message(msg, bytes.fromhex(vec["privateKey"]), aux=bytes(32))
    assert signed["sig"] == vec["expectedSignature"]
    assert signing.verify_message({**msg, "sig": vec["expectedSignature"]})


@pytest.mark.parametrize("vec", SIGS["invalid"], ids=lambda v: v["description"])
def test_invalid_signature_vectors(vec: dict[str, Any]) -> None:
    assert not signing.verify_message({**vec["message"], "sig": vec["signature"]})
