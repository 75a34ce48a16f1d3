"""Private keys are 32 bytes (issue 47): every function of snap_spark.protocol that takes a
private key refuses a shorter one (it was padded with zeros before), a longer one, zero and
numbers at or above the group order, with an InvalidPrivateKey that never quotes the key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from snap_spark.protocol import keys
from snap_spark.protocol.cards import sample_card, sign_card
from snap_spark.protocol.keys import (
    CURVE_ORDER,
    InvalidPrivateKey,
    check_private_key,
    parse_private_key,
)
from snap_spark.protocol.nostr import build_card_event, check_card_event, check_event, sign_event
from snap_spark.protocol.signing import sign_digest, sign_message, verify_message
from tests.unit.helpers import (
    BAD_KEY_BYTES,
    BAD_KEY_TEXTS,
    EDGE_KEY_TEXTS,
    assert_not_quoted,
    message,
)

AUX = bytes(32)
EVENT = {"created_at": 1, "kind": 1, "tags": [], "content": "hi"}

#: name -> a call of a public function with a private key
API: dict[str, Callable[[bytes], Any]] = {
    "check_private_key": check_private_key,
    "internal_pubkey": keys.internal_pubkey,
    "tweak_private_key": keys.tweak_private_key,
    "sign_digest": lambda key: sign_digest(bytes(32), key, AUX),
    "sign_message": lambda key: sign_message(message(), key, AUX),
    "sign_event": lambda key: sign_event(EVENT, key, AUX),
    "build_card_event": lambda key: build_card_event({"name": "A"}, key, 1, aux=AUX),
    "sign_card": lambda key: sign_card({"name": "A"}, key, 1, AUX),
}


@pytest.mark.parametrize("bad", BAD_KEY_TEXTS)  # ids are the names: no key in test output
def test_parse_private_key_refuses_what_is_not_64_hex_digits_of_a_valid_key(bad: str) -> None:
    key = BAD_KEY_TEXTS[bad]
    with pytest.raises(InvalidPrivateKey) as refused:
        parse_private_key(key)
    said = str(refused.value)
    assert isinstance(refused.value, ValueError) and "\n" not in said
    assert said in ("a private key is exactly 64 hex digits",
                    "not a valid secp256k1 private key: it must be from 1 to n-1 "
                    "(n: the group order)")
    assert_not_quoted(key, said, repr(refused.value))


@pytest.mark.parametrize("edge", EDGE_KEY_TEXTS)
def test_parse_private_key_takes_1_and_n_minus_1_in_either_case(edge: str) -> None:
    text = EDGE_KEY_TEXTS[edge]
    assert parse_private_key(text) == parse_private_key(text.upper()) == bytes.fromhex(text)


def test_parse_private_key_refuses_what_is_not_text() -> None:
    for value in (bytes.fromhex("0a" * 32), b"0a" * 32, 10, None):
        with pytest.raises(InvalidPrivateKey, match="64 hex digits"):
            parse_private_key(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("function", API)
@pytest.mark.parametrize("bad", BAD_KEY_BYTES)
def test_functions_taking_a_key_refuse_one_that_is_not_32_bytes_of_a_valid_key(
    function: str, bad: str
) -> None:
    key = BAD_KEY_BYTES[bad]
    with pytest.raises(InvalidPrivateKey) as refused:
        API[function](key)
    said = str(refused.value)
    assert "\n" not in said
    assert said.startswith("a private key is exactly 32 bytes") == (len(key) != 32)
    assert_not_quoted(key.hex(), said, repr(refused.value))


@pytest.mark.parametrize("function", API)
def test_functions_taking_a_key_refuse_its_hex_text(function: str) -> None:
    with pytest.raises(InvalidPrivateKey, match="exactly 32 bytes"):
        API[function]("0a" * 32)


@pytest.mark.parametrize("edge", EDGE_KEY_TEXTS)
def test_functions_taking_a_key_take_1_and_n_minus_1(edge: str) -> None:
    key = bytes.fromhex(EDGE_KEY_TEXTS[edge])
    assert check_private_key(bytearray(key)) == key
    internal = keys.internal_pubkey(key)
    tweaked = keys.tweak_private_key(key)
    assert 0 < int.from_bytes(tweaked, "big") < CURVE_ORDER
    assert keys.internal_pubkey(tweaked) == keys.tweak_public_key(internal)
    address = keys.p2tr_address(internal)
    assert verify_message(sign_message(message(**{"from": address}), key, AUX))
    assert check_event(sign_event(EVENT, key, AUX))[0] == "ok"
    card = sample_card(address)
    assert check_card_event(build_card_event(card, key, 1, aux=AUX))[0] == "valid"
    assert sign_card(card, key, 1, AUX)["publicKey"] == keys.tweak_public_key(internal).hex()


def test_a_short_key_is_not_padded_into_the_identity_of_a_small_number() -> None:
    # before issue 47: internal_pubkey(b"\x01") was the key of secret 1, a known identity
    one = keys.internal_pubkey(bytes.fromhex(EDGE_KEY_TEXTS["1"]))
    assert one.hex() == "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    with pytest.raises(InvalidPrivateKey):
        keys.internal_pubkey(b"\x01")
