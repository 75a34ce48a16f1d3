"""The fixed tables of a Nostr sample: relays, texts, names, and how often each case is made.

Each ``*_WEIGHTS`` table names the scenarios of one part of the sample with their relative
frequency; a first pass makes each scenario once when the counts allow
(:meth:`~snap_spark.samples.nostr.workbench.Workbench.schedule`). ``*_SIZES`` give the
scenarios that make more than one event.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AGENT_NAMES",
    "CARD_SIZES",
    "CARD_WEIGHTS",
    "GARBAGE",
    "MESSAGE_SIZES",
    "MESSAGE_WEIGHTS",
    "RELAYS",
    "STATES",
    "TEXTS",
    "WELL_KNOWN_WEIGHTS",
]

RELAYS: Final = (
    "wss://relay.damus.io",
    "wss://nos.lol",
    "wss://relay.primal.net",
    "wss://relay.nostr.band",
)
TEXTS: Final = (
    "Summarise yesterday's incident report",
    "Translate the release notes into German",
    "请把这份合同翻译成英文",
    "今日の売上を集計してください",
    "Book a table for four at 19:30 🍽️",
    "Check this invoice for errors",
    "Refactor the payment module to async",
    "Quote: \"ship it\" \\o/ — then run the tests",
)
AGENT_NAMES: Final = (
    "Code Assistant", "Ledger Bot", "Travel Planner", "Translator", "Data Analyst",
    "Research Agent", "Invoice Checker", "Scheduler",
)  # fmt: skip
STATES: Final = ("working", "input_required", "completed")

MESSAGE_WEIGHTS: Final[dict[str, int]] = {
    "delivered": 40,
    "unsigned_response": 4,
    "boundary_drift_60": 2,
    "offline_recipient": 8,
    "expired": 5,
    "decrypt_failed": 8,
    "rewrapped": 5,
    "rewrapped_with_genuine": 3,
    "misaddressed": 5,
    "inner_bad_sig": 4,
    "inner_unsigned_request": 2,
    "inner_constraint": 3,
    "late_fetch": 4,
    "inner_replay": 4,
    "inner_replay_late": 2,
    "inner_forged_first": 2,
    "tampered_event": 3,
    "bad_event_sig": 3,
}
MESSAGE_SIZES: Final[dict[str, int]] = {
    "rewrapped_with_genuine": 2,
    "inner_replay": 2,
    "inner_replay_late": 2,
    "inner_forged_first": 2,
}
CARD_WEIGHTS: Final[dict[str, int]] = {
    "card": 30,
    "card_update": 8,
    "card_same_second": 2,
    "impersonation": 6,
    "bad_d_tag": 8,
    "invalid_card": 8,
    "card_identity_mismatch": 5,
    "tampered_card_event": 4,
    "bad_card_sig": 4,
}
CARD_SIZES: Final[dict[str, int]] = {"card_update": 2, "card_same_second": 2}
WELL_KNOWN_WEIGHTS: Final[dict[str, int]] = {
    "valid": 8,
    "malformed": 5,
    "bad_sig": 4,
    "invalid_identity": 3,
    "key_mismatch": 3,
    "invalid_card": 3,
}


#: Kinds of garbage lines (all ``malformed``), written in turn.
GARBAGE: Final = (
    "not_json", "python_repr", "truncated", "invalid_utf8", "empty", "not_object",
    "other_frame", "frame_without_event", "received_at_text", "event_not_object",
    "lone_surrogate", "deep_nesting", "wrong_kind", "missing_sig", "uppercase_id",
    "bad_hex_pubkey", "short_sig", "created_at_text", "created_at_float", "kind_text",
    "kind_out_of_range", "tags_object", "content_number",
)  # fmt: skip
