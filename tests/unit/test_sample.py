"""Tests of the sample generator: determinism, coverage, and every label re-derived.

The labels are checked against :class:`ReferenceVerdicts`, a deliberately small re-statement
of the verdict order (``docs/architecture.md``, *Verdict order*) written from the rules
alone, using only ``json``, :func:`decode_p2tr` and :func:`verify_message` from the
protocol core.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from snap_spark.files.lines import list_input_files
from snap_spark.protocol.errors import IdentityInvalid
from snap_spark.protocol.keys import decode_p2tr, tweak_private_key
from snap_spark.protocol.signing import verify_message
from snap_spark.samples.messages import (
    ATTACK_KINDS,
    HONEST_KINDS,
    KIND_CODES,
    Label,
    SampleConfig,
    expected_tasks_path,
    generate,
    read_expected_tasks,
    sample_agents,
    write_sample,
)
from snap_spark.samples.messages.agents import Signer

LABELLED = SampleConfig(
    agents=12, messages=20_000, seed=11, attack_share=0.2, bare_share=0.05, testnet_share=0.25
)

# ----------------------------------------------------------------------------- reference

_REQUIRED = ("id", "version", "from", "type", "method", "payload", "timestamp")
# ECMAScript semantics: \d is ASCII only and $ never matches before a final newline, so the
# patterns are spelled with explicit ASCII classes and matched with fullmatch.
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_VERSION = re.compile(r"[0-9]+\.[0-9]+")
_METHOD = re.compile(r"[a-z]+/[a-z_]+")
_SIG = re.compile(r"[0-9a-f]{128}")
_TYPES = frozenset({"request", "response", "event"})
_MAX_TIMESTAMP = 2**53 - 1
_STATES = ("submitted", "working", "input_required", "completed", "failed", "canceled")
_LEGAL = {
    "submitted": {"working", "failed", "canceled"},
    "working": {"completed", "failed", "canceled", "input_required"},
    "input_required": {"working", "failed", "canceled"},
    "completed": set(),
    "failed": set(),
    "canceled": set(),
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _depth_and_finite(value: Any) -> tuple[int, bool]:
    """Nesting depth (scalar 0, ``{}`` 1) and whether every number is a finite double."""
    if isinstance(value, dict | list):
        children = value.values() if isinstance(value, dict) else value
        deepest, finite = 0, True
        for child in children:
            depth, ok = _depth_and_finite(child)
            deepest, finite = max(deepest, depth), finite and ok
        return deepest + 1, finite
    if isinstance(value, float):
        return 0, value not in (float("inf"), float("-inf")) and value == value
    return 0, True


def _well_formed(msg: dict[str, Any]) -> bool:
    """Step 2 of §3: JSON types and constraints."""
    if not all(isinstance(msg[name], str) for name in ("id", "version", "from", "type", "method")):
        return False
    if "to" in msg and not isinstance(msg["to"], str):
        return False
    timestamp = msg["timestamp"]
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        return False
    if not 0 <= timestamp <= _MAX_TIMESTAMP:
        return False
    if not (
        _ID.fullmatch(msg["id"])
        and _VERSION.fullmatch(msg["version"])
        and _METHOD.fullmatch(msg["method"])
        and len(msg["method"]) <= 64
        and msg["type"] in _TYPES
    ):
        return False
    if "sig" in msg and not (isinstance(msg["sig"], str) and _SIG.fullmatch(msg["sig"])):
        return False
    if not isinstance(msg["payload"], dict):
        return False
    depth, finite = _depth_and_finite(msg["payload"])
    return depth <= 10 and finite


def parse_line(line: bytes) -> tuple[dict[str, Any] | None, int | None]:
    """``(message, received_at)`` of a line; message ``None`` when it is no JSON object.

    A bare line has no receipt time: the sample's labels assume the message's own timestamp.
    """
    try:
        outer = _loads(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is a ValueError too
        return None, None
    if not isinstance(outer, dict):
        return None, None
    if "message" not in outer:
        return outer, None
    message = outer["message"]
    if isinstance(message, str):
        try:
            message = _loads(message)
        except ValueError:
            return None, None
    if not isinstance(message, dict):
        return None, None
    return message, outer["received_at"]


class ReferenceVerdicts:
    """The §3 verdict order, line by line, with a replay store of accepted messages."""

    def __init__(self) -> None:
        self.accepted: dict[tuple[str, str], int] = {}

    def verdict(self, line: bytes) -> int | None:
        msg, received_at = parse_line(line)
        if msg is None or any(name not in msg for name in _REQUIRED):
            return 1003
        if not _well_formed(msg):
            return 1004
        try:
            sender = decode_p2tr(msg["from"])
            recipient = decode_p2tr(msg["to"]) if "to" in msg else None
        except IdentityInvalid:
            return 2005
        if recipient is not None and recipient.network != sender.network:
            return 1004
        clock = msg["timestamp"] if received_at is None else received_at
        if abs(math.floor(clock) - msg["timestamp"]) > 60:  # whole receipt seconds
            return 2004
        key = (msg["from"], msg["id"])
        first = self.accepted.get(key)
        if first is not None and clock - first <= 120:
            return 2006
        if "sig" not in msg:
            if msg["type"] == "request":
                return 2002
        elif not verify_message(msg):
            return 2001
        self.accepted[key] = clock
        return None


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def labelled() -> list[tuple[bytes, Label]]:
    return list(generate(LABELLED))


# ----------------------------------------------------------------------------- tests


def test_same_seed_same_bytes_other_seed_other_bytes() -> None:
    config = SampleConfig(agents=6, messages=3000, seed=3, attack_share=0.2, bare_share=0.1)
    first = list(generate(config))
    assert first == list(generate(config))
    other = list(generate(SampleConfig(**{**config.__dict__, "seed": 4})))
    assert [line for line, _ in first] != [line for line, _ in other]
    assert len(first) == len(other) == 3000


def test_line_numbers_and_codes_follow_the_kind_table(labelled: list[tuple[bytes, Label]]) -> None:
    assert [label.line_no for _, label in labelled] == list(range(1, len(labelled) + 1))
    for line, label in labelled:
        assert label.expected_code == KIND_CODES[label.kind], label
        assert b"\n" not in line and b"\r" not in line


def test_every_kind_appears(labelled: list[tuple[bytes, Label]]) -> None:
    counts = Counter(label.kind for _, label in labelled)
    assert set(ATTACK_KINDS) <= set(counts), set(ATTACK_KINDS) - set(counts)
    assert set(HONEST_KINDS) <= set(counts), set(HONEST_KINDS) - set(counts)
    attacks = sum(counts[kind] for kind in ATTACK_KINDS)
    assert 0.15 < attacks / len(labelled) < 0.25


def test_every_label_matches_the_reference_verdict(labelled: list[tuple[bytes, Label]]) -> None:
    reference = ReferenceVerdicts()
    wrong = []
    for line, label in labelled:
        got = reference.verdict(line)
        if got != label.expected_code:
            wrong.append((label, got, line[:200]))
    assert not wrong, f"{len(wrong)} labels disagree, first: {wrong[:5]}"


def test_attack_kinds_carry_their_defining_feature(labelled: list[tuple[bytes, Label]]) -> None:
    """The kinds test what they say (boundary exactly 60 s, depth 11, replays of a line...)."""
    seen: dict[tuple[str, str], tuple[int, Any]] = {}
    for line, label in labelled:
        msg, received_at = parse_line(line)
        if label.kind == "boundary_drift_60":
            assert msg is not None and received_at is not None
            assert abs(received_at - msg["timestamp"]) == 60
        elif label.kind in ("stale_timestamp", "future_timestamp"):
            assert msg is not None and received_at is not None
            drift = received_at - msg["timestamp"]
            assert 61 <= abs(drift) <= 3600 and (drift > 0) == (label.kind == "stale_timestamp")
        elif label.kind in ("deep_payload", "boundary_depth_10"):
            assert msg is not None
            depth = _depth_and_finite(msg["payload"])[0]
            assert depth == (11 if label.kind == "deep_payload" else 10)
        elif label.kind in ("replay_in_window", "replay_outside_window"):
            assert msg is not None and received_at is not None
            first_received, first_message = seen[(msg["from"], msg["id"])]
            assert first_message == msg  # an exact copy of an accepted message
            delay = received_at - first_received
            assert 5 <= delay <= 100 if label.kind == "replay_in_window" else delay > 120
        elif label.kind == "empty_line":
            assert line == b""
        elif label.kind == "invalid_utf8":
            assert b"\xff\xfe" in line
        if label.expected_code is None and msg is not None and received_at is not None:
            seen.setdefault((msg["from"], msg["id"]), (received_at, msg))


def test_forged_copy_comes_just_before_its_genuine_message(
    labelled: list[tuple[bytes, Label]],
) -> None:
    pairs = 0
    for (forged_line, forged), (genuine_line, genuine) in itertools.pairwise(labelled):
        if forged.kind != "forged_copy_then_genuine":
            continue
        assert genuine.kind == "genuine_after_forged_copy"
        fake, fake_received = parse_line(forged_line)
        real, real_received = parse_line(genuine_line)
        assert fake is not None and real is not None
        assert (fake["from"], fake["id"]) == (real["from"], real["id"])
        assert fake_received is not None and real_received is not None
        assert fake_received < real_received
        pairs += 1
    assert pairs == sum(1 for _, label in labelled if label.kind == "forged_copy_then_genuine")


def test_honest_traffic_is_realistic(labelled: list[tuple[bytes, Label]]) -> None:
    addresses = {agent.address: agent.network for agent in sample_agents(LABELLED)}
    ids: Counter[tuple[str, str]] = Counter()
    string_messages = bare = 0
    last_received = None
    for line, label in labelled:
        msg, received_at = parse_line(line)
        if received_at is not None:
            if last_received is not None:  # increasing overall, a few seconds of jitter
                assert received_at >= last_received - 5
            last_received = max(received_at, last_received or received_at)
        if label.kind not in HONEST_KINDS:
            continue
        assert msg is not None
        ids[(msg["from"], msg["id"])] += 1
        assert msg["from"] in addresses
        if "to" in msg:  # conversations stay on one network
            assert addresses[msg["to"]] == addresses[msg["from"]]
        if received_at is None:
            bare += 1
            continue
        assert abs(received_at - msg["timestamp"]) <= 10
        string_messages += isinstance(json.loads(line)["message"], str)
    assert max(ids.values()) == 1  # ids unique per sender
    honest = sum(ids.values())
    assert 0.005 < string_messages / honest < 0.05
    assert 0.02 < bare / honest < 0.08


def test_service_calls_have_no_recipient(labelled: list[tuple[bytes, Label]]) -> None:
    calls = 0
    for line, label in labelled:
        msg, _ = parse_line(line)
        if msg is not None and msg.get("method") == "service/call":
            assert "to" not in msg
            if label.kind == "service_call":
                assert isinstance(msg["payload"]["name"], str)
                assert isinstance(msg["payload"]["arguments"], dict)
                calls += 1
    assert calls > 100


def test_task_reports_follow_the_state_machine_except_labelled(
    labelled: list[tuple[bytes, Label]],
) -> None:
    """Fold valid reports per task (timestamp, then receipt order), as §3 describes."""
    reports: dict[str, list[tuple[int, int, str, str, str]]] = defaultdict(list)
    for line, label in labelled:
        if label.expected_code is not None:
            continue
        msg, _ = parse_line(line)
        assert msg is not None
        task = msg["payload"].get("task") if msg["type"] == "response" else None
        if isinstance(task, dict) and task.get("status", {}).get("state") in _STATES:
            reports[task["id"]].append(
                (msg["timestamp"], label.line_no, msg["from"], task["status"]["state"], label.kind)
            )
    found: Counter[str] = Counter()
    for task_reports in reports.values():
        task_reports.sort()
        timestamps = [report[0] for report in task_reports]
        assert len(set(timestamps)) == len(timestamps)  # the order never hangs on a tie
        _, _, owner, state, kind = task_reports[0]
        assert kind not in ("task_non_owner", "task_illegal_transition")
        for _, _, sender, new_state, kind in task_reports[1:]:
            if sender != owner:
                assert kind == "task_non_owner"
            elif new_state == state:
                assert kind != "task_illegal_transition"
            elif new_state in _LEGAL[state]:
                assert kind != "task_illegal_transition"
                state = new_state
            else:
                assert kind == "task_illegal_transition", (state, new_state)
            found[kind] += 1
    labels = Counter(label.kind for _, label in labelled)
    for kind in ("task_non_owner", "task_illegal_transition"):
        assert found[kind] == labels[kind] > 5


def reference_tasks(lines: list[bytes]) -> dict[str, dict[str, Any]]:
    """The ``tasks`` rows §3 gives ``lines``, from :class:`ReferenceVerdicts` and a fold
    written here from the rules (not the protocol's): valid responses reporting one of the
    six states, per task by timestamp then receipt (then line), first sender owns."""
    reference = ReferenceVerdicts()
    reports: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for line_no, line in enumerate(lines, start=1):
        if reference.verdict(line) is not None:
            continue
        msg, received_at = parse_line(line)
        assert msg is not None
        task = msg["payload"].get("task") if msg["type"] == "response" else None
        if not isinstance(task, dict) or not isinstance(task.get("id"), str) or not task["id"]:
            continue
        status = task.get("status")
        state = status.get("state") if isinstance(status, dict) else None
        if state in _STATES:
            receipt = msg["timestamp"] if received_at is None else received_at
            reports[task["id"]].append((msg["timestamp"], receipt, line_no, msg["from"], state,
                                        msg["id"], task.get("contextId")))
    rows = {}
    for task_id, items in reports.items():
        items.sort()
        row: dict[str, Any] = {"task_id": task_id, "context_id": items[0][6],
                               "owner": items[0][3], "state": None, "reports": len(items),
                               "transitions": 0, "illegal_transitions": 0,
                               "foreign_reports": 0}
        for timestamp, _, _, sender, state, message_id, _ in items:
            if sender != row["owner"]:
                row["foreign_reports"] += 1
            elif row["state"] is None or (state != row["state"]
                                          and state in _LEGAL[row["state"]]):
                row["transitions"] += row["state"] is not None
                row.update(state=state, state_timestamp=timestamp, last_message_id=message_id)
            elif state != row["state"]:
                row["illegal_transitions"] += 1
        rows[task_id] = row
    return rows


@pytest.mark.parametrize("config", [
    LABELLED,
    SampleConfig(agents=3, messages=4000, seed=2, attack_share=0.4),
    SampleConfig(agents=8, messages=8000, seed=19, attack_share=0.0),
])
def test_expected_tasks_are_what_the_rules_give_the_lines(config: SampleConfig) -> None:
    sample = generate(config)
    with pytest.raises(RuntimeError):
        sample.expected_tasks()  # nothing read yet
    lines = [line for line, _ in sample]
    expected = [task.to_plain() for task in sample.expected_tasks()]
    assert len({row["task_id"] for row in expected}) == len(expected) > 300
    assert {row["task_id"]: row for row in expected} == reference_tasks(lines)
    if config.attack_share:  # replays of reports are in the traffic, and do not count
        replayed = sum(label.kind == "replay_in_window" for _, label in generate(config))
        assert replayed > 10
    assert sum(row["illegal_transitions"] for row in expected) > 3
    assert sum(row["foreign_reports"] for row in expected) > 3


def test_expected_tasks_file_sits_beside_the_traffic(tmp_path: Path) -> None:
    config = SampleConfig(agents=5, messages=3000, seed=8)
    out = tmp_path / "sample" / "traffic.jsonl.gz"
    out.parent.mkdir()
    write_sample(config, str(out), str(tmp_path / "sample" / "labels.jsonl"))
    beside = tmp_path / "sample" / "traffic.expected-tasks.txt"
    assert expected_tasks_path(str(out)) == str(beside)
    sample = generate(config)
    list(sample)
    assert read_expected_tasks(str(beside)) == [t.to_plain() for t in sample.expected_tasks()]
    first = json.loads(beside.read_text().splitlines()[0])
    assert list(first) == ["task_id", "context_id", "owner", "state", "state_timestamp",
                           "last_message_id", "reports", "transitions", "illegal_transitions",
                           "foreign_reports"]
    # landing or checking the folder reads the traffic (and the labels), never the expectation
    assert str(beside) not in list_input_files([str(tmp_path / "sample")])
    chosen = tmp_path / "elsewhere.txt"
    write_sample(config, str(tmp_path / "t.jsonl"), tasks_path=str(chosen))
    assert chosen.read_bytes() == beside.read_bytes()
    assert not (tmp_path / "t.expected-tasks.txt").exists()
    write_sample(config, str(tmp_path / "u.jsonl"), tasks_path=None)
    assert not (tmp_path / "u.expected-tasks.txt").exists()


def test_fast_signer_agrees_with_the_protocol_core() -> None:
    key = bytes.fromhex("0a" * 32)
    digest, aux = bytes(range(32)), bytes(range(32, 64))
    from coincurve import PrivateKey

    expected = PrivateKey(tweak_private_key(key)).sign_schnorr(digest, aux).hex()
    assert Signer(tweak_private_key(key)).sign(digest, aux) == expected


def test_write_sample_plain_and_gzip(tmp_path: Path) -> None:
    config = SampleConfig(agents=5, messages=2500, seed=5, attack_share=0.2)
    plain, packed = tmp_path / "s.ndjson", tmp_path / "s.ndjson.gz"
    labels_path = tmp_path / "labels.jsonl"
    counts = write_sample(config, str(plain), str(labels_path))
    assert write_sample(config, str(packed)) == counts
    data = plain.read_bytes()
    assert gzip.decompress(packed.read_bytes()) == data
    lines = data.split(b"\n")
    assert lines.pop() == b""  # every line ends with a newline
    expected = list(generate(config))
    assert lines == [line for line, _ in expected]
    labels = [json.loads(row) for row in labels_path.read_text().splitlines()]
    assert labels == [
        {"line_no": lab.line_no, "kind": lab.kind, "expected_code": lab.expected_code}
        for _, lab in expected
    ]
    assert counts == Counter(lab.kind for _, lab in expected)
    again = tmp_path / "again.ndjson.gz"
    write_sample(config, str(again))
    assert again.read_bytes() == packed.read_bytes()  # gzip header has no time or name


def test_config_is_validated() -> None:
    with pytest.raises(ValueError):
        SampleConfig(agents=1)
    with pytest.raises(ValueError):
        SampleConfig(attack_share=1.5)
    assert list(generate(SampleConfig(messages=0))) == []
