"""Nostr ingestion reads the NIP-40 expiry and the receipt clock with the rules the stored
message check and the batch job use (one reading each), not its own."""

from __future__ import annotations

import datetime as dt

import pytest

from snap_spark.nostr.ingest import Folded, event_row
from snap_spark.nostr.stored import expiration_time
from snap_spark.protocol.validate import ReceiptClock

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
