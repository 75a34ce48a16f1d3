"""RFC 8785 (JCS) canonicalization of SNAP payloads, with a fast path proven equal by tests.

Numbers are IEEE-754 doubles, as in every JavaScript signer: an integer literal beyond
2^53 canonicalizes to its nearest double, ``1.0`` to ``1`` and ``-0.0`` to ``0``; a number
no double can hold is an :class:`~snap_spark.protocol.errors.InvalidPayload` (1004).

The fast path serializes with ``orjson`` (sorted keys), which writes the same bytes as JCS
when every number is an integer within ±(2^53−1) or a non-integral double of magnitude at
least 1e-5, and no key holds a character at or above U+E000 (where UTF-16 and code-point
order differ). Anything else goes to ``rfc8785``. Property tests prove the two paths equal.

Examples:
    >>> canonicalize({"z": 1, "a": [1.0, -0.0, "x"]})
    b'{"a":[1,0,"x"],"z":1}'
    >>> canonicalize({"n": 9007199254740993})
    b'{"n":9007199254740992}'
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import rfc8785

from snap_spark.protocol.errors import InvalidPayload

#: Largest integer a double holds exactly on both sides (``Number.MAX_SAFE_INTEGER``).
MAX_SAFE_INTEGER = 2**53 - 1
#: Payload depth limit (``constraints.md``): a scalar is 0, ``{}`` is 1.
MAX_PAYLOAD_DEPTH = 10
_SORT = orjson.OPT_SORT_KEYS
#: Smallest magnitude of a non-integral double the fast path writes (ES switches to
#: exponent notation below 1e-6, orjson below 1e-4: between, both must agree; see tests).
FAST_FLOAT_MIN = 1e-5


def normalize(value: Any, *, max_depth: int = MAX_PAYLOAD_DEPTH) -> tuple[Any, int, bool]:
    """Return ``(normalized, depth, fast_ok)`` for a parsed JSON value.

    ``normalized`` has every number as JavaScript would hold it (integral doubles within the
    safe range become ``int``, larger integers become ``float``); ``depth`` is the nesting
    depth; ``fast_ok`` says whether ``orjson`` may serialize it byte-for-byte as JCS.

    Raises:
        InvalidPayload: when deeper than ``max_depth`` or a number is not a finite double.
    """
    state = [True]
    result, depth = _norm(value, 0, max_depth, state)
    return result, depth, state[0]


def _norm(value: Any, level: int, max_depth: int, state: list[bool]) -> tuple[Any, int]:
    t = type(value)
    if t is str or t is bool or value is None:
        return value, 0
    if t is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value, 0
        try:
            as_double = float(value)
        except OverflowError:
            raise InvalidPayload("number too large for an IEEE-754 double") from None
        state[0] = False
        return as_double, 0
    if t is float:
        if not math.isfinite(value):
            raise InvalidPayload("number is not a finite IEEE-754 double")
        if value.is_integer():
            if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return int(value), 0
        elif value >= FAST_FLOAT_MIN or value <= -FAST_FLOAT_MIN:
            # A non-integral double is below 2^53, and from 1e-5 up orjson's shortest
            # round-trip digits are written exactly as ECMAScript writes them.
            return value, 0
        state[0] = False
        return value, 0
    if t is dict:
        if level >= max_depth:
            raise InvalidPayload(f"payload nesting deeper than {max_depth}")
        out: dict[str, Any] = {}
        deepest = 0
        for key, child in value.items():
            if state[0] and not key.isascii() and max(key) >= "\ue000":
                state[0] = False
            norm_child, child_depth = _norm(child, level + 1, max_depth, state)
            out[key] = norm_child
            if child_depth > deepest:
                deepest = child_depth
        return out, deepest + 1
    if t is list:
        if level >= max_depth:
            raise InvalidPayload(f"payload nesting deeper than {max_depth}")
        items = []
        deepest = 0
        for child in value:
            norm_child, child_depth = _norm(child, level + 1, max_depth, state)
            items.append(norm_child)
            if child_depth > deepest:
                deepest = child_depth
        return items, deepest + 1
    raise InvalidPayload(f"value of type {t.__name__} is not JSON")


def is_plain(value: Any, *, max_depth: int = MAX_PAYLOAD_DEPTH) -> bool:
    """True when ``value`` needs no normalization and ``orjson`` may write it as JCS.

    A read-only scan (no copy), the common case of real payloads: every number a safe
    integer or a non-integral double of magnitude at least :data:`FAST_FLOAT_MIN`, no key
    with a character at or above U+E000, and nesting within ``max_depth``. When it says
    False, :func:`normalize` decides (and raises what it must).

    Examples:
        >>> is_plain({"a": [1, "x", {"b": 2.5}]}), is_plain({"a": 1.0})
        (True, False)
        >>> is_plain([[[]]], max_depth=2)
        False
    """
    t = type(value)
    if t is dict or t is list:
        return _plain_container(value, max_depth)
    if t is str or t is bool or value is None:
        return True
    return _plain_container([value], 1)


def _plain_container(value: Any, room: int) -> bool:
    if room <= 0:
        return False
    if type(value) is dict:
        for key in value:
            if not key.isascii() and max(key) >= "\ue000":
                return False
        children = value.values()
    else:
        children = value
    for child in children:
        t = type(child)
        if t is str or t is bool or child is None:
            continue
        if t is int:
            if -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                continue
            return False
        if t is float:
            if (child >= FAST_FLOAT_MIN or child <= -FAST_FLOAT_MIN) and \
                    math.isfinite(child) and not child.is_integer():
                continue
            return False
        if (t is dict or t is list) and _plain_container(child, room - 1):
            continue
        return False
    return True


def canonicalize(value: Any, *, max_depth: int = MAX_PAYLOAD_DEPTH) -> bytes:
    """JCS bytes of a parsed JSON value (numbers treated as doubles, see module doc).

    Raises:
        InvalidPayload: too deep, a number no double holds, or a string that is not valid
            Unicode (a lone surrogate).
    """
    if is_plain(value, max_depth=max_depth):
        try:
            return orjson.dumps(value, option=_SORT)
        except orjson.JSONEncodeError:
            pass  # e.g. a lone surrogate: the full path below decides
    normalized, _depth, fast_ok = normalize(value, max_depth=max_depth)
    return serialize_normalized(normalized, fast_ok)


def serialize_normalized(normalized: Any, fast_ok: bool) -> bytes:
    """Serialize a value already passed through :func:`normalize`."""
    if fast_ok:
        try:
            return orjson.dumps(normalized, option=_SORT)
        except orjson.JSONEncodeError:
            pass  # e.g. a lone surrogate: let the reference serializer decide
    try:
        return bytes(rfc8785.dumps(normalized))
    except rfc8785.CanonicalizationError as exc:
        raise InvalidPayload(f"payload cannot be canonicalized: {exc}") from None
    except UnicodeEncodeError:
        # a lone surrogate in a key: rfc8785 sorts keys by their UTF-16 form and raises
        # this instead (in a value it says the sentence below itself)
        raise InvalidPayload(
            "payload cannot be canonicalized: input contains non-UTF-8 codepoints"
        ) from None


def canonicalize_reference(value: Any) -> bytes:
    """JCS through ``rfc8785`` only (after number normalization); the fast path's oracle."""
    normalized, _depth, _fast = normalize(value, max_depth=10**9)
    try:
        return bytes(rfc8785.dumps(normalized))
    except rfc8785.CanonicalizationError as exc:
        raise InvalidPayload(f"payload cannot be canonicalized: {exc}") from None
