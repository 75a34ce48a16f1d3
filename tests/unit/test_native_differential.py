"""Differential tests: the native checking core (``snap_spark._native``) equals the Python
reference (:func:`snap_spark.udfs.verify.check_columns_reference`) on every verdict column
of every line, to the exact text of the reasons and the exact bits of the floats.

Corpora: the spec's vectors; the traffic of ``snap-spark sample`` (honest, attack and
malformed kinds) and of ``snap-spark sample --nostr`` (its raw lines and the SNAP messages
inside its stored events); hand-made edge cases (JCS numbers, nesting, lone surrogates, BOM,
envelopes, wrong types, addresses, huge lines, duplicate keys, truncations); Hypothesis-made
signed messages and their mutations; and a seeded fuzz run. Each corpus is checked under
the three receipt clocks and under per-line clocks, with read errors and null lines mixed in.

Lines the native core hands back ("deferred") are decided by the reference, so they always
agree; :func:`assert_same` also proves each one was handed back for an allowed reason (a
non-ASCII character where JSON reading stopped, or an envelope line near 10 MiB) and counts
them per corpus in :data:`DEFERRED` (``pytest -s`` prints them).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import json
import math
import os
import random
import re
import struct
from collections import Counter
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from bech32m import codecs as bech32
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snap_spark.nostr.lines import event_from_line
from snap_spark.nostr.stored import Keyring, check_stored_event
from snap_spark.protocol import keys
from snap_spark.protocol.jsonparse import loads
from snap_spark.protocol.records import MAX_EXACT_SIZE_ABOVE
from snap_spark.protocol.signing import message_digest, sign_digest, sign_message
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.samples.nostr import NostrSampleConfig, generate_nostr
from snap_spark.udfs import verify
from snap_spark.udfs.verify import (
    VERDICT_COLUMNS,
    check_arrow,
    check_columns,
    check_columns_reference,
)
from tests.conftest import load_vector

T0 = 1_770_163_200
#: A few fixed private keys (never printed: only addresses and signatures appear in lines).
PRIVS = (*(hashlib.sha256(b"snap-spark native differential %d" % i).digest()
            for i in range(3)), bytes.fromhex("0a" * 32))
NETWORKS: tuple[keys.Network, ...] = ("mainnet", "testnet")
ADDRS = {(i, net): keys.p2tr_address(keys.internal_pubkey(p), net)
         for i, p in enumerate(PRIVS) for net in NETWORKS}
MAIN, TEST = ADDRS[0, "mainnet"], ADDRS[0, "testnet"]
CLOCKS = {
    "refuse": ReceiptClock.refuse(),
    "fixed": ReceiptClock("fixed", float(T0)),
    "message": ReceiptClock("message"),
}
FLOAT_COLUMNS = frozenset(("envelope_received_at", "received_at"))
_MODES = {"refuse": 0, "fixed": 1, "message": 2}
#: Lines the native core handed back to the reference, per corpus.
DEFERRED: Counter[str] = Counter()
Clock = ReceiptClock | Sequence[ReceiptClock]


# --------------------------------------------------------------------------- comparison


def _native() -> ModuleType:
    try:
        return importlib.import_module("snap_spark._native")
    except ImportError as exc:
        pytest.fail(f"the native checking core snap_spark._native is not built ({exc}); "
                    "run `make native`", pytrace=False)


@contextlib.contextmanager
def _native_on() -> Iterator[None]:
    """Run with the native core switched on, whatever the environment says."""
    saved = os.environ.pop(verify.NATIVE_ENV, None)
    try:
        if verify.native_core() is None:
            pytest.fail("check_arrow does not use the native core; run `make native`",
                        pytrace=False)
        yield
    finally:
        if saved is not None:
            os.environ[verify.NATIVE_ENV] = saved


def _same(column: str, ref: object, nat: object) -> bool:
    if column in FLOAT_COLUMNS and ref is not None and nat is not None:
        if not isinstance(ref, int | float) or not isinstance(nat, float):
            return False
        return struct.pack("<d", float(ref)) == struct.pack("<d", nat)
    return type(ref) is type(nat) and ref == nat


def _deferred(raws: list[bytes | None], errors: Any, clock: Clock,
              max_drift: float) -> list[int]:
    lines = pa.array(raws, pa.binary())
    if isinstance(clock, ReceiptClock):
        mode, value = _MODES[clock.mode], float(clock.value or 0.0)
        modes: list[int] | None = None
        values: list[float] | None = None
    else:
        mode, value = 0, 0.0
        modes = [_MODES[c.mode] for c in clock]
        values = [float(c.value or 0.0) for c in clock]
    _schema, _array, deferred = _native().check_batch(
        lines, errors, mode, value, float(max_drift), 1, modes, values)
    return list(deferred)


def _deferral_allowed(raw: bytes | None, pre_detail: str | None) -> bool:
    """Deferral is allowed for a non-ASCII character where JSON reading stopped, and for
    an envelope line near the 10 MiB limit."""
    if raw is not None and len(raw) > MAX_EXACT_SIZE_ABOVE:
        return True
    found = re.search(r"unexpected character (.+) at (?:character \d+|end of input)",
                      pre_detail or "")
    if found is None:
        return False
    char = ast.literal_eval(found.group(1))
    return isinstance(char, str) and len(char) == 1 and not char.isascii()


def _show(raw: bytes | None) -> str:
    text = repr(raw)
    return text if len(text) <= 300 else text[:297] + "..."


def assert_same(
    raws: Sequence[bytes | None],
    read_errors: Sequence[str | None] | None = None,
    clock: Clock = CLOCKS["fixed"],
    max_drift: float = 60.0,
    *,
    corpus: str = "",
    verify_threads: int = 1,
) -> int:
    """Check ``raws`` with the reference and with the native core; fail on any difference
    (line, column, both values). Returns how many lines the native core deferred."""
    raws = list(raws)
    errors: list[str | None] = (list(read_errors) if read_errors is not None
                                else [None] * len(raws))
    ref = check_columns_reference(raws, errors, clock, max_drift, verify_threads)
    error_array = (None if all(e is None for e in errors) else pa.array(errors, pa.string()))
    with _native_on():
        nat = check_arrow(pa.array(raws, pa.binary()), error_array, clock, max_drift,
                          verify_threads).to_pydict()
        deferred = _deferred(raws, error_array, clock, max_drift)
    problems: list[str] = []
    bad_lines = 0
    for i, raw in enumerate(raws):
        diffs = [f"    {name}: reference={ref[name][i]!r:.300} native={nat[name][i]!r:.300}"
                 for name in VERDICT_COLUMNS if not _same(name, ref[name][i], nat[name][i])]
        if diffs:
            bad_lines += 1
            if bad_lines <= 8:
                clock_i = clock if isinstance(clock, ReceiptClock) else clock[i]
                problems.append(f"  line {i} {_show(raw)} (read_error={errors[i]!r}, "
                                f"clock={clock_i}, max_drift={max_drift})")
                problems.extend(diffs)
    # why each deferred line was handed back: its reason without a read error
    reasons = check_columns_reference([raws[i] for i in deferred], [None] * len(deferred),
                                      CLOCKS["fixed"], max_drift)["pre_detail"]
    unjustified = [i for i, reason in zip(deferred, reasons, strict=True)
                   if not _deferral_allowed(raws[i], reason)]
    if unjustified:
        problems.append("  deferred without an allowed reason: "
                        + "; ".join(_show(raws[i]) for i in unjustified[:5]))
    if problems:
        pytest.fail(f"native and reference differ on {bad_lines} of {len(raws)} lines"
                    f"{' of ' + corpus if corpus else ''}:\n" + "\n".join(problems),
                    pytrace=False)
    if corpus:
        DEFERRED[corpus] += len(deferred)
    return len(deferred)


def assert_same_everywhere(raws: Sequence[bytes | None], corpus: str, *,
                           max_drift: float = 60.0, seed: int = 0) -> None:
    """All three clocks, per-line clocks, and read errors / null lines mixed in."""
    raws = list(raws)
    for name, clock in CLOCKS.items():
        assert_same(raws, clock=clock, max_drift=max_drift, corpus=f"{corpus}/{name}")
    rng = random.Random(seed)
    clocks = [rng.choice([*CLOCKS.values(), ReceiptClock("fixed", T0 + rng.uniform(-90, 90)),
                          ReceiptClock("fixed", float(rng.randrange(T0 - 70, T0 + 70)))])
              for _ in raws]
    mixed: list[bytes | None] = [None if rng.random() < 0.05 else r for r in raws]
    errors = [rng.choice(["gzip: bad CRC", "truncated file", "é ünïcode ☃"])
              if rng.random() < 0.05 else None for _ in raws]
    assert_same(mixed, errors, clocks, max_drift, corpus=f"{corpus}/per-line",
                verify_threads=2)


def test_native_core_is_built() -> None:
    assert _native().check_batch is not None
    with _native_on():
        assert verify.core_name() == "native"


def test_the_helper_sees_a_difference() -> None:
    """The comparison tells -0.0 from 0.0 and 1 from 1.0 (Arrow float columns may take
    the reference's ints)."""
    assert not _same("received_at", 0.0, -0.0)
    assert not _same("timestamp", 1, 1.0)
    assert not _same("pre_detail", "a", "b")
    assert _same("received_at", 5, 5.0)


# --------------------------------------------------------------------------- builders


def _sig_for(text: bytes, priv: bytes) -> str | None:
    """The signature of the message a JSON text holds, if it can be signed."""
    try:
        msg = loads(text)
        return sign_digest(message_digest(msg), priv, aux=bytes(32))
    except Exception:
        return None


def obj(pairs: Sequence[tuple[str, str]]) -> str:
    """A JSON object from (raw key JSON, raw value JSON) pairs, written as given."""
    return "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"


def j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def base_pairs(**over: Any) -> list[tuple[str, str]]:
    """An unsigned request from key 0 to key 1 on mainnet, as raw pairs."""
    msg: dict[str, Any] = {
        "id": "m-1", "version": "0.1", "from": MAIN, "to": ADDRS[1, "mainnet"],
        "type": "request", "method": "message/send",
        "payload": {"message": {"messageId": "i1", "parts": [{"text": "hi"}]}},
        "timestamp": T0,
    }
    for key, value in over.items():
        if value is None:
            msg.pop(key, None)
        else:
            msg[key] = value
    return [(j(k), j(v)) for k, v in msg.items()]


def with_raw(pairs: list[tuple[str, str]], key: str, raw: str | None) -> list[tuple[str, str]]:
    """Replace (or with ``None`` drop) the value of ``key``; append it when absent."""
    out: list[tuple[str, str]] = []
    found = False
    for k, v in pairs:
        if k == j(key):
            found = True
            if raw is not None:
                out.append((k, raw))
        else:
            out.append((k, v))
    if not found and raw is not None:
        out.append((j(key), raw))
    return out


def signed_line(pairs: list[tuple[str, str]], priv: bytes = PRIVS[0]) -> bytes:
    """The message with a ``sig`` made over what the text holds (none when unsignable)."""
    text = obj([p for p in pairs if p[0] != '"sig"']).encode("utf-8", "surrogatepass")
    sig = _sig_for(text, priv)
    if sig is None:
        return text
    return obj([*[p for p in pairs if p[0] != '"sig"'], ('"sig"', j(sig))]).encode(
        "utf-8", "surrogatepass")


def envelopes(message: bytes, received: str = str(T0 + 1), source: str = '"relay"'
              ) -> list[bytes]:
    """The message inside an envelope as an object and as JSON text."""
    inner = message.decode("utf-8", "surrogatepass")
    as_text = json.dumps(inner)  # escapes: the text of a string value
    return [
        f'{{"received_at":{received},"source":{source},"message":{inner}}}'.encode(
            "utf-8", "surrogatepass"),
        f'{{"received_at":{received},"source":{source},"message":{as_text}}}'.encode(),
        f'{{"message":{as_text},"received_at":{received}}}'.encode(),
    ]


# --------------------------------------------------------------------------- corpora


def spec_vector_lines() -> list[bytes]:
    lines: list[bytes] = []
    for case in load_vector("envelope.test.json")["tests"]:
        line = json.dumps(case["data"]).encode()
        lines += [line, *envelopes(line, received="1738627201")]
    for case in load_vector("agent-card.test.json")["tests"]:
        lines.append(json.dumps(case["data"]).encode())
    sigs = load_vector("schnorr-signatures.json")
    for vec in sigs["valid"]:
        line = json.dumps({**vec["message"], "sig": vec["expectedSignature"]}).encode()
        lines += [line, *envelopes(line, received="1738627200")]
    for vec in sigs["invalid"]:
        lines.append(json.dumps({**vec["message"], "sig": vec["signature"]}).encode())
    for vec in load_vector("jcs-payloads.json")["vectors"]:
        msg = sign_message({**json.loads(base_line_text()), "payload": vec["input"]},
                           PRIVS[0], aux=bytes(32))
        lines += [json.dumps(msg).encode(), json.dumps(msg, ensure_ascii=False).encode()]
    for vec in load_vector("key-encoding.json")["vectors"]:
        priv = bytes.fromhex(vec["privateKey"])
        msg = sign_message({**json.loads(base_line_text()), "from": vec["p2trAddress"],
                            "to": vec["p2trAddress"]}, priv, aux=bytes(32))
        lines.append(json.dumps(msg).encode())
    return lines


def base_line_text() -> str:
    return obj(base_pairs())


def test_spec_vectors() -> None:
    lines = spec_vector_lines()
    assert_same_everywhere(lines, "spec vectors")
    for at in (1738627200.0, 1738627260.0, 1738627261.0):
        assert_same(lines, clock=ReceiptClock("fixed", at), corpus="spec vectors/vector time")


@pytest.fixture(scope="module")
def sample_lines() -> list[bytes]:
    config = SampleConfig(agents=6, messages=2500, seed=3, attack_share=0.6, bare_share=0.3)
    lines = [line for line, _label in generate(config)]
    lines += [line for line, _label in generate(SampleConfig(agents=4, messages=600, seed=9))]
    return lines


def test_sample_traffic(sample_lines: list[bytes]) -> None:
    assert_same_everywhere(sample_lines, "sample")
    assert_same(sample_lines, clock=CLOCKS["message"], corpus="sample/2 threads",
                verify_threads=2)
    assert_same(sample_lines, clock=CLOCKS["fixed"], max_drift=0.0, corpus="sample/drift 0")


def test_keys_kept_between_batches_change_no_verdict() -> None:
    """The native core keeps the addresses it decoded and the keys it parsed from one batch
    to the next (``KeyCache::take``/``give_back`` in native/src/check.rs): traffic of many
    agents, with forged and broken addresses, checked once whole and then again in small
    batches in reverse order (every agent known by then, from either end), gets the
    reference's verdicts each time."""
    config = SampleConfig(agents=400, messages=3000, seed=13, attack_share=0.4)
    lines = [line for line, _label in generate(config)]
    assert len({sender for line in lines[:2000] if (sender := _sender(line))}) > 300
    assert_same(lines, clock=CLOCKS["message"], corpus="many agents/whole")
    backwards = lines[::-1]
    for start in range(0, len(backwards), 250):
        assert_same(backwards[start:start + 250], clock=CLOCKS["message"],
                    corpus="many agents/batches", verify_threads=2)


def _sender(line: bytes) -> str | None:
    """The ``from`` of an envelope's or a bare message's JSON, if it has one."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    message = value.get("message", value) if isinstance(value, dict) else None
    sender = message.get("from") if isinstance(message, dict) else None
    return sender if isinstance(sender, str) else None


def test_sample_covers_every_kind() -> None:
    config = SampleConfig(agents=6, messages=2500, seed=3, attack_share=0.6, bare_share=0.3)
    kinds = {label.kind for _line, label in generate(config)}
    assert {"not_json", "invalid_utf8", "empty_line", "embedded_not_json", "number_overflow",
            "deep_payload", "malformed_address", "mixed_network"} <= kinds


def nostr_lines() -> list[bytes]:
    sample = generate_nostr(NostrSampleConfig(cards=10, messages=250, seed=11))
    ring = Keyring(sample.keyring)
    lines = list(sample.lines)
    for raw in sample.lines:
        event = event_from_line(raw)
        if event.event is None or event.event.get("kind") not in (4339, 21339):
            continue
        try:
            got = check_stored_event(event.event, float(event.received_at or T0), ring)
        except Exception:
            continue
        if got.inner is None:
            continue
        inner = got.inner.encode("utf-8", "surrogatepass")
        lines += [inner, *envelopes(inner, received=str(event.received_at or T0),
                                    source='"nostr"')]
    return lines


def test_nostr_sample() -> None:
    lines = nostr_lines()
    assert sum(b'"from"' in line for line in lines) > 100
    assert_same_everywhere(lines, "nostr sample")


# --------------------------------------------------------------------------- edge cases

#: Numbers whose JCS form or whose parsing is an edge (as JSON literals).
EDGE_NUMBERS = (
    "0", "-0", "-0.0", "0.0", "1.0", "1E5", "1e5", "1e+5", "1.5e1", "1e21", "1e20", "1e-7",
    "1e-6", "1e-5", "0.00001", "0.000001", "5e-324", "2.5e-324", "2.4e-324", "1e-400",
    "-1e-400", str(2**53 - 1), str(2**53), str(2**53 + 1), str(-(2**53) - 1), str(2**63),
    str(2**64), str(2**64 + 1), str(-(2**63) - 1), str(10**38), str(10**38 - 1),
    str(10**39), "1e308", "1.7976931348623157e308", "1.7976931348623158e308",
    "1.7976931348623159e308", "1e400", "-1e400", "1" * 400, "-" + "1" * 400,
    "9" * 309, "1" * 4300, "1" * 4301, "1" + "0" * 4999, "-" + "1" * 5000,
    str(2**1024 - 2**970), str(2**1024 - 2**970 - 1), "0.1", "123456789.123456789",
    "0.0078125", "1770163200.0078125", "1770163200.5", "1770163199.9999999", "-1",
    str(T0), str(T0 + 60), str(T0 - 60), str(T0 + 61), "1770163260.0000001",
    "1770163200.0", "1.7701632e9", "17701632e2", "4.35", "0.30000000000000004",
)
#: Values of every JSON type, for wrong-type cases.
WRONG_TYPES = ("null", "true", "false", "0", "1.5", '""', '"x"', "[]", "{}", "[1]",
               '{"a":1}', '"\\ud800"')
#: Strings with escaped (lone) surrogates, and other text edges.
SURROGATE_TEXTS = (
    '"\\ud800"', '"\\udc00"', '"\\ud800\\udc00"', '"\\udc00\\ud800"', '"\\ud83d\\ude00"',
    '"a\\ud800b"', '"\\ud800\\u0041"', '"\\ud800\\ud800"', '"\\uD800"', '"\\uDBFF\\uDFFF"',
    '"😀"', '"é"', '"\\u00e9"', '"\\u0000"', '"\\u001f\\u007f"', '"\ue000"', '"\uffff"',
)


def _deep(depth: int, opener: str = "[", leaf: str = "1") -> str:
    closer = {"[": "]", "{": "}"}
    if opener == "{":
        return '{"d":' * depth + leaf + "}" * depth
    return opener * depth + leaf + closer[opener] * depth


def edge_lines() -> list[bytes]:
    lines: list[bytes] = []
    add = lines.append
    base = base_pairs()
    good = signed_line(base)
    add(good)
    lines += envelopes(good)
    # JCS edge numbers in the payload, the timestamp and the envelope's received_at
    for num in EDGE_NUMBERS:
        add(signed_line(with_raw(base, "payload", f'{{"n":{num},"l":[{num}]}}')))
        add(signed_line(with_raw(base, "timestamp", num)))
        lines += envelopes(good, received=num)[:2]
        add(f'{{"received_at":{num},"message":{{}}}}'.encode())
    add(signed_line(with_raw(base, "payload", "{" + ",".join(
        f'"k{i}":{n}' for i, n in enumerate(EDGE_NUMBERS)) + "}")))
    # nesting: the payload at depth 9, 10, 11, 12; far deeper outside the payload
    for depth in (8, 9, 10, 11, 12):
        for opener in "[{":
            add(signed_line(with_raw(base, "payload", '{"p":' + _deep(depth - 1, opener)
                                     + "}")))
    add(signed_line(with_raw(base, "payload", '{"a":' + _deep(11) + ',"b":1e400}')))
    add(signed_line(with_raw(base, "payload", '{"b":1e400,"a":' + _deep(11) + "}")))
    add(signed_line(with_raw(base, "payload", '{"b":' + "1" * 400 + ',"a":1e400}')))
    add(signed_line(with_raw(base, "payload", '{"a":"\\ud800","b":1e400}')))
    add(signed_line(with_raw(base, "payload", '{"\\ud800":1,"b":' + _deep(11) + "}")))
    deep = _deep(100_000)
    add(signed_line(with_raw(base, "x-deep", deep)))
    add(deep.encode())
    add(("[" * 100_000).encode())
    add(("{" + '"a":{' * 100_000).encode())
    add(f'{{"received_at":{T0},"x":{deep},"message":{good.decode()}}}'.encode())
    add(f'{{"received_at":{T0},"message":{json.dumps(deep)}}}'.encode())
    add(signed_line(with_raw(base, "payload", deep)))
    # lone surrogates and other text edges in every field and in keys
    fields = ("id", "version", "from", "to", "type", "method", "sig", "timestamp", "payload")
    for text in SURROGATE_TEXTS:
        for name in fields:
            add(signed_line(with_raw(base, name, text)))
        add(signed_line(with_raw(base, "payload", f'{{"t":{text}}}')))
        add(signed_line(with_raw(base, "payload", f'{{{text}:1,"a":2}}')))
        add(signed_line(with_raw(base, "payload",
                                 f'{{"task":{{"id":{text},"contextId":{text},'
                                 f'"status":{{"state":{text}}}}}}}')))
        add(signed_line(with_raw(base, "payload", f'{{"taskId":{text}}}')))
        add(signed_line([*base, (text, "1")]))
        add(obj([(text, "1"), *base]).encode("utf-8", "surrogatepass"))
        lines += envelopes(good, source=text)
        add(f'{{{text}:1,"message":{good.decode()}}}'.encode())
        inner = obj(with_raw(base, "id", text))
        add(f'{{"received_at":{T0},"message":{json.dumps(inner)}}}'.encode())
        add(f'{{"received_at":{T0},"message":"{text}"}}'.encode())
    add(b'{"received_at":1770163200,"message":"{\\"id\\":\\"\\ud800\\\\udc00\\"}"}')
    add(b'{"received_at":1770163200,"message":"\\ud800{}"}')
    add(b'{"received_at":1770163200,"message":"{\\"a\\":\\"\\ud800\\"}\\ud800"}')
    # BOM, whitespace, empty
    lines += [b"\xef\xbb\xbf" + good, b"\xef\xbb\xbf", b"", b" ", b"\t\r\n \x0b\x0c",
              b"\x0c" + good, b"\x0b", b"\x1c", b"\xc2\xa0", b" " + good + b" \r",
              b"\n" + good + b"\n\n", good + b"\x00", b"\xef\xbb\xbf   "]
    add('{"message":"\ufeff{}","received_at":1}'.encode())
    add(f'{{"message":{json.dumps(chr(0xFEFF) + good.decode())}}}'.encode())
    # envelopes: received_at and message of every type, keys with message fields
    for value in (*WRONG_TYPES, "-1", "-0.5", "1e400", "-0", "-0.0", "1.5"):
        add(f'{{"received_at":{value},"message":{good.decode()}}}'.encode())
        add(f'{{"received_at":{T0},"message":{value}}}'.encode())
        add(f'{{"source":{value},"message":{good.decode()}}}'.encode())
    for field in ("id", "from", "to", "sig", "payload", "version", "x-ext"):
        add(f'{{"message":{good.decode()},"{field}":1}}'.encode())
    add(b'{"message":{},"message":{"id":"x"}}')
    add(f'{{"message":"not json","message":{good.decode()}}}'.encode())
    add(f'{{"message":{good.decode()},"received_at":1,"received_at":{T0}}}'.encode())
    add(b'{"received_at":null,"source":null,"message":"[]"}')
    add(b'{"message":"{\\"id\\":1}","received_at":"1770163200"}')
    add(b'{"message":"{\\n\\t\\"a\\" : 1\\r}"}')
    add(b'{"message":"{\\"a\\" \\u00e9}"}')
    add(b'{"message":"\\u00e9"}')
    add(b'{"message":"\\u00e9", "received_at": 5}')
    add(b'{"message":"[1,\\"\\\\ud800\\"]"}')
    add(b'{"message":"\\"\\\\u12"}')
    # wrong types for every field, absent fields
    for name in (*fields, "payload"):
        for value in WRONG_TYPES:
            add(signed_line(with_raw(base, name, value)))
        add(signed_line(with_raw(base, name, None)))
    add(b"{}")
    for value in WRONG_TYPES:
        add(value.encode())
    # patterns: ids, versions, methods, sigs
    for msg_id in ('""', '"a"', j("a" * 128), j("a" * 129), '"a b"', '"ä"', '"a\\n"',
                   '"-_"', '"٣"', '"ａ"'):
        add(signed_line(with_raw(base, "id", msg_id)))
    for version in ('"0.1"', '"1"', '"1."', '".1"', '"1.2.3"', '"١.٢"', '"1.1\\n"',
                    '"10.20"', '"a.b"', '"1.2 "'):
        add(signed_line(with_raw(base, "version", version)))
    for method in ('"a/b"', '"a/b_"', '"A/b"', '"a/"', '"/b"', '"a/b/c"', '"a/b1"',
                   j("a/" + "b" * 62), j("a/" + "b" * 63), '"a/b\\n"', '"é/b"', '"a_/b"'):
        add(signed_line(with_raw(base, "method", method)))
    for kind in ('"request"', '"response"', '"event"', '"Request"', '"requests"', '""'):
        add(signed_line(with_raw(base, "type", kind)))
        add(obj(with_raw(base, "type", kind)).encode())
    sig = json.loads(good)["sig"]
    for bad in (sig.upper(), sig[:-1], sig + "0", "g" * 128, "0" * 128, sig[:64],
                sig[:-2] + "\\u0030\\u0030"):
        add(obj(with_raw(base, "sig", j(bad))).encode())
    add(obj(with_raw(base, "sig", j(sig[:-2] + ("00" if sig[-2:] != "00" else "11")))).encode())
    lines += address_lines(base)
    lines += task_lines(base)
    lines += duplicate_key_lines(base)
    lines += non_ascii_error_lines(good)
    return lines


def address_lines(base: list[tuple[str, str]]) -> list[bytes]:
    """Uppercase, mixed-case, bech32, wrong-length, wrong-network and crafted addresses."""
    program = keys.decode_p2tr(MAIN).program
    data = bytes([1]) + bytes(bech32.convertbits(program, 8, 5))
    crafted = [
        MAIN.upper(), MAIN[:10].upper() + MAIN[10:], "BC1P" + MAIN[4:], MAIN[:-1],
        MAIN + "q", MAIN[:-1] + "é", MAIN[:-1] + "\\ud800", "bc1q" + MAIN[4:],
        "tb1q" + MAIN[4:], "bcrt1p" + MAIN[6:], MAIN.replace("1", "!", 1),
        MAIN[:-1] + "b", MAIN[:-1] + "i", MAIN[:-1] + "\x7f", MAIN[:-1] + " ",
        bech32.bech32_encode("bc", data, bech32.Encoding.BECH32),
        bech32.bech32_encode("tb", data, bech32.Encoding.BECH32),
        bech32.bech32_encode("bc", bytes([0]) + data[1:], bech32.Encoding.BECH32M),
        bech32.bech32_encode("bc", bytes([2]) + data[1:], bech32.Encoding.BECH32M),
        bech32.bech32_encode("bc", bytes([1]) + data[1:-1] + bytes([1]),
                             bech32.Encoding.BECH32M),  # non-zero padding
        bech32.bech32_encode("bc", bytes([1]) + bytes(52), bech32.Encoding.BECH32M),
        bech32.bech32_encode("bc1p" + "q" * 51, b"", bech32.Encoding.BECH32M),
        bech32.bech32_encode("bc1p" + "q" * 45, bytes([1]) + bytes(5),
                             bech32.Encoding.BECH32M),
        bech32.bech32_encode("bc1p" + "q" * 45, bytes([0]) + bytes(5),
                             bech32.Encoding.BECH32M),
        bech32.bech32_encode("bc1pq", bytes([1]) + bytes(50), bech32.Encoding.BECH32M),
        bech32.bech32_encode("bc1", bytes([1]) + bytes(53), bech32.Encoding.BECH32M),
        bech32.bech32_encode("tb", bytes([1]) + bytes(52), bech32.Encoding.BECH32M),
        keys.encode_p2tr(bytes(32)), keys.encode_p2tr(b"\xff" * 32),  # off the curve
        keys.encode_p2tr(bytes(31) + b"\x07", "testnet"),
        "", "bc1p", "x" * 62, "1" * 62, "bc1p" + "1" * 58,
        # the prefix is quoted with Python's repr
        "'" + MAIN[1:], '"' + MAIN[1:], "'\"" + MAIN[2:], "\\" + MAIN[1:], "\t" + MAIN[1:],
        "\x00" + MAIN[1:], "\x7f" + MAIN[1:], "bc1" + "\n" + MAIN[4:], " " * 62,
    ]
    lines = []
    for address in crafted:
        value = f'"{address}"' if "\\u" in address else j(address)
        for name in ("from", "to"):
            lines.append(signed_line(with_raw(base, name, value)))
    for i in range(len(PRIVS)):
        for net in NETWORKS:
            for to_net in NETWORKS:
                pairs = with_raw(base, "from", j(ADDRS[i, net]))
                pairs = with_raw(pairs, "to", j(ADDRS[(i + 1) % len(PRIVS), to_net]))
                lines.append(signed_line(pairs, PRIVS[i]))
                lines.append(signed_line(pairs, PRIVS[(i + 1) % len(PRIVS)]))
                lines.append(signed_line(with_raw(pairs, "to", None), PRIVS[i]))
    return lines


def task_lines(base: list[tuple[str, str]]) -> list[bytes]:
    states = ("submitted", "working", "input_required", "completed", "failed", "canceled",
              "unknown", "Working", "")
    lines = []
    for kind in ("request", "response", "event"):
        pairs = with_raw(base, "type", j(kind))
        for state in states:
            for task_id in ('"t1"', '""', "1", "null"):
                payload = (f'{{"task":{{"id":{task_id},"contextId":"c1",'
                           f'"status":{{"state":{j(state)}}}}},"taskId":"t9"}}')
                lines.append(signed_line(with_raw(pairs, "payload", payload)))
        for payload in ('{"task":[],"taskId":"t2"}', '{"task":null,"taskId":3}',
                        '{"taskId":"t3"}', '{"task":{"id":"t4","status":"completed"}}',
                        '{"task":{"id":"t4","status":{"state":5}}}',
                        '{"task":{"id":"t4","status":{"state":"completed"},"contextId":1}}',
                        '{"task":{"id":"t5","status":{"state":"working"}},"task":{"id":"t6"}}',
                        '{"task":{}}', "{}"):
            lines.append(signed_line(with_raw(pairs, "payload", payload)))
    return lines


def duplicate_key_lines(base: list[tuple[str, str]]) -> list[bytes]:
    """Duplicate keys, written by hand (dicts cannot hold them), and swapped key orders."""
    lines = []
    good = signed_line(base)
    pairs = [(k, v) for k, v in json.loads(good).items()]
    raw_pairs = [(j(k), j(v)) for k, v in pairs]
    for i, (key, value) in enumerate(raw_pairs):
        for other in ('"x"', "1", "null", "{}", value):
            lines.append(obj([*raw_pairs, (key, other)]).encode())
            lines.append(obj([(key, other), *raw_pairs]).encode())
        swapped = raw_pairs[:]
        swapped[0], swapped[i] = swapped[i], swapped[0]
        lines.append(obj(swapped).encode())
        lines.append(obj(list(reversed(swapped))).encode())
    for payload in ('{"a":1,"a":2}', '{"a":1,"b":2,"a":{"c":1}}', '{"a":' + _deep(11) +
                    ',"a":1}', '{"a":1e400,"a":1}', '{"b":1,"a":2,"b":3}',
                    "{" + ",".join(f'"k{i % 20}":{i}' for i in range(60)) + "}"):
        lines.append(signed_line(with_raw(base, "payload", payload)))
    return lines


def non_ascii_error_lines(good: bytes) -> list[bytes]:
    """Non-ASCII characters where a malformed line stops being JSON."""
    text = good.decode()
    cut = text.index('"payload"')
    lines = []
    for char in ("é", "\xa0", "\u3000", "😀", "\u2028", "\x85", "ÿ", "\ufeff", "ſ"):
        for malformed in (char, f"[1,{char}]", f'{{"a":{char}}}', f'{{"a":1{char}}}',
                          f'{{{char}:1}}', f'{{"a" {char}}}', f"[1 {char}]",
                          f"{text[:cut]}{char}{text[cut:]}", f"{text}{char}",
                          f'"a{char}', f"{char}{text}", f"[tru{char}]", f'{{"a":-{char}}}'):
            lines.append(malformed.encode())
            lines.append(f'{{"received_at":{T0},"message":{json.dumps(malformed)}}}'.encode())
    return lines


def test_edge_cases() -> None:
    lines = edge_lines()
    assert len(lines) > 1000
    assert_same_everywhere(lines, "edge cases")
    for drift in (0.0, 0.5, 60.0078125, 1e-9, 1e300):
        assert_same(lines, clock=CLOCKS["fixed"], max_drift=drift, corpus="edge cases/drift")


def _clock_lines() -> list[bytes]:
    line = signed_line(base_pairs())
    late = signed_line(with_raw(base_pairs(), "timestamp", str(T0 + 100)))
    return [line, late, *envelopes(line, received=str(T0 + 61)), *envelopes(line, "1.5e9"),
            *envelopes(late, "1770163200.0078125"), *envelopes(line, "1770163260.999"),
            *envelopes(line, "1770163139.5"), *envelopes(late, "1770163139.75")]


def test_edge_clock_values() -> None:
    lines = _clock_lines()
    for value in (0.0, 0.5, float(T0) + 0.0078125, float(T0) - 60.0, T0 + 60.0000001,
                  float(T0) + 1e-7, 1e300, 2.0**63, 2.0**64 + 2048, 1e22, float(2**53 + 2),
                  math.inf, -math.inf, math.nan, -5.5, -1e-7):
        for drift in (60.0, 39.9921875, 0.0, math.inf, math.nan, -1.0):
            assert_same(lines, clock=ReceiptClock("fixed", value), max_drift=drift,
                        corpus="clock values")


def test_negative_zero_clock() -> None:
    """A fixed clock of -0.0 reaches the native core as -0.0 (``received_at`` keeps it)."""
    assert_same(_clock_lines(), clock=ReceiptClock("fixed", -0.0))


#: Receipt offsets from the timestamp, and the code both cores give them: the drift check
#: reads the receipt clock in whole seconds (authentication.md's ``Math.floor``), so late
#: receipt passes up to 60.999 s and early receipt up to exactly 60 s.
WHOLE_SECOND_DRIFT = ((60.999, None), (61.0, 2004), (60.5, None), (61.5, 2004),
                      (60.0, None), (-60.0, None), (-60.001, 2004), (-60.5, 2004),
                      (-61.0, 2004), (0.25, None))


@pytest.mark.parametrize(("offset", "code"), WHOLE_SECOND_DRIFT)
def test_drift_reads_whole_receipt_seconds_in_both_cores(offset: float, code: int | None
                                                         ) -> None:
    """Envelope receipt times and fixed clocks with a fraction: each core gives the code,
    keeps the fractional ``received_at``, and both write the same reason."""
    line = signed_line(base_pairs())
    received = T0 + offset
    for raws, clock in ((envelopes(line, received=repr(received)), CLOCKS["refuse"]),
                        ([line], ReceiptClock("fixed", received))):
        assert_same(raws, clock=clock, corpus="whole-second drift")
        reference = check_columns_reference(raws, [None] * len(raws), clock, 60.0)
        with _native_on():
            native = check_arrow(pa.array(raws, pa.binary()), None, clock, 60.0).to_pydict()
        for cols in (reference, native):
            assert cols["pre_code"] == [code] * len(raws)
            assert cols["auth_code"] == [None] * len(raws)
            assert cols["received_at"] == [received] * len(raws)
            if code is not None and received % 1:
                assert all(f"receipt second {math.floor(received)} " in detail
                           for detail in cols["pre_detail"])


def test_arrow_input_forms() -> None:
    """Binary, large binary and string arrays, sliced (non-zero offsets), with read errors
    as strings, large strings or a null array; and the list API :func:`check_columns`."""
    lines: list[bytes | None] = []
    lines += [line for line in edge_lines() if len(line) < 4000][:300]
    lines[5] = lines[77] = None
    errors: list[str | None] = [None] * len(lines)
    errors[10], errors[11] = "bad gzip", "é"
    clock = CLOCKS["fixed"]

    def same(array: Any, error_array: Any, raws: list[bytes | None],
             errs: list[str | None]) -> None:
        ref = check_columns_reference(raws, errs, clock, 60.0)
        with _native_on():
            nat = check_arrow(array, error_array, clock, 60.0).to_pydict()
        for name in VERDICT_COLUMNS:
            for i, raw in enumerate(raws):
                assert _same(name, ref[name][i], nat[name][i]), (name, _show(raw))

    for kind in (pa.binary(), pa.large_binary()):
        array = pa.array(lines, kind)
        same(array, pa.array(errors, pa.string()), lines, errors)
        same(array.slice(7), pa.array(errors, pa.string()).slice(7), lines[7:], errors[7:])
        same(array.slice(3, 50), pa.array(errors, pa.large_string()).slice(3, 50),
             lines[3:53], errors[3:53])
        same(array.slice(9), pa.nulls(len(lines) - 9), lines[9:], [None] * (len(lines) - 9))
    texts = [raw for raw in lines if raw is None or _is_utf8(raw)]
    for kind in (pa.string(), pa.large_string()):
        array = pa.array([None if t is None else t.decode() for t in texts], kind)
        same(array, None, texts, [None] * len(texts))
        same(array.slice(13), None, texts[13:], [None] * (len(texts) - 13))
    same(pa.array([], pa.binary()), None, [], [])
    with _native_on():
        listed = check_columns(lines, errors, clock, 60.0)
    ref = check_columns_reference(lines, errors, clock, 60.0)
    for name in VERDICT_COLUMNS:
        assert all(_same(name, a, b) for a, b in zip(ref[name], listed[name], strict=True))


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_truncation_at_every_position() -> None:
    good = signed_line(base_pairs(payload={"t": "é😀\u2028", "n": [1.5, -0.0, 1e21]}))
    lines: list[bytes] = []
    for line in (good, *envelopes(good)):
        lines += [line[:k] for k in range(len(line) + 1)]
    assert_same_everywhere(lines, "truncations")


def test_huge_lines() -> None:
    """Payloads just under and over 1 MiB of JCS; messages at and over 10 MiB."""
    base = base_pairs()
    limit = 1024 * 1024
    lines = []
    for extra in (0, 1):
        filler = "x" * (limit - len('{"s":""}') + extra)
        lines.append(signed_line(with_raw(base, "payload", j({"s": filler}))))
        escaped = "\\n" * ((limit - len('{"s":""}') + extra) // 2)
        lines.append(signed_line(with_raw(base, "payload", f'{{"s":"{escaped}"}}')))
    big = 10 * 1024 * 1024
    text = obj(with_raw(base, "x-pad", '""')).encode()
    for extra in (0, 1):
        padded = obj(with_raw(base, "x-pad", j("p" * (big - len(text) + extra)))).encode()
        assert len(padded) == big + extra
        lines.append(padded)
        lines.append(f'{{"received_at":{T0},"message":{json.dumps(padded.decode())}}}'.encode())
    lines.append(f'{{"received_at":{T0},"message":{padded.decode()}}}'.encode())
    lines.append(f'{{"received_at":{T0},"message":{text.decode()},"x":"{"p" * big}"}}'.encode())
    lines.append(f'{{"received_at":{T0},"message":{text.decode()}}}'.encode())
    deferred = assert_same(lines, clock=CLOCKS["fixed"], corpus="huge lines")
    assert deferred == 2


# --------------------------------------------------------------------------- hypothesis

json_scalars = (
    st.none() | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.text(st.characters(codec=None, categories=["Cs", "Co", "Lo", "So"]), max_size=4)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=16,
)
payloads = st.dictionaries(
    st.text(max_size=6) | st.sampled_from(["task", "taskId", "\ue000", "😀", "é"]),
    json_values | st.builds(
        lambda tid, state: {"id": tid, "contextId": "c", "status": {"state": state}},
        st.sampled_from(["t1", "", 5]),
        st.sampled_from(["working", "completed", "bogus"])),
    max_size=5)
timestamps = st.sampled_from([T0, T0 - 60, T0 + 60, T0 - 61, T0 + 61, 0, 2**53 - 1]) | \
    st.integers(min_value=0, max_value=2**53 - 1)


@st.composite
def messages(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    i = draw(st.integers(0, len(PRIVS) - 1))
    net = draw(st.sampled_from(NETWORKS))
    msg: dict[str, Any] = {
        "id": draw(st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)),
        "version": draw(st.sampled_from(["0.1", "1.0", "12.34"])),
        "from": ADDRS[i, net],
        "type": draw(st.sampled_from(["request", "response", "event"])),
        "method": draw(st.sampled_from(["message/send", "tasks/get", "service/call"])),
        "payload": draw(payloads),
        "timestamp": draw(timestamps),
    }
    if draw(st.booleans()):
        msg["to"] = ADDRS[draw(st.integers(0, len(PRIVS) - 1)),
                          draw(st.sampled_from((net, net, *NETWORKS)))]
    if draw(st.booleans()):
        msg["x-ext"] = draw(json_values)
    if draw(st.integers(0, 4)):
        with contextlib.suppress(Exception):
            msg = sign_message(msg, PRIVS[i], aux=bytes(32))
    return msg, i


STYLES = ("compact", "ascii", "unicode", "indent", "shuffled", "env-object", "env-text",
          "env-text-ascii", "env-fraction")


def render(msg: dict[str, Any], style: str, rng: random.Random) -> bytes:
    def dumps(value: Any, **kw: Any) -> bytes:
        return json.dumps(value, **kw).encode("utf-8", "surrogatepass")

    if style == "compact":
        return dumps(msg, separators=(",", ":"), ensure_ascii=False)
    if style == "ascii":
        return dumps(msg)
    if style == "unicode":
        return dumps(msg, ensure_ascii=False)
    if style == "indent":
        return dumps(msg, indent=1)
    if style == "shuffled":
        items = list(msg.items())
        rng.shuffle(items)
        return dumps(dict(items))
    received = {"env-fraction": T0 + rng.uniform(-80, 80)}.get(style, T0 + rng.randint(-70, 70))
    if style in ("env-object", "env-fraction"):
        return dumps({"received_at": received, "source": "s", "message": msg})
    text = json.dumps(msg, ensure_ascii=style == "env-text-ascii")
    return dumps({"received_at": received, "source": "s", "message": text})


#: Byte strings mutations insert: JSON tokens and edge values.
TOKENS = (b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b" ", b"\n", b"\x00", b"\xff",
          b"\xc3", b"\xc3\xa9", b"\xf0\x9f\x98\x80", b"\xef\xbb\xbf", b"\\u", b"\\ud800",
          b"\\udc00", b"\\\\", b'\\"', b"1e400", b"-0", b"-0.0", b"1e21", b"5e-324",
          b"9007199254740993", b"1" * 400, b"null", b"true", b"1.0", b"1E5", b'"id":',
          b'"sig":', b'"to":"tb1p"', b'"message":', b'"received_at":', b'"payload":{}',
          b"[[[[[[[[[[[[", b"\xa0", b"e", b"E", b".", b"-", b"+", b"0")


def mutate(line: bytes, rng: random.Random, count: int) -> bytes:
    data = bytearray(line)
    for _ in range(count):
        op = rng.randrange(7)
        at = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            del data[at:]
        elif op == 2:
            data[at:at] = rng.choice(TOKENS)
        elif op == 3:
            del data[at:at + rng.randrange(1, 12)]
        elif op == 4:
            end = min(len(data), at + rng.randrange(1, 40))
            data[at:at] = data[at:end]
        elif op == 5 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        else:
            data[at:at] = bytes([rng.choice(b'"\\{}[],:0123456789-.eEtfnu ')])
    return bytes(data)


HYPOTHESIS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@HYPOTHESIS
@given(st.lists(st.tuples(messages(), st.sampled_from(STYLES), st.integers(0, 3)),
                min_size=1, max_size=6),
       st.sampled_from(list(CLOCKS.values())), st.sampled_from([60.0, 0.0, 30.5]),
       st.randoms(use_true_random=False))
def test_generated_messages_and_mutations(
    cases: list[tuple[tuple[dict[str, Any], int], str, int]], clock: ReceiptClock,
    max_drift: float, rng: random.Random,
) -> None:
    lines = []
    for (msg, _key), style, mutations in cases:
        line = render(msg, style, rng)
        lines.append(line)
        if mutations:
            lines.append(mutate(line, rng, mutations))
    assert_same(lines, clock=clock, max_drift=max_drift)


@HYPOTHESIS
@given(st.lists(st.binary(max_size=120) | st.text(max_size=60).map(
    lambda s: s.encode("utf-8", "surrogatepass")), min_size=1, max_size=10))
def test_random_bytes(lines: list[bytes]) -> None:
    assert_same(lines, clock=CLOCKS["message"])


@HYPOTHESIS
@given(st.lists(st.sampled_from(EDGE_NUMBERS) | st.floats(allow_nan=False).map(repr)
                | st.integers(-(10**40), 10**40).map(str)
                | st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,3})?",
                                fullmatch=True),
                min_size=1, max_size=8))
def test_generated_numbers(numbers: list[str]) -> None:
    base = base_pairs()
    lines = []
    for num in numbers:
        if num in ("inf", "-inf"):
            num = "1e400"
        lines.append(signed_line(with_raw(base, "payload", f'{{"n":{num},"a":[{num}]}}')))
        lines.append(obj(with_raw(base, "timestamp", num)).encode())
        lines.append(f'{{"received_at":{num},"message":{{}}}}'.encode())
    assert_same(lines, clock=CLOCKS["fixed"])
    assert_same(lines, clock=CLOCKS["message"])


# --------------------------------------------------------------------------- seeded fuzz


def _fuzz_pool(sample_lines: list[bytes]) -> list[bytes]:
    pool = [signed_line(base_pairs()), *envelopes(signed_line(base_pairs()))]
    pool += sample_lines[:: max(1, len(sample_lines) // 80)]
    pool += spec_vector_lines()[:40]
    return pool


def test_seeded_fuzz(sample_lines: list[bytes]) -> None:
    rng = random.Random(20260415)
    pool = _fuzz_pool(sample_lines)
    alphabet = b'{}[]",:\\ 0123456789-+.eEtrufalsn\xc3\xa9\xff\x00\n'
    lines: list[bytes] = []
    for _ in range(12000):
        if rng.random() < 0.2:
            lines.append(bytes(rng.choice(alphabet) for _ in range(rng.randrange(40))))
        else:
            lines.append(mutate(rng.choice(pool), rng, rng.randrange(1, 5)))
    clocks = [rng.choice(list(CLOCKS.values())) for _ in lines]
    assert_same(lines, clock=clocks, corpus="fuzz")
    assert_same(lines, clock=CLOCKS["fixed"], max_drift=5.0, corpus="fuzz/fixed")


def test_seeded_fuzz_inside_envelopes(sample_lines: list[bytes]) -> None:
    """Mutated messages as the JSON text of an envelope's ``message`` (escaped, so bytes
    that are not UTF-8 become lone surrogates of the inner text)."""
    rng = random.Random(20260416)
    pool = _fuzz_pool(sample_lines) + [line for line in edge_lines() if len(line) < 4000]
    lines: list[bytes] = []
    for _ in range(5000):
        inner = mutate(rng.choice(pool), rng, rng.choice([0, 1, 1, 2, 4]))
        text = json.dumps(inner.decode("utf-8", "surrogateescape"))
        received = rng.choice(["1770163200", "1770163250.25", "-0.0", "null", "1e400", '"x"'])
        source = rng.choice(['"relay"', '"\\ud800"', '"é"'])
        lines.append(f'{{"received_at":{received},"source":{source},"message":{text}}}'
                     .encode())
    assert_same(lines, clock=[rng.choice(list(CLOCKS.values())) for _ in lines],
                corpus="fuzz/envelope text")


def test_report_deferrals() -> None:
    """Not a check: prints the deferral counts (run with ``-s``)."""
    print("\nnative core: deferred lines per corpus:",
          json.dumps(dict(sorted(DEFERRED.items())), indent=1))


# --------------------------------------------------------------------------- raw_text

#: Pieces of broken UTF-8: truncated sequences, surrogates, overlong forms, bytes that never
#: start a character, code points above U+10FFFF; joined to valid text in any order.
BROKEN_UTF8 = (b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\x80",
               b"\xe0\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80", b"\x80", b"\xbf\xbf")


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.none() | st.binary(max_size=24)
                | st.lists(st.sampled_from(BROKEN_UTF8) | st.text(max_size=4).map(str.encode),
                           max_size=6).map(b"".join), max_size=30))
def test_line_text_equals_the_reference(raws: list[bytes | None]) -> None:
    """``raw_messages.raw_text``/``raw_bytes`` of a batch with a line that is not UTF-8 are
    built by the native core's ``line_text``: each line's text and exact bytes equal
    ``verify.line_text`` (Python's ``decode("utf-8", "replace")``), U+FFFD for U+FFFD."""
    with _native_on():
        text, exact = verify.line_text_arrow(pa.array(raws, pa.binary()), raws)
    texts, exacts = verify.line_text(raws)
    assert text.to_pylist() == texts
    assert exact.to_pylist() == exacts
