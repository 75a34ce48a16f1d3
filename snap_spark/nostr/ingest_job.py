"""``jobs/ingest_nostr.py``: the Nostr ingestion job's command line, around
:func:`snap_spark.nostr.ingest.ingest`.

Example::

    spark-submit jobs/ingest_nostr.py --relay ws://127.0.0.1:7777 --lake data/lake
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from snap_spark.common.console import UsageError
from snap_spark.common.extras import require
from snap_spark.nostr.ingest import STORED_CLOCKS, IngestResult, ingest
from snap_spark.nostr.stored import Keyring
from snap_spark.runner import Context, Job
from snap_spark.runner import main as run_job

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["IngestNostr", "main"]


class IngestNostr(Job):
    """``jobs/ingest_nostr.py``: relays or archives -> the Nostr tables (and messages)."""

    name = "ingest_nostr"
    description = ("Ingest SNAP Nostr events (agent cards, kind 31337; stored messages, "
                   "kind 4339) from relays or archive files into nostr_events, "
                   "agent_card_history and agent_cards under --lake, with a verdict for "
                   "every event; decrypted stored messages land in messages.")
    epilog = ("Archive lines are raw events, relay frames [\"EVENT\", sub, {...}] or "
              "envelopes {\"received_at\", \"relay\", \"event\"}. Live runs resume "
              "where each relay's events in the lake end (minus --overlap).")
    verifies_messages = True

    def add_arguments(self, parser: Any) -> None:
        source = parser.add_argument_group("sources (at least one)")
        source.add_argument("--relay", action="append", default=[], metavar="URL",
                            help="relay to fetch kinds 31337 and 4339 from (repeatable)")
        source.add_argument("--input", "-i", action="append", default=[], metavar="PATH",
                            help="archive file or folder of event lines (repeatable)")
        source.add_argument("--well-known", action="append", default=[],
                            metavar="FILE_OR_DIR",
                            help="signed well-known card documents (repeatable)")
        parser.add_argument("--since", type=int, default=None, metavar="UNIX",
                            help="fetch events created from this time (overrides the "
                            "resume points kept in the lake)")
        parser.add_argument("--overlap", type=int, default=600, metavar="SECONDS",
                            help="fetch this much before each relay's resume point "
                            "(default 600: events published late are not missed)")
        parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                            help="per relay (default 10)")
        parser.add_argument("--keyring", default=None, metavar="FILE",
                            help="64-hex private keys, one per line (mode 600): stored "
                            "messages to these keys are decrypted")
        parser.add_argument("--stored-clock", default="event", choices=STORED_CLOCKS,
                            help="receipt time of a stored message's inner message: "
                            "'event' (default: the event's created_at, so offline "
                            "retrieval works) or 'received' (when the event first "
                            "reached us: a message fetched more than 60 s after it was "
                            "sent is a 2004)")

    def check(self, context: Context) -> None:
        args = context.args
        if not (args.relay or args.input or args.well_known):
            raise UsageError("give --relay URL, --input PATH or --well-known PATH")
        if args.relay or args.keyring:  # archives alone are checked without nostr-sdk
            require("nostr")

    def run(self, spark: SparkSession, context: Context) -> IngestResult:
        from snap_spark.nostr.stored import KeyringError

        args = context.args
        try:
            keyring = Keyring.load(args.keyring) if args.keyring else None
        except KeyringError as exc:
            raise UsageError(str(exc)) from None
        return ingest(spark, context.lake, inputs=args.input, relays=args.relay,
                      since=args.since, keyring=keyring, well_known=args.well_known,
                      settings=context.verify, stored_clock=args.stored_clock,
                      timeout=args.timeout, overlap=args.overlap)

    def summary(self, result: Any) -> str:
        assert isinstance(result, IngestResult)
        verdicts = "  ".join(f"{v}:{n}" for v, n in sorted(result.verdicts.items()))
        lines = [f"copies read: {result.copies}   events written: {result.events} "
                 f"({result.new_events} new)   agent_cards rows: {result.cards}   "
                 f"stored messages in messages: {result.messages_landed}   "
                 f"({result.seconds:.1f}s)",
                 f"new events by verdict: {verdicts or '-'}"]
        lines += [f"relay {r['relay']}: {r['events']} events"
                  + (f", error: {r['error']}" if r["error"] else "")
                  for r in result.relays]
        return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``jobs/ingest_nostr.py``."""
    return run_job(IngestNostr(), argv)
