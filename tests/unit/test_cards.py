"""Agent Card rules (constraints.md, agent-card.schema.json) and the signed well-known card."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from coincurve import PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from snap_spark.protocol import cards
from snap_spark.protocol.cards import InvalidCard, js_length, sample_card, validate_agent_card
from snap_spark.protocol.keys import (
    decode_p2tr,
    encode_p2tr,
    internal_pubkey,
    p2tr_address,
    tweak_private_key,
)
from tests.conftest import load_vector

SCHEMA_CASES = load_vector("agent-card.test.json")["tests"]

PRIV_A = bytes.fromhex("0a" * 32)
PRIV_B = bytes.fromhex("0b" * 32)
ADDR_A = p2tr_address(internal_pubkey(PRIV_A))
ADDR_A_TESTNET = p2tr_address(internal_pubkey(PRIV_A), "testnet")
ADDR_B = p2tr_address(internal_pubkey(PRIV_B))
AUX = bytes(32)
TS = 1770622297
#: The identity used by every case of agent-card.test.json. It fails the bech32m checksum.
VECTOR_IDENTITY = "bc1p5d7rjq7g6rdk2yhzqnt9dp8wvscrplqk0zwy63lmgreu9jzyt0mqf3xvn8"
#: x = 5 is not the x coordinate of any secp256k1 point.
NOT_A_POINT = (5).to_bytes(32, "big").hex()


def encode_p2tr_program(address: str) -> str:
    """The witness program (tweaked key Q) of a P2TR address, as hex."""
    return decode_p2tr(address).program.hex()


def reason(card: object) -> tuple[str, str] | None:
    """``(field, constraint)`` of the first broken rule, or None when the card is valid."""
    try:
        validate_agent_card(card)
    except InvalidCard as exc:
        return exc.field, exc.constraint
    return None


# ------------------------------------------------------------------ schema test cases

#: What each schema case breaks, once its identity is replaced by a real address.
EXPECTED_REASON = {
    "INVALID: missing required field (identity)": ("identity", "required"),
    "INVALID: empty skills array": ("skills", "minItems"),
    "INVALID: version not semver": ("version", "pattern"),
    "INVALID: skill id with uppercase": ("skills[0].id", "pattern"),
    "INVALID: endpoint with unknown protocol": ("endpoints[0].protocol", "enum"),
    "INVALID: skill tag with uppercase": ("skills[0].tags[0]", "pattern"),
}


@pytest.mark.parametrize("case", SCHEMA_CASES, ids=lambda c: c["description"])
def test_schema_cases(case: dict[str, Any]) -> None:
    data = copy.deepcopy(case["data"])
    if data.get("identity") == VECTOR_IDENTITY:
        # Conflict: the schema checks identity only against ^(bc1p|tb1p)[a-z0-9]{58}$, so
        # its two "valid" cases pass there, but constraints.md ("P2TR Address Validation")
        # says a valid P2TR address MUST pass the bech32m checksum, and this one does not.
        # constraints.md wins: as given, every case is invalid, the "valid" ones because of
        # the identity (an invalid case may report its own defect first, e.g. ``version``,
        # which is checked before ``identity``)...
        as_given = reason(data)
        assert as_given is not None
        if case["valid"]:
            assert as_given == ("identity", "p2tr")
        # ...and with a real address in its place, each case gives the schema's answer.
        data["identity"] = ADDR_A
    if case["valid"]:
        assert reason(data) is None
    else:
        assert reason(data) == EXPECTED_REASON[case["description"]]


def test_every_schema_case_is_covered() -> None:
    invalid = {c["description"] for c in SCHEMA_CASES if not c["valid"]}
    assert invalid == set(EXPECTED_REASON)
    assert sum(c["valid"] for c in SCHEMA_CASES) == 2


# ------------------------------------------------------------------ rule by rule

Mutation = Callable[[dict[str, Any]], None]


def setter(path: str, value: Any) -> Mutation:
    """A mutation setting ``a.b[0].c`` style ``path`` to ``value``."""

    def apply(card: dict[str, Any]) -> None:
        target: Any = card
        parts = path.replace("]", "").replace("[", ".").split(".")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return apply


def deleter(path: str) -> Mutation:
    def apply(card: dict[str, Any]) -> None:
        target: Any = card
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[part]
        del target[parts[-1]]

    return apply


def deleter_in_list(array: str, index: int, key: str) -> Mutation:
    def apply(card: dict[str, Any]) -> None:
        del card[array][index][key]

    return apply


def full_card() -> dict[str, Any]:
    """Every optional field present and valid."""
    return sample_card(
        ADDR_A,
        endpoints=[
            {"protocol": "http", "url": "https://agent.example.com/snap"},
            {"protocol": "wss", "url": "wss://agent.example.com/snap"},
        ],
        nostrRelays=["wss://relay.example.com"],
        protocolVersion="0.1",
        supportedVersions=["0.1"],
        capabilities={
            "streaming": True,
            "pushNotifications": False,
            "rateLimit": {"maxRequests": 100, "windowSeconds": 60},
        },
        trust={"domain": "agent.example.com"},
        provider={"organization": "Example", "url": "https://example.com"},
        iconUrl="https://example.com/icon.png",
        documentationUrl="https://docs.example.com/agent?x=1#top",
    ) | {
        "skills": [
            {
                "id": "code-generation",
                "name": "Code Generation",
                "description": "Generate code",
                "tags": ["code", "typescript"],
                "examples": ["Write a login form"],
                "inputModes": ["text/plain"],
                "outputModes": ["application/json"],
            }
        ]
    }


def skill(i: int, **overrides: Any) -> dict[str, Any]:
    return {"id": f"s{i}", "name": "S", "description": "D", "tags": ["t"]} | overrides


VALID_VARIANTS: list[tuple[str, Mutation]] = [
    ("name 128 long", setter("name", "n" * 128)),
    ("name 64 emoji = 128 UTF-16 units", setter("name", "😀" * 64)),
    ("name 128 non-ASCII BMP", setter("name", "é" * 128)),
    ("description 1024", setter("description", "d" * 1024)),
    ("version with leading zeros", setter("version", "01.002.0003")),
    ("identity testnet", setter("identity", ADDR_A_TESTNET)),
    # constraints.md gives endpoints a maximum only; the schema's minItems 1 is not applied.
    ("endpoints empty", setter("endpoints", [])),
    ("endpoints 10", setter("endpoints", [{"protocol": "http", "url": "https://a.b"}] * 10)),
    ("endpoint plain http url", setter("endpoints[0].url", "http://localhost:8080/snap")),
    ("endpoint IPv6 url", setter("endpoints[0].url", "https://[2001:db8::1]:443/snap")),
    ("endpoint url 2048", setter("endpoints[0].url", "https://a.b/" + "p" * 2036)),
    ("nostrRelays 10", setter("nostrRelays", ["wss://r.example"] * 10)),
    ("supportedVersions 20", setter("supportedVersions", ["0.1"] * 20)),
    ("capabilities empty", setter("capabilities", {})),
    ("rateLimit null", setter("capabilities.rateLimit", None)),
    ("rateLimit floats", setter("capabilities.rateLimit", {"maxRequests": 1.5})),
    ("skills 100", setter("skills", [skill(i) for i in range(100)])),
    ("skill id 64", setter("skills[0].id", "a" * 64)),
    ("tags 20", setter("skills[0].tags", ["t"] * 20)),
    ("tag 32", setter("skills[0].tags[0]", "t" * 32)),
    ("tag digits and dashes", setter("skills[0].tags[0]", "-0-9-")),
    ("examples empty", setter("skills[0].examples", [])),
    ("examples 10", setter("skills[0].examples", ["e"] * 10)),
    ("example empty string", setter("skills[0].examples", [""])),
    ("example 256", setter("skills[0].examples", ["e" * 256])),
    ("skill modes empty", setter("skills[0].inputModes", [])),
    ("skill modes 20", setter("skills[0].outputModes", ["text/plain"] * 20)),
    ("media type with suffix", setter("defaultInputModes", ["application/vnd.a+json"])),
    ("media type 128", setter("defaultInputModes", ["a/" + "b" * 126])),
    ("default modes 20", setter("defaultOutputModes", ["text/plain"] * 20)),
    ("trust domain 253", setter("trust.domain", "d" * 253)),
    ("trust domain empty", setter("trust.domain", "")),
    ("provider empty", setter("provider", {})),
    ("organization 256", setter("provider.organization", "o" * 256)),
    ("x- extension of any shape", setter("x-anything", {"deep": [1, 2.5, None, {"a": "b"}]})),
    ("x- extension null", setter("x-null", None)),
    ("big integer extension", setter("x-n", 2**64)),
    ("optional fields absent", deleter("endpoints")),
]


@pytest.mark.parametrize(
    "mutate", [m for _, m in VALID_VARIANTS], ids=[name for name, _ in VALID_VARIANTS]
)
def test_valid_variants(mutate: Mutation) -> None:
    card = full_card()
    mutate(card)
    assert reason(card) is None


INVALID_VARIANTS: list[tuple[str, Mutation, tuple[str, str]]] = [
    # required fields, in the documented order
    ("no name", deleter("name"), ("name", "required")),
    ("no description", deleter("description"), ("description", "required")),
    ("no version", deleter("version"), ("version", "required")),
    ("no skills", deleter("skills"), ("skills", "required")),
    ("no defaultInputModes", deleter("defaultInputModes"), ("defaultInputModes", "required")),
    ("no defaultOutputModes", deleter("defaultOutputModes"), ("defaultOutputModes", "required")),
    # unknown fields
    ("unknown top-level field", setter("rating", 5), ("rating", "additionalProperties")),
    ("X- is not x-", setter("X-custom", 1), ("X-custom", "additionalProperties")),
    (
        "x- inside a skill",
        setter("skills[0].x-note", "n"),
        ("skills[0].x-note", "additionalProperties"),
    ),
    (
        "unknown endpoint field",
        setter("endpoints[0].priority", 1),
        ("endpoints[0].priority", "additionalProperties"),
    ),
    (
        "unknown capability",
        setter("capabilities.batching", True),
        ("capabilities.batching", "additionalProperties"),
    ),
    (
        "unknown rateLimit field",
        setter("capabilities.rateLimit.burst", 1),
        ("capabilities.rateLimit.burst", "additionalProperties"),
    ),
    ("unknown trust field", setter("trust.dns", "x"), ("trust.dns", "additionalProperties")),
    (
        "unknown provider field",
        setter("provider.email", "x"),
        ("provider.email", "additionalProperties"),
    ),
    # name / description
    ("name empty", setter("name", ""), ("name", "minLength")),
    ("name 129", setter("name", "n" * 129), ("name", "maxLength")),
    ("name 65 emoji = 130 units", setter("name", "😀" * 65), ("name", "maxLength")),
    ("name not a string", setter("name", 1), ("name", "type")),
    ("name null", setter("name", None), ("name", "type")),
    ("description empty", setter("description", ""), ("description", "minLength")),
    ("description 1025", setter("description", "d" * 1025), ("description", "maxLength")),
    # version: ECMAScript \d and $
    ("version 2 parts", setter("version", "1.0"), ("version", "pattern")),
    ("version trailing newline", setter("version", "1.0.0\n"), ("version", "pattern")),
    ("version Arabic-Indic digits", setter("version", "١.٠.٠"), ("version", "pattern")),
    ("version fullwidth digits", setter("version", "１.0.0"), ("version", "pattern")),
    ("version prerelease", setter("version", "1.0.0-beta"), ("version", "pattern")),
    ("version number", setter("version", 1.0), ("version", "type")),
    # identity
    ("identity bad checksum", setter("identity", VECTOR_IDENTITY), ("identity", "p2tr")),
    ("identity uppercase", setter("identity", ADDR_A.upper()), ("identity", "p2tr")),
    ("identity with newline", setter("identity", ADDR_A + "\n"), ("identity", "p2tr")),
    ("identity hex key", setter("identity", "ab" * 32), ("identity", "p2tr")),
    (
        "identity bech32 v0",
        setter("identity", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"),
        ("identity", "p2tr"),
    ),
    ("identity not a string", setter("identity", ["bc1p"]), ("identity", "type")),
    # endpoints
    (
        "endpoints 11",
        setter("endpoints", [{"protocol": "http", "url": "https://a.b"}] * 11),
        ("endpoints", "maxItems"),
    ),
    ("endpoints object", setter("endpoints", {"protocol": "http"}), ("endpoints", "type")),
    ("endpoint not object", setter("endpoints[0]", "https://a.b"), ("endpoints[0]", "type")),
    ("endpoint no url", deleter_in_list("endpoints", 0, "url"), ("endpoints[0].url", "required")),
    (
        "endpoint protocol https",
        setter("endpoints[0].protocol", "https"),
        ("endpoints[0].protocol", "enum"),
    ),
    (
        "endpoint protocol upper",
        setter("endpoints[0].protocol", "HTTP"),
        ("endpoints[0].protocol", "enum"),
    ),
    ("endpoint url relative", setter("endpoints[0].url", "/snap"), ("endpoints[0].url", "format")),
    (
        "endpoint url space",
        setter("endpoints[0].url", "https://a.b/s nap"),
        ("endpoints[0].url", "format"),
    ),
    (
        "endpoint url non-ASCII",
        setter("endpoints[0].url", "https://bücher.example"),
        ("endpoints[0].url", "format"),
    ),
    (
        "endpoint url bad escape",
        setter("endpoints[0].url", "https://a.b/%zz"),
        ("endpoints[0].url", "format"),
    ),
    (
        "endpoint url 2049",
        setter("endpoints[0].url", "https://a.b/" + "p" * 2037),
        ("endpoints[0].url", "maxLength"),
    ),
    # nostrRelays (schema only)
    ("nostrRelays empty", setter("nostrRelays", []), ("nostrRelays", "minItems")),
    (
        "nostrRelays 11",
        setter("nostrRelays", ["wss://r.example"] * 11),
        ("nostrRelays", "maxItems"),
    ),
    ("relay https", setter("nostrRelays", ["https://r.example"]), ("nostrRelays[0]", "pattern")),
    ("relay bare scheme", setter("nostrRelays", ["wss://"]), ("nostrRelays[0]", "pattern")),
    # protocol versions
    ("protocolVersion semver", setter("protocolVersion", "0.1.0"), ("protocolVersion", "pattern")),
    (
        "protocolVersion trailing newline",
        setter("protocolVersion", "0.1\n"),
        ("protocolVersion", "pattern"),
    ),
    ("supportedVersions empty", setter("supportedVersions", []), ("supportedVersions", "minItems")),
    (
        "supportedVersions 21",
        setter("supportedVersions", ["0.1"] * 21),
        ("supportedVersions", "maxItems"),
    ),
    (
        "supportedVersions bad item",
        setter("supportedVersions", ["v1"]),
        ("supportedVersions[0]", "pattern"),
    ),
    # capabilities
    ("capabilities array", setter("capabilities", []), ("capabilities", "type")),
    (
        "streaming string",
        setter("capabilities.streaming", "yes"),
        ("capabilities.streaming", "type"),
    ),
    (
        "push number",
        setter("capabilities.pushNotifications", 0),
        ("capabilities.pushNotifications", "type"),
    ),
    ("rateLimit number", setter("capabilities.rateLimit", 100), ("capabilities.rateLimit", "type")),
    (
        "maxRequests string",
        setter("capabilities.rateLimit.maxRequests", "100"),
        ("capabilities.rateLimit.maxRequests", "type"),
    ),
    (
        "windowSeconds bool",
        setter("capabilities.rateLimit.windowSeconds", True),
        ("capabilities.rateLimit.windowSeconds", "type"),
    ),
    # skills
    ("skills empty", setter("skills", []), ("skills", "minItems")),
    ("skills 101", setter("skills", [skill(i) for i in range(101)]), ("skills", "maxItems")),
    ("skill not object", setter("skills", ["code"]), ("skills[0]", "type")),
    ("skill no tags", deleter_in_list("skills", 0, "tags"), ("skills[0].tags", "required")),
    (
        "skill no description",
        deleter_in_list("skills", 0, "description"),
        ("skills[0].description", "required"),
    ),
    ("skill id empty", setter("skills[0].id", ""), ("skills[0].id", "minLength")),
    ("skill id 65", setter("skills[0].id", "a" * 65), ("skills[0].id", "maxLength")),
    ("skill id underscore", setter("skills[0].id", "code_gen"), ("skills[0].id", "pattern")),
    ("skill id trailing newline", setter("skills[0].id", "code\n"), ("skills[0].id", "pattern")),
    ("skill name 129", setter("skills[0].name", "n" * 129), ("skills[0].name", "maxLength")),
    (
        "skill description empty",
        setter("skills[0].description", ""),
        ("skills[0].description", "minLength"),
    ),
    (
        "duplicate skill ids",
        setter("skills", [skill(1), skill(2), skill(1)]),
        ("skills[2].id", "unique"),
    ),
    ("tags empty", setter("skills[0].tags", []), ("skills[0].tags", "minItems")),
    ("tags 21", setter("skills[0].tags", ["t"] * 21), ("skills[0].tags", "maxItems")),
    ("tag empty", setter("skills[0].tags", [""]), ("skills[0].tags[0]", "minLength")),
    ("tag 33", setter("skills[0].tags", ["t" * 33]), ("skills[0].tags[0]", "maxLength")),
    ("tag space", setter("skills[0].tags", ["a b"]), ("skills[0].tags[0]", "pattern")),
    ("tag not string", setter("skills[0].tags", [7]), ("skills[0].tags[0]", "type")),
    ("examples 11", setter("skills[0].examples", ["e"] * 11), ("skills[0].examples", "maxItems")),
    (
        "example 257",
        setter("skills[0].examples", ["e" * 257]),
        ("skills[0].examples[0]", "maxLength"),
    ),
    (
        "example 129 emoji",
        setter("skills[0].examples", ["😀" * 129]),
        ("skills[0].examples[0]", "maxLength"),
    ),
    ("example number", setter("skills[0].examples", [1]), ("skills[0].examples[0]", "type")),
    (
        "skill modes 21",
        setter("skills[0].inputModes", ["text/plain"] * 21),
        ("skills[0].inputModes", "maxItems"),
    ),
    (
        "skill mode bad",
        setter("skills[0].outputModes", ["json"]),
        ("skills[0].outputModes[0]", "pattern"),
    ),
    # default modes
    ("defaultInputModes empty", setter("defaultInputModes", []), ("defaultInputModes", "minItems")),
    (
        "defaultOutputModes 21",
        setter("defaultOutputModes", ["text/plain"] * 21),
        ("defaultOutputModes", "maxItems"),
    ),
    (
        "media type params",
        setter("defaultInputModes", ["text/plain; charset=utf-8"]),
        ("defaultInputModes[0]", "pattern"),
    ),
    (
        "media type uppercase",
        setter("defaultInputModes", ["Text/Plain"]),
        ("defaultInputModes[0]", "pattern"),
    ),
    (
        "media type 129",
        setter("defaultInputModes", ["a/" + "b" * 127]),
        ("defaultInputModes[0]", "maxLength"),
    ),
    (
        "media type string",
        setter("defaultOutputModes", "text/plain"),
        ("defaultOutputModes", "type"),
    ),
    # trust / provider / urls
    ("trust without domain", setter("trust", {}), ("trust.domain", "required")),
    ("trust domain 254", setter("trust.domain", "d" * 254), ("trust.domain", "maxLength")),
    ("provider string", setter("provider", "Example"), ("provider", "type")),
    (
        "organization 257",
        setter("provider.organization", "o" * 257),
        ("provider.organization", "maxLength"),
    ),
    ("provider url bad", setter("provider.url", "example.com"), ("provider.url", "format")),
    ("iconUrl bad", setter("iconUrl", "icon.png"), ("iconUrl", "format")),
    ("documentationUrl number", setter("documentationUrl", 1), ("documentationUrl", "type")),
    # the card as a whole
    ("over 64 KiB", setter("x-pad", "p" * cards.MAX_CARD_BYTES), ("", "maxSize")),
    ("too deep", setter("x-deep", json.loads("[" * 128 + "]" * 128)), ("", "json")),
    ("NaN in an extension", setter("x-n", float("nan")), ("", "json")),
    ("lone surrogate", setter("x-s", "\ud800"), ("", "json")),
    ("tuple is not JSON", setter("x-t", (1, 2)), ("", "json")),
    ("non-string key", setter("x-k", {1: "a"}), ("", "json")),
]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [(m, e) for _, m, e in INVALID_VARIANTS],
    ids=[name for name, _, _ in INVALID_VARIANTS],
)
def test_invalid_variants(mutate: Mutation, expected: tuple[str, str]) -> None:
    card = full_card()
    mutate(card)
    assert reason(card) == expected


@pytest.mark.parametrize("value", [None, [], "card", 1, True, (), {"name"}])
def test_card_not_an_object(value: object) -> None:
    assert reason(value) == ("", "type")


def test_size_limit_is_on_the_jcs_form() -> None:
    card = full_card()
    base = len(cards.canonical_card(card))
    overhead = len(b',"x-pad":""')
    card["x-pad"] = "p" * (cards.MAX_CARD_BYTES - base - overhead)
    assert len(cards.canonical_card(card)) == cards.MAX_CARD_BYTES
    assert reason(card) is None
    card["x-pad"] += "p"
    assert reason(card) == ("", "maxSize")


def test_error_message_names_field_and_rule() -> None:
    card = full_card()
    card["skills"][0]["tags"] = ["ok", "Bad"]
    with pytest.raises(InvalidCard) as info:
        validate_agent_card(card)
    assert str(info.value) == "skills[0].tags[1]: must match ^[a-z0-9-]+$, got 'Bad'"
    assert info.value.code == 1004
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("", 0),
        ("abc", 3),
        ("é", 1),
        ("€", 1),
        ("😀", 2),
        ("a😀b", 4),
        ("\ud800", 1),
        ("\U0010ffff", 2),
    ],
)
def test_js_length_counts_utf16_code_units(text: str, units: int) -> None:
    assert js_length(text) == units


# ------------------------------------------------------------------ signed well-known card

#: The SignedAgentCard example of docs/discovery.md ("Well-Known URL Discovery", SNAP spec
#: at 0a34fed0, CC BY 4.0, (c) SNAP Protocol Contributors): a signature made by the reference
#: SDK, used here as a fixed vector.
SPEC_EXAMPLE: dict[str, Any] = {
    "card": {
        "name": "Code Assistant",
        "description": "An AI agent that helps with code generation and review",
        "version": "1.0.0",
        "identity": "bc1pmfr3p9j00pfxjh0zmgp99y8zftmd3s5pmedqhyptwy6lm87hf5sspknck9",
        "skills": [
            {
                "id": "code-generation",
                "name": "Code Generation",
                "description": "Generate code from natural language",
                "tags": ["code"],
            },
            {
                "id": "code-review",
                "name": "Code Review",
                "description": "Review code for bugs and improvements",
                "tags": ["code"],
            },
        ],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
    },
    "sig": "eec2fc8876050b0258721e77146c760e219c56a0f3688f12b58ceeb4070b6e07"
    "fa80e6accb318aa5aa0a940b649afd124dfc299339b2ecef504717b4321dd95f",
    "publicKey": "da4710964f7852695de2da025290e24af6d8c281de5a0b902b7135fd9fd74d21",
    "timestamp": 1770622297,
}


def signed(card: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    doc = cards.sign_card(card if card is not None else sample_card(ADDR_A), PRIV_A, TS, AUX)
    doc.update(changes)
    return doc


def test_spec_example_verifies() -> None:
    assert cards.verify_signed_card(SPEC_EXAMPLE) == (
        "valid",
        "signature, identity and card verified",
    )
    # Key order of the card does not matter: the signature is over JCS(card).
    shuffled = {**SPEC_EXAMPLE, "card": dict(reversed(list(SPEC_EXAMPLE["card"].items())))}
    assert cards.verify_signed_card(shuffled)[0] == "valid"


def test_sign_card_round_trip() -> None:
    doc = signed()
    assert cards.verify_signed_card(doc)[0] == "valid"
    assert doc["publicKey"] == encode_p2tr_program(ADDR_A)
    assert doc == signed()  # deterministic with fixed aux
    # JSON round trip and extra top-level members change nothing.
    assert cards.verify_signed_card({**json.loads(json.dumps(doc)), "x-served-by": "a"})[0] == (
        "valid"
    )
    # A testnet identity of the same key has the same program: still valid.
    assert cards.verify_signed_card(signed(sample_card(ADDR_A_TESTNET)))[0] == "valid"
    # An integral double timestamp is the same number to a JavaScript signer.
    assert cards.verify_signed_card({**doc, "timestamp": float(TS)})[0] == "valid"


@pytest.mark.parametrize(
    ("doc", "detail"),
    [
        (None, "document must be an object"),
        ([], "document must be an object"),
        ("{}", "document must be an object"),
        ({}, "required field 'card' is missing"),
        ({"card": {}, "sig": "", "publicKey": ""}, "required field 'timestamp' is missing"),
        (signed() | {"card": "{}"}, "card must be an object"),
        (signed() | {"card": None}, "card must be an object"),
        (signed() | {"card": []}, "card must be an object"),
        (signed() | {"sig": None}, "sig must be 128 lowercase hex characters"),
        (signed() | {"sig": "AB" * 64}, "sig must be 128 lowercase hex characters"),
        (signed() | {"sig": "ab" * 63}, "sig must be 128 lowercase hex characters"),
        (signed() | {"sig": "ab" * 64 + "\n"}, "sig must be 128 lowercase hex characters"),
        (signed() | {"publicKey": "AB" * 32}, "publicKey must be 64 lowercase hex characters"),
        (signed() | {"publicKey": ADDR_A}, "publicKey must be 64 lowercase hex characters"),
        (signed() | {"timestamp": -1}, "timestamp must be an integer from 0 to 2^53-1"),
        (signed() | {"timestamp": 2**53}, "timestamp must be an integer from 0 to 2^53-1"),
        (signed() | {"timestamp": 1.5}, "timestamp must be an integer from 0 to 2^53-1"),
        (signed() | {"timestamp": float("inf")}, "timestamp must be an integer from 0 to 2^53-1"),
        (signed() | {"timestamp": True}, "timestamp must be an integer from 0 to 2^53-1"),
        (signed() | {"timestamp": str(TS)}, "timestamp must be an integer from 0 to 2^53-1"),
        (
            signed() | {"card": {"x-n": float("nan")}},
            "card is not canonical JSON: number is not a finite IEEE-754 double",
        ),
    ],
)
def test_malformed_signed_cards(doc: object, detail: str) -> None:
    verdict, reason_text = cards.verify_signed_card(doc)
    assert verdict == "malformed"
    assert reason_text.startswith(detail)


def test_bad_sig() -> None:
    doc = signed()
    tampered_card = {**doc["card"], "name": "Other"}
    assert cards.verify_signed_card({**doc, "card": tampered_card})[0] == "bad_sig"
    assert cards.verify_signed_card({**doc, "timestamp": TS + 1})[0] == "bad_sig"
    # a valid signature by another key, publicKey left as A's
    by_b = cards.sign_card(doc["card"], PRIV_B, TS, AUX)
    assert cards.verify_signed_card({**doc, "sig": by_b["sig"]})[0] == "bad_sig"
    # publicKey that is not a curve point
    assert cards.verify_signed_card({**doc, "publicKey": NOT_A_POINT}) == (
        "bad_sig",
        "publicKey is not the x coordinate of a secp256k1 point",
    )
    # the signature input is JCS(card) + "|" + timestamp, not the message input (NUL-joined)
    digest = cards.signed_card_digest(cards.canonical_card(doc["card"]), TS)
    assert cards.verify_signed_card(doc)[0] == "valid"
    wrong_input = cards.signed_card_digest(cards.canonical_card(doc["card"]) + b" ", TS)
    assert digest != wrong_input
    sig = PrivateKey(tweak_private_key(PRIV_A)).sign_schnorr(wrong_input, AUX).hex()
    assert cards.verify_signed_card({**doc, "sig": sig})[0] == "bad_sig"
    # bad_sig comes before the identity checks: a forged doc with a broken identity
    forged = {**doc, "card": {**doc["card"], "identity": "nonsense"}}
    assert cards.verify_signed_card(forged)[0] == "bad_sig"


@pytest.mark.parametrize(
    "identity", [None, "nonsense", VECTOR_IDENTITY, ADDR_A.upper(), 42, "ab" * 32]
)
def test_invalid_identity(identity: object) -> None:
    card = sample_card(ADDR_A)
    if identity is None:
        del card["identity"]
    else:
        card["identity"] = identity
    verdict, detail = cards.verify_signed_card(signed(card))
    assert verdict == "invalid_identity"
    assert detail.startswith("card.identity: ")


def test_key_mismatch() -> None:
    # A signs a card claiming B's identity
    verdict, detail = cards.verify_signed_card(signed(sample_card(ADDR_B)))
    assert verdict == "key_mismatch"
    assert encode_p2tr_program(ADDR_B) in detail
    # signed with the untweaked key and publishing the internal key (a common mistake):
    # the signature checks out against publicKey, but publicKey is not the identity's key Q
    card = sample_card(ADDR_A)
    internal = internal_pubkey(PRIV_A)
    digest = cards.signed_card_digest(cards.canonical_card(card), TS)
    doc = {
        "card": card,
        "sig": PrivateKey(PRIV_A).sign_schnorr(digest, AUX).hex(),
        "publicKey": internal.hex(),
        "timestamp": TS,
    }
    assert cards.verify_signed_card(doc)[0] == "key_mismatch"
    # an identity built from the internal key instead of the tweaked one
    wrong_identity = sample_card(encode_p2tr(internal))
    assert cards.verify_signed_card(signed(wrong_identity))[0] == "key_mismatch"


def test_invalid_card_when_authentic() -> None:
    verdict, detail = cards.verify_signed_card(signed(sample_card(ADDR_A, version="1.0")))
    assert (verdict, detail) == (
        "invalid_card",
        "version: must match ^\\d+\\.\\d+\\.\\d+$, got '1.0'",
    )
    card = sample_card(ADDR_A)
    del card["skills"]
    assert cards.verify_signed_card(signed(card)) == (
        "invalid_card",
        "skills: required field is missing",
    )
    assert cards.verify_signed_card(signed({"identity": ADDR_A}))[0] == "invalid_card"


def test_verdict_order_is_documented() -> None:
    assert cards.SIGNED_CARD_VERDICTS == (
        "malformed",
        "bad_sig",
        "invalid_identity",
        "key_mismatch",
        "invalid_card",
        "valid",
    )


# ------------------------------------------------------------------ never raises

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text())
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=25,
)
python_garbage = st.one_of(
    json_values,
    st.binary(),
    st.complex_numbers(),
    st.decimals(),
    st.tuples(json_scalars),
    st.frozensets(st.integers()),
    st.builds(object),
    st.dictionaries(st.integers(), json_scalars, max_size=3),
)


@st.composite
def mangled_cards(draw: st.DrawFn) -> dict[Any, Any]:
    """A valid card with some fields dropped or replaced by arbitrary values."""
    card: dict[Any, Any] = copy.deepcopy(full_card())
    for key in list(card):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            del card[key]
        elif choice == 1:
            card[key] = draw(python_garbage)
    if draw(st.booleans()) and isinstance(card.get("skills"), list):
        card["skills"] = [
            draw(st.one_of(python_garbage, st.just(skill(0)), st.builds(skill, st.integers())))
            for _ in range(draw(st.integers(0, 3)))
        ]
    return card


@settings(max_examples=400)
@given(card=st.one_of(python_garbage, mangled_cards()))
def test_validate_raises_only_invalid_card(card: Any) -> None:
    try:
        validate_agent_card(card)
    except InvalidCard as exc:
        assert isinstance(exc.field, str) and exc.constraint


@settings(max_examples=300)
@given(
    doc=st.one_of(
        python_garbage,
        st.fixed_dictionaries(
            {},
            optional={
                "card": st.one_of(mangled_cards(), python_garbage),
                "sig": st.one_of(st.just("ab" * 64), python_garbage),
                "publicKey": st.one_of(st.just(encode_p2tr_program(ADDR_A)), python_garbage),
                "timestamp": st.one_of(st.just(TS), python_garbage),
            },
        ),
    )
)
def test_verify_signed_card_never_raises(doc: Any) -> None:
    verdict, detail = cards.verify_signed_card(doc)
    assert verdict in cards.SIGNED_CARD_VERDICTS and isinstance(detail, str)


@settings(max_examples=100)
@given(card=mangled_cards())
def test_signed_mangled_cards_get_a_content_verdict(card: dict[str, Any]) -> None:
    """Correctly signed, whatever the card holds: never malformed unless JCS refuses it."""
    try:
        doc = cards.sign_card(card, PRIV_A, TS, AUX)
    except InvalidCard:
        return
    verdict, _ = cards.verify_signed_card(doc)
    assert verdict in ("invalid_identity", "key_mismatch", "invalid_card", "valid")
    assert (verdict == "valid") == (reason(card) is None and card.get("identity") == ADDR_A)
