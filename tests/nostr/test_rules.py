"""Nostr ingestion reads the NIP-40 expiry and the receipt clock with the rules the stored
message check and the batch job use (one reading each), not its own; and it routes both
SNAP message kinds (4339, 21339) to that check."""

from __future__ import annotations

import datetime as dt

import pytest

from snap_spark.nostr.ingest import Folded, decide, event_row
from snap_spark.nostr.stored import Keyring, check_stored_event, expiration_time
from snap_spark.protocol.validate import ReceiptClock
from tests.nostr.conftest import PRIV_A, card_event, message_event

NOW = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)


def _row(expiration: str) -> dict[str, object]:
    event = {"kind": 4339, "pubkey": "ab" * 32, "created_at": 1_700_000_000, "content": "x",
             "tags": [["p", "cd" * 32], ["expiration", expiration]]}
    return event_row(Folded("k", event, "e" * 64, None, None), "malformed", "d",
                     ingest_id="i", ingest_time=NOW)


@pytest.mark.parametrize("text", ["1700000100", "0", "9" * 15])
def test_the_expiration_column_holds_what_the_rule_reads(text: str) -> None:
    assert _row(text)["expiration"] == expiration_time(text) == int(text)


@pytest.mark.parametrize("text", ["\u0661\u0667\u0660\u0660", "\uff11\uff12", "1e9", "-5", "",
                                  "9" * 16, "17000000 00"])
def test_an_expiration_the_rule_refuses_is_no_expiration_in_the_table(text: str) -> None:
    # Arabic-Indic and full-width digits pass str.isdigit(): the rule wants ASCII digits
    assert expiration_time(text) is None
    assert _row(text)["expiration"] is None


def test_the_receipt_clock_of_an_event_without_a_receipt_time() -> None:
    assert ReceiptClock.parse("message").receipt_for(1_700_000_000) == 1_700_000_000.0
    assert ReceiptClock.parse("message").receipt_for(None) is None
    assert ReceiptClock.parse("now", now=42.0).receipt_for(None) == 42.0
    assert ReceiptClock.parse("1000").receipt_for(5) == 1000.0
    assert ReceiptClock.parse(None).receipt_for(5) is None


@pytest.mark.parametrize("kind", [4339, 21339])
def test_both_message_kinds_fill_the_recipient_column(kind: int) -> None:
    event = message_event(PRIV_A, created_at=1_700_000_000, kind=kind,
                          tags=[["p", "cd" * 32], ["expiration", "1700000100"]])
    row = event_row(Folded(event["id"], event, event["id"], None, None), "encrypted", "d",
                    ingest_id="i", ingest_time=NOW)
    assert (row["kind"], row["recipient"], row["expiration"], row["identity"]) == (
        kind, "cd" * 32, 1_700_000_100, None)


def test_other_kinds_have_no_recipient() -> None:
    for event in (message_event(PRIV_A, created_at=1, kind=1, tags=[["p", "cd" * 32]]),
                  card_event(PRIV_A, created_at=1)):
        row = event_row(Folded(event["id"], event, event["id"], None, None), "valid", None,
                        ingest_id="i", ingest_time=NOW)
        assert row["recipient"] is None


@pytest.mark.parametrize("kind", [4339, 21339])
def test_decide_takes_both_message_kinds_through_the_message_check(kind: int) -> None:
    event = message_event(PRIV_A, created_at=1_700_000_000, kind=kind,
                          tags=[["p", "cd" * 32], ["expiration", "1700000100"]])
    entry = Folded(event["id"], event, event["id"], None, None)
    for receipt, verdict in ((1_700_000_050.0, "encrypted"), (1_700_000_101.0, "expired")):
        found = check_stored_event(event, receipt, Keyring([]))
        assert decide(entry, receipt, Keyring([])) == (verdict, found.detail, None)


@pytest.mark.parametrize("kind", [1, 4338, 21338, 30000])
def test_decide_names_the_three_snap_kinds(kind: int) -> None:
    event = message_event(PRIV_A, created_at=1, kind=kind, tags=[["p", "cd" * 32]])
    verdict, detail, inner = decide(Folded(event["id"], event, event["id"], None, None), 5.0,
                                    Keyring([]))
    assert (verdict, inner) == ("malformed", None)
    assert detail == f"kind {kind} is not a SNAP kind (31337, 4339, 21339)"
