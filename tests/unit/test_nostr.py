"""NIP-01 ids and signatures, and agent-card event verdicts, cross-checked with nostr-sdk."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import nostr_sdk
import pytest
from coincurve import PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snap_spark.protocol import nostr
from snap_spark.protocol.cards import MAX_CARD_BYTES, sample_card
from snap_spark.protocol.keys import (
    Network,
    encode_p2tr,
    internal_pubkey,
    p2tr_address,
    tweak_private_key,
)

PRIV_A = bytes.fromhex("0a" * 32)
PRIV_B = bytes.fromhex("0b" * 32)
PUB_A = internal_pubkey(PRIV_A).hex()
ADDR_A = p2tr_address(internal_pubkey(PRIV_A), "mainnet")
ADDR_A_TESTNET = p2tr_address(internal_pubkey(PRIV_A), "testnet")
ADDR_B = p2tr_address(internal_pubkey(PRIV_B), "mainnet")
AUX = bytes(32)
T0 = 1770163200
#: 5 is the smallest x with no point on secp256k1 (x^3 + 7 is not a square mod p).
NOT_A_POINT = (5).to_bytes(32, "big").hex()
CARD_JSON = json.dumps(sample_card(ADDR_A))

# Characters that NIP-01 serialization treats specially, or that serializers get wrong.
SPECIALS = (
    '"\\/\n\r\t\b\f\x00\x01\x07\x0b\x1b\x1f\x7f\x80\x9f\u00e9\u2028\u2029\ufeff'
    "\ufffd\U0001f600\U0001f468\u200d\U0001f469\U00010000\U0010ffff\ue000"
)
#: Any Unicode text without surrogates (Rust strings, and UTF-8, cannot hold them).
nostr_text = st.text(
    alphabet=st.one_of(
        st.characters(exclude_categories=["Cs"]),
        st.sampled_from(SPECIALS),
    ),
    max_size=40,
)
tag_lists = st.lists(st.lists(nostr_text, min_size=1, max_size=4), max_size=5)


def sdk_keys(private_key: bytes) -> nostr_sdk.Keys:
    return nostr_sdk.Keys(nostr_sdk.SecretKey.from_bytes(private_key))


def sdk_event(
    private_key: bytes, kind: int, content: str, tags: list[list[str]], created_at: int
) -> dict[str, Any]:
    """Build and sign an event with nostr-sdk, return it as parsed JSON."""
    keys = sdk_keys(private_key)
    builder = (
        nostr_sdk.EventBuilder(nostr_sdk.Kind(kind), content)
        .tags([nostr_sdk.Tag.parse(tag) for tag in tags])
        .custom_created_at(nostr_sdk.Timestamp.from_secs(created_at))
    )
    signed = keys.sign_event(builder.finalize_unsigned(keys.public_key()))
    parsed: dict[str, Any] = json.loads(signed.as_json())
    return parsed


def sdk_verifies(event: dict[str, Any]) -> bool:
    try:
        return bool(nostr_sdk.Event.from_json(json.dumps(event)).verify())
    except Exception:  # nostr-sdk refuses to parse it at all
        return False


def card_event(**overrides: Any) -> dict[str, Any]:
    card = sample_card(ADDR_A)
    card.update(overrides)
    return nostr.build_card_event(card, PRIV_A, T0, aux=AUX)


def resign(event: dict[str, Any], private_key: bytes = PRIV_A) -> dict[str, Any]:
    return nostr.sign_event(event, private_key, aux=AUX)


# ------------------------------------------------------------------ NIP-01 serialization


@pytest.mark.parametrize(
    ("char", "written"),
    [
        ("\n", "\\n"),
        ('"', '\\"'),
        ("\\", "\\\\"),
        ("\r", "\\r"),
        ("\t", "\\t"),
        ("\b", "\\b"),
        ("\f", "\\f"),
        ("\x00", "\\u0000"),
        ("\x0b", "\\u000b"),
        ("\x1f", "\\u001f"),
        ("\x7f", "\x7f"),
        ("/", "/"),
        ("\u2028", "\u2028"),
        ("\u2029", "\u2029"),
        ("é", "é"),
        ("\U0001f600", "\U0001f600"),
    ],
)
def test_serialization_escapes_exactly_nip01(char: str, written: str) -> None:
    event = {"pubkey": PUB_A, "created_at": 7, "kind": 1, "tags": [["t", char]], "content": char}
    expected = f'[0,"{PUB_A}",7,1,[["t","{written}"]],"{written}"]'.encode()
    assert nostr.serialize_event(event) == expected


@given(
    content=nostr_text,
    tags=tag_lists,
    kind=st.integers(0, 65535),
    created_at=st.integers(0, 2**53 - 1),
)
def test_serialization_equals_compact_json(
    content: str, tags: list[list[str]], kind: int, created_at: int
) -> None:
    """Python's json (ensure_ascii off) escapes exactly the NIP-01 set plus \\u00XX controls."""
    event = {"pubkey": PUB_A, "created_at": created_at, "kind": kind, "tags": tags}
    event["content"] = content
    oracle = json.dumps(
        [0, PUB_A, created_at, kind, tags, content], ensure_ascii=False, separators=(",", ":")
    )
    assert nostr.serialize_event(event) == oracle.encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(
    content=nostr_text,
    tags=tag_lists,
    kind=st.integers(0, 65535),
    created_at=st.integers(0, 2**53 - 1),
)
def test_event_id_matches_nostr_sdk_compute(
    content: str, tags: list[list[str]], kind: int, created_at: int
) -> None:
    sdk_id = nostr_sdk.EventId.compute(
        nostr_sdk.PublicKey.parse(PUB_A),
        nostr_sdk.Timestamp.from_secs(created_at),
        nostr_sdk.Kind(kind),
        [nostr_sdk.Tag.parse(tag) for tag in tags],
        content,
    ).to_hex()
    event = {"pubkey": PUB_A, "created_at": created_at, "kind": kind, "tags": tags}
    event["content"] = content
    assert nostr.event_id(event) == sdk_id


@settings(max_examples=150, deadline=None)
@given(
    secret=st.integers(1, 2**255),
    content=nostr_text,
    tags=tag_lists,
    kind=st.integers(0, 65535),
    created_at=st.integers(0, 2**40),
)
def test_events_signed_by_nostr_sdk_pass_check_event(
    secret: int, content: str, tags: list[list[str]], kind: int, created_at: int
) -> None:
    event = sdk_event(secret.to_bytes(32, "big"), kind, content, tags, created_at)
    assert event["content"] == content  # the JSON round trip kept every character
    assert nostr.event_id(event) == event["id"]
    assert nostr.check_event(event) == ("ok", "id and signature verified")


@settings(max_examples=100, deadline=None)
@given(
    secret=st.integers(1, 2**255),
    name=nostr_text,
    description=nostr_text,
    created_at=st.integers(0, 2**40),
    network=st.sampled_from(["mainnet", "testnet"]),
)
def test_events_built_here_pass_nostr_sdk_verification(
    secret: int, name: str, description: str, created_at: int, network: Network
) -> None:
    private_key = secret.to_bytes(32, "big")
    card = sample_card(p2tr_address(internal_pubkey(private_key), network))
    card.update(name=name, description=description)
    event = nostr.build_card_event(card, private_key, created_at, network)
    parsed = nostr_sdk.Event.from_json(json.dumps(event))
    assert parsed.verify()
    assert parsed.id().to_hex() == event["id"]
    assert parsed.author().to_hex() == internal_pubkey(private_key).hex()
    assert json.loads(parsed.as_json()) == event
    expected = "valid" if 1 <= len(name) <= 128 and 1 <= len(description) <= 1024 else None
    verdict = nostr.check_card_event(event)[0]
    assert verdict == expected or (expected is None and verdict == "invalid_card")


def test_tampering_is_caught_by_both_implementations() -> None:
    event = sdk_event(PRIV_A, 1, "hello", [["t", "x"]], T0)
    tampered = {**event, "content": "hello!"}
    assert not sdk_verifies(tampered)
    assert nostr.check_event(tampered)[0] == "bad_event_id"
    tampered = {**event, "sig": event["sig"][:-2] + ("00" if event["sig"][-2:] != "00" else "01")}
    assert not sdk_verifies(tampered)
    assert nostr.check_event(tampered)[0] == "bad_event_sig"


def test_sign_event_is_deterministic_with_aux_and_uses_the_untweaked_key() -> None:
    template = {"created_at": T0, "kind": 1, "tags": [], "content": "x"}
    first, second = nostr.sign_event(template, PRIV_A, AUX), nostr.sign_event(template, PRIV_A, AUX)
    assert first == second
    assert first["pubkey"] == PUB_A  # the internal key P, not the taproot output key
    assert sdk_verifies(first)


def test_event_id_raises_value_error_on_bad_fields() -> None:
    with pytest.raises(ValueError, match="created_at"):
        nostr.event_id({"pubkey": PUB_A, "created_at": "1", "kind": 1, "tags": [], "content": ""})
    with pytest.raises(ValueError, match="lone surrogate"):
        nostr.event_id(
            {"pubkey": PUB_A, "created_at": 1, "kind": 1, "tags": [], "content": "\ud800"}
        )


# ------------------------------------------------------------------ check_event verdicts


def signed_note() -> dict[str, Any]:
    return nostr.sign_event(
        {"created_at": T0, "kind": 1, "tags": [["t", "x"]], "content": "hi"}, PRIV_A, AUX
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"id": None}, "id must be"),
        ({"sig": None}, "sig must be"),
        ({"pubkey": None}, "pubkey must be"),
        ({"id": "A" * 64}, "id must be"),  # NIP-01: lowercase hex (nostr-sdk accepts upper)
        ({"sig": "ab" * 63}, "sig must be"),
        ({"pubkey": PUB_A.upper()}, "pubkey must be"),
        ({"created_at": -1}, "created_at"),
        ({"created_at": 2**53}, "created_at"),
        ({"created_at": float(T0)}, "created_at"),  # Rust/Go relays refuse 1.0 too
        ({"created_at": True}, "created_at"),
        ({"created_at": str(T0)}, "created_at"),
        ({"kind": 65536}, "kind"),
        ({"kind": -1}, "kind"),
        ({"kind": False}, "kind"),
        ({"tags": {}}, "tags must be"),
        ({"tags": [[]]}, "tags[0] must be a non-empty"),  # nostr-sdk: "empty tag"
        ({"tags": ["t"]}, "tags[0] must be"),
        ({"tags": [["t", 1]]}, "tags[0][1] must be a string"),
        ({"tags": [["t", None]]}, "tags[0][1] must be a string"),
        ({"content": None}, "content must be"),
        ({"content": {"a": 1}}, "content must be"),
        ({"content": "x\udc80"}, "lone surrogate"),
        ({"tags": [["t", "\ud83d"]]}, "lone surrogate"),
    ],
)
def test_malformed_events(change: dict[str, Any], reason: str) -> None:
    event = {**signed_note(), **change}
    verdict, detail = nostr.check_event(event)
    assert verdict == "malformed"
    assert reason in detail


@pytest.mark.parametrize("field", ["id", "pubkey", "created_at", "kind", "tags", "content", "sig"])
def test_missing_field_is_malformed(field: str) -> None:
    event = signed_note()
    del event[field]
    assert nostr.check_event(event) == ("malformed", f"required field {field!r} is missing")


def test_unknown_members_are_ignored() -> None:
    assert nostr.check_event({**signed_note(), "relay": "wss://x", "seen": 3})[0] == "ok"


def test_bad_event_id_for_tampered_fields_and_id() -> None:
    event = signed_note()
    for change in (
        {"content": "hi "},
        {"created_at": T0 + 1},
        {"kind": 2},
        {"tags": [["t", "y"]]},
        {"tags": []},
        {"pubkey": internal_pubkey(PRIV_B).hex()},
    ):
        assert nostr.check_event({**event, **change})[0] == "bad_event_id", change
    flipped = ("0" if event["id"][0] != "0" else "1") + event["id"][1:]
    verdict, detail = nostr.check_event({**event, "id": flipped})
    assert verdict == "bad_event_id"
    assert event["id"] in detail  # the reason names the id that was expected


def test_bad_event_sig() -> None:
    event = signed_note()
    # a valid signature of the same id, by another key
    forged = {
        **event,
        "sig": PrivateKey(PRIV_B).sign_schnorr(bytes.fromhex(event["id"]), AUX).hex(),
    }
    assert nostr.check_event(forged)[0] == "bad_event_sig"
    # signed with the taproot-*tweaked* key (the SNAP message key) instead of the Nostr key
    tweaked = PrivateKey(tweak_private_key(PRIV_A))
    wrong_key = {**event, "sig": tweaked.sign_schnorr(bytes.fromhex(event["id"]), AUX).hex()}
    assert nostr.check_event(wrong_key)[0] == "bad_event_sig"
    # a pubkey that is not a curve point, with a correct id
    off_curve = {**event, "pubkey": NOT_A_POINT}
    off_curve["id"] = nostr.event_id(off_curve)
    assert nostr.check_event(off_curve) == (
        "bad_event_sig",
        "pubkey is not the x coordinate of a secp256k1 point",
    )
    assert nostr.check_event({**event, "sig": "00" * 64})[0] == "bad_event_sig"
    assert nostr.check_event({**event, "sig": "ff" * 64})[0] == "bad_event_sig"


# ------------------------------------------------------------------ check_card_event verdicts


def test_valid_card_event_and_testnet_card() -> None:
    assert nostr.check_card_event(card_event()) == ("valid", "agent card event verified")
    # A tb1p d tag is checked against the testnet address of the key: a testnet card is valid.
    testnet = nostr.build_card_event(sample_card(ADDR_A_TESTNET), PRIV_A, T0, "testnet", aux=AUX)
    assert testnet["tags"][0] == ["d", ADDR_A_TESTNET]
    assert nostr.check_card_event(testnet)[0] == "valid"


def test_card_event_signed_by_nostr_sdk_is_valid() -> None:
    card = sample_card(ADDR_A)
    event = sdk_event(PRIV_A, 31337, json.dumps(card, indent=2), nostr.card_tags(card, ADDR_A), T0)
    assert nostr.check_card_event(event) == ("valid", "agent card event verified")


def test_card_event_tags_follow_discovery_md() -> None:
    card = sample_card(
        ADDR_A,
        endpoints=[{"protocol": "http", "url": "https://a.example/snap"}],
        nostrRelays=["wss://relay.example"],
    )
    event = nostr.build_card_event(card, PRIV_A, T0, aux=AUX)
    assert event["tags"] == [
        ["d", ADDR_A],
        ["name", "Code Assistant"],
        ["version", "1.0.0"],
        ["skill", "code-generation", "Code Generation"],
        ["endpoint", "http", "https://a.example/snap"],
        ["relay", "wss://relay.example"],
    ]
    assert json.loads(event["content"]) == card
    assert event["kind"] == nostr.CARD_KIND == 31337


def test_card_event_failing_check_event_keeps_that_verdict() -> None:
    event = card_event()
    assert nostr.check_card_event({**event, "content": event["content"] + " "})[0] == "bad_event_id"
    bad_id = {**event, "id": "0" * 64}
    assert nostr.check_card_event(bad_id)[0] == "bad_event_id"
    other_sig = resign(event, PRIV_B)["sig"]
    assert nostr.check_card_event({**event, "sig": other_sig})[0] == "bad_event_sig"
    assert nostr.check_card_event({**event, "sig": None})[0] == "malformed"


def test_wrong_kind_is_malformed() -> None:
    event = resign({**card_event(), "kind": 1})
    assert nostr.check_card_event(event) == ("malformed", "kind 1 is not an agent card (31337)")


def with_tags(tags: list[list[str]], **card_overrides: Any) -> dict[str, Any]:
    event = card_event(**card_overrides)
    return resign({**event, "tags": tags})


@pytest.mark.parametrize(
    ("tags", "reason"),
    [
        ([], "no d tag"),
        ([["name", "Code Assistant"]], "no d tag"),
        ([["d"]], "not a P2TR address"),
        ([["d", ""]], "not a P2TR address"),
        ([["d", ADDR_A.upper()]], "not a P2TR address"),
        ([["d", PUB_A]], "not a P2TR address"),
        ([["d", "bc1p5d7rjq7g6rdk2yhzqnt9dp8wvscrplqk0zwy63lmgreu9jzyt0mqf3xvn8"]], "checksum"),
        ([["d", ADDR_B]], "is not the taproot address"),  # another key's identity
        ([["d", ADDR_A_TESTNET]], None),  # right key, testnet: see the next test
        ([["d", ADDR_A], ["d", ADDR_B]], "several d tags"),
        ([["d", ADDR_A], ["d"]], "several d tags"),
        ([["name", "x"], ["d", ADDR_B], ["d", ADDR_A]], "is not the taproot address"),
    ],
)
def test_identity_mismatch(tags: list[list[str]], reason: str | None) -> None:
    verdict, detail = nostr.check_card_event(with_tags(tags))
    if reason is None:
        # A testnet d tag that is this key's testnet address passes the binding; the card
        # still names the mainnet identity, so the card no longer matches the d tag.
        assert verdict == "card_identity_mismatch"
    else:
        assert verdict == "identity_mismatch"
        assert reason in detail


def test_internal_key_mistaken_for_identity_is_identity_mismatch() -> None:
    # d tag built from the *untweaked* key (a common mistake): a valid P2TR, wrong key.
    untweaked = encode_p2tr(internal_pubkey(PRIV_A))
    assert nostr.check_card_event(with_tags([["d", untweaked]]))[0] == "identity_mismatch"


def test_d_tag_with_extra_values_is_accepted() -> None:
    assert nostr.check_card_event(with_tags([["d", ADDR_A, "extra"]]))[0] == "valid"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "not JSON"),
        ("{", "not JSON"),
        ("NaN", "not JSON"),
        ('{"a": Infinity}', "not JSON"),
        ("[" * 60_000, "nests too deeply"),  # deeper than the parser's recursion limit
        (CARD_JSON[:-1] + ',"x-deep":' + "[" * 30_000 + "]" * 30_000 + "}", "nests too deeply"),
        (CARD_JSON[:-1] + ',"x-deep":' + "[" * 200 + "]" * 200 + "}", "nesting deeper than 128"),
        (CARD_JSON[:-1] + ',"x-deep":' + "[" * 120 + "]" * 120 + "}", None),
        ("[]", "must be an object"),
        ("null", "must be an object"),
        ('"card"', "must be an object"),
        ("{}", "name: required"),
    ],
)
def test_invalid_card_content(content: str, reason: str | None) -> None:
    event = resign({**card_event(), "content": content})
    verdict, detail = nostr.check_card_event(event)
    if reason is None:  # within the implementation depth limit: fine
        assert verdict == "valid"
    else:
        assert verdict == "invalid_card"
        assert reason in detail


def test_card_breaking_one_rule_is_invalid_card() -> None:
    verdict, detail = nostr.check_card_event(card_event(version="1.0"))
    assert (verdict, detail) == (
        "invalid_card",
        "version: must match ^\\d+\\.\\d+\\.\\d+$, got '1.0'",
    )
    verdict, detail = nostr.check_card_event(card_event(identity="bc1pnotanaddress"))
    assert verdict == "invalid_card"
    assert detail.startswith("identity:")


def test_content_over_64_kib_is_invalid_card() -> None:
    event = card_event()
    card = json.loads(event["content"])
    # Pretty-printing padding keeps JCS(card) small, so only the content limit applies.
    padded = json.dumps(card, indent=MAX_CARD_BYTES)
    assert len(padded.encode()) > MAX_CARD_BYTES
    verdict, detail = nostr.check_card_event(resign({**event, "content": padded}))
    assert verdict == "invalid_card"
    assert "more than 65536" in detail


def test_card_identity_mismatch() -> None:
    verdict, detail = nostr.check_card_event(card_event(identity=ADDR_B))
    assert verdict == "card_identity_mismatch"
    assert ADDR_B in detail
    # The card names the testnet address of the same key while the d tag is mainnet.
    assert nostr.check_card_event(card_event(identity=ADDR_A_TESTNET))[0] == (
        "card_identity_mismatch"
    )


def test_duplicate_json_keys_in_content_take_the_last_value() -> None:
    # As JavaScript's JSON.parse does: the identity that counts is the last one.
    text = json.dumps(sample_card(ADDR_A))[:-1] + f', "identity": "{ADDR_B}"}}'
    assert nostr.check_card_event(resign({**card_event(), "content": text}))[0] == (
        "card_identity_mismatch"
    )


def test_card_sort_key_newest_then_lowest_id() -> None:
    old = nostr.build_card_event(sample_card(ADDR_A), PRIV_A, T0, aux=AUX)
    new = nostr.build_card_event(sample_card(ADDR_A, name="v2"), PRIV_A, T0 + 1, aux=AUX)
    tie = nostr.build_card_event(sample_card(ADDR_A, name="v3"), PRIV_A, T0 + 1, aux=AUX)
    low, high = sorted((new, tie), key=lambda e: e["id"])
    ordered = sorted([old, high, low], key=nostr.card_sort_key)
    assert ordered == [low, high, old]
    assert min([high, old, low], key=nostr.card_sort_key) is low


def test_verdict_tuples_list_every_verdict_once() -> None:
    assert len(set(nostr.EVENT_VERDICTS)) == 4
    assert len(set(nostr.CARD_EVENT_VERDICTS)) == 7


# ------------------------------------------------------------------ never raises

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)
python_garbage = st.one_of(
    json_values,
    st.binary(),
    st.complex_numbers(),
    st.decimals(),
    st.tuples(json_scalars, json_scalars),
    st.frozensets(st.integers()),
    st.builds(object),
    st.dictionaries(st.integers(), json_scalars, max_size=3),
)


def field_values(good: Any) -> st.SearchStrategy[Any]:
    """The right value, a value of a plausible shape, or garbage."""
    return st.one_of(st.just(good), python_garbage, st.just(None))


@st.composite
def mangled_events(draw: st.DrawFn) -> dict[Any, Any]:
    base = draw(st.sampled_from([signed_note(), card_event()]))
    event: dict[Any, Any] = {}
    for name, value in base.items():
        if draw(st.booleans()):
            event[name] = value
        elif draw(st.booleans()):
            event[name] = draw(field_values(value))
    if draw(st.booleans()):
        event["tags"] = draw(st.lists(st.lists(st.one_of(nostr_text, python_garbage), max_size=3)))
    return event


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(python_garbage, mangled_events()))
def test_checks_never_raise(value: Any) -> None:
    verdict, detail = nostr.check_event(value)
    assert verdict in nostr.EVENT_VERDICTS and isinstance(detail, str)
    card_verdict, card_detail = nostr.check_card_event(value)
    assert card_verdict in nostr.CARD_EVENT_VERDICTS and isinstance(card_detail, str)


@settings(max_examples=200)
@given(content=st.one_of(st.text(), json_values.map(json.dumps)))
def test_card_content_never_raises(content: str) -> None:
    event = resign({**card_event(), "content": content})
    verdict, _ = nostr.check_card_event(event)
    assert verdict in ("invalid_card", "valid", "card_identity_mismatch")


def test_input_is_not_mutated() -> None:
    event = card_event()
    before = copy.deepcopy(event)
    nostr.check_card_event(event)
    nostr.event_id(event)
    assert event == before
    assert hashlib.sha256(nostr.serialize_event(event)).hexdigest() == event["id"]
