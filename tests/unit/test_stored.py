"""SNAP message events (kinds 4339 and 21339): the rules of snap_spark.nostr.stored against
the labelled Nostr sample (whose labels come from what the generator built, not from these
rules), each check on hand-built events of both kinds, and the keyring file's guards."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from snap_spark.nostr.lines import event_from_line
from snap_spark.nostr.stored import (
    EPHEMERAL_KIND,
    MESSAGE_KINDS,
    STORED_KIND,
    STORED_VERDICTS,
    Keyring,
    KeyringError,
    StoredCheck,
    check_stored_event,
)
from snap_spark.protocol.keys import InvalidPrivateKey, internal_pubkey, p2tr_address
from snap_spark.protocol.nostr import sign_event
from snap_spark.protocol.signing import sign_message
from snap_spark.protocol.validate import MissingReceiptTime
from snap_spark.samples.nostr import (
    NostrSampleConfig,
    generate_nostr,
    nip44_conversation_key,
    nip44_encrypt,
    read_keyring,
    write_nostr_sample,
)
from tests.unit.helpers import BAD_KEY_BYTES, BAD_KEY_TEXTS, EDGE_KEY_TEXTS, assert_not_quoted

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
        if label.kind not in (4339, 21339) or event is None or label.expected == "malformed":
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
    for kind in (4339, 21339):
        verdicts = {lab.expected for lab in sample.labels if lab.kind == kind}
        assert {"expired", "encrypted", "decrypt_failed", "from_mismatch",
                "recipient_mismatch", "valid", "inner_invalid"} <= verdicts, kind
    assert checked > 300


# -- both message kinds, check by check ---------------------------------------------------------

#: Fixed test keys (never real ones): sender A, recipient B, a third key C.
PRIV_A, PRIV_B, PRIV_C = (bytes.fromhex(h * 32) for h in ("0a", "0b", "0c"))
PUB_A, PUB_B, PUB_C = (internal_pubkey(k).hex() for k in (PRIV_A, PRIV_B, PRIV_C))
SENT = 1_770_163_200


def inner_message(to: str | None = None, sender: bytes = PRIV_A) -> dict[str, Any]:
    """A signed SNAP request from ``sender`` to B (or ``to``)."""
    message = {"id": "msg-1", "version": "0.1",
               "from": p2tr_address(internal_pubkey(sender)),
               "to": to or p2tr_address(internal_pubkey(PRIV_B)), "type": "request",
               "method": "message/send",
               "payload": {"message": {"messageId": "m1", "role": "user",
                                       "parts": [{"text": "hello"}]}},
               "timestamp": SENT}
    return sign_message(message, sender, aux=bytes(32))


def message_event(kind: int, *, inner: dict[str, Any] | None = None, wrapper: bytes = PRIV_A,
                  for_key: str = PUB_B, p: str = PUB_B, expiration: int | None = None
                  ) -> dict[str, Any]:
    """``inner`` NIP-44 encrypted by ``wrapper`` for ``for_key``, in a signed event of
    ``kind`` whose p tag is ``p``."""
    content = nip44_encrypt(orjson.dumps(inner or inner_message()).decode(),
                            nip44_conversation_key(wrapper, for_key), bytes(range(32)))
    tags = [["p", p]] + ([["expiration", str(expiration)]] if expiration is not None else [])
    return sign_event({"created_at": SENT, "kind": kind, "tags": tags, "content": content},
                      wrapper, aux=bytes(32))


#: name -> (event arguments, receipt time, keyring keys, verdict)
CASES: dict[str, tuple[dict[str, Any], float, tuple[bytes, ...], str]] = {
    "bound": ({}, SENT + 5.0, (PRIV_B,), "bound"),
    "bound, expiring later": ({"expiration": SENT + 60}, SENT + 60.0, (PRIV_B,), "bound"),
    "encrypted": ({}, SENT + 5.0, (), "encrypted"),
    "encrypted, key of another": ({}, SENT + 5.0, (PRIV_C,), "encrypted"),
    "expired": ({"expiration": SENT + 60}, SENT + 61.0, (PRIV_B,), "expired"),
    "decrypt_failed": ({"for_key": PUB_C}, SENT + 5.0, (PRIV_B,), "decrypt_failed"),
    "from_mismatch": ({"wrapper": PRIV_C}, SENT + 5.0, (PRIV_B,), "from_mismatch"),
    "recipient_mismatch": ({"inner": inner_message(to=p2tr_address(internal_pubkey(PRIV_C)))},
                           SENT + 5.0, (PRIV_B,), "recipient_mismatch"),
}


def test_the_message_kinds() -> None:
    assert (STORED_KIND, EPHEMERAL_KIND) == MESSAGE_KINDS == (4339, 21339)


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_ephemeral_message_gets_the_checks_of_a_stored_one(case: str) -> None:
    arguments, received, keys, verdict = CASES[case]
    got: dict[int, StoredCheck] = {}
    for kind in (STORED_KIND, EPHEMERAL_KIND):
        got[kind] = check_stored_event(message_event(kind, **arguments), received,
                                       Keyring(keys))
    ephemeral = got[EPHEMERAL_KIND]
    assert ephemeral.verdict == verdict, ephemeral.detail
    assert ephemeral.recipient == PUB_B
    assert ephemeral == got[STORED_KIND]  # same verdict, detail, recipient and inner text
    if verdict == "bound":
        assert ephemeral.inner is not None
        assert orjson.loads(ephemeral.inner) == arguments.get("inner", inner_message())
    else:
        assert ephemeral.inner is None


def test_an_ephemeral_message_needs_a_receipt_time_like_a_stored_one() -> None:
    ring = Keyring([PRIV_B])
    for kind in MESSAGE_KINDS:
        with pytest.raises(MissingReceiptTime, match="--bare-clock"):
            check_stored_event(message_event(kind), None, ring)
        with pytest.raises(MissingReceiptTime):
            check_stored_event(message_event(kind, expiration=SENT + 9), None, ring)
        # decided before anything needs the clock
        assert check_stored_event(message_event(kind), None, Keyring([])).verdict == "encrypted"


@pytest.mark.parametrize("kind", [1, 4338, 14339, 21338, 20000, 31337])
def test_other_kinds_are_no_message(kind: int) -> None:
    got = check_stored_event(message_event(kind), SENT + 5.0, Keyring([PRIV_B]))
    assert got.verdict == "malformed"
    assert "4339" in got.detail and "21339" in got.detail


@pytest.mark.parametrize("tags", [[], [["p", PUB_B], ["p", PUB_C]], [["p", "xyz"]],
                                  [["p", PUB_B], ["expiration", "soon"]]])
def test_an_ephemeral_message_with_broken_tags_is_malformed(tags: list[list[str]]) -> None:
    event = sign_event({**message_event(EPHEMERAL_KIND), "tags": tags}, PRIV_A, aux=bytes(32))
    assert check_stored_event(event, SENT + 5.0, Keyring([PRIV_B])).verdict == "malformed"


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


def _private_file(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, text.encode())
    os.close(fd)
    return path


@pytest.mark.parametrize("bad", BAD_KEY_TEXTS)  # ids are the names: no key in test output
def test_keyring_refuses_a_line_that_is_not_64_hex_digits_of_a_valid_key(
    bad: str, tmp_path: Path
) -> None:
    key = BAD_KEY_TEXTS[bad]
    path = _private_file(tmp_path / "ring", f"# mine\n{'0a' * 32}\n\n{key}\n")
    with pytest.raises(KeyringError) as refused:
        Keyring.load(str(path))
    said = str(refused.value)
    assert said.startswith(f"keyring {path}, line 4: ") and "\n" not in said
    assert ("64 hex digits" in said) != ("from 1 to n-1" in said)
    assert_not_quoted(key, said.replace(str(path), ""))
    # the sample's reader of keyring files refuses it too
    with pytest.raises(InvalidPrivateKey) as also:
        read_keyring(str(path))
    assert str(also.value).startswith(f"{path}, line 4: ")
    assert_not_quoted(key, str(also.value).replace(str(path), ""))


@pytest.mark.parametrize("edge", EDGE_KEY_TEXTS)
def test_keyring_takes_the_smallest_and_largest_keys(edge: str, tmp_path: Path) -> None:
    # 1 and n-1 share their x-only key (n-1 = -1): one file each
    text = EDGE_KEY_TEXTS[edge]
    path = _private_file(tmp_path / "ring", f"# either case, blanks around\n  {text.upper()}\t\n")
    ring = Keyring.load(str(path))
    assert ring.recipients() == [internal_pubkey(bytes.fromhex(text)).hex()]
    assert read_keyring(str(path)) == [bytes.fromhex(text)]


@pytest.mark.parametrize("bad", BAD_KEY_BYTES)
def test_a_keyring_of_keys_refuses_a_key_that_is_not_32_bytes_of_a_valid_key(bad: str) -> None:
    with pytest.raises(InvalidPrivateKey) as refused:
        Keyring([PRIV_B, BAD_KEY_BYTES[bad]])
    assert_not_quoted(BAD_KEY_BYTES[bad].hex(), str(refused.value))
    for text in EDGE_KEY_TEXTS.values():
        assert internal_pubkey(bytes.fromhex(text)).hex() in Keyring([PRIV_B, bytes.fromhex(text)])
