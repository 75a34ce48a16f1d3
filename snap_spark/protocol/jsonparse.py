"""Strict JSON parsing that never crashes and never rejects valid JSON.

``orjson`` parses almost every line (it is much faster than ``json``: docs/speed.md,
*Figures behind the code*). It refuses three kinds of *valid* JSON: nesting deeper than
1024, numbers that overflow a double (``1e400``), and escaped lone surrogates
(``"\\ud800"``). Those lines, and genuinely bad ones, go through an iterative pure-Python
parser that has no recursion limit and no integer-digit limit, so the verdict is decided by
the protocol rules, not by a parser's limits.

Examples:
    >>> loads(b'{"a": [1, 2.5, "x"]}')
    {'a': [1, 2.5, 'x']}
    >>> loads(b'{"a": 1e400}')
    {'a': inf}
"""

from __future__ import annotations

import re
from json.decoder import JSONDecodeError
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from typing import Any

import orjson

from snap_spark.protocol.errors import InvalidMessage

_WS = re.compile(r"[ \t\n\r]*")


def _skip(text: str, idx: int) -> int:
    """Index of the first non-whitespace character at or after ``idx``."""
    match = _WS.match(text, idx)
    return match.end() if match is not None else idx
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def loads(raw: bytes | str) -> Any:
    """Parse one JSON text, or raise :class:`InvalidMessage` (1003) with the reason.

    Numbers keep Python types (``int`` for integer literals, ``float`` otherwise; a float
    literal beyond the double range becomes ``inf`` so that the caller rejects it as a
    constraint, 1004, rather than as bad JSON).
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidMessage(f"not valid UTF-8 (byte {exc.start})") from None
    else:
        text = raw
    if text.startswith("\ufeff"):
        raise InvalidMessage("not JSON: starts with a byte order mark")
    return parse_strict(text)


def _fail(text: str, pos: int, what: str) -> InvalidMessage:
    if pos >= len(text):
        return InvalidMessage(f"not JSON: {what} at end of input (truncated?)")
    return InvalidMessage(f"not JSON: {what} at character {pos}")


def parse_strict(text: str) -> Any:
    """Iterative RFC 8259 parser (no recursion, so any depth parses): one value at a time,
    each container kept on a stack until its closing bracket.

    Examples:
        >>> parse_strict('{"a": [1, {"b": null}], "c": 1e400}')
        {'a': [1, {'b': None}], 'c': inf}
        >>> parse_strict('[1, 2')  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        snap_spark.protocol.errors.InvalidMessage: not JSON: unterminated object or array ...
    """
    n = len(text)
    stack: list[Any] = []
    keys: list[str | None] = []
    idx = _skip(text, 0)
    while True:
        if idx >= n:
            raise _fail(text, idx, "expected a value")
        ch = text[idx]
        value: Any
        if ch in "{[":
            value, idx = _open(text, idx, stack, keys)
            if value is None:  # a container opened: its first value comes next
                continue
        else:
            value, idx = _scalar(text, idx, ch)
        done, value, idx = _attach(text, idx, value, stack, keys)
        if done:
            return value


def _open(text: str, idx: int, stack: list[Any], keys: list[str | None]) -> tuple[Any, int]:
    """At ``{`` or ``[``: an empty container and the index after it, or ``None`` and the
    index of the first value after pushing the container (and its first key) on
    ``stack``."""
    close = "}" if text[idx] == "{" else "]"
    idx = _skip(text, idx + 1)
    if idx < len(text) and text[idx] == close:
        return ({} if close == "}" else []), idx + 1
    if close == "}":
        key, idx = _parse_key(text, idx)
        stack.append({})
        keys.append(key)
    else:
        stack.append([])
        keys.append(None)
    return None, idx


def _scalar(text: str, idx: int, ch: str) -> tuple[Any, int]:
    """The string, number, ``true``, ``false`` or ``null`` at ``idx`` (its first character
    ``ch``) and the index after it."""
    if ch == '"':
        try:
            return _scanstring(text, idx + 1, True)  # type: ignore[no-any-return]
        except JSONDecodeError as exc:
            raise _fail(text, exc.pos, exc.msg.lower()) from None
    if ch == "-" or "0" <= ch <= "9":
        match = _NUMBER.match(text, idx)
        if match is None:
            raise _fail(text, idx, "bad number")
        literal = match.group()
        if match.group(1) or match.group(2):
            return float(literal), match.end()
        try:
            return int(literal), match.end()
        except ValueError:  # more digits than int() accepts: far beyond a double
            return float(literal), match.end()
    for word, value in (("true", True), ("false", False), ("null", None)):
        if text.startswith(word, idx):
            return value, idx + len(word)
    raise _fail(text, idx, f"unexpected character {ch!r}")


def _attach(text: str, idx: int, value: Any, stack: list[Any], keys: list[str | None]
            ) -> tuple[bool, Any, int]:
    """Put the finished ``value`` into the open container, closing containers as far as
    their brackets follow. ``(True, the whole value, end)`` when the text's one value is
    complete; else ``(False, None, index of the next value)`` after a comma (and, in an
    object, the next key)."""
    n = len(text)
    while True:
        if not stack:
            idx = _skip(text, idx)
            if idx != n:
                raise _fail(text, idx, "extra data after the JSON value")
            return True, value, idx
        parent = stack[-1]
        if type(parent) is dict:
            parent[keys[-1]] = value
        else:
            parent.append(value)
        idx = _skip(text, idx)
        if idx >= n:
            raise _fail(text, idx, "unterminated object or array")
        ch = text[idx]
        if ch == ",":
            idx = _skip(text, idx + 1)
            if type(parent) is dict:
                keys[-1], idx = _parse_key(text, idx)
            return False, None, idx
        if (ch == "}" and type(parent) is dict) or (ch == "]" and type(parent) is list):
            idx += 1
            value = stack.pop()
            keys.pop()
            continue
        raise _fail(text, idx, f"unexpected character {ch!r}")


def _parse_key(text: str, idx: int) -> tuple[str, int]:
    """Parse ``"key" :`` at ``idx``; return the key and the index of the value."""
    if idx >= len(text) or text[idx] != '"':
        raise _fail(text, idx, "expected a string key")
    try:
        key, idx = _scanstring(text, idx + 1, True)
    except JSONDecodeError as exc:
        raise _fail(text, exc.pos, exc.msg.lower()) from None
    idx = _skip(text, idx)
    if idx >= len(text) or text[idx] != ":":
        raise _fail(text, idx, "expected ':'")
    return key, _skip(text, idx + 1)


def json_type(value: object) -> str:
    """The JSON type name of a parsed value, for reasons (``"null"``, ``"number"``, …).

    Examples:
        >>> json_type(True), json_type(1.5), json_type([])
        ('boolean', 'number', 'array')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return f"non-JSON {type(value).__name__}"
