"""jobs/ingest_nostr.py end to end, on real Spark and real Delta tables (both backends), from
archives of the labelled Nostr sample and from a real relay process.

The expected verdicts are the sample's labels (what its generator built on purpose, never
computed by the pipeline's rules); the standing card of each identity is worked out here from
those labels alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from snap_spark.common.placement import ENV as LIMITS_ENV
from snap_spark.nostr.client import fetch_events, publish_events
from snap_spark.nostr.ingest import ingest
from snap_spark.nostr.lines import event_from_line
from snap_spark.nostr.stored import Keyring
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.keys import internal_pubkey, p2tr_address
from snap_spark.protocol.nostr import sign_event
from snap_spark.protocol.signing import sign_message
from snap_spark.protocol.validate import MissingReceiptTime, ReceiptClock
from snap_spark.samples.nostr import (
    NostrSampleConfig,
    nip44_conversation_key,
    nip44_encrypt,
    output_paths,
    write_nostr_sample,
)
from snap_spark.settings import VerifySettings
from tests.driver_limits import set_limits
from tests.lake.helpers import delta_rows, use_backend
from tests.nostr.conftest import PRIV_A, PRIV_B, card_event

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLES = ("nostr_events", "agent_card_history", "agent_cards", "messages")
PER_RUN = ("ingest_id", "ingest_time")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str]]]:
    stem = str(tmp_path_factory.mktemp("nostr") / "s")
    made = write_nostr_sample(NostrSampleConfig(cards=24, messages=160, well_known=12,
                                                seed=5), stem)
    yield made, output_paths(stem)


def table(lake: Path, name: str) -> list[dict[str, Any]]:
    got = delta_rows(lake / name)
    for row in got:
        if "event_date" in row and row["event_time"] is None and row["received_time"] is None:
            # a message landed without a time is dated by its landing's day, which differs
            # between two lakes landed across midnight (UTC)
            assert row["event_date"] == row["ingest_time"].date(), row
            row["event_date"] = "the landing's day"
        for column in PER_RUN:
            row.pop(column, None)
    return got


def by_origin(lake: Path) -> dict[str, dict[str, Any]]:
    return {origin: row for row in table(lake, "nostr_events") for origin in row["origins"]}


def check_against_labels(lake: Path, made: Any, paths: dict[str, str]) -> None:
    rows = by_origin(lake)
    wrong = []
    for label in made.labels:
        row = rows[f"{paths['events']}:{label.line_no}"]
        if label.expected == "duplicate_event":  # folded into the genuine event's row
            ok = row["event_key"] == label.event_id and row["copies"] >= 2
        else:
            ok = (row["verdict"], row["error_code"]) == (label.expected, label.inner_code)
        if not ok:
            wrong.append((label.line_no, label.scenario, label.expected, row["verdict"]))
    assert wrong == []
    history = {r["origin"]: r for r in table(lake, "agent_card_history")
               if r["source"] == "well-known"}
    folder = paths["well_known"]
    labels = [json.loads(line) for line in Path(paths["well_known_labels"]).read_text()
              .splitlines()]
    assert sorted((history[f"{folder}/{w['file']}"]["verdict"], w["expected"])
                  for w in labels) == sorted((w["expected"], w["expected"]) for w in labels)


def standing_cards(made: Any, paths: dict[str, str]) -> dict[str, str]:
    """identity -> card key that must stand, from the labels: the Nostr card labelled valid,
    unless a valid well-known document of the identity is newer (or as new, with a lower
    key)."""
    events = {}
    for raw, label in zip(made.lines, made.labels, strict=True):
        if label.kind == 31337 and label.expected == "valid":
            found = json.loads(raw)
            event = found.get("event", found) if isinstance(found, dict) else found[2]
            identity = next(t[1] for t in event["tags"] if t[0] == "d")
            events[identity] = (-event["created_at"], event["id"])
    for document in made.well_known:
        if document.expected == "valid":
            doc = json.loads(document.data)
            key = "well-known:" + hashlib.sha256(document.data).hexdigest()
            mine = (-doc["timestamp"], key)
            identity = doc["card"]["identity"]
            if identity not in events or mine < events[identity]:
                events[identity] = mine
    return {identity: key for identity, (_, key) in events.items()}


@pytest.mark.parametrize("backend", ["delta-rs", "delta-spark"])
def test_archive_verdicts_equal_the_labels_and_a_rerun_changes_nothing(
        spark: Any, tmp_path: Path, sample: tuple[Any, dict[str, str]], backend: str,
        capfd: pytest.CaptureFixture[str]) -> None:
    made, paths = sample
    lake = tmp_path / "lake"
    keyring = Keyring.load(paths["keyring"])
    with use_backend(spark, backend):
        first = ingest(spark, str(lake), inputs=[paths["events"]], keyring=keyring,
                       well_known=[paths["well_known"]])
        check_against_labels(lake, made, paths)
        assert first.copies == len(made.lines)
        cards = {r["identity"]: r["card_key"] for r in table(lake, "agent_cards")}
        assert cards == standing_cards(made, paths)
        stored = [lab for lab in made.labels  # both message kinds land their messages
                  if lab.kind in (4339, 21339) and lab.expected in ("valid", "inner_invalid")]
        assert {lab.kind for lab in stored} == {4339, 21339}
        assert first.messages_landed == len(stored)
        messages = table(lake, "messages")
        assert len(messages) == len(stored)
        assert sorted(m["error_code"] or 0 for m in messages) == sorted(
            lab.inner_code or 0 for lab in stored)
        before = {name: table(lake, name) for name in TABLES}
        again = ingest(spark, str(lake), inputs=[paths["events"]], keyring=keyring,
                       well_known=[paths["well_known"]])
    assert again.new_events == 0 and again.events == 0 and again.messages_landed == 0
    assert {name: table(lake, name) for name in TABLES} == before
    # the keyring never leaves its file
    secrets = [key.hex() for key in made.keyring]
    dumped = json.dumps({name: before[name] for name in TABLES}, default=str)
    output = capfd.readouterr()
    assert not any(s in dumped or s in output.out or s in output.err for s in secrets)


def test_archive_cut_in_two_runs_in_reverse_order_equals_one_run(
        spark: Any, tmp_path: Path, sample: tuple[Any, dict[str, str]]) -> None:
    _made, paths = sample
    keyring = Keyring.load(paths["keyring"])
    lines = Path(paths["events"]).read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"".join(lines[:half]))
    second.write_bytes(b"".join(lines[half:]))
    whole = tmp_path / "whole"
    ingest(spark, str(whole), inputs=[str(first), str(second)], keyring=keyring)
    cut = tmp_path / "cut"
    ingest(spark, str(cut), inputs=[str(second)], keyring=keyring)
    ingest(spark, str(cut), inputs=[str(first)], keyring=keyring)

    def verdicts(lake: Path) -> list[tuple[Any, ...]]:
        return sorted((r["event_key"], r["verdict"], r["error_code"], r["copies"],
                       r["first_received_at"]) for r in table(lake, "nostr_events"))

    assert verdicts(cut) == verdicts(whole)
    for name in ("agent_cards", "agent_card_history"):
        assert sorted(json.dumps(r, sort_keys=True, default=str) for r in table(cut, name)) \
            == sorted(json.dumps(r, sort_keys=True, default=str) for r in table(whole, name))
    assert sorted((m["msg_id"], m["verdict"], m["error_code"])
                  for m in table(cut, "messages")) == sorted(
        (m["msg_id"], m["verdict"], m["error_code"]) for m in table(whole, "messages"))


def test_bare_stored_messages_need_a_receipt_clock(spark: Any, tmp_path: Path,
                                                   sample: tuple[Any, dict[str, str]]) -> None:
    made, paths = sample
    bound = next(raw for raw, lab in zip(made.lines, made.labels, strict=True)
                 if lab.kind == 4339 and lab.expected == "valid")
    event = json.loads(bound)["event"]
    archive = tmp_path / "bare.jsonl"
    archive.write_text(json.dumps(event) + "\n")
    keyring = Keyring.load(paths["keyring"])
    with pytest.raises(MissingReceiptTime, match="--bare-clock"):
        ingest(spark, str(tmp_path / "lake"), inputs=[str(archive)], keyring=keyring)
    assert not (tmp_path / "lake" / "nostr_events").exists()
    ingest(spark, str(tmp_path / "lake"), inputs=[str(archive)], keyring=keyring,
           settings=VerifySettings(bare_clock="message"))
    (row,) = table(tmp_path / "lake", "nostr_events")
    assert row["verdict"] == "valid" and row["first_received_at"] is None


def test_live_from_a_relay_with_another_one_down(spark: Any, tmp_path: Path, relay: Any,
                                                  down_relay_url: str) -> None:
    now = int(time.time())
    old, new = card_event(PRIV_A, created_at=now - 50, name="Old"), card_event(
        PRIV_A, created_at=now - 10, name="New")
    other = card_event(PRIV_B, created_at=now - 20)
    # an impersonation: B signs a card whose d tag is A's identity
    identity_a = p2tr_address(internal_pubkey(PRIV_A))
    impostor = sign_event({"created_at": now - 5, "kind": 31337,
                           "tags": [["d", identity_a]], "content": old["content"]},
                          PRIV_B, aux=bytes(32))
    outcomes = publish_events(relay.url, [json.dumps(e) for e in (old, new, other, impostor)])
    assert [o.accepted for o in outcomes] == [True, True, True, True]
    lake = tmp_path / "lake"
    result = ingest(spark, str(lake), relays=[relay.url, down_relay_url], timeout=5.0)
    reports = {r["relay"]: r for r in result.relays}
    assert reports[relay.url]["error"] is None and reports[relay.url]["events"] == 3
    assert reports[down_relay_url]["error"] and reports[down_relay_url]["events"] == 0
    events = {r["event_key"]: r for r in table(lake, "nostr_events")}
    # the relay itself keeps only the newest card of A: the old one never reaches us
    assert {k: v["verdict"] for k, v in events.items()} == {
        new["id"]: "valid", other["id"]: "valid", impostor["id"]: "identity_mismatch"}
    assert all(v["relays"] == [relay.url] for v in events.values())
    cards = {r["identity"]: r for r in table(lake, "agent_cards")}
    assert cards[identity_a]["card_key"] == new["id"]
    assert cards[identity_a]["name"] == "New" and cards[identity_a]["rejected_cards"] == 1
    # the archive of the same events (with the old card, which the relay dropped) gives the
    # same standing cards, and a second live run resumes and adds nothing
    archive = tmp_path / "archive.jsonl"
    archive.write_text("".join(json.dumps({"received_at": now, "relay": relay.url,
                                           "event": e}) + "\n"
                               for e in (old, new, other, impostor)))
    offline = tmp_path / "offline"
    ingest(spark, str(offline), inputs=[str(archive)])
    assert {r["identity"]: r["card_key"] for r in table(offline, "agent_cards")} == {
        i: r["card_key"] for i, r in cards.items()}
    assert {r["event_key"]: r["verdict"] for r in table(offline, "nostr_events")} == {
        **{k: v["verdict"] for k, v in events.items()}, old["id"]: "superseded"}
    before = table(lake, "nostr_events")
    again = ingest(spark, str(lake), relays=[relay.url], timeout=5.0)
    assert again.relays[0]["since"] is not None and again.new_events == 0
    assert table(lake, "nostr_events") == before


def test_live_sample_events_get_their_labels(spark: Any, tmp_path: Path, relay: Any,
                                             sample: tuple[Any, dict[str, str]],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Every genuine SNAP event of the sample a relay keeps, published, fetched and
    ingested live, gets the verdict of its label. Left out: events with an expiration tag
    (the sample's are in the past by now, so the relay refuses them) and the replays of
    those; the relay itself keeps only the newest card per identity.

    Ephemeral messages (kind 21339) are published too, and the relay accepts them, but a
    relay never stores an ephemeral event (it only forwards it to the subscribers connected
    at that moment), so a fetch after publishing never returns one: they are expected
    ABSENT from the live run (asserted), and so are the events whose label depends on a
    21339 line (a replay of it). The archive run at the end gives them their labels."""
    made, paths = sample
    events: dict[int, dict[str, Any]] = {}
    for raw, label in zip(made.lines, made.labels, strict=True):
        event = event_from_line(raw).event
        if event is not None:
            events[label.line_no] = event

    def expiring(line_no: int) -> bool:
        tags = events[line_no].get("tags")
        return isinstance(tags, list) and any(
            isinstance(t, list) and t[:1] == ["expiration"] for t in tags)

    def ephemeral(line_no: int) -> bool:
        return events[line_no].get("kind") == 21339

    expected: dict[str, tuple[str, int | None]] = {}
    never_stored: set[str] = set()  # genuine 21339 events the relay accepts
    for label in made.labels:
        if label.expected in ("malformed", "bad_event_id", "bad_event_sig",
                              "duplicate_event", "superseded", "expired"):
            continue
        refs = [int(n) for n in re.findall(r"line (\d+)", label.why)]
        if expiring(label.line_no) or any(expiring(n) for n in refs):
            continue
        if ephemeral(label.line_no):
            never_stored.add(events[label.line_no]["id"])
            continue
        if any(ephemeral(n) for n in refs):
            continue
        expected[events[label.line_no]["id"]] = (label.expected, label.inner_code)
    assert len(never_stored) > 10
    published = [events[lab.line_no] for lab in made.labels
                 if events.get(lab.line_no, {}).get("id") in expected.keys() | never_stored]
    outcomes = publish_events(relay.url, [json.dumps(e) for e in published])
    accepted = {e["id"]: o.accepted for e, o in zip(published, outcomes, strict=True)}
    assert all(accepted[i] for i in never_stored)  # accepted (and forwarded), not stored
    assert sum(accepted[i] for i in expected) >= len(expected) - 8  # replaced cards only
    # the relay holds none of them: even a fetch that asks for kind 21339 gets none
    (fetched,) = fetch_events([relay.url], kinds=[21339, 4339], timeout=10.0)
    assert fetched.error is None and fetched.events
    assert not {json.loads(e.event_json)["id"] for e in fetched.events} & never_stored
    lake = tmp_path / "lake"
    ingest(spark, str(lake), relays=[relay.url], keyring=Keyring.load(paths["keyring"]),
           timeout=10.0)
    got = {r["event_key"]: (r["verdict"], r["error_code"])
           for r in table(lake, "nostr_events")}
    assert not never_stored & set(got)  # ephemeral events never come from a fetch
    assert got == {k: v for k, v in expected.items() if k in got}
    # those few deliveries were checked on the driver; checked in Spark tasks instead
    # (another lake, the same relay), they get the same verdicts
    with monkeypatch.context() as patched:
        set_limits(patched, land_bytes="spark")
        ingest(spark, str(tmp_path / "in-spark"), relays=[relay.url],
               keyring=Keyring.load(paths["keyring"]), timeout=10.0)
    assert {r["event_key"]: (r["verdict"], r["error_code"])
            for r in table(tmp_path / "in-spark", "nostr_events")} == got
    stored = {k for k, v in expected.items() if v[0] not in (
        "valid", "identity_mismatch", "invalid_card", "card_identity_mismatch")
        or v[1] is not None}
    assert stored <= set(got)  # stored messages are never replaced by the relay
    # (a card of an identity's own key that a newer card replaced is gone from the relay,
    # broken or not: invalid_card and card_identity_mismatch are covered by the archive)
    assert {v for v, _ in got.values()} >= {
        "valid", "inner_invalid", "encrypted", "decrypt_failed", "from_mismatch",
        "recipient_mismatch", "identity_mismatch"}
    # then the archive of every event (what the relay refused or dropped included): the
    # lake ends as the archive alone would leave it, replays decided across both runs
    ingest(spark, str(lake), inputs=[paths["events"]], keyring=Keyring.load(paths["keyring"]),
           well_known=[paths["well_known"]])
    check_against_labels(lake, made, paths)


def test_an_earlier_copy_of_an_expired_stored_message_decides_it_again(
        spark: Any, tmp_path: Path, sample: tuple[Any, dict[str, str]]) -> None:
    made, paths = sample
    raw = next(raw for raw, lab in zip(made.lines, made.labels, strict=True)
               if lab.scenario == "expired")
    event = event_from_line(raw).event
    assert event is not None
    expiration = int(next(t[1] for t in event["tags"] if t[0] == "expiration"))
    late, early = tmp_path / "late.jsonl", tmp_path / "early.jsonl"
    late.write_text(json.dumps({"received_at": expiration + 100, "relay": "wss://late",
                                "event": event}) + "\n")
    early.write_text(json.dumps({"received_at": event["created_at"] + 5,
                                 "relay": "wss://early", "event": event}) + "\n")
    keyring = Keyring.load(paths["keyring"])
    lake = tmp_path / "lake"
    ingest(spark, str(lake), inputs=[str(late)], keyring=keyring)
    (row,) = table(lake, "nostr_events")
    assert row["verdict"] == "expired"
    assert not (lake / "messages").exists()  # an expired event's message is not landed
    ingest(spark, str(lake), inputs=[str(early)], keyring=keyring)
    (row,) = table(lake, "nostr_events")
    assert (row["verdict"], row["relays"], row["copies"]) == (
        "valid", ["wss://early", "wss://late"], 2)
    assert row["first_received_at"] == event["created_at"] + 5
    (message,) = table(lake, "messages")
    assert message["verdict"] == "valid"
    # the other order gives the same row
    other = tmp_path / "other"
    ingest(spark, str(other), inputs=[str(early), str(late)], keyring=keyring)
    (again,) = table(other, "nostr_events")
    assert {k: again[k] for k in ("verdict", "relays", "copies", "first_received_at")} == {
        k: row[k] for k in ("verdict", "relays", "copies", "first_received_at")}


def test_a_stored_replay_seen_again_follows_its_message(
        spark: Any, tmp_path: Path, sample: tuple[Any, dict[str, str]]) -> None:
    """The replay copy of a stored message landed alone is valid; once the original arrives
    (with the replay copy again, as a relay would serve both), the copy's event follows its
    message to 2006."""
    made, paths = sample
    lines = Path(paths["events"]).read_bytes().splitlines(keepends=True)
    replay = next(lab for lab in made.labels
                  if lab.scenario == "inner_replay" and lab.inner_code == 2006)
    original = int(re.findall(r"line (\d+)", replay.why)[0])
    first, both = tmp_path / "replay.jsonl", tmp_path / "both.jsonl"
    first.write_bytes(lines[replay.line_no - 1])
    both.write_bytes(lines[original - 1] + lines[replay.line_no - 1])
    keyring = Keyring.load(paths["keyring"])
    lake = tmp_path / "lake"
    ingest(spark, str(lake), inputs=[str(first)], keyring=keyring)
    assert [r["verdict"] for r in table(lake, "nostr_events")] == ["valid"]
    ingest(spark, str(lake), inputs=[str(both)], keyring=keyring)
    got = {r["event_key"]: (r["verdict"], r["error_code"], r["copies"])
           for r in table(lake, "nostr_events")}
    assert got[replay.event_id] == ("inner_invalid", 2006, 2)
    assert sorted(m["error_code"] or 0 for m in table(lake, "messages")) == [0, 2006]


# -- kind 21339 (ephemeral SNAP messages) ----------------------------------------------------

SENT = 1_770_163_200  # the inner messages' timestamp
PRIV_C = bytes.fromhex("0c" * 32)  # a key the keyring does not hold
PUB_B, PUB_C = internal_pubkey(PRIV_B).hex(), internal_pubkey(PRIV_C).hex()


def snap_message(number: int, *, to: bytes = PRIV_B, edited: bool = False) -> dict[str, Any]:
    """A signed SNAP request from A to ``to`` (its payload changed after signing when
    ``edited``: a 2001)."""
    message = sign_message({
        "id": f"msg-{number}", "version": "0.1", "from": p2tr_address(internal_pubkey(PRIV_A)),
        "to": p2tr_address(internal_pubkey(to)), "type": "request", "method": "message/send",
        "payload": {"message": {"messageId": f"m-{number}", "role": "user",
                                "parts": [{"text": "hello"}]}},
        "timestamp": SENT}, PRIV_A, aux=bytes(32))
    if edited:
        message["payload"]["message"]["parts"][0]["text"] = "hello (edited)"
    return message


def snap_event(kind: int, inner: dict[str, Any], *, created: int, wrapper: bytes = PRIV_A,
               for_key: str = PUB_B, p: str = PUB_B, expiration: int | None = None
               ) -> dict[str, Any]:
    """``inner`` NIP-44 encrypted by ``wrapper`` for ``for_key`` in a signed event of
    ``kind``, p-tagged ``p``."""
    content = nip44_encrypt(orjson.dumps(inner).decode(),
                            nip44_conversation_key(wrapper, for_key), bytes(range(32)))
    tags = [["p", p]] + ([["expiration", str(expiration)]] if expiration is not None else [])
    return sign_event({"created_at": created, "kind": kind, "tags": tags, "content": content},
                      wrapper, aux=bytes(32))


def envelope(event: dict[str, Any], received: float) -> str:
    return json.dumps({"received_at": received, "relay": "wss://relay.example",
                       "event": event}) + "\n"


#: scenario -> (event of a kind, receipt time, the verdict and code it must get): every
#: check of a SNAP message event, the receipt clock being the event's created_at (default)
MESSAGE_CASES: dict[str, tuple[Any, float, tuple[str, int | None]]] = {
    "valid": (lambda k: snap_event(k, snap_message(1), created=SENT + 1), SENT + 3,
              ("valid", None)),
    "inner signature": (lambda k: snap_event(k, snap_message(2, edited=True), created=SENT + 1),
                        SENT + 3, ("inner_invalid", 2001)),
    "wrapped late": (lambda k: snap_event(k, snap_message(3), created=SENT + 100), SENT + 101,
                     ("inner_invalid", 2004)),
    "encrypted": (lambda k: snap_event(k, snap_message(4, to=PRIV_C), created=SENT + 1,
                                       for_key=PUB_C, p=PUB_C), SENT + 3, ("encrypted", None)),
    "expired": (lambda k: snap_event(k, snap_message(5), created=SENT + 1,
                                     expiration=SENT + 30), SENT + 100, ("expired", None)),
    "in time": (lambda k: snap_event(k, snap_message(6), created=SENT + 1,
                                     expiration=SENT + 30), SENT + 30, ("valid", None)),
    "decrypt_failed": (lambda k: snap_event(k, snap_message(7), created=SENT + 1,
                                            for_key=PUB_C), SENT + 3, ("decrypt_failed", None)),
    "from_mismatch": (lambda k: snap_event(k, snap_message(8), created=SENT + 1,
                                           wrapper=PRIV_C), SENT + 3, ("from_mismatch", None)),
    "recipient_mismatch": (lambda k: snap_event(k, snap_message(9, to=PRIV_C),
                                                created=SENT + 1),
                           SENT + 3, ("recipient_mismatch", None)),
    "tampered": (lambda k: {**snap_event(k, snap_message(10), created=SENT + 1),
                            "created_at": SENT}, SENT + 3, ("bad_event_id", None)),
}


def test_ephemeral_messages_get_the_verdicts_of_stored_ones(spark: Any, tmp_path: Path) -> None:
    """An archive of kind-21339 events (envelopes with received_at) and the same events as
    kind 4339: every check gives the same verdict, the recipient column is filled, and the
    bound messages land in messages once."""
    keyring = Keyring([PRIV_B])
    names = sorted(MESSAGE_CASES)
    rows: dict[int, dict[str, dict[str, Any]]] = {}
    lakes = {}
    for kind in (4339, 21339):
        archive = tmp_path / f"kind-{kind}.jsonl"
        events = [MESSAGE_CASES[name][0](kind) for name in names]
        archive.write_text("".join(envelope(event, MESSAGE_CASES[name][1])
                                   for name, event in zip(names, events, strict=True)))
        lakes[kind] = tmp_path / f"lake-{kind}"
        result = ingest(spark, str(lakes[kind]), inputs=[str(archive)], keyring=keyring)
        assert result.messages_landed == 4
        found = by_origin(lakes[kind])
        rows[kind] = {name: found[f"{archive}:{n}"] for n, name in enumerate(names, start=1)}
        assert {name: (r["kind"], r["recipient"]) for name, r in rows[kind].items()} == {
            name: (kind, PUB_C if name == "encrypted" else PUB_B) for name in names}
        assert all(r["event_id"] == e["id"] for r, e in zip(
            (rows[kind][name] for name in names), events, strict=True))
    for kind in (4339, 21339):
        assert {name: (r["verdict"], r["error_code"]) for name, r in rows[kind].items()} == {
            name: case[2] for name, case in MESSAGE_CASES.items()}, kind

    def same(row: dict[str, Any]) -> dict[str, Any]:  # what does not name the event itself
        # (the detail of a bad_event_id names the id the fields hash to)
        return {k: v for k, v in row.items() if k in (
            "verdict", "error_code", "recipient", "expiration", "copies", "first_received_at",
            "relays") or (k == "error_detail" and row["verdict"] != "bad_event_id")}

    assert {n: same(r) for n, r in rows[21339].items()} == {
        n: same(r) for n, r in rows[4339].items()}
    # the bound ones landed in messages, once each, with the event as their source
    landed = {kind: sorted((m["msg_id"], m["verdict"], m["error_code"])
                           for m in table(lakes[kind], "messages")) for kind in lakes}
    assert landed[21339] == landed[4339] == [
        ("msg-1", "valid", None), ("msg-2", "rejected", 2001), ("msg-3", "rejected", 2004),
        ("msg-6", "valid", None)]
    sources = sorted(r["source"] for r in table(lakes[21339], "raw_messages"))
    assert sources == sorted(f"nostr:{r['event_id']}" for r in rows[21339].values()
                             if r["message_source"])
    # again: nothing new, nothing landed twice
    written = ("nostr_events", "messages", "raw_messages")  # (no card tables: no cards)
    before = {name: table(lakes[21339], name) for name in written}
    again = ingest(spark, str(lakes[21339]), inputs=[str(tmp_path / "kind-21339.jsonl")],
                   keyring=keyring)
    assert (again.new_events, again.events, again.messages_landed) == (0, 0, 0)
    assert {name: table(lakes[21339], name) for name in written} == before


def test_an_ephemeral_and_a_stored_event_of_one_message_are_a_replay_pair(
        spark: Any, tmp_path: Path) -> None:
    """The same inner message in a 21339 and in a 4339 event is two copies of one message:
    the one received later (the receipt clock: the event's created_at) is its replay, 2006,
    whichever kind it is. The expected codes come from the SNAP checker's replay rule
    (check_lines), not from the pipeline."""
    first, second = snap_message(1), snap_message(2)
    copies = [  # (event, received_at), in file order
        (snap_event(4339, first, created=SENT + 11), SENT + 12.0),  # the later copy of msg-1
        (snap_event(21339, first, created=SENT + 1), SENT + 2.0),
        (snap_event(4339, second, created=SENT + 1), SENT + 2.0),
        (snap_event(21339, second, created=SENT + 11), SENT + 12.0),  # the later one of msg-2
    ]
    reference = check_lines(
        [json.dumps({"received_at": event["created_at"], "message": inner}).encode()
         for (event, _), inner in zip(copies, (first, first, second, second), strict=True)],
        ReceiptClock.refuse())
    codes = [r.error_code for r in reference]
    assert codes == [2006, None, None, 2006]
    archive = tmp_path / "pairs.jsonl"
    archive.write_text("".join(envelope(event, at) for event, at in copies))
    lake = tmp_path / "lake"
    result = ingest(spark, str(lake), inputs=[str(archive)], keyring=Keyring([PRIV_B]))
    assert result.messages_landed == 4
    found = by_origin(lake)
    got = [(found[f"{archive}:{n}"]["kind"], found[f"{archive}:{n}"]["verdict"],
            found[f"{archive}:{n}"]["error_code"]) for n in range(1, 5)]
    assert got == [(4339, "inner_invalid", 2006), (21339, "valid", None),
                   (4339, "valid", None), (21339, "inner_invalid", 2006)]
    assert [code for _, _, code in got] == codes
    assert sorted((m["msg_id"], m["error_code"] or 0) for m in table(lake, "messages")) == [
        ("msg-1", 0), ("msg-1", 2006), ("msg-2", 0), ("msg-2", 2006)]


def test_garbage_and_huge_lines_become_rows_with_a_reason(spark: Any, tmp_path: Path) -> None:
    now = int(time.time())
    card = card_event(PRIV_A, created_at=now)
    huge_card = sign_event({"created_at": now, "kind": 31337, "tags": [["d", "x"]],
                            "content": "y" * 3_000_000}, PRIV_B, aux=bytes(32))
    lines = [
        b"\xff\xfe not utf-8",
        b'{"id": "ab", "kind": "31337"}',
        b"[" * 100_000,
        json.dumps({**card, "content": "z" * 5_000_000}).encode(),  # id no longer matches
        json.dumps(huge_card).encode(),
        json.dumps(sign_event({"created_at": now, "kind": 1, "tags": [], "content": "hi"},
                              PRIV_A, aux=bytes(32))).encode(),
        b"",
        json.dumps(card).encode(),
    ]
    archive = tmp_path / "garbage.jsonl"
    archive.write_bytes(b"\n".join(lines) + b"\n")
    lake = tmp_path / "lake"
    result = ingest(spark, str(lake), inputs=[str(archive)])
    assert result.copies == len(lines)
    rows = {origin.rsplit(":", 1)[1]: r for r in table(lake, "nostr_events")
            for origin in r["origins"]}
    assert {n: rows[n]["verdict"] for n in sorted(rows, key=int)} == {
        "1": "malformed", "2": "malformed", "3": "malformed", "4": "bad_event_id",
        "5": "identity_mismatch", "6": "malformed", "7": "malformed", "8": "valid"}
    assert all(r["error_detail"] for r in rows.values())
    assert "not a SNAP kind" in rows["6"]["error_detail"]


def _canonical(rows: Any) -> list[str]:
    """Rows as sorted JSON texts: values compared with their types' text (a timestamp with
    and without a zone, a date and its string differ)."""
    return sorted(json.dumps(r, sort_keys=True, default=repr) for r in rows)


@pytest.mark.parametrize("backend", ["delta-rs", "delta-spark"])
def test_lookups_on_the_driver_equal_the_spark_joins(
        spark: Any, tmp_path: Path, sample: tuple[Any, dict[str, str]], backend: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A small table is looked up on the driver (delta-rs and memory) instead of by Spark joins
    (lookup_rows), and a small archive's lines are checked there instead of in Spark tasks
    (land_bytes; both of snap_spark.common.placement). Two runs (the second re-decides rows of the
    first) made with every lookup in Spark land the same tables as on the driver; and each
    lookup those runs make (of nostr_events, agent_card_history, agent_cards and
    raw_messages, of the stored messages' verdicts, of the messages a run re-decides) is
    made on the driver too, at that moment, on the tables the backend wrote: the same rows,
    with the same types, every lookup finding rows at least once; so are the relays' resume
    points."""
    from snap_spark.nostr import ingest as module

    _made, paths = sample
    keyring = Keyring.load(paths["keyring"])
    lines = Path(paths["events"]).read_bytes().splitlines(keepends=True)
    halves = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    halves[0].write_bytes(b"".join(lines[len(lines) // 2:]))
    halves[1].write_bytes(b"".join(lines[:len(lines) // 2]))
    lakes = {"driver": tmp_path / "driver", "spark": tmp_path / "spark"}
    compared: dict[str, list[bool]] = {}  # lookup -> whether each one found rows
    replaying: list[bool] = []  # set while a lookup is made again on the driver

    def both_ways(name: str, real: Any) -> Any:
        def lookup(*args: Any, **kwargs: Any) -> Any:
            if replaying:  # (the lookups inside one made again: on the driver too)
                return real(*args, **kwargs)
            in_spark = real(*args, **kwargs)  # as the run asks (lookup_rows=spark)
            replaying.append(True)
            saved = os.environ[LIMITS_ENV]
            os.environ[LIMITS_ENV] = f"{saved},lookup_rows=100000"
            try:
                on_driver = real(*args, **{**kwargs, "local": True}
                                 if kwargs.get("local") is False else kwargs)
            finally:
                os.environ[LIMITS_ENV] = saved
                replaying.clear()
            what = f"{name} {Path(args[2]).name}" if name == "_lookup" else name
            got = [_canonical(list(x.items()) if isinstance(x, dict) else x)
                   for x in (in_spark, on_driver)]
            assert got[0] == got[1], (what, got)
            compared.setdefault(what, []).append(bool(in_spark))
            return in_spark
        return lookup

    with use_backend(spark, backend):
        for way, lake in lakes.items():
            # the lookups, the archive's lines and the stored messages' lines: on the
            # driver, or in Spark
            if way == "driver":
                set_limits(monkeypatch, lookup_rows=100_000, land_bytes=1_048_576)
            else:
                set_limits(monkeypatch, lookup_rows="spark", land_bytes="spark")
            if way == "spark":
                for name in ("_lookup", "_landed_messages", "_restated_rows"):
                    monkeypatch.setattr(module, name, both_ways(name, getattr(module, name)))
            for half in halves:  # the second run re-decides rows of the first
                ingest(spark, str(lake), inputs=[str(half)], keyring=keyring,
                       well_known=[paths["well_known"]])
        for name in TABLES:  # (the details that name an earlier line name its lake)
            assert [row.replace(str(lakes["driver"]), "LAKE") for row in
                    _canonical(table(lakes["driver"], name))] == \
                [row.replace(str(lakes["spark"]), "LAKE") for row in
                 _canonical(table(lakes["spark"], name))], name
        events = table(lakes["spark"], "nostr_events")
        relays = [*sorted({r for e in events for r in e["relays"] or ()}), "wss://none"]
        resumes = []
        for rows in ("spark", 100_000):
            set_limits(monkeypatch, lookup_rows=rows)
            resumes.append(module.resume_points(spark, str(lakes["spark"]), relays,
                                                time.time()))
    print({what: (len(found), sum(found)) for what, found in sorted(compared.items())})
    # every lookup compared found rows (resume points: of the relays the archive names)
    assert {what for what, found in compared.items() if any(found)} >= {
        "_lookup nostr_events", "_lookup agent_card_history", "_lookup agent_cards",
        "_lookup raw_messages", "_landed_messages", "_restated_rows"}, compared
    assert resumes[0] and _canonical([resumes[0]]) == _canonical([resumes[1]])
