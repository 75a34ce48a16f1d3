"""One declared Spark schema per Delta table (docs/architecture.md, *Tables*).

Change a schema only with a migration note in docs/migration.md: notebooks and audits read them.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _f(name: str, dtype: object, nullable: bool = True) -> StructField:
    return StructField(name, dtype, nullable)  # type: ignore[arg-type]


#: One row per input line, exactly as read.
RAW_MESSAGES = StructType([
    _f("ingest_id", StringType(), False),  # one id per job run
    _f("ingest_time", TimestampType(), False),
    _f("source_file", StringType(), False),
    _f("file_key", StringType(), False),  # SHA-256 of the file's landed bytes: the ingest key
    _f("line_no", LongType(), False),  # 1-based
    _f("byte_len", LongType(), False),
    _f("raw_text", StringType()),  # the line as UTF-8 text (lossless unless raw_bytes is set)
    _f("raw_bytes", BinaryType()),  # the exact bytes, only for lines that are not UTF-8
    _f("read_error", StringType()),  # the file could not be read past this point
    _f("is_envelope", BooleanType(), False),
    _f("source", StringType()),  # envelope "source"
    _f("received_at", DoubleType()),  # envelope receipt time, unix seconds
    _f("received_time", TimestampType()),
])

#: One row per input line (valid or not), with the verdict.
MESSAGES = StructType([
    _f("ingest_id", StringType(), False),
    _f("ingest_time", TimestampType(), False),
    _f("source_file", StringType(), False),
    _f("file_key", StringType(), False),
    _f("line_no", LongType(), False),
    _f("msg_id", StringType()),
    _f("version", StringType()),
    _f("sender", StringType()),  # "from"
    _f("recipient", StringType()),  # "to"
    _f("msg_type", StringType()),
    _f("method", StringType()),
    _f("timestamp", LongType()),  # message timestamp, unix seconds
    _f("event_time", TimestampType()),
    _f("received_at", DoubleType()),  # receipt time used for the drift and replay checks
    _f("received_time", TimestampType()),
    _f("event_date", DateType(), False),  # partition: receipt date, else message date, else ingest
    _f("task_id", StringType()),
    _f("context_id", StringType()),
    _f("task_state", StringType()),  # state a response reports (one of the six), else null
    _f("has_sig", BooleanType(), False),
    _f("canonical_payload", StringType()),  # JCS(payload)
    _f("verdict", StringType(), False),  # "valid" | "rejected"
    _f("error_code", IntegerType()),  # SNAP code, null when valid
    _f("error_name", StringType()),
    _f("error_detail", StringType()),
    # Checks 7-8 (signature) of a message that passed checks 1-5, kept for every replay
    # candidate, 2006 included: what the row becomes if a later re-decision finds it is not
    # a duplicate after all (docs/verdicts.md). Null when they pass or did not run.
    _f("signature_code", IntegerType()),
    _f("signature_detail", StringType()),
])

MESSAGES_PARTITION = ("event_date",)

#: One row per landed piece of an input file: what the job has read from which file. A file
#: is known by the SHA-256 of its bytes; a file that grew is landed again only from where
#: the landed piece ended (its ``prefix_key`` names that piece).
INGESTED_FILES = StructType([
    _f("source_file", StringType(), False),
    # SHA-256 (hex, 32) of the file's bytes [0, end_byte); "vanished:…" for a file the stream
    # picked up that was gone before it could be read (no bytes, no lines)
    _f("file_key", StringType(), False),
    _f("prefix_key", StringType()),  # file_key of the piece this one continues, if any
    _f("start_byte", LongType(), False),
    _f("end_byte", LongType(), False),
    _f("first_line", LongType(), False),
    _f("lines", LongType(), False),
    _f("ingest_id", StringType(), False),
    _f("ingest_time", TimestampType(), False),
])

#: One row per state report (a valid response naming one of the six states), as the task
#: fold took it: ordered per task by message timestamp, then receipt.
TASK_EVENTS = StructType([
    _f("task_id", StringType(), False),
    _f("seq", LongType(), False),  # position of the report in its task's fold, from 0
    _f("context_id", StringType()),
    _f("previous_state", StringType()),
    _f("new_state", StringType(), False),
    _f("legal", BooleanType(), False),  # the transition table allows previous -> new
    _f("applied", BooleanType(), False),  # the report changed the task's state
    _f("anomaly", StringType()),  # null | "illegal_transition" | "non_owner"
    _f("by_owner", BooleanType(), False),
    _f("message_id", StringType(), False),
    _f("sender", StringType(), False),
    _f("timestamp", LongType(), False),
    _f("event_time", TimestampType()),
    _f("received_at", DoubleType()),
])

#: One row per task: where it stands after every report folded.
TASKS = StructType([
    _f("task_id", StringType(), False),
    _f("context_id", StringType()),
    _f("owner", StringType()),
    _f("state", StringType()),
    _f("state_timestamp", LongType()),  # message timestamp of the report that set the state
    _f("state_time", TimestampType()),
    _f("last_message_id", StringType()),
    _f("reports", LongType(), False),
    _f("transitions", LongType(), False),
    _f("illegal_transitions", LongType(), False),
    _f("foreign_reports", LongType(), False),  # reports from someone other than the owner
])

#: One row per distinct Nostr event (kinds 31337, 4339 and 21339, and whatever else a relay or
#: an archive held): every copy of an event whose id and signature verify is folded into the
#: row of its id (relays seen on, copies, first receipt); a line or copy that is not such an
#: event (malformed, ``bad_event_id``, ``bad_event_sig``) has its own row, keyed by its bytes,
#: so a forged copy never shadows the genuine event. ``verdict``: docs/verdicts.md "Nostr".
NOSTR_EVENTS = StructType([
    _f("event_key", StringType(), False),  # the event id, or "line:<sha256 of the bytes>"
    _f("event_id", StringType()),  # the id the event claims, when it has one
    _f("kind", IntegerType()),
    _f("pubkey", StringType()),
    _f("created_at", LongType()),
    _f("created_time", TimestampType()),
    _f("tags", StringType()),  # the tags as a JSON array
    _f("content", StringType()),
    _f("identity", StringType()),  # kind 31337: the d tag
    _f("recipient", StringType()),  # kinds 4339 and 21339: the p tag
    _f("expiration", LongType()),  # NIP-40 expiration tag, if any
    _f("relays", ArrayType(StringType())),  # relays it was seen on (sorted)
    _f("origins", ArrayType(StringType())),  # "file:line" of each line, or the relay
    _f("copies", LongType(), False),  # distinct origins folded into this row
    _f("first_source", StringType()),  # "file:line" or the relay of the first copy
    _f("first_received_at", DoubleType()),
    _f("first_received_time", TimestampType()),
    _f("verdict", StringType(), False),
    _f("error_code", IntegerType()),  # inner_invalid: the inner message's SNAP code
    _f("error_detail", StringType()),
    _f("message_source", StringType()),  # a 4339 or 21339 landed: messages.source of its message
    _f("ingest_id", StringType(), False),  # the run that first wrote the row
    _f("ingest_time", TimestampType(), False),
])

#: One row per agent card seen: every kind-31337 event whose id and signature verify
#: (valid, superseded, or rejected with its verdict: impersonations are counted from here),
#: and every signed well-known card document (``source = "well-known"``).
AGENT_CARD_HISTORY = StructType([
    _f("card_key", StringType(), False),  # event id, or "well-known:<sha256 of the document>"
    _f("source", StringType(), False),  # "nostr" | "well-known"
    # well-known: the document's file or URL (a Nostr card's relays and receipt time are in
    # its nostr_events row: event_key = card_key)
    _f("origin", StringType()),
    _f("identity", StringType()),  # the identity it claims (d tag, or card identity)
    _f("pubkey", StringType()),
    _f("created_at", LongType()),  # event created_at, or the signed document's timestamp
    _f("created_time", TimestampType()),
    _f("verdict", StringType(), False),
    _f("error_detail", StringType()),
    _f("card", StringType()),  # the card JSON (the event content, or the document's card)
    _f("ingest_id", StringType(), False),
])

#: One row per identity: the card that stands (newest valid card, ties to the lower id).
AGENT_CARDS = StructType([
    _f("identity", StringType(), False),
    _f("pubkey", StringType(), False),
    _f("card_key", StringType(), False),
    _f("source", StringType(), False),
    _f("created_at", LongType(), False),
    _f("created_time", TimestampType()),
    _f("name", StringType()),
    _f("description", StringType()),
    _f("version", StringType()),
    _f("skills", ArrayType(StringType())),  # skill ids
    _f("skill_names", ArrayType(StringType())),
    _f("skill_tags", ArrayType(StringType())),
    _f("endpoints", ArrayType(StringType())),  # endpoint URLs, in the card's order
    _f("endpoint_protocols", ArrayType(StringType())),  # "http" | "wss", same order
    _f("relays", ArrayType(StringType())),  # the card's nostrRelays
    _f("capabilities", ArrayType(StringType())),  # capability names that are true
    _f("protocol_version", StringType()),
    _f("card", StringType(), False),
    _f("valid_cards", LongType(), False),  # valid cards seen for the identity
    _f("rejected_cards", LongType(), False),  # card events claiming it that were rejected
])

TABLES = {"raw_messages": RAW_MESSAGES, "messages": MESSAGES, "ingested_files": INGESTED_FILES,
          "task_events": TASK_EVENTS, "tasks": TASKS, "nostr_events": NOSTR_EVENTS,
          "agent_card_history": AGENT_CARD_HISTORY, "agent_cards": AGENT_CARDS}
