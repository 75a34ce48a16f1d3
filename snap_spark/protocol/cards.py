"""Agent Cards: field rules, and the signed well-known card (``SignedAgentCard``).

Rules come from ``docs/constraints.md`` ("Agent Card Fields", "Skill Fields", "Size Limits")
and ``schemas/agent-card.schema.json`` (with ``common.schema.json``). Where the two disagree,
``constraints.md`` wins and the code says so at that rule. Conventions:

* A card is a parsed JSON value: ``dict``, ``list``, ``str``, ``int``/``float``, ``bool``,
  ``None``. Anything else (a tuple, a set, bytes) is not JSON and makes the card invalid.
* Lengths are counted in UTF-16 code units, as JavaScript's ``String.length`` counts them,
  so ``"😀"`` is 2 long. (JSON Schema, and ajv by default, count code points instead; the
  two differ only for characters above U+FFFF.)
* Patterns are ECMAScript patterns matched against the whole string: ``\\d`` is ``[0-9]``
  only (never other Unicode digits) and ``$`` never matches before a trailing newline, so
  ``"1.0.0\\n"`` is not a semver.
* Unknown fields follow the schema's ``additionalProperties: false``: at the top level only
  ``x-`` extension fields may be added (``patternProperties: ^x-``); inside skills,
  endpoints, capabilities, trust and provider nothing may be added. (``constraints.md``
  "Extension Fields" says receivers MUST ignore unknown fields; that section is written for
  messages, and the card schema is explicit, so the schema is followed here.)
* ``format: uri`` is checked (``constraints.md`` "Validation Order" step 5 lists URL format
  among the semantic checks): an absolute RFC 3986 URI, ASCII only.
* The serialized card is at most 64 KiB (65,536 bytes) of UTF-8 in its JCS (RFC 8785) form,
  the form that is signed.

The well-known document (``docs/discovery.md`` "Well-Known URL Discovery") is
``{card, sig, publicKey, timestamp}``: ``sig`` is a BIP-340 signature, by the taproot-tweaked
key ``publicKey``, of ``SHA-256(UTF-8(JCS(card) + "|" + str(timestamp)))``, and
``publicKey`` must be the witness program of ``card.identity``.

Examples:
    >>> card = sample_card("bc1pmfr3p9j00pfxjh0zmgp99y8zftmd3s5pmedqhyptwy6lm87hf5sspknck9")
    >>> validate_agent_card(card)
    >>> try:
    ...     validate_agent_card({**card, "version": "1.0"})
    ... except InvalidCard as exc:
    ...     print(exc)
    version: must match ^\\d+\\.\\d+\\.\\d+$, got '1.0'
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

from snap_spark.protocol.errors import IdentityInvalid, InvalidPayload
from snap_spark.protocol.jcs import MAX_SAFE_INTEGER, canonicalize
from snap_spark.protocol.jsonparse import json_type
from snap_spark.protocol.keys import (
    check_private_key,
    decode_p2tr,
    internal_pubkey,
    tweak_public_key,
    xonly_key,
)
from snap_spark.protocol.signing import sign_digest

#: ``constraints.md`` "Size Limits": Agent Card (serialized JSON) 64 KB, read as 64 KiB.
MAX_CARD_BYTES: Final = 64 * 1024
#: Nesting limit for a whole card (a scalar is 0, ``{}`` is 1). Not a spec rule: the spec
#: sets none for cards, whose defined fields nest 4 deep; it bounds the recursion spent on
#: ``x-`` extension values so that no input can exhaust the stack.
MAX_CARD_DEPTH: Final = 128

SignedCardVerdict = Literal[
    "malformed", "bad_sig", "invalid_identity", "key_mismatch", "invalid_card", "valid"
]
#: Verdicts of :func:`verify_signed_card`, in the order the checks run.
SIGNED_CARD_VERDICTS: Final[tuple[SignedCardVerdict, ...]] = get_args(SignedCardVerdict)


class InvalidCard(InvalidPayload):
    """An Agent Card breaks a rule; ``field`` is a JSON path, ``constraint`` the rule's name.

    It is an :class:`~snap_spark.protocol.errors.InvalidPayload` (code 1004), as
    ``constraints.md`` "Error Responses" asks for invalid fields, hence a ``ValueError``.
    """

    def __init__(self, field: str, constraint: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.constraint = constraint


# --------------------------------------------------------------------------- primitives


def js_length(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (JavaScript ``String.length``).

    Examples:
        >>> js_length("abc"), js_length("é"), js_length("😀")
        (3, 1, 2)
    """
    if text.isascii():
        return len(text)
    # surrogatepass: a lone surrogate is one code unit in JavaScript too
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _string(value: object, field: str, min_len: int = 0, max_len: int | None = None) -> str:
    if not isinstance(value, str):
        raise InvalidCard(field, "type", f"must be a string, got {json_type(value)}")
    if min_len or max_len is not None:
        length = js_length(value)
        if length < min_len:
            raise InvalidCard(field, "minLength", f"must be at least {min_len} characters long")
        if max_len is not None and length > max_len:
            raise InvalidCard(
                field, "maxLength", f"must be at most {max_len} characters long, got {length}"
            )
    return value


def _array(value: object, field: str, min_items: int, max_items: int) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidCard(field, "type", f"must be an array, got {json_type(value)}")
    if len(value) < min_items:
        raise InvalidCard(field, "minItems", f"must have at least {min_items} item(s)")
    if len(value) > max_items:
        raise InvalidCard(
            field, "maxItems", f"must have at most {max_items} items, got {len(value)}"
        )
    return value


def _object(
    value: object,
    field: str,
    allowed: frozenset[str],
    required: tuple[str, ...] = (),
    *,
    extensions: bool = False,
) -> dict[Any, Any]:
    """Type, required members (in order), then members the schema does not allow."""
    if not isinstance(value, dict):
        raise InvalidCard(field, "type", f"must be an object, got {json_type(value)}")
    for name in required:
        if name not in value:
            raise InvalidCard(_join(field, name), "required", "required field is missing")
    for key in value:
        if isinstance(key, str) and (key in allowed or (extensions and key.startswith("x-"))):
            continue
        hint = " (extension fields must start with 'x-')" if extensions else ""
        raise InvalidCard(_join(field, str(key)), "additionalProperties", f"unknown field{hint}")
    return value


def _join(parent: str, name: str) -> str:
    return name if not parent else f"{parent}.{name}"


def _pattern(value: str, field: str, regex: re.Pattern[str], source: str) -> None:
    # ``fullmatch`` is ECMAScript's ``^...$`` without the ``m`` flag: ``$`` in Python's ``re``
    # would also match before a trailing "\n".
    if regex.fullmatch(value) is None:
        raise InvalidCard(field, "pattern", f"must match {source}, got {value!r}")


def _number(value: object, field: str) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or (isinstance(value, float) and not math.isfinite(value)):
        raise InvalidCard(field, "type", f"must be a number, got {json_type(value)}")


# ECMAScript sources as the schema writes them, and their Python equivalents (``\d`` -> [0-9]).
_SEMVER_SRC = r"^\d+\.\d+\.\d+$"
_SEMVER = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_PROTOCOL_VERSION_SRC = r"^\d+\.\d+$"
_PROTOCOL_VERSION = re.compile(r"[0-9]+\.[0-9]+")
_SLUG_SRC = r"^[a-z0-9-]+$"
_SLUG = re.compile(r"[a-z0-9-]+")
_MEDIA_TYPE_SRC = r"^[a-z]+/[a-z0-9_.+-]+$"
_MEDIA_TYPE = re.compile(r"[a-z]+/[a-z0-9_.+-]+")

# RFC 3986 "URI" (absolute, fragment allowed); IP-literals are checked for their character
# set only. Applied after the 2048-character limit, so backtracking stays bounded.
_PCT = r"%[0-9A-Fa-f]{2}"
_UNRESERVED_SUB = r"A-Za-z0-9\-._~!$&'()*+,;="
_PCHAR = rf"(?:[{_UNRESERVED_SUB}:@]|{_PCT})"
_AUTHORITY = (
    rf"(?:(?:[{_UNRESERVED_SUB}:]|{_PCT})*@)?"
    rf"(?:\[[0-9A-Za-z:.\-._~!$&'()*+,;=]+\]|(?:[{_UNRESERVED_SUB}]|{_PCT})*)"
    r"(?::[0-9]*)?"
)
_HIER_PART = (
    rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*"
    rf"|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
    rf"|{_PCHAR}+(?:/{_PCHAR}*)*"
    r"|)"
)
_URI = re.compile(
    rf"[A-Za-z][A-Za-z0-9+.\-]*:{_HIER_PART}"
    rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
)
_JS_LINE_TERMINATORS = "\n\r\u2028\u2029"


def _uri(value: object, field: str, max_len: int = 2048) -> str:
    text = _string(value, field, 0, max_len)
    if not text.isascii() or _URI.fullmatch(text) is None:
        raise InvalidCard(field, "format", f"must be an absolute URI (RFC 3986), got {text!r}")
    return text


def _wss_url(value: object, field: str) -> str:
    """``NostrRelayUrl``: ``^wss://.+`` (ECMAScript ``.`` excludes line terminators)."""
    text = _uri(value, field)
    if not (text.startswith("wss://") and len(text) > 6 and text[6] not in _JS_LINE_TERMINATORS):
        raise InvalidCard(field, "pattern", f"must match ^wss://.+, got {text!r}")
    return text


def _media_types(value: object, field: str, min_items: int, max_items: int) -> None:
    for i, item in enumerate(_array(value, field, min_items, max_items)):
        name = f"{field}[{i}]"
        _pattern(_string(item, name, 0, 128), name, _MEDIA_TYPE, _MEDIA_TYPE_SRC)


def _identity(value: object, field: str) -> str:
    text = _string(value, field)
    try:
        decode_p2tr(text)  # implies the schema pattern ^(bc1p|tb1p)[a-z0-9]{58}$
    except IdentityInvalid as exc:
        raise InvalidCard(field, "p2tr", f"not a valid P2TR address: {exc}") from None
    return text


# --------------------------------------------------------------------------- card rules

_CARD_REQUIRED: Final = (
    "name",
    "description",
    "version",
    "identity",
    "skills",
    "defaultInputModes",
    "defaultOutputModes",
)
_CARD_FIELDS: Final = frozenset(
    (
        *_CARD_REQUIRED,
        "endpoints",
        "nostrRelays",
        "protocolVersion",
        "supportedVersions",
        "capabilities",
        "trust",
        "provider",
        "iconUrl",
        "documentationUrl",
    )
)
_SKILL_REQUIRED: Final = ("id", "name", "description", "tags")
_SKILL_FIELDS: Final = frozenset((*_SKILL_REQUIRED, "examples", "inputModes", "outputModes"))
_ENDPOINT_FIELDS: Final = frozenset(("protocol", "url"))
_ENDPOINT_PROTOCOLS: Final = ("http", "wss")
# ``rateLimit`` is documented in agent-card.md "Capabilities" but missing from the schema's
# Capabilities (additionalProperties: false); the prose is followed and it is accepted.
_CAPABILITY_FIELDS: Final = frozenset(("streaming", "pushNotifications", "rateLimit"))
_RATE_LIMIT_FIELDS: Final = frozenset(("maxRequests", "windowSeconds"))


def validate_agent_card(card: object) -> None:
    """Raise :class:`InvalidCard` naming the first broken rule, or return ``None``.

    Checks run in the order of ``constraints.md`` "Validation Order" as far as a
    field-by-field report allows: the card is an object; required fields are present (in
    the order ``name, description, version, identity, skills, defaultInputModes,
    defaultOutputModes``); no unknown field (only ``x-`` extensions at the top level);
    then each field's type, lengths, pattern and semantics (P2TR, URI) in the schema's
    property order; skill ids unique; finally the 64 KiB size of ``JCS(card)``.

    Rules beyond the schema: skill ``id`` is unique within the card (``agent-card.md``
    "Skills"); ``endpoints`` may be empty (``constraints.md`` sets only a maximum, the
    schema a minimum of 1); ``capabilities.rateLimit`` is accepted (``agent-card.md``).

    Raises:
        InvalidCard: with ``field`` (a JSON path such as ``skills[0].tags[2]``),
            ``constraint`` (``type``, ``required``, ``pattern``, ``maxLength``, ...) and a
            message saying what was expected.

    Examples:
        >>> card = sample_card("bc1pmfr3p9j00pfxjh0zmgp99y8zftmd3s5pmedqhyptwy6lm87hf5sspknck9")
        >>> validate_agent_card(card) is None
        True
        >>> bad = {**card, "skills": [{**card["skills"][0], "tags": ["Code"]}]}
        >>> try:
        ...     validate_agent_card(bad)
        ... except InvalidCard as exc:
        ...     print(exc.field, exc.constraint)
        skills[0].tags[0] pattern
    """
    obj = _object(card, "", _CARD_FIELDS, _CARD_REQUIRED, extensions=True)

    _string(obj["name"], "name", 1, 128)
    _string(obj["description"], "description", 1, 1024)
    _pattern(_string(obj["version"], "version"), "version", _SEMVER, _SEMVER_SRC)
    _identity(obj["identity"], "identity")
    if "endpoints" in obj:
        # constraints.md: "max 10 entries", no minimum; the schema adds minItems 1. The two
        # disagree on [], and constraints.md is followed: an empty list is accepted.
        for i, endpoint in enumerate(_array(obj["endpoints"], "endpoints", 0, 10)):
            _endpoint(endpoint, f"endpoints[{i}]")
    if "nostrRelays" in obj:
        for i, relay in enumerate(_array(obj["nostrRelays"], "nostrRelays", 1, 10)):
            _wss_url(relay, f"nostrRelays[{i}]")
    if "protocolVersion" in obj:
        _protocol_version(obj["protocolVersion"], "protocolVersion")
    if "supportedVersions" in obj:
        for i, version in enumerate(_array(obj["supportedVersions"], "supportedVersions", 1, 20)):
            _protocol_version(version, f"supportedVersions[{i}]")
    if "capabilities" in obj:
        _capabilities(obj["capabilities"], "capabilities")
    skills = _array(obj["skills"], "skills", 1, 100)
    for i, skill in enumerate(skills):
        _skill(skill, f"skills[{i}]")
    _media_types(obj["defaultInputModes"], "defaultInputModes", 1, 20)
    _media_types(obj["defaultOutputModes"], "defaultOutputModes", 1, 20)
    if "trust" in obj:
        trust = _object(obj["trust"], "trust", frozenset(("domain",)), ("domain",))
        _string(trust["domain"], "trust.domain", 0, 253)
    if "provider" in obj:
        provider = _object(obj["provider"], "provider", frozenset(("organization", "url")))
        if "organization" in provider:
            _string(provider["organization"], "provider.organization", 0, 256)
        if "url" in provider:
            _uri(provider["url"], "provider.url")
    if "iconUrl" in obj:
        _uri(obj["iconUrl"], "iconUrl")
    if "documentationUrl" in obj:
        _uri(obj["documentationUrl"], "documentationUrl")

    seen: dict[str, int] = {}
    for i, skill in enumerate(skills):
        if skill["id"] in seen:
            raise InvalidCard(
                f"skills[{i}].id",
                "unique",
                f"duplicate skill id {skill['id']!r} (also skills[{seen[skill['id']]}])",
            )
        seen[skill["id"]] = i

    size = len(canonical_card(obj))
    if size > MAX_CARD_BYTES:
        raise InvalidCard(
            "", "maxSize", f"serialized card is {size} bytes, more than {MAX_CARD_BYTES}"
        )


def _protocol_version(value: object, field: str) -> None:
    _pattern(_string(value, field), field, _PROTOCOL_VERSION, _PROTOCOL_VERSION_SRC)


def _endpoint(value: object, field: str) -> None:
    endpoint = _object(value, field, _ENDPOINT_FIELDS, ("protocol", "url"))
    protocol = _string(endpoint["protocol"], f"{field}.protocol")
    if protocol not in _ENDPOINT_PROTOCOLS:
        raise InvalidCard(f"{field}.protocol", "enum", f"must be 'http' or 'wss', got {protocol!r}")
    # The schema does not tie the URL scheme to the protocol (no pattern on url); neither do we.
    _uri(endpoint["url"], f"{field}.url")


def _capabilities(value: object, field: str) -> None:
    caps = _object(value, field, _CAPABILITY_FIELDS)
    for name in ("streaming", "pushNotifications"):
        if name in caps and not isinstance(caps[name], bool):
            raise InvalidCard(
                f"{field}.{name}", "type", f"must be a boolean, got {json_type(caps[name])}"
            )
    if "rateLimit" in caps and caps["rateLimit"] is not None:  # documented default: null
        limit = _object(caps["rateLimit"], f"{field}.rateLimit", _RATE_LIMIT_FIELDS)
        for name in ("maxRequests", "windowSeconds"):
            if name in limit:
                _number(limit[name], f"{field}.rateLimit.{name}")


def _skill(value: object, field: str) -> None:
    skill = _object(value, field, _SKILL_FIELDS, _SKILL_REQUIRED)
    _pattern(_string(skill["id"], f"{field}.id", 1, 64), f"{field}.id", _SLUG, _SLUG_SRC)
    _string(skill["name"], f"{field}.name", 1, 128)
    _string(skill["description"], f"{field}.description", 1, 1024)
    for i, tag in enumerate(_array(skill["tags"], f"{field}.tags", 1, 20)):
        name = f"{field}.tags[{i}]"
        _pattern(_string(tag, name, 1, 32), name, _SLUG, _SLUG_SRC)
    if "examples" in skill:
        for i, example in enumerate(_array(skill["examples"], f"{field}.examples", 0, 10)):
            _string(example, f"{field}.examples[{i}]", 0, 256)
    for modes in ("inputModes", "outputModes"):
        if modes in skill:
            _media_types(skill[modes], f"{field}.{modes}", 0, 20)


def canonical_card(card: object) -> bytes:
    """``JCS(card)`` as UTF-8 bytes, numbers as doubles (see :mod:`.jcs`).

    Raises:
        InvalidCard: when the card is not a JSON value JCS can serialize (a non-finite or
            overflowing number, a lone surrogate, a non-string key, a non-JSON type, or
            nesting deeper than :data:`MAX_CARD_DEPTH`).

    Examples:
        >>> canonical_card({"b": 1.0, "a": "é"})
        b'{"a":"\\xc3\\xa9","b":1}'
    """
    try:
        return canonicalize(card, max_depth=MAX_CARD_DEPTH)
    except InvalidPayload as exc:
        raise InvalidCard("", "json", f"card is not canonical JSON: {exc.detail}") from None
    except (AttributeError, TypeError, RecursionError) as exc:
        # e.g. a non-string object key, which only a Python caller (never JSON) can produce
        raise InvalidCard("", "json", f"card is not a JSON value: {exc}") from None


# --------------------------------------------------------------------------- signed card

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX128 = re.compile(r"[0-9a-f]{128}")
_DOC_FIELDS: Final = ("card", "sig", "publicKey", "timestamp")


def signed_card_digest(canonical: bytes, timestamp: int) -> bytes:
    """``SHA-256(JCS(card) + "|" + str(timestamp))`` over UTF-8 (discovery.md steps 1-3).

    Examples:
        >>> signed_card_digest(b'{}', 5).hex()[:16]
        'c9257c4ee8167f4a'
    """
    return hashlib.sha256(canonical + b"|" + str(timestamp).encode()).digest()


def _timestamp(value: object) -> int | None:
    """A non-negative integer up to 2^53-1; an integral double counts (as for messages)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)  # JSON 1770622297.0 is the same number to a JavaScript signer
    else:
        return None
    return number if 0 <= number <= MAX_SAFE_INTEGER else None


def verify_signed_card(doc: object) -> tuple[SignedCardVerdict, str]:
    """Verdict and reason for a well-known ``SignedAgentCard``. Never raises.

    Checks, first failure wins:

    1. ``malformed``: not an object; ``card``/``sig``/``publicKey``/``timestamp`` missing;
       ``card`` not an object; ``sig`` not 128 lowercase hex; ``publicKey`` not 64
       lowercase hex; ``timestamp`` not an integer in 0..2^53-1; ``card`` not serializable
       by JCS. Other top-level members are ignored (``constraints.md`` "Extension Fields").
    2. ``bad_sig``: the BIP-340 signature over ``SHA-256(JCS(card) + "|" + timestamp)`` does
       not verify against ``publicKey`` (or ``publicKey`` is not an x coordinate).
    3. ``invalid_identity``: ``card.identity`` missing or not a strict P2TR address.
    4. ``key_mismatch``: ``publicKey`` is not the witness program (tweaked key ``Q``) of
       ``card.identity``.
    5. ``invalid_card``: :func:`validate_agent_card` fails.
    6. ``valid``.

    Why this order: it is ``discovery.md``'s own (verify the signature, then match the key
    to the identity) and the order of the verdict list in docs/architecture.md,
    *Nostr verdicts*; it mirrors the Nostr path (event signature, then the ``d``-tag
    identity binding, then the card); and a document whose signature fails vouches for
    nothing, so none of its claims (identity included) is reported as if someone had made
    it. The card's field rules come last so that ``invalid_card`` always means "really
    published by that identity, but broken".

    Examples:
        >>> priv = bytes.fromhex("0a" * 32)
        >>> from snap_spark.protocol.keys import internal_pubkey, p2tr_address
        >>> card = sample_card(p2tr_address(internal_pubkey(priv)))
        >>> doc = sign_card(card, priv, 1770622297, aux=bytes(32))
        >>> verify_signed_card(doc)
        ('valid', 'signature, identity and card verified')
        >>> verify_signed_card({**doc, "timestamp": 1770622298})[0]
        'bad_sig'
    """
    if not isinstance(doc, Mapping):
        return "malformed", f"document must be an object, got {json_type(doc)}"
    for name in _DOC_FIELDS:
        if name not in doc:
            return "malformed", f"required field {name!r} is missing"
    card, sig, public_key = doc["card"], doc["sig"], doc["publicKey"]
    if not isinstance(card, dict):
        return "malformed", f"card must be an object, got {json_type(card)}"
    if not isinstance(sig, str) or _HEX128.fullmatch(sig) is None:
        return "malformed", "sig must be 128 lowercase hex characters"
    if not isinstance(public_key, str) or _HEX64.fullmatch(public_key) is None:
        return "malformed", "publicKey must be 64 lowercase hex characters"
    timestamp = _timestamp(doc["timestamp"])
    if timestamp is None:
        return "malformed", "timestamp must be an integer from 0 to 2^53-1"
    try:
        canonical = canonical_card(card)
    except InvalidCard as exc:
        return "malformed", str(exc)

    key = xonly_key(bytes.fromhex(public_key))
    if key is None:
        return "bad_sig", "publicKey is not the x coordinate of a secp256k1 point"
    if not key.verify(bytes.fromhex(sig), signed_card_digest(canonical, timestamp)):
        return "bad_sig", "Schnorr signature does not verify against publicKey"

    identity = card.get("identity")
    try:
        program = decode_p2tr(identity).program
    except IdentityInvalid as exc:
        return "invalid_identity", f"card.identity: {exc}"
    if program.hex() != public_key:
        return (
            "key_mismatch",
            f"publicKey {public_key} is not the taproot output key {program.hex()} "
            "of card.identity",
        )

    try:
        validate_agent_card(card)
    except InvalidCard as exc:
        return "invalid_card", str(exc)
    return "valid", "signature, identity and card verified"


def sign_card(
    card: Mapping[str, Any], private_key: bytes, timestamp: int, aux: bytes | None = None
) -> dict[str, Any]:
    """Build a ``SignedAgentCard`` for ``card`` (which is not validated, nor its identity).

    ``publicKey`` is the taproot-tweaked x-only key ``Q`` (the program of the P2TR identity
    of ``private_key``), and the signature is made with the tweaked private key, as in the
    example of ``discovery.md``. ``aux`` is BIP-340 auxiliary randomness (random if ``None``).

    Raises:
        InvalidPrivateKey: ``private_key`` is not a valid key
            (:func:`~snap_spark.protocol.keys.check_private_key`; the message never quotes it).
        InvalidCard: if the card cannot be canonicalized.

    Examples:
        >>> doc = sign_card({"name": "x"}, bytes.fromhex("0a" * 32), 1, aux=bytes(32))
        >>> sorted(doc), doc["publicKey"][:8]
        (['card', 'publicKey', 'sig', 'timestamp'], '2b074989')
    """
    private_key = check_private_key(private_key)
    canonical = canonical_card(dict(card))
    digest = signed_card_digest(canonical, timestamp)
    return {
        "card": dict(card),
        "sig": sign_digest(digest, private_key, aux),
        "publicKey": tweak_public_key(internal_pubkey(private_key)).hex(),
        "timestamp": timestamp,
    }


def sample_card(identity: str, **overrides: Any) -> dict[str, Any]:
    """A small valid card for ``identity`` (for examples, tests and sample data).

    Examples:
        >>> sample_card("bc1p...", name="Echo")["name"]
        'Echo'
    """
    card: dict[str, Any] = {
        "name": "Code Assistant",
        "description": "Generates and reviews code",
        "version": "1.0.0",
        "identity": identity,
        "skills": [
            {
                "id": "code-generation",
                "name": "Code Generation",
                "description": "Generate code from natural language",
                "tags": ["code"],
            }
        ],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
    }
    card.update(overrides)
    return card
