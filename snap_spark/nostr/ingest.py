"""Nostr events into the lake: ``nostr_events``, ``agent_card_history``, ``agent_cards``, and
the stored messages they carry into ``messages``.

One run (:func:`ingest`) takes events from archive files (each line an event, a relay
``EVENT`` frame or an envelope with its receipt time, :mod:`snap_spark.nostr.lines`) or from
relays (:func:`snap_spark.nostr.client.fetch_events`), and then:

1. **verifies every copy** (Spark tasks over line ranges, the batch job's read path): the
   NIP-01 id and signature (:func:`snap_spark.protocol.nostr.check_event`). A line that is
   no verified event keeps its own ``nostr_events`` row, keyed by its bytes
   (``line:<sha256>``): a forged copy never shadows the genuine event;
2. **folds verified copies by event id**, across relays, files and runs: relays seen on,
   origins (``file:line`` or relay), first receipt time. An event already in the lake keeps
   its verdict; only its relays and origins grow;
3. **decides each new event**: kind 31337 by :func:`~snap_spark.protocol.nostr.check_card_event`,
   the SNAP message kinds, 4339 (stored by relays) and 21339 (ephemeral: forwarded to live
   subscribers, never stored), alike by :func:`snap_spark.nostr.stored.check_stored_event`
   (expiry, keyring, decryption, binding), any other kind ``malformed``;
4. **lands the bound messages** of both kinds through the batch job
   (:func:`snap_spark.pipeline.batch_job.run`): one envelope line per event, ``source =
   nostr:<event id>``, in a content-keyed file under ``<lake>/nostr_inbox/``; their
   ``messages`` verdicts give the events theirs (``valid``, or ``inner_invalid`` with the
   code). An event whose message the lake already holds is not landed again;
5. **cards**: every verified card event (and well-known document) joins
   ``agent_card_history``; per identity the newest valid card (ties: the lower id) stands in
   ``agent_cards``, and the valid cards it displaces become ``superseded``, in
   ``nostr_events`` and in the history alike (a late, older card is superseded at once).

Each table is then replaced key by key in one commit
(:func:`snap_spark.lake.commit_data_files` with ``keys``), so running the same input again
changes nothing. From reading the rows the lake holds to the last commit, a run holds the
lake's commit lease (:func:`snap_spark.lake.commit_lease`): two Nostr writers on one lake,
or one and a batch job, decide one after the other, each against what the other committed.

Example::

    result = ingest(spark, "data/lake", inputs=["data/nostr.events.jsonl"],
                    keyring=Keyring.load("data/nostr.keyring"))
    print(result.verdicts)   # Counter({'valid': 412, 'superseded': 30, ...})
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson
import pyarrow as pa

from snap_spark.common.console import log
from snap_spark.common.remote import refuse_remote
from snap_spark.files import storage
from snap_spark.nostr.lines import event_from_line
from snap_spark.nostr.stored import (
    EPHEMERAL_KIND,
    MESSAGE_KINDS,
    STORED_KIND,
    Keyring,
    check_stored_event,
    expiration_time,
)
from snap_spark.protocol.nostr import CARD_KIND, card_sort_key, check_card_event, check_event

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from snap_spark.files.lines import LineRange
    from snap_spark.lake import HeldLease, Lake
    from snap_spark.settings import VerifySettings

#: How a stored message's receipt time is taken (docs/verdicts.md "Stored messages"):
#: ``event`` (default) the event's ``created_at``, when its sender wrapped it for the relay
#: (offline retrieval works, and the verdict is the same whenever and from wherever it is
#: fetched); ``received`` the first time a copy reached us (the spec's ±60 s read
#: literally: a message fetched more than a minute after it was sent is a 2004).
STORED_CLOCKS: Final = ("event", "received")

#: Verdicts of a copy that is not a verified event (its row is keyed by its bytes).
UNVERIFIED: Final = ("malformed", "bad_event_id", "bad_event_sig")

#: What the verifying tasks send back: one row per line or delivery.
CHECKED = pa.schema([
    pa.field("origin", pa.string()),  # "file:line" or the relay URL
    pa.field("relay", pa.string()),
    pa.field("received_at", pa.float64()),
    pa.field("line_key", pa.string()),  # sha256 of the line (or event JSON) bytes
    pa.field("event_id", pa.string()),  # the id it claims, if any
    pa.field("verdict", pa.string()),  # "ok" or one of UNVERIFIED
    pa.field("detail", pa.string()),
    pa.field("event", pa.string()),  # the event as JSON (verified copies, and forged ones)
])

#: Folder of the lake holding the envelope files of landed stored messages.
INBOX: Final = "nostr_inbox"
#: The tables only Nostr ingestion writes (each commit replaces rows key by key).
NOSTR_TABLES: Final = ("nostr_events", "agent_card_history", "agent_cards")


@dataclass
class IngestResult:
    """What one run did (the job prints it)."""

    copies: int = 0  # lines or deliveries read
    events: int = 0  # nostr_events rows written (new or grown)
    new_events: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)  # of the new rows
    #: the new rows by ``"<kind>:<verdict>"`` (``"-:<verdict>"``: no event kind)
    kind_verdicts: Counter[str] = field(default_factory=Counter)
    cards: int = 0  # agent_cards rows written
    messages_landed: int = 0
    relays: list[dict[str, Any]] = field(default_factory=list)  # live mode, per relay
    seconds: float = 0.0


# -- 1. verify copies (executors) --------------------------------------------------------------


def check_copy(raw: bytes | None, origin: str, *, relay: str | None = None,
               received_at: float | None = None, read_error: str | None = None
               ) -> dict[str, Any]:
    """The :data:`CHECKED` row of one archived line or relay delivery.

    Examples:
        >>> row = check_copy(b"not json", "a.jsonl:3")
        >>> row["verdict"], row["line_key"][:5], row["event"] is None
        ('malformed', 'line:', True)
    """
    data = raw if raw is not None else b""
    row: dict[str, Any] = {"origin": origin, "relay": relay, "received_at": received_at,
                           "line_key": "line:" + hashlib.sha256(data).hexdigest(),
                           "event_id": None, "verdict": "malformed", "detail": read_error,
                           "event": None}
    if raw is None:
        row["detail"] = read_error or "the line could not be read"
        return row
    found = event_from_line(raw)
    if found.event is None:
        row["detail"] = found.reason
        return row
    if found.relay is not None:
        row["relay"] = found.relay
    if found.received_at is not None:
        row["received_at"] = float(found.received_at)
    claimed = found.event.get("id")
    if isinstance(claimed, str):
        row["event_id"] = claimed[:64]
    verdict, detail = check_event(found.event)
    row["verdict"], row["detail"] = verdict, detail
    if verdict in ("ok", "bad_event_id", "bad_event_sig"):
        try:
            row["event"] = orjson.dumps(found.event).decode()
        except (TypeError, orjson.JSONEncodeError):  # an integer beyond 64 bits
            row["event"] = None
    return row


def check_range(part: LineRange, _index: int) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` work of one line range of an archive file."""
    from snap_spark.pipeline.read import iter_line_lists

    for line_nos, raws, errors in iter_line_lists(part.path, start=part.start, end=part.end,
                                                  first_line=part.first_line):
        rows = [check_copy(raw, f"{part.path}:{n}",
                           read_error=None if errors is None else errors[i])
                for i, (n, raw) in enumerate(zip(line_nos, raws, strict=True))]
        yield pa.RecordBatch.from_pylist(rows, schema=CHECKED)


def check_deliveries(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` work over live deliveries (``event_json, relay, received_at``)."""
    for batch in batches:
        rows = [check_copy(event.encode("utf-8", "surrogatepass"), relay, relay=relay,
                           received_at=at)
                for event, relay, at in zip(batch.column("event_json").to_pylist(),
                                            batch.column("relay").to_pylist(),
                                            batch.column("received_at").to_pylist(),
                                            strict=True)]
        yield pa.RecordBatch.from_pylist(rows, schema=CHECKED)


# -- 2. fold copies (driver) -------------------------------------------------------------------


@dataclass
class Folded:
    """One ``nostr_events`` row in the making: a verified event, or an unverified line."""

    key: str
    event: dict[str, Any] | None
    event_id: str | None
    verdict: str | None  # None: to decide (a verified event new to the lake)
    detail: str | None
    relays: set[str] = field(default_factory=set)
    origins: set[str] = field(default_factory=set)
    received_at: float | None = None
    first_origin: str | None = None

    def add(self, row: Mapping[str, Any]) -> None:
        if row["relay"]:
            self.relays.add(row["relay"])
        self.origins.add(row["origin"])
        at = row["received_at"]
        if at is not None and (self.received_at is None or at < self.received_at):
            self.received_at, self.first_origin = at, row["origin"]
        if self.first_origin is None:
            self.first_origin = row["origin"]


def fold_copies(rows: Iterable[Mapping[str, Any]]) -> dict[str, Folded]:
    """Copies folded by event id (verified) or by their bytes (the rest).

    Examples:
        >>> rows = [{"origin": "f:1", "relay": "wss://a", "received_at": 5.0,
        ...          "line_key": "line:x", "event_id": "e1", "verdict": "ok",
        ...          "detail": "", "event": '{"id":"e1"}'},
        ...         {"origin": "f:2", "relay": "wss://b", "received_at": 3.0,
        ...          "line_key": "line:y", "event_id": "e1", "verdict": "ok",
        ...          "detail": "", "event": '{"id":"e1"}'}]
        >>> f = fold_copies(rows)["e1"]
        >>> sorted(f.relays), f.received_at, f.first_origin
        (['wss://a', 'wss://b'], 3.0, 'f:2')
    """
    folded: dict[str, Folded] = {}
    for row in rows:
        verified = row["verdict"] == "ok"
        key = row["event_id"] if verified else row["line_key"]
        entry = folded.get(key)
        if entry is None:
            event = json.loads(row["event"]) if row["event"] else None
            entry = folded[key] = Folded(key, event if verified else None, row["event_id"],
                                         None if verified else row["verdict"], row["detail"])
            if not verified and event is not None:
                entry.event = event  # a forged copy: its fields are shown, never trusted
        entry.add(row)
    return folded


# -- 3. decide new events (driver) -------------------------------------------------------------


def decide(entry: Folded, receipt: float | None, keyring: Keyring) -> tuple[str, str,
                                                                           str | None]:
    """Verdict, detail and (a bound SNAP message, kind 4339 or 21339) inner message text of
    a new verified event.

    ``receipt`` is the first receipt time (``None``: unknown, a bare archive line without
    ``--bare-clock``)."""
    assert entry.event is not None
    kind = entry.event.get("kind")
    if kind == CARD_KIND:
        verdict, detail = check_card_event(entry.event)
        return verdict, detail, None
    if kind in MESSAGE_KINDS:
        found = check_stored_event(entry.event, receipt, keyring)
        return found.verdict, found.detail, found.inner
    return ("malformed", f"kind {kind} is not a SNAP kind ({CARD_KIND}, {STORED_KIND}, "
                         f"{EPHEMERAL_KIND})", None)


def _tag(event: Mapping[str, Any], name: str) -> str | None:
    for tag in event.get("tags") or []:
        if tag and tag[0] == name:
            return str(tag[1]) if len(tag) > 1 else ""
    return None


def _time(seconds: float | int | None) -> dt.datetime | None:
    if seconds is None or not 0 <= seconds <= 253_402_300_799:
        return None
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def event_row(entry: Folded, verdict: str, detail: str | None, *, ingest_id: str,
              ingest_time: dt.datetime, code: int | None = None,
              message_source: str | None = None) -> dict[str, Any]:
    """The ``nostr_events`` row of a folded entry."""
    event = entry.event or {}

    def typed(name: str, kind: type) -> Any:
        value = event.get(name)
        return value if isinstance(value, kind) and not isinstance(value, bool) else None

    created = typed("created_at", int)
    expiration = _tag(event, "expiration")
    tags = event.get("tags")
    return {
        "event_key": entry.key, "event_id": entry.event_id, "kind": typed("kind", int),
        "pubkey": typed("pubkey", str), "created_at": created, "created_time": _time(created),
        "tags": None if tags is None else orjson.dumps(tags).decode(),
        "content": typed("content", str),
        "identity": _tag(event, "d") if event.get("kind") == CARD_KIND else None,
        "recipient": _tag(event, "p") if event.get("kind") in MESSAGE_KINDS else None,
        "expiration": expiration_time(expiration),
        "relays": sorted(entry.relays), "origins": sorted(entry.origins),
        "copies": len(entry.origins),
        "first_source": entry.first_origin, "first_received_at": entry.received_at,
        "first_received_time": _time(entry.received_at), "verdict": verdict,
        "error_code": code, "error_detail": detail, "message_source": message_source,
        "ingest_id": ingest_id, "ingest_time": ingest_time,
    }


# -- 5. cards (driver) -------------------------------------------------------------------------


def history_row(*, card_key: str, source: str, origin: str | None, identity: str | None,
                pubkey: str | None, created_at: int | None, verdict: str, detail: str | None,
                card: str | None, ingest_id: str) -> dict[str, Any]:
    """An ``agent_card_history`` row."""
    return {"card_key": card_key, "source": source, "origin": origin, "identity": identity,
            "pubkey": pubkey, "created_at": created_at, "created_time": _time(created_at),
            "verdict": verdict, "error_detail": detail, "card": card, "ingest_id": ingest_id}


def card_fields(card_json: str) -> dict[str, Any]:
    """The queryable ``agent_cards`` columns of a (valid) card.

    Examples:
        >>> from snap_spark.protocol.cards import sample_card
        >>> fields = card_fields(json.dumps(sample_card("bc1p...")))
        >>> fields["skills"], fields["skill_tags"], fields["endpoints"]
        (['code-generation'], ['code'], [])
    """
    card = json.loads(card_json)
    skills = [s for s in card.get("skills") or [] if isinstance(s, dict)]
    endpoints = [e for e in card.get("endpoints") or [] if isinstance(e, dict)]
    capabilities = card.get("capabilities") if isinstance(card.get("capabilities"), dict) else {}
    return {
        "name": card.get("name"), "description": card.get("description"),
        "version": card.get("version"),
        "skills": [str(s.get("id")) for s in skills],
        "skill_names": [str(s.get("name")) for s in skills],
        "skill_tags": sorted({str(t) for s in skills for t in s.get("tags") or []}),
        "endpoints": [str(e.get("url")) for e in endpoints],
        "endpoint_protocols": [str(e.get("protocol")) for e in endpoints],
        "relays": [str(r) for r in card.get("nostrRelays") or []],
        "capabilities": sorted(k for k, v in capabilities.items() if v is True),
        "protocol_version": card.get("protocolVersion"),
    }


def resolve_cards(history: Sequence[Mapping[str, Any]]
                  ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Given every ``agent_card_history`` row of some identities, the ``agent_cards`` row of
    each and the verdict each standing Nostr card must now have (``card_key -> verdict``).

    Among an identity's valid Nostr cards the newest stands (ties: the lower event id) and
    the others are ``superseded`` (NIP-01 replaceable events). A valid well-known document
    is no Nostr event: it supersedes none and keeps its verdict, but it stands in
    ``agent_cards`` when it is newer than the identity's standing Nostr card.

    Examples:
        >>> rows = [{"card_key": k, "identity": "bc1pa", "pubkey": "p", "source": "nostr",
        ...          "created_at": t, "verdict": "valid", "card": '{"name": "A"}'}
        ...         for k, t in (("b", 5), ("a", 5), ("c", 4))]
        >>> cards, verdicts = resolve_cards(rows)
        >>> cards[0]["card_key"], sorted(verdicts.items())
        ('a', [('a', 'valid'), ('b', 'superseded'), ('c', 'superseded')])
    """
    def order(row: Mapping[str, Any]) -> tuple[int, str]:
        return card_sort_key({"created_at": row["created_at"], "id": row["card_key"]})

    by_identity: dict[str, list[Mapping[str, Any]]] = {}
    for row in history:
        if row["identity"] is not None:
            by_identity.setdefault(row["identity"], []).append(row)
    cards: list[dict[str, Any]] = []
    verdicts: dict[str, str] = {}
    for identity, rows in sorted(by_identity.items()):
        standing = [r for r in rows if r["verdict"] in ("valid", "superseded")]
        nostr = [r for r in standing if r["source"] == "nostr"]
        contenders = [r for r in standing if r["source"] != "nostr"]
        if nostr:
            newest = min(nostr, key=order)
            for row in nostr:
                verdicts[row["card_key"]] = "valid" if row is newest else "superseded"
            contenders.append(newest)
        if not contenders:
            continue
        current = min(contenders, key=order)
        cards.append({"identity": identity, "pubkey": current["pubkey"],
                      "card_key": current["card_key"], "source": current["source"],
                      "created_at": current["created_at"],
                      "created_time": _time(current["created_at"]),
                      **card_fields(current["card"]), "card": current["card"],
                      "valid_cards": len(standing), "rejected_cards": len(rows) - len(standing)})
    return cards, verdicts


# -- the run -----------------------------------------------------------------------------------


def _on_driver(path: str) -> bool | None:
    """How to look up rows of the table at ``path``: on the driver (``True``, a small
    table, :class:`~snap_spark.common.placement.DriverLimits` ``lookup_rows``: read by delta-rs
    and matched in memory, far faster than a Spark join: docs/speed.md, *Figures behind the
    code*), in Spark (``False``), or not at all (``None``: there is no table)."""
    from snap_spark.common.placement import limits
    from snap_spark.lake import rows_at_most, table_present, table_uri

    if rows_at_most(table_uri(path), limits().lookup_rows):
        return True
    return False if table_present(path) else None


def _keyed_rows(columns: tuple[str, ...], keys: frozenset[tuple[Any, ...]],
                batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` whose ``columns`` hold one of ``keys`` (a tuple of values
    each). Every lookup of earlier rows is this one function over Arrow batches:
    :func:`_scan` runs it over a table read on the driver or, in Spark tasks, over the
    table's partitions. Keys are matched in memory, never sent to a scan: string
    statistics in a Delta log may be truncated prefixes.

    Examples:
        >>> batch = pa.record_batch({"k": ["a", "b", "a", None], "n": [1, 2, 3, 4]})
        >>> [b.to_pydict() for b in _keyed_rows(("k", "n"), frozenset({("a", 3)}), [batch])]
        [{'k': ['a'], 'n': [3]}]
    """
    import pyarrow.compute as pc

    if not keys:
        return
    firsts = sorted({key[0] for key in keys if key[0] is not None})
    value_set = None
    for batch in batches:
        column = batch.column(columns[0])
        if value_set is None:  # the batches of one table share their types
            value_set = pa.array(firsts, column.type)
        found = batch.filter(pc.is_in(column, value_set=value_set))
        if len(columns) > 1 and found.num_rows:
            values = zip(*(found.column(name).to_pylist() for name in columns), strict=True)
            found = found.filter(pa.array([value in keys for value in values], pa.bool_()))
        if found.num_rows:
            yield found


def _scan(spark: SparkSession, lake: Lake, path: str, on_driver: bool,
          read: Sequence[str] | None, work: Any, output: StructType | None = None
          ) -> list[dict[str, Any]]:
    """The rows ``work`` (a function from Arrow batches to Arrow batches) makes of the
    columns ``read`` (all when ``None``) of the table at ``path``: over the table read on
    the driver by delta-rs when ``on_driver``, else in Spark tasks (``mapInArrow``) over a
    Spark read of it. ``output`` is the schema of what ``work`` yields (default: the
    columns read)."""
    from snap_spark.lake import read_arrow

    if on_driver:
        table = read_arrow(path, None if read is None else list(read))
        if table is None:
            return []
        return [row for batch in work(table.to_batches()) for row in batch.to_pylist()]
    frame = lake.read(spark, path)
    if read is not None:
        frame = frame.select(*read)
    rows: list[dict[str, Any]] = frame.mapInArrow(
        work, frame.schema if output is None else output).toArrow().to_pylist()
    return rows


def _lookup(spark: SparkSession, lake: Lake, path: str, column: str, keys: Iterable[str],
            columns: Sequence[str] | None = None, *, local: bool | None = None
            ) -> list[dict[str, Any]]:
    """The rows of a table whose ``column`` is one of ``keys`` (none when it is absent),
    with every column or ``columns``: on the driver for a small table
    (:func:`_on_driver`), else in Spark tasks, by :func:`_keyed_rows` either way;
    ``local`` is :func:`_on_driver`'s answer when the caller has it."""
    wanted = frozenset((key,) for key in keys)
    if not wanted:
        return []
    if local is None:
        local = _on_driver(path)
    if local is None:
        return []
    read = None if columns is None else sorted({column, *columns})
    rows = _scan(spark, lake, path, local, read,
                 functools.partial(_keyed_rows, (column,), wanted))
    if columns is None or column in columns:
        return rows
    return [{name: row[name] for name in columns} for row in rows]


def _replace(spark: SparkSession, lake: Lake, lake_dir: str, table: str,
             rows: Sequence[Mapping[str, Any]], key: str, *, staging: str, ingest_id: str,
             info: Mapping[str, Any]) -> None:
    """Replace the rows of ``rows``' keys in ``table`` by ``rows``, in one commit; logs
    ``<table>: ...`` once it is done (or found nothing to do)."""
    from snap_spark.lake import commit_rows, to_arrow
    from snap_spark.pipeline.ledger import batch_app_id
    from snap_spark.pipeline.runs import file_prefix
    from snap_spark.schemas.tables import TABLES

    if not rows:
        log(f"{table}: nothing new to commit")
        return
    schema = TABLES[table]
    path = storage.join(lake_dir, table)
    wanted = sorted({r[key] for r in rows})
    # the keys as Arrow, not a DataFrame: the backends take them on the driver, without
    # a Spark job per commit (three a live micro-batch, each paying a Spark job's fixed cost:
    # docs/speed.md, *Figures behind the code*)
    keys: pa.Table | None = pa.table({key: pa.array(wanted, pa.string())})
    if _on_driver(path) and not _lookup(spark, lake, path, key, wanted, columns=(key,),
                                        local=True):
        # none of the keys is in the table (a small one, looked at on the driver, under the
        # commit lease): appending is replacing, without a merge over the table's files
        keys = None
    done = commit_rows(
        spark, lake, path, lake.data_root(path, staging),
        pa.RecordBatch.from_pylist(list(rows), schema=to_arrow(schema)), schema=schema,
        file_prefix=file_prefix(ingest_id, table), app_id=batch_app_id([ingest_id, table]),
        version=1, commit_info=dict(info), keys=keys)
    if not done:
        log(f"{table}: {len(rows)} rows committed before, nothing written")
    else:
        log(f"{table}: +{len(rows)} rows committed")


def _receipt(entry: Folded, settings: VerifySettings) -> float | None:
    """The first receipt time of an event, else the bare-line clock's (``--bare-clock``,
    the batch job's :class:`~snap_spark.protocol.validate.ReceiptClock`: ``message`` takes
    the event's ``created_at``); ``None`` when no clock is set."""
    if entry.received_at is not None:
        return entry.received_at
    created = (entry.event or {}).get("created_at")
    return settings.clock().receipt_for(
        created if isinstance(created, int) else None)


def land_stored(spark: SparkSession, lake_dir: str, bound: Sequence[tuple[Folded, float, str]],
                settings: VerifySettings, *, catch_up_tasks: bool = True
                ) -> dict[str, dict[str, Any]]:
    """Land bound stored messages (``(event, receipt time, inner text)``) through the batch
    job, unless ``messages`` holds them already; the ``messages`` row of each by event id.
    ``catch_up_tasks`` is the batch job's (:func:`snap_spark.pipeline.batch_job.run`)."""
    from snap_spark.lake import get_lake
    from snap_spark.pipeline.batch_job import reverify, run

    lake = get_lake(spark)
    sources = {f"nostr:{entry.key}": entry.key for entry, _, _ in bound}
    # lines raw_messages holds already; those without messages rows (a run stopped between
    # the batch job's commits) are completed from raw_messages, never landed twice
    raw = {r["source"]: r["file_key"] for r in _lookup(
        spark, lake, storage.join(lake_dir, "raw_messages"), "source", sources,
        columns=("source", "file_key"))}
    held = set(raw)
    orphans = {raw[s] for s in held - set(_landed_messages(spark, lake, lake_dir, sources))}
    if orphans:
        reverify(spark, lake_dir, settings, keys=orphans)
    # receipt order; equal receipt times (same created_at) by first arrival, then id
    todo = [(at, key, inner) for at, _first, key, inner in sorted(
        (at, entry.received_at or 0.0, entry.key, inner) for entry, at, inner in bound
        if f"nostr:{entry.key}" not in held)]
    if todo:
        body = b"".join(
            orjson.dumps({"received_at": at, "source": f"nostr:{key}", "message": inner})
            + b"\n" for at, key, inner in todo)
        digest = hashlib.sha256(body).hexdigest()[:24]
        inbox = storage.join(lake_dir, INBOX)
        storage.make_dirs(inbox)
        location = storage.join(inbox, f"stored-{digest}.jsonl")
        filesystem, local = storage.resolve(location)
        with filesystem.open_output_stream(local) as out:
            out.write(body)
        run(spark, [location], lake_dir, settings, catch_up_tasks=catch_up_tasks)
    return {sources[source]: row
            for source, row in _landed_messages(spark, lake, lake_dir, sources).items()}


def _landed_messages(spark: SparkSession, lake: Lake, lake_dir: str, sources: Iterable[str]
                     ) -> dict[str, dict[str, Any]]:
    """The ``messages`` row (verdict, code, detail) of each envelope ``source`` the lake
    holds (found through ``raw_messages``, which keeps the envelope's source)."""
    raw = _lookup(spark, lake, storage.join(lake_dir, "raw_messages"), "source", sources,
                  columns=("source", "file_key", "line_no"))
    msg_path = storage.join(lake_dir, "messages")
    local = _on_driver(msg_path) if raw else None
    if local is None:
        # (raw_messages without messages: a run stopped between the batch job's commits;
        # landing the same lines again completes it)
        return {}
    verdicts = ("verdict", "error_code", "error_detail")
    lines = frozenset((r["file_key"], r["line_no"]) for r in raw)
    found = _scan(spark, lake, msg_path, local, ["file_key", "line_no", *verdicts],
                  functools.partial(_keyed_rows, ("file_key", "line_no"), lines))
    by_line = {(row["file_key"], row["line_no"]): row for row in found}
    return {r["source"]: {"source": r["source"], **{k: line[k] for k in verdicts}}
            for r in raw if (line := by_line.get((r["file_key"], r["line_no"])))}


def _restated(spark: SparkSession, lake: Lake, lake_dir: str,
              bound: Sequence[tuple[Folded, float, str]], out: Mapping[str, Any]
              ) -> dict[str, dict[str, Any]]:
    """``nostr_events`` rows of earlier runs whose stored message the run's messages
    re-decided (a late, earlier-received copy makes it a 2006, or no longer one), with
    the verdict its ``messages`` row now has."""
    keys = set()
    for _entry, _at, inner in bound:
        try:
            message = json.loads(inner)
        except ValueError:
            continue
        if isinstance(message, dict) and isinstance(message.get("from"), str) \
                and isinstance(message.get("id"), str):
            keys.add((message["from"], message["id"]))
    rows = _restated_rows(spark, lake, lake_dir, keys)
    states = {r["source"][len("nostr:"):]: r for r in rows
              if (r["source"] or "").startswith("nostr:")}
    mine = {entry.key for entry, _at, _inner in bound}
    # rows of earlier runs: as this run rewrites them (grown by new copies), else as stored
    earlier = [out[k] for k in states if k in out and k not in mine]
    earlier += _lookup(spark, lake, storage.join(lake_dir, "nostr_events"), "event_key",
                       [k for k in states if k not in out])
    changed: dict[str, dict[str, Any]] = {}
    for row in earlier:
        state = states[row["event_key"]]
        code = state["error_code"]
        verdict = "valid" if code is None else "inner_invalid"
        if (verdict, code) != (row["verdict"], row["error_code"]):
            changed[row["event_key"]] = {
                **row, "verdict": verdict, "error_code": code,
                "error_detail": "inner message verified" if code is None
                else state["error_detail"]}
    return changed


def _restated_rows(spark: SparkSession, lake: Lake, lake_dir: str,
                   keys: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """The ``messages`` rows (``source``, ``error_code``, ``error_detail``) of the message
    keys ``(from, id)`` in ``keys``, with the ``source`` of their ``raw_messages`` line:
    each table looked up on the driver when small, else in Spark tasks."""
    msg_path = storage.join(lake_dir, "messages")
    raw_path = storage.join(lake_dir, "raw_messages")
    local = _on_driver(msg_path) if keys else None
    if local is None:
        return []
    hits = _scan(spark, lake, msg_path, local,
                 ["sender", "msg_id", "file_key", "line_no", "error_code", "error_detail"],
                 functools.partial(_keyed_rows, ("sender", "msg_id"), frozenset(keys)))
    raw_local = _on_driver(raw_path) if hits else None
    if raw_local is None:
        return []
    lines = frozenset((row["file_key"], row["line_no"]) for row in hits)
    raw = _scan(spark, lake, raw_path, raw_local, ["file_key", "line_no", "source"],
                functools.partial(_keyed_rows, ("file_key", "line_no"), lines))
    sources: dict[tuple[str, int], list[str]] = {}
    for line in raw:
        sources.setdefault((line["file_key"], line["line_no"]), []).append(line["source"])
    return [{"source": source, "error_code": row["error_code"],
             "error_detail": row["error_detail"]}
            for row in hits for source in sources.get((row["file_key"], row["line_no"]), [])]


#: What :func:`_newest_per_relay` yields.
_NEWEST = pa.schema([pa.field("relay", pa.string()), pa.field("newest", pa.int64())])


def _newest_per_relay(relays: frozenset[str], now: int, batches: Iterable[pa.RecordBatch]
                      ) -> Iterator[pa.RecordBatch]:
    """Of ``nostr_events`` rows (``relays``, ``created_at``): the newest ``created_at`` at
    most ``now`` of each of ``relays`` that delivered one, as one batch of
    :data:`_NEWEST` rows for all of ``batches`` (taken together by :func:`resume_points`,
    which keeps each relay's largest).

    Examples:
        >>> batch = pa.record_batch({"relays": [["r1", "r2"], ["r1"], None],
        ...                          "created_at": [5, 9, 7]})
        >>> next(_newest_per_relay(frozenset({"r1", "r2"}), 8, [batch])).to_pylist()
        [{'relay': 'r1', 'newest': 5}, {'relay': 'r2', 'newest': 5}]
    """
    newest: dict[str, int] = {}
    for batch in batches:
        for row in batch.to_pylist():
            created = row["created_at"]
            if created is None or created > now:
                continue
            for relay in row["relays"] or ():
                if relay in relays and created >= newest.get(relay, created):
                    newest[relay] = int(created)
    yield pa.RecordBatch.from_pylist(
        [{"relay": relay, "newest": at} for relay, at in sorted(newest.items())],
        schema=_NEWEST)


def resume_points(spark: SparkSession, lake_dir: str, relays: Sequence[str], now: float
                  ) -> dict[str, int]:
    """Per relay, the newest ``created_at`` of the events it delivered that the lake holds
    (events dated after ``now`` are left out: a relay keeps future-dated events, and one
    would move the resume point past everything still to come)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from snap_spark.lake import get_lake

    path = storage.join(lake_dir, "nostr_events")
    local = _on_driver(path) if relays else None
    if local is None:
        return {}
    found = _scan(spark, get_lake(spark), path, local, ["relays", "created_at"],
                  functools.partial(_newest_per_relay, frozenset(relays), int(now)),
                  from_arrow_schema(_NEWEST))
    newest: dict[str, int] = {}
    for row in found:  # one row per relay from each batch or Spark task: the largest
        newest[row["relay"]] = max(newest.get(row["relay"], row["newest"]), row["newest"])
    return newest


def ingest(spark: SparkSession, lake_dir: str, *, inputs: Sequence[str] = (),
           relays: Sequence[str] = (), since: int | None = None,
           keyring: Keyring | None = None, well_known: Sequence[str] = (),
           settings: VerifySettings | None = None, stored_clock: str = "event",
           timeout: float = 10.0, overlap: int = 600) -> IngestResult:
    """One ingestion run (see the module docstring): ``inputs`` (archive files or folders)
    and/or ``relays`` (live; each resumes ``overlap`` seconds before the newest event it
    delivered before, unless ``since`` is given), ``well_known`` signed card documents.

    Raises:
        UsageError: nothing to read, or an unknown ``stored_clock``.
    """
    refuse_remote(spark, "Nostr ingestion", "jobs/ingest_nostr.py")
    from pyspark.sql.pandas.types import from_arrow_schema

    from snap_spark.common.console import UsageError
    from snap_spark.common.placement import limits
    from snap_spark.nostr.wellknown import read_well_known
    from snap_spark.pipeline.batch_job import decided_settings, listed_inputs
    from snap_spark.pipeline.read import over_ranges, plan_ranges, small_input
    from snap_spark.pipeline.runs import clean_leftovers

    if stored_clock not in STORED_CLOCKS:
        raise UsageError(f"--stored-clock must be one of {', '.join(STORED_CLOCKS)}")
    if not inputs and not relays and not well_known:
        raise UsageError("give --input PATH, --relay URL or --well-known PATH")
    settings = decided_settings(settings, spark)  # validated, the run's "now" fixed, as the job's
    keyring = keyring or Keyring([])
    # what a killed run left uncommitted in any table of the lake
    clean_leftovers(lake_dir)
    started = time.monotonic()
    result = IngestResult()
    ingest_id = uuid.uuid4().hex
    checked = from_arrow_schema(CHECKED)
    rows: list[dict[str, Any]] = []
    if inputs:
        files = listed_inputs(inputs)
        ranges = plan_ranges(spark, files)
        if small_input(files, {}, limits().land_bytes):
            # a small archive is checked here, range by range in the order Spark's tasks
            # would give them (a job whose session has not started needs no Spark)
            rows += [row for index, part in enumerate(ranges)
                     for batch in check_range(part, index) for row in batch.to_pylist()]
        else:
            rows += over_ranges(spark, ranges, check_range, checked).toArrow().to_pylist()
        log(f"read {len(rows)} lines from {len(files)} archive file(s)")
    if relays:
        rows += _fetch(spark, lake_dir, relays, since, timeout, overlap, result, checked)
    read_well = read_well_known(well_known)
    land_copies(spark, lake_dir, rows, keyring=keyring, settings=settings,
                stored_clock=stored_clock, well_known_rows=read_well, ingest_id=ingest_id,
                result=result)
    result.seconds = time.monotonic() - started
    return result


def land_copies(spark: SparkSession, lake_dir: str, rows: Sequence[Mapping[str, Any]], *,
                keyring: Keyring, settings: VerifySettings, stored_clock: str = "event",
                well_known_rows: Sequence[Mapping[str, Any]] = (),
                ingest_id: str | None = None, result: IngestResult | None = None,
                catch_up_tasks: bool = True) -> IngestResult:
    """Steps 2 to 5 of the module docstring over checked copies (:data:`CHECKED` rows, from
    archive lines or relay deliveries): fold, decide, land the stored messages, settle the
    cards and commit the three Nostr tables. ``settings`` must be decided already
    (:func:`snap_spark.pipeline.batch_job.decided_settings`); ``ingest_id`` names the commits (a
    live stream gives one per micro-batch, so a replayed micro-batch writes nothing new);
    ``well_known_rows`` are :func:`snap_spark.nostr.wellknown.read_well_known` rows;
    ``catch_up_tasks`` ``False`` leaves the task tables to the caller's
    :class:`snap_spark.pipeline.task_tables.TasksFollower` (the live stream's).

    Folding, deciding and the replacing commits are idempotent: the same copies landed
    again change nothing.
    """
    from snap_spark.lake import commit_lease, get_lake

    started = time.monotonic()
    result = result if result is not None else IngestResult()
    lake = get_lake(spark)
    ingest_id = ingest_id or uuid.uuid4().hex
    now = dt.datetime.now(tz=dt.UTC)
    result.copies += len(rows)
    folded = fold_copies(rows)
    # read, decide and commit one writer at a time (docs/architecture.md, *Concurrent
    # writers*): every Nostr table row this run writes is decided against the tables as
    # other writers left them. The bound messages land under the lease too: the batch job
    # takes it again in this thread (it is re-entrant), and two writers landing the same
    # stored message at once would give messages a second line of it
    with commit_lease(lake_dir, "nostr") as held:
        out, existing, cards = _decide_and_commit(
            spark, lake, lake_dir, folded, held, keyring=keyring, settings=settings,
            stored_clock=stored_clock, well_known_rows=well_known_rows, ingest_id=ingest_id,
            now=now, result=result, catch_up_tasks=catch_up_tasks)
    new_rows = [r for k, r in out.items() if k not in existing]
    result.events += len(out)
    result.new_events += len(new_rows)
    result.verdicts += Counter(r["verdict"] for r in new_rows)
    result.kind_verdicts += Counter(
        f"{'-' if r['kind'] is None else r['kind']}:{r['verdict']}" for r in new_rows)
    result.cards += len(cards["cards"])
    result.seconds += time.monotonic() - started
    return result


def _decide_and_commit(spark: SparkSession, lake: Lake, lake_dir: str,
                       folded: dict[str, Folded], held: HeldLease, *, keyring: Keyring,
                       settings: VerifySettings, stored_clock: str,
                       well_known_rows: Sequence[Mapping[str, Any]], ingest_id: str,
                       now: dt.datetime, result: IngestResult, catch_up_tasks: bool
                       ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]],
                                  dict[str, list[dict[str, Any]]]]:
    """Steps 3 to 5 of :func:`land_copies`, with the lake's commit lease ``held``: the
    existing rows are read, the new events decided, the stored messages landed and the
    cards settled, then the three tables committed. Returns the ``nostr_events`` rows
    written, the rows the table held before, and the card rows written."""
    events_path = storage.join(lake_dir, "nostr_events")
    existing = {r["event_key"]: r for r in _lookup(spark, lake, events_path, "event_key",
                                                    folded)}
    out, bound, cards_new = _decide_events(folded, existing, keyring=keyring,
                                           settings=settings, stored_clock=stored_clock,
                                           ingest_id=ingest_id, now=now)
    if bound:
        _land_bound(spark, lake, lake_dir, bound, out, settings=settings, ingest_id=ingest_id,
                    now=now, result=result, catch_up_tasks=catch_up_tasks)
    cards_new += [{**row, "created_time": _time(row["created_at"]), "ingest_id": ingest_id}
                  for row in well_known_rows]
    cards = _settle_cards(spark, lake, lake_dir, cards_new, out)
    _commit_tables(spark, lake, lake_dir, held, cards, out, ingest_id)
    return out, existing, cards


def _decide_events(folded: dict[str, Folded], existing: Mapping[str, Mapping[str, Any]], *,
                   keyring: Keyring, settings: VerifySettings, stored_clock: str,
                   ingest_id: str, now: dt.datetime
                   ) -> tuple[dict[str, dict[str, Any]], list[tuple[Folded, float, str]],
                              list[dict[str, Any]]]:
    """Decide each folded event against the rows the lake holds (``existing``): the
    ``nostr_events`` rows to write (a held event only when its copies grew), the stored
    messages bound to a key of ``keyring`` (``(event, receipt time, inner text)``, to be
    landed through the batch job), and the history rows of the card events decided."""
    out: dict[str, dict[str, Any]] = {}
    bound: list[tuple[Folded, float, str]] = []
    cards_new: list[dict[str, Any]] = []
    for key, entry in folded.items():
        old = existing.get(key)
        if old is not None and not _expired_too_soon(old, entry):
            grown = _grown(old, entry)
            if grown is not None:
                out[key] = grown
            continue
        if old is not None:  # decided again from its earlier copy, with every copy
            entry.relays |= set(old["relays"] or [])
            entry.origins |= set(old["origins"] or [])
        if entry.verdict is not None:  # not a verified event: kept as it came
            out[key] = event_row(entry, entry.verdict, entry.detail, ingest_id=ingest_id,
                                 ingest_time=now)
            continue
        receipt = _receipt(entry, settings)
        verdict, detail, inner = decide(entry, receipt, keyring)
        if verdict == "bound" and inner is not None and receipt is not None:
            at = (float((entry.event or {})["created_at"]) if stored_clock == "event"
                  else receipt)
            bound.append((entry, at, inner))
            continue
        out[key] = event_row(entry, verdict, detail, ingest_id=ingest_id, ingest_time=now)
        if entry.event is not None and entry.event.get("kind") == CARD_KIND:
            cards_new.append(_card_history(entry, verdict, detail, ingest_id))
    return out, bound, cards_new


def _land_bound(spark: SparkSession, lake: Lake, lake_dir: str,
                bound: Sequence[tuple[Folded, float, str]], out: dict[str, dict[str, Any]], *,
                settings: VerifySettings, ingest_id: str, now: dt.datetime,
                result: IngestResult, catch_up_tasks: bool) -> None:
    """Land the ``bound`` stored messages in ``messages`` (:func:`land_stored`) and add to
    ``out`` the ``nostr_events`` row of each, with its inner message's verdict, and the
    earlier events whose verdict these messages changed (:func:`_restated`)."""
    delivered = land_stored(spark, lake_dir, bound, settings, catch_up_tasks=catch_up_tasks)
    log(f"stored messages: {len(delivered)} of {len(bound)} in messages")
    for entry, _at, _inner in bound:
        message = delivered.get(entry.key)
        if message is None:  # pragma: no cover - the batch job lands every line
            raise RuntimeError(f"stored message of event {entry.key} did not land")
        code = message["error_code"]
        out[entry.key] = event_row(
            entry, "valid" if code is None else "inner_invalid",
            "inner message verified" if code is None else message["error_detail"],
            ingest_id=ingest_id, ingest_time=now, code=code,
            message_source=f"nostr:{entry.key}")
    result.messages_landed += len(delivered)
    out.update(_restated(spark, lake, lake_dir, bound, out))


def _commit_tables(spark: SparkSession, lake: Lake, lake_dir: str, held: HeldLease,
                   cards: Mapping[str, list[dict[str, Any]]], out: Mapping[str, Any],
                   ingest_id: str) -> None:
    """Commit the run's rows to ``agent_card_history``, ``agent_cards`` and, last,
    ``nostr_events``, each while the lease is still ``held``, under the run's marker."""
    from snap_spark.lake import check_held, table_uri
    from snap_spark.pipeline.runs import run_marker

    staging = table_uri(storage.join(lake_dir, "_staging", ingest_id))
    info = {"job": "ingest_nostr", "ingest_id": ingest_id}
    with run_marker(lake_dir, ingest_id):
        try:
            # nostr_events last: an event it holds is one the run finished (a run stopped
            # before decides its events again; the card tables skip what they hold)
            # a writer that stalled past its lease (taken over) commits nothing more
            check_held(held)
            _replace(spark, lake, lake_dir, "agent_card_history", cards["history"],
                     "card_key", staging=staging, ingest_id=ingest_id, info=info)
            check_held(held)
            _replace(spark, lake, lake_dir, "agent_cards", cards["cards"], "identity",
                     staging=staging, ingest_id=ingest_id, info=info)
            check_held(held)
            _replace(spark, lake, lake_dir, "nostr_events", list(out.values()), "event_key",
                     staging=staging, ingest_id=ingest_id, info=info)
        finally:
            storage.delete_tree(staging)


def _expired_too_soon(old: Mapping[str, Any], entry: Folded) -> bool:
    """Whether a stored message the lake has as ``expired`` arrives now with an earlier
    copy, received before its expiration: its verdict depends on its first receipt, so it
    is decided again (the only verdict of an event that a later copy can change)."""
    if old["verdict"] != "expired" or entry.received_at is None:
        return False
    first, expiration = old["first_received_at"], old["expiration"]
    return (first is None or entry.received_at < first) and expiration is not None \
        and not expiration < entry.received_at


def _grown(old: Mapping[str, Any], entry: Folded) -> dict[str, Any] | None:
    """An existing row with this run's relays and origins added (``None``: nothing new)."""
    relays = sorted(set(old["relays"] or []) | entry.relays)
    origins = sorted(set(old["origins"] or []) | entry.origins)
    if relays == sorted(old["relays"] or []) and origins == sorted(old["origins"] or []):
        return None
    row = {**old, "relays": relays, "origins": origins, "copies": len(origins)}
    first = old["first_received_at"]
    if entry.received_at is not None and (first is None or entry.received_at < first):
        row.update(first_received_at=entry.received_at,
                   first_received_time=_time(entry.received_at),
                   first_source=entry.first_origin)
    return row


def _card_history(entry: Folded, verdict: str, detail: str | None, ingest_id: str
                  ) -> dict[str, Any]:
    event = entry.event or {}
    return history_row(card_key=entry.key, source="nostr", origin=None,
                       identity=_tag(event, "d"), pubkey=event.get("pubkey"),
                       created_at=event.get("created_at"), verdict=verdict, detail=detail,
                       card=event.get("content") if isinstance(event.get("content"), str)
                       else None, ingest_id=ingest_id)


def _settle_cards(spark: SparkSession, lake: Lake, lake_dir: str,
                  new: list[dict[str, Any]], events: dict[str, dict[str, Any]]
                  ) -> dict[str, list[dict[str, Any]]]:
    """History rows to write (new ones, and older ones whose verdict moves), the
    ``agent_cards`` rows of the identities the run's cards claim that differ from the
    table's, and the ``nostr_events`` rows of cards whose verdict the resolution sets
    (updated in ``events``). Rows the history already holds (a document read again, or a
    run stopped between its commits) are not written again, but their identities are
    resolved: a re-run completes what a stopped run left."""
    history_path = storage.join(lake_dir, "agent_card_history")
    held = {r["card_key"] for r in _lookup(spark, lake, history_path, "card_key",
                                            [r["card_key"] for r in new])}
    identities = {r["identity"] for r in new if r["identity"]}
    new = [r for r in new if r["card_key"] not in held]
    if not identities:
        return {"history": new, "cards": []}
    known = _lookup(spark, lake, history_path, "identity", identities)
    fresh = {r["card_key"] for r in new}
    rows = [r for r in known if r["card_key"] not in fresh] + new
    cards, verdicts = resolve_cards(rows)
    history = list(new)
    moved: set[str] = set()
    for row in rows:
        want = verdicts.get(row["card_key"])
        if want is not None and want != row["verdict"]:
            if row["card_key"] in fresh:
                row["verdict"] = want
            else:
                history.append({**row, "verdict": want})
                moved.add(row["card_key"])
    events_path = storage.join(lake_dir, "nostr_events")
    stored = {r["event_key"]: r for r in _lookup(spark, lake, events_path, "event_key",
                                                  [k for k in moved if k not in events])}
    for row in rows:
        key = row["card_key"]
        if row["source"] != "nostr" or key not in verdicts:
            continue
        current: dict[str, Any] | None = events.get(key) or stored.get(key)
        if current is not None and current["verdict"] != verdicts[key]:
            events[key] = {**current, "verdict": verdicts[key],
                           "error_detail": "a newer valid card of the identity stands"
                           if verdicts[key] == "superseded" else "agent card event verified"}
    standing = {r["identity"]: r for r in _lookup(spark, lake, storage.join(
        lake_dir, "agent_cards"), "identity", identities)}
    changed = [c for c in cards if _plain(c) != _plain(standing.get(c["identity"]))]
    return {"history": history, "cards": changed}


def _plain(row: Mapping[str, Any] | None) -> str:
    """A row as comparable text (table rows read back and rows built here alike)."""
    if row is None:
        return ""
    return json.dumps({k: (v.timestamp() if isinstance(v, dt.datetime) else v)
                       for k, v in row.items()}, sort_keys=True, default=str)


def _fetch(spark: SparkSession, lake_dir: str, relays: Sequence[str], since: int | None,
           timeout: float, overlap: int, result: IngestResult, checked: Any
           ) -> list[dict[str, Any]]:
    """Fetch from every relay (resuming), report each, verify the deliveries."""
    from snap_spark.common.placement import limits
    from snap_spark.nostr.client import fetch_events

    now = time.time()
    points: int | dict[str, int] | None = since
    if since is None:
        points = {relay: max(0, at - overlap)
                  for relay, at in resume_points(spark, lake_dir, relays, now).items()}
    fetched = fetch_events(list(relays), since=points, timeout=timeout)
    deliveries: list[dict[str, Any]] = []
    for report in fetched:
        start = points.get(report.url) if isinstance(points, dict) else points
        result.relays.append({"relay": report.url, "events": len(report.events),
                              "since": start, "error": report.error,
                              "seconds": round(report.seconds, 2)})
        log(f"relay {report.url}: {len(report.events)} events"
            + (f" since {start}" if start is not None else "")
            + (f"; {report.error}" if report.error else ""))
        deliveries += [{"event_json": e.event_json, "relay": e.relay,
                        "received_at": e.received_at} for e in report.events]
    if not deliveries:
        return []
    table = pa.Table.from_pylist(deliveries, schema=pa.schema([
        pa.field("event_json", pa.string()), pa.field("relay", pa.string()),
        pa.field("received_at", pa.float64())]))
    if limits().fits("land_bytes", sum(len(d["event_json"]) for d in deliveries)):
        # as few bytes as a batch run lands on the driver: checked here, in the order
        # Spark's tasks would give them (a job whose session has not started needs none)
        return [row for batch in check_deliveries(table.to_batches())
                for row in batch.to_pylist()]
    checked_rows: list[dict[str, Any]] = (
        spark.createDataFrame(table).mapInArrow(check_deliveries, checked).toArrow()
        .to_pylist())
    return checked_rows
