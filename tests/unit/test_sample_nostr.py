"""Tests of the Nostr sample generator: every label re-derived from the protocol's rules.

The generator labels lines from what it built on purpose. :class:`ReferenceNostr` decides
the same lines from the rules alone: ``check_event`` / ``check_card_event`` /
``card_sort_key`` for events, NIP-40 for ``expiration``, nostr-sdk's NIP-44 decryption with
the keyring, the taproot addresses of ``keys``, and ``check_lines`` (the SNAP checker, with
its replay rule) for the inner messages. The two must agree on every line.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import nostr_sdk
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snap_spark import cli
from snap_spark.protocol.cards import verify_signed_card
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.errors import IdentityInvalid
from snap_spark.protocol.keys import decode_p2tr, internal_pubkey, p2tr_address
from snap_spark.protocol.nostr import card_sort_key, check_card_event, check_event
from snap_spark.protocol.signing import verify_message
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.nostr import (
    EPHEMERAL_KIND,
    EVENT_LABELS,
    MESSAGE_KINDS,
    STORED_KIND,
    WELL_KNOWN_LABELS,
    NostrSample,
    NostrSampleConfig,
    generate_nostr,
    nip44_conversation_key,
    nip44_encrypt,
    nip44_padded_length,
    output_paths,
    read_keyring,
    write_nostr_sample,
)
from snap_spark.samples.nostr.tables import GARBAGE
from snap_spark.samples.nostr.workbench import Workbench

CONFIG = NostrSampleConfig(seed=11)
SMALL = NostrSampleConfig(agents=5, cards=10, messages=40, well_known=8, seed=2)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[NostrSample, str]:
    stem = str(tmp_path_factory.mktemp("nostr") / "sample")
    return write_nostr_sample(CONFIG, stem), stem


@pytest.fixture(scope="module")
def sample(written: tuple[NostrSample, str]) -> NostrSample:
    return written[0]


def all_private_keys(config: NostrSampleConfig) -> list[bytes]:
    bench = Workbench(config)
    return [key.private_key for key in (*bench.agents, *bench.strangers)]


# ----------------------------------------------------------------------------- reference


def parse_line(raw: bytes) -> tuple[dict[str, Any] | None, float | None]:
    """``(event, received_at)`` of an archive line; ``(None, None)`` when it holds none."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, None
    if isinstance(value, dict) and "event" in value:
        at = value.get("received_at")
        if isinstance(at, bool) or not isinstance(at, int | float):
            return None, None
        return (value["event"], float(at)) if isinstance(value["event"], dict) else (None, None)
    if isinstance(value, dict):
        return value, None
    if (isinstance(value, list) and len(value) == 3 and value[0] == "EVENT"
            and isinstance(value[1], str) and isinstance(value[2], dict)):
        return value[2], None
    return None, None


def tag_values(event: dict[str, Any], name: str) -> list[str]:
    return [tag[1] for tag in event["tags"] if tag[0] == name and len(tag) > 1]


def address_on_prefix(pubkey_hex: str, claimed: object) -> str:
    """The taproot address of a key on the network ``claimed``'s prefix names."""
    try:
        network = decode_p2tr(claimed).network
    except IdentityInvalid:
        network = "mainnet"
    return p2tr_address(bytes.fromhex(pubkey_hex), network)


class ReferenceNostr:
    """Verdicts of an events file from the rules (see the module docstring)."""

    def __init__(self, keyring: list[bytes], stored_clock: str = "event") -> None:
        self.keys = {internal_pubkey(key).hex(): key for key in keyring}
        self.stored_clock = stored_clock

    def decide(self, lines: list[bytes]) -> list[tuple[str, int | None]]:
        verdicts: list[tuple[str, int | None]] = []
        seen: set[str] = set()
        cards: list[tuple[int, dict[str, Any]]] = []
        inner_lines: list[tuple[int, bytes]] = []
        for raw in lines:
            event, received_at = parse_line(raw)
            verdicts.append(self.event_verdict(event, received_at, seen, cards, inner_lines,
                                               len(verdicts)))
        # the inner messages that reached verification, in receipt (= line) order
        results = check_lines([line for _, line in inner_lines], ReceiptClock.refuse())
        for (index, _), result in zip(inner_lines, results, strict=True):
            code = result.error_code
            verdicts[index] = ("valid", None) if code is None else ("inner_invalid", code)
        groups: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
        for index, event in cards:
            groups.setdefault((event["pubkey"], tag_values(event, "d")[0]), []).append(
                (index, event))
        for group in groups.values():
            standing = min(group, key=lambda pair: card_sort_key(pair[1]))
            for index, _ in group:
                if index != standing[0]:
                    verdicts[index] = ("superseded", None)
        return verdicts

    def event_verdict(self, event: dict[str, Any] | None, received_at: float | None,
                      seen: set[str], cards: list[tuple[int, dict[str, Any]]],
                      inner_lines: list[tuple[int, bytes]],
                      index: int) -> tuple[str, int | None]:
        verdict, _ = check_event(event)
        if verdict != "ok":
            return verdict, None
        assert event is not None
        if event["id"] in seen:
            return "duplicate_event", None
        seen.add(event["id"])
        if event["kind"] == 31337:
            card_verdict, _ = check_card_event(event)
            if card_verdict == "valid":
                cards.append((index, event))
            return card_verdict, None
        if event["kind"] not in (4339, 21339):  # stored and ephemeral SNAP messages alike
            return "malformed", None
        expiration = tag_values(event, "expiration")
        if expiration:
            assert received_at is not None, "an expiring event needs a receipt time"
            if int(expiration[0]) < received_at:
                return "expired", None
        recipient = tag_values(event, "p")[0]
        if recipient not in self.keys:
            return "encrypted", None
        try:
            plaintext = nostr_sdk.nip44_decrypt(
                nostr_sdk.SecretKey.from_bytes(self.keys[recipient]),
                nostr_sdk.PublicKey.parse(event["pubkey"]), event["content"])
        except Exception:  # nostr-sdk raises its own error types
            return "decrypt_failed", None
        inner = json.loads(plaintext)
        if inner["from"] != address_on_prefix(event["pubkey"], inner["from"]):
            return "from_mismatch", None
        if inner.get("to") != address_on_prefix(recipient, inner.get("to")):
            return "recipient_mismatch", None
        assert received_at is not None, "an inner message needs a receipt time"
        at = event["created_at"] if self.stored_clock == "event" else received_at
        inner_lines.append((index, json.dumps({"received_at": at, "message": inner}).encode()))
        return "pending", None


# ----------------------------------------------------------------------------- labels


def test_every_label_matches_the_protocol_rules(
    written: tuple[NostrSample, str],
) -> None:
    sample, stem = written
    lines = Path(output_paths(stem)["events"]).read_bytes().split(b"\n")[:-1]
    assert lines == list(sample.lines)
    decided = ReferenceNostr(read_keyring(output_paths(stem)["keyring"])).decide(lines)
    wrong = [
        (label.line_no, label.scenario, (label.expected, label.inner_code), got)
        for label, got in zip(sample.labels, decided, strict=True)
        if (label.expected, label.inner_code) != got
    ]
    assert wrong == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_labels_match_the_rules_for_other_seeds_and_sizes(seed: int) -> None:
    config = NostrSampleConfig(agents=4 + seed, cards=8 * seed, messages=60, well_known=6,
                               seed=seed, testnet_share=0.5)
    sample = generate_nostr(config)
    decided = ReferenceNostr(list(sample.keyring)).decide(list(sample.lines))
    assert [(lab.expected, lab.inner_code) for lab in sample.labels] == decided


def test_labels_match_the_rules_under_the_received_clock() -> None:
    config = NostrSampleConfig(cards=10, messages=200, seed=4, stored_clock="received")
    sample = generate_nostr(config)
    assert any(lab.scenario == "late_fetch" and lab.inner_code == 2004
               for lab in sample.labels)
    decided = ReferenceNostr(list(sample.keyring), "received").decide(list(sample.lines))
    assert [(lab.expected, lab.inner_code) for lab in sample.labels] == decided


def test_labels_file_has_one_label_per_line_in_order(written: tuple[NostrSample, str]) -> None:
    sample, stem = written
    rows = [json.loads(row) for row in Path(output_paths(stem)["labels"]).read_text().splitlines()]
    assert [row["line_no"] for row in rows] == list(range(1, len(sample.lines) + 1))
    assert list(rows[0]) == ["line_no", "event_id", "kind", "expected", "inner_code", "why",
                             "scenario", "form"]
    assert rows == [label.to_plain() for label in sample.labels]
    for row, raw in zip(rows, sample.lines, strict=True):
        event, _ = parse_line(raw)
        if row["event_id"] is not None:
            assert row["event_id"].encode() in raw
        if event is not None and row["expected"] != "malformed":
            assert row["event_id"] == event["id"] and row["kind"] == event["kind"]
        assert (row["inner_code"] is not None) == (row["expected"] == "inner_invalid")
        assert row["why"]


def test_label_counts_cover_the_vocabulary(sample: NostrSample) -> None:
    counts = sample.counts()
    assert set(counts) == set(EVENT_LABELS)
    assert counts["valid"] > len(sample.lines) // 4
    inner = Counter(lab.inner_code for lab in sample.labels if lab.expected == "inner_invalid")
    assert set(inner) == {1004, 2001, 2002, 2004, 2006}
    assert Counter(lab.form for lab in sample.labels).keys() == {"envelope", "event", "frame",
                                                                 "garbage"}
    garbage = {lab.scenario.split("/", 1)[1] for lab in sample.labels
               if lab.scenario.startswith("garbage/")}
    assert garbage == set(GARBAGE)
    assert sum(counts.values()) == len(sample.lines)
    whys = [lab.why for lab in sample.labels if lab.expected == "superseded"]
    assert any(why.startswith("same created_at") for why in whys)  # the lower-id tie rule
    assert any(why.startswith("an older card") for why in whys)
    assert sum(1 for lab in sample.labels if lab.kind in (4339, 21339)
               and lab.scenario not in ("duplicate", "forged_copy")) == CONFIG.messages
    assert sum(1 for lab in sample.labels if lab.kind == 31337
               and lab.form != "garbage"
               and lab.scenario not in ("duplicate", "forged_copy")) == CONFIG.cards


def test_bare_events_and_frames_only_where_no_receipt_time_is_needed(sample: NostrSample) -> None:
    for label, raw in zip(sample.labels, sample.lines, strict=True):
        if label.form in ("event", "frame"):
            event, received_at = parse_line(raw)
            assert event is not None and received_at is None
            if label.kind in (4339, 21339):
                assert label.expected not in ("valid", "expired", "inner_invalid")
                if label.expected not in ("bad_event_id", "bad_event_sig"):
                    assert not tag_values(event, "expiration")
            else:
                assert label.kind == 31337


def test_duplicates_and_forged_copies(sample: NostrSample) -> None:
    by_id: dict[str, list[tuple[int, str]]] = {}
    for label, raw in zip(sample.labels, sample.lines, strict=True):
        if label.event_id is not None and label.expected != "malformed":
            by_id.setdefault(label.event_id, []).append((label.line_no, label.expected))
        if label.expected == "duplicate_event":
            envelope = json.loads(raw)
            first = next(r for lab, r in zip(sample.labels, sample.lines, strict=True)
                         if lab.event_id == label.event_id and lab.scenario != "forged_copy")
            assert json.loads(first)["event"] == envelope["event"]
            assert json.loads(first)["relay"] != envelope["relay"]
    forged = [lab for lab in sample.labels if lab.scenario == "forged_copy"]
    assert {lab.expected for lab in forged} == {"bad_event_id", "bad_event_sig"}
    # a forged copy received first never shadows the genuine event with the same id
    shadowed = 0
    for label in forged:
        copies = by_id[label.event_id or ""]
        genuine = [verdict for _, verdict in copies
                   if verdict not in ("bad_event_id", "bad_event_sig", "duplicate_event")]
        assert len(genuine) == 1
        shadowed += copies[0][0] == label.line_no
    assert shadowed >= 1


def test_replays_and_late_messages_say_what_they_assume(sample: NostrSample) -> None:
    whys = {lab.inner_code: lab.why for lab in sample.labels if lab.expected == "inner_invalid"
            and lab.scenario in ("inner_replay", "late_fetch")}
    assert "2006" in whys[2006] and "accepted" in whys[2006]
    assert "created_at" in whys[2004] and "drift" in whys[2004]


def test_ephemeral_events_get_every_message_scenario(sample: NostrSample) -> None:
    """Kind 21339 (ephemeral) carries a share of the messages, with the variety of 4339."""
    assert (STORED_KIND, EPHEMERAL_KIND) == MESSAGE_KINDS == (4339, 21339)
    kinds = Counter(lab.kind for lab in sample.labels
                    if lab.kind in MESSAGE_KINDS and lab.scenario not in ("duplicate",
                                                                          "forged_copy"))
    assert 0.2 * CONFIG.messages < kinds[21339] < 0.5 * CONFIG.messages
    ephemeral = [lab for lab in sample.labels if lab.kind == 21339]
    stored = [lab for lab in sample.labels if lab.kind == 4339]
    assert {lab.expected for lab in ephemeral} == {lab.expected for lab in stored} == {
        "duplicate_event", "bad_event_id", "bad_event_sig", "expired", "encrypted",
        "decrypt_failed", "from_mismatch", "recipient_mismatch", "inner_invalid", "valid"}
    assert {lab.inner_code for lab in ephemeral if lab.inner_code} == {
        1004, 2001, 2002, 2004, 2006}
    # every scenario of the messages part, the extra lines' copies included
    assert {lab.scenario.split("/")[0] for lab in ephemeral} == {
        lab.scenario.split("/")[0] for lab in stored}
    # offline retrieval (an event fetched from a relay long after it was sent) is a 4339
    late = [lab for lab in sample.labels if lab.scenario == "late_fetch"
            and lab.expected == "valid"]
    assert late and all(lab.kind == 4339 for lab in late)


def test_a_replay_pair_may_mix_the_two_kinds() -> None:
    """The same inner message in a 21339 and a 4339: a replay pair like any two copies."""
    pairs = set()
    for seed in (5, 11):
        sample = generate_nostr(NostrSampleConfig(cards=10, messages=300, seed=seed))
        by_line = {lab.line_no: lab for lab in sample.labels}
        for lab in sample.labels:
            if lab.scenario == "inner_replay" and lab.inner_code == 2006:
                first = by_line[int(re.findall(r"line (\d+)", lab.why)[0])]
                assert first.expected == "valid"
                pairs.add((first.kind, lab.kind))
    assert {(4339, 21339), (21339, 4339)} & pairs


def test_no_ephemeral_share_makes_only_stored_messages() -> None:
    sample = generate_nostr(NostrSampleConfig(agents=5, cards=10, messages=40, well_known=8,
                                              seed=2, ephemeral_share=0.0))
    assert {lab.kind for lab in sample.labels if lab.kind in MESSAGE_KINDS} == {4339}
    decided = ReferenceNostr(list(sample.keyring)).decide(list(sample.lines))
    assert [(lab.expected, lab.inner_code) for lab in sample.labels] == decided
    with pytest.raises(ValueError, match="ephemeral_share"):
        NostrSampleConfig(ephemeral_share=1.5)


def test_same_seed_same_bytes_and_another_seed_differs() -> None:
    first, second = generate_nostr(SMALL), generate_nostr(SMALL)
    assert first.lines == second.lines and first.labels == second.labels
    assert [d.data for d in first.well_known] == [d.data for d in second.well_known]
    other = generate_nostr(NostrSampleConfig(agents=5, cards=10, messages=40, well_known=8,
                                             seed=3))
    assert other.lines != first.lines


def test_written_files_are_identical_for_a_seed(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_nostr_sample(SMALL, str(tmp_path / name))
    for key in ("events", "labels", "keyring", "well_known_labels"):
        a, b = output_paths(str(tmp_path / "a"))[key], output_paths(str(tmp_path / "b"))[key]
        assert Path(a).read_bytes() == Path(b).read_bytes()


# ----------------------------------------------------------------------------- keys


def test_keyring_is_0600_and_holds_only_keyring_recipients(
    written: tuple[NostrSample, str],
) -> None:
    sample, stem = written
    path = output_paths(stem)["keyring"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = Path(path).read_text()
    assert text.startswith("#")
    keys = read_keyring(path)
    assert keys == list(sample.keyring)
    assert [internal_pubkey(k).hex() for k in keys] == list(sample.keyring_pubkeys)
    outsiders = [k for k in all_private_keys(CONFIG) if k not in keys]
    assert len(outsiders) >= 3
    assert not any(k.hex() in text for k in outsiders)
    # every `encrypted` event is addressed to, and sent by, a key outside the keyring
    for label, raw in zip(sample.labels, sample.lines, strict=True):
        if label.expected == "encrypted":
            event, _ = parse_line(raw)
            assert event is not None
            assert tag_values(event, "p")[0] not in sample.keyring_pubkeys
            assert event["pubkey"] not in sample.keyring_pubkeys


def test_keyring_mode_is_0600_even_over_an_open_file(tmp_path: Path) -> None:
    stem = str(tmp_path / "s")
    Path(stem + ".keyring").write_text("old")
    os.chmod(stem + ".keyring", 0o644)
    write_nostr_sample(SMALL, stem)
    assert stat.S_IMODE(os.stat(stem + ".keyring").st_mode) == 0o600


def test_no_private_key_outside_the_keyring(written: tuple[NostrSample, str]) -> None:
    _, stem = written
    paths = output_paths(stem)
    blobs = [Path(paths[k]).read_bytes() for k in ("events", "labels", "well_known_labels")]
    blobs += [p.read_bytes() for p in Path(paths["well_known"]).rglob("*") if p.is_file()]
    for key in all_private_keys(CONFIG):
        for spelling in (key.hex(), key.hex().upper()):
            assert not any(spelling.encode() in blob for blob in blobs)
    sample = generate_nostr(SMALL)
    assert all(k.hex() not in repr(sample) for k in sample.keyring)


def test_nip44_content_decrypts_with_nostr_sdk_to_the_inner_message(sample: NostrSample) -> None:
    keys = {internal_pubkey(k).hex(): k for k in sample.keyring}
    checked = 0
    for label, raw in zip(sample.labels, sample.lines, strict=True):
        if label.kind not in (4339, 21339) or label.expected not in ("valid", "inner_invalid"):
            continue
        event, _ = parse_line(raw)
        assert event is not None
        recipient = tag_values(event, "p")[0]
        inner = json.loads(nostr_sdk.nip44_decrypt(
            nostr_sdk.SecretKey.from_bytes(keys[recipient]),
            nostr_sdk.PublicKey.parse(event["pubkey"]), event["content"]))
        assert inner["to"] == address_on_prefix(recipient, inner["to"])
        if label.expected == "valid" and "sig" in inner:
            assert verify_message(inner)
        checked += 1
    assert checked > 100


# ----------------------------------------------------------------------------- NIP-44


def test_nip44_official_vector() -> None:
    one, two = (1).to_bytes(32, "big"), (2).to_bytes(32, "big")
    key = nip44_conversation_key(one, internal_pubkey(two).hex())
    assert key.hex() == "c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d"
    assert key == nip44_conversation_key(two, internal_pubkey(one).hex())
    assert nip44_encrypt("a", key, (1).to_bytes(32, "big")) == (
        "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABee0G5VSK0/9YypIObAtDKfYEAjD35uVkHyB0F4DwrcNa"
        "CXlCWZKaArsGrY6M9wnuTMxWfp1RTN9Xga8no+kF5Vsb"
    )


def test_nip44_padding_table() -> None:
    table = {16: 32, 32: 32, 33: 64, 37: 64, 45: 64, 49: 64, 64: 64, 65: 96, 100: 128,
             111: 128, 200: 224, 250: 256, 320: 320, 383: 384, 384: 384, 400: 448, 500: 512,
             512: 512, 515: 640, 700: 768, 800: 896, 900: 1024, 1020: 1024, 65536: 65536}
    assert {n: nip44_padded_length(n) for n in table} == table


@settings(max_examples=25)
@given(text=st.text(min_size=1, max_size=400), seed=st.integers(1, 2**32),  # no surrogates
       nonce=st.binary(min_size=32, max_size=32))
def test_nip44_encrypt_round_trips_through_nostr_sdk(text: str, seed: int, nonce: bytes) -> None:
    sender, recipient = seed.to_bytes(32, "big"), (seed + 1).to_bytes(32, "big")
    payload = nip44_encrypt(text, nip44_conversation_key(sender, internal_pubkey(recipient).hex()),
                            nonce)
    plain = nostr_sdk.nip44_decrypt(nostr_sdk.SecretKey.from_bytes(recipient),
                                    nostr_sdk.PublicKey.from_bytes(internal_pubkey(sender)),
                                    payload)
    assert plain == text


def test_nip44_refuses_empty_and_oversized_plaintext() -> None:
    with pytest.raises(ValueError):
        nip44_encrypt("", bytes(32), bytes(32))
    with pytest.raises(ValueError):
        nip44_encrypt("x" * 65536, bytes(32), bytes(32))


# ----------------------------------------------------------------------------- well-known


def test_well_known_documents_match_verify_signed_card(
    written: tuple[NostrSample, str],
) -> None:
    _, stem = written
    paths = output_paths(stem)
    rows = [json.loads(r) for r in Path(paths["well_known_labels"]).read_text().splitlines()]
    assert len(rows) == CONFIG.well_known
    for row in rows:
        data = (Path(paths["well_known"]) / row["file"]).read_bytes()
        try:
            verdict = verify_signed_card(json.loads(data))[0]
        except (UnicodeDecodeError, ValueError):
            verdict = "malformed"
        assert verdict == row["expected"], row
    assert set(Counter(r["expected"] for r in rows)) == set(WELL_KNOWN_LABELS)
    assert sorted(p.parent.name for p in Path(paths["well_known"]).glob("*/snap-agent.json")) \
        == sorted(r["file"].split("/")[0] for r in rows)


def test_a_smaller_rerun_leaves_no_stale_documents(tmp_path: Path) -> None:
    stem = str(tmp_path / "s")
    write_nostr_sample(NostrSampleConfig(agents=4, cards=2, messages=4, well_known=9), stem)
    write_nostr_sample(NostrSampleConfig(agents=4, cards=2, messages=4, well_known=3), stem)
    assert len(list(Path(stem + ".well-known").glob("*/snap-agent.json"))) == 3


# ----------------------------------------------------------------------------- CLI


def test_cli_sample_nostr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stem = str(tmp_path / "out" / "n")
    assert cli.main(["sample", "--nostr", stem, "--cards", "6", "--messages", "30",
                     "--well-known", "6", "--agents", "4", "--seed", "9"]) == 0
    err = capsys.readouterr().err
    assert "valid" in err and "well-known" in err
    keys = read_keyring(stem + ".keyring")
    assert keys and not any(k.hex() in err for k in keys)
    labels = Path(stem + ".labels.jsonl").read_text().splitlines()
    assert len(labels) == len(Path(stem + ".events.jsonl").read_bytes().split(b"\n")) - 1
    expected = generate_nostr(NostrSampleConfig(agents=4, cards=6, messages=30, well_known=6,
                                                seed=9))
    assert Path(stem + ".events.jsonl").read_bytes() == b"".join(
        line + b"\n" for line in expected.lines)


@pytest.mark.parametrize("extra", [["--out", "x.jsonl"], ["--labels", "l.jsonl"],
                                   ["--agents", "3"]])
def test_cli_sample_nostr_usage_errors(tmp_path: Path, extra: list[str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    stem = str(tmp_path / "n")
    assert cli.main(["sample", "--nostr", stem, *extra]) == cli.EXIT_USAGE
    assert not Path(stem + ".events.jsonl").exists()


def test_cli_sample_without_nostr_still_needs_out(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["sample", "--messages", "5"]) == cli.EXIT_USAGE
    assert cli.main(["sample", "--out", "x.jsonl", "--cards", "5"]) == cli.EXIT_USAGE


def test_mismatched_events_carry_an_otherwise_valid_inner_message(sample: NostrSample) -> None:
    """So their label holds whichever order a checker takes the 4339 checks in."""
    keys = {internal_pubkey(k).hex(): k for k in sample.keyring}
    seen = Counter()
    for label, raw in zip(sample.labels, sample.lines, strict=True):
        if label.expected not in ("from_mismatch", "recipient_mismatch") or label.form == "garbage":
            continue
        event, _ = parse_line(raw)
        assert event is not None
        inner = json.loads(nostr_sdk.nip44_decrypt(
            nostr_sdk.SecretKey.from_bytes(keys[tag_values(event, "p")[0]]),
            nostr_sdk.PublicKey.parse(event["pubkey"]), event["content"]))
        assert verify_message(inner)
        assert inner["from"][:4] == inner["to"][:4]
        seen[label.expected] += 1
    assert seen["from_mismatch"] > 5 and seen["recipient_mismatch"] > 3
