"""Stored messages (kind 4339): the rules of snap_spark.nostr.stored against the labelled
Nostr sample (whose labels come from what the generator built, not from these rules), and
the keyring file's guards."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from snap_spark.nostr.lines import event_from_line
from snap_spark.nostr.stored import (
    STORED_VERDICTS,
    Keyring,
    KeyringError,
    check_stored_event,
)
from snap_spark.protocol.keys import internal_pubkey
from snap_spark.samples.nostr import NostrSampleConfig, generate_nostr, write_nostr_sample

#: labels the event-level rules decide alone (the rest need the message pipeline or the
#: other copies of an event)
EVENT_LEVEL = set(STORED_VERDICTS) - {"bound"}


@pytest.fixture(scope="module")
def sample():  # type: ignore[no-untyped-def]
    return generate_nostr(NostrSampleConfig(cards=10, messages=400, seed=11))


def test_stored_verdicts_equal_the_labels(sample) -> None:  # type: ignore[no-untyped-def]
    ring = Keyring(sample.keyring)
    seen: set[str] = set()
    checked = 0
    for raw, label in zip(sample.lines, sample.labels, strict=True):
        found = event_from_line(raw)
        event = found.event
        if label.kind != 4339 or event is None or label.expected == "malformed":
            continue
        if label.expected == "duplicate_event":
            assert event["id"] in seen
            continue
        received = found.received_at if found.received_at is not None else 0.0
        got = check_stored_event(event, float(received), ring)
        if label.expected in ("valid", "inner_invalid"):
            assert got.verdict == "bound", (label.scenario, got)
            assert got.inner is not None and '"from"' in got.inner
        else:
            assert label.expected in EVENT_LEVEL | {"bad_event_id", "bad_event_sig"}
            assert got.verdict == label.expected, (label.line_no, label.scenario, got)
            assert got.inner is None
        if got.verdict not in ("malformed", "bad_event_id", "bad_event_sig"):
            seen.add(event["id"])
        checked += 1
    verdicts = {lab.expected for lab in sample.labels if lab.kind == 4339}
    assert {"expired", "encrypted", "decrypt_failed", "from_mismatch",
            "recipient_mismatch", "valid", "inner_invalid"} <= verdicts
    assert checked > 300


def test_keyring_file_is_refused_when_others_may_read_it(tmp_path: Path) -> None:
    stem = str(tmp_path / "s")
    sample = write_nostr_sample(NostrSampleConfig(cards=2, messages=20, seed=3), stem)
    path = f"{stem}.keyring"
    ring = Keyring.load(path)
    assert len(ring) == len(sample.keyring)
    assert all(internal_pubkey(k).hex() in ring for k in sample.keyring)
    os.chmod(path, 0o640)
    with pytest.raises(KeyringError, match="chmod 600") as refused:
        Keyring.load(path)
    assert not any(k.hex() in str(refused.value) for k in sample.keyring)


def test_keyring_errors_never_quote_a_key(tmp_path: Path) -> None:
    path = tmp_path / "ring"
    secret = "0a" * 32
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, f"# mine\n{secret}\n{secret[:-2]}zz\n".encode())
    os.close(fd)
    with pytest.raises(KeyringError, match="line 3") as refused:
        Keyring.load(str(path))
    assert secret[:20] not in str(refused.value)
    ring = Keyring([bytes.fromhex(secret)])
    assert secret not in repr(ring) and secret not in str(ring)


def test_zero_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ring"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, ("00" * 32 + "\n").encode())
    os.close(fd)
    with pytest.raises(KeyringError, match="not a valid secp256k1 private key"):
        Keyring.load(str(path))
