"""The ``snap-spark`` command: check files, make sample traffic, make keys, sign messages,
run a local Nostr relay, publish events to a relay, and submit a job of ``jobs/`` to Spark.

Run ``snap-spark --help`` or ``snap-spark COMMAND --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from snap_spark.common.extras import missing_extra, require

EXIT_USAGE = 2


def _add_check(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="verify every line of an NDJSON file (no Spark) and print one verdict per line",
        description=(
            "Read input lines (bare SNAP messages, or envelopes with received_at) and print "
            'one JSON line per input line: {"line_no", "verdict", "error_code", '
            '"error_detail"}. Replay dedupe is applied across the file in receipt order. '
            "A summary goes to stderr."
        ),
    )
    p.add_argument("file", help="input file (.jsonl/.ndjson/.json, optionally .gz), a folder "
                   "of them (read recursively; each output line then names its source_file; "
                   "replay is decided across all of them), or - for stdin")
    p.add_argument(
        "--bare-clock",
        default="",
        metavar="CLOCK",
        help=(
            "receipt time for bare lines (lines without an envelope received_at): 'now' "
            "(the time the check starts), 'message' (trust the message timestamp: drift "
            "always passes), or unix seconds. Without it, a bare line is an error."
        ),
    )
    p.add_argument("--max-drift", default="60",
                   help="allowed |received_at - timestamp| in seconds (default 60)")
    p.add_argument("--replay-window", default="120",
                   help="seconds an accepted (from, id) blocks repeats (default 120)")
    p.add_argument("--output", "-o", default="-", help="where to write verdict lines (default -)")
    p.add_argument("--summary-only", action="store_true",
                   help="print only the summary (to stdout), not one line per input line")


def _read_input(location: str) -> tuple[list[bytes | None], dict[int, str],
                                       list[tuple[str, int]]]:
    """The lines of a file, a folder of input files (in listing order) or ``-`` (stdin):
    ``(lines, read errors by position from 1, (source file, line number) per line)``.

    Raises:
        FileNotFoundError, ValueError: a missing path, a file of another kind, no input.
    """
    from snap_spark.files.lines import iter_file_lines
    from snap_spark.pipeline.read import list_input_files

    lines: list[bytes | None] = []
    errors: dict[int, str] = {}
    origin: list[tuple[str, int]] = []
    if location == "-":
        parts = sys.stdin.buffer.read().split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        return list(parts), errors, [("-", n) for n in range(1, len(parts) + 1)]
    files = list_input_files([location])
    if not files:
        raise FileNotFoundError(f"no .jsonl/.ndjson/.json(.gz) files under {location}")
    for path in files:
        for line_no, raw, error in iter_file_lines(path):
            lines.append(raw)
            origin.append((path, line_no))
            if error is not None:
                errors[len(lines)] = error
    return lines, errors, origin


def cmd_check(args: argparse.Namespace) -> int:
    from snap_spark.protocol.checker import final_verdicts
    from snap_spark.protocol.replay import line_name
    from snap_spark.protocol.validate import MissingReceiptTime, ReceiptClock
    from snap_spark.settings import SettingsError, VerifySettings
    from snap_spark.udfs.verify import check_items

    try:
        settings = VerifySettings(max_drift=args.max_drift, replay_window=args.replay_window,
                                  bare_clock=args.bare_clock).validated()
    except SettingsError as exc:
        print(f"snap-spark check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    clock = ReceiptClock.parse(settings.bare_clock)
    started = time.monotonic()
    try:
        lines, read_errors, origin = _read_input(args.file)
    except FileNotFoundError as exc:
        if exc.filename is None and os.path.exists(args.file):  # there, but nothing to read
            print(f"snap-spark check: {exc}", file=sys.stderr)
        else:
            print(f"snap-spark check: no such file or folder: {exc.filename or args.file}",
                  file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError) as exc:
        print(f"snap-spark check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    many = len({path for path, _ in origin}) > 1 or (
        args.file != "-" and os.path.isdir(args.file))
    try:
        # the native core unless SNAP_SPARK_NATIVE=0, like the jobs
        errors: list[str | None] = [None] * len(lines)
        for line_no, reason in (read_errors or {}).items():
            errors[line_no - 1] = reason
        checked = check_items(lines, errors, clock, settings.max_drift)
        verdicts = final_verdicts(
            checked, replay_window=settings.replay_window,
            names=[line_name(None if path == "-" else path, n) for path, n in origin])
    except MissingReceiptTime as exc:
        print(f"snap-spark check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    elapsed = time.monotonic() - started
    counts = Counter(v.error_code for v in verdicts)
    if not args.summary_only:
        out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")  # noqa: SIM115
        try:
            for v, (path, line_no) in zip(verdicts, origin, strict=True):
                row = v.as_dict()
                if many:  # a folder: say which file, with the line number in that file
                    row = {"source_file": path, **row, "line_no": line_no}
                out.write(orjson.dumps(row) + b"\n")
        finally:
            if out is not sys.stdout.buffer:
                out.close()
    summary = format_summary(len(lines), counts, elapsed)
    print(summary, file=sys.stdout if args.summary_only else sys.stderr)
    return 0


def format_summary(total: int, counts: Counter[int | None], seconds: float) -> str:
    """The balance of a check run, with its speed."""
    from snap_spark.protocol.checker import format_balance

    rows = format_balance(total, counts)
    rate = total / seconds if seconds > 0 else 0.0
    rows[0] += f"   ({seconds:.1f}s, {rate:,.0f} lines/s)"
    return "\n".join(rows)


def _add_sample(sub: Any) -> None:
    p = sub.add_parser(
        "sample",
        help="write deterministic, signed sample traffic with labelled attacks",
        description="Generate realistic SNAP traffic (NDJSON envelopes) with a share of attacks; "
        "with --nostr STEM, labelled Nostr traffic instead (agent-card events, SNAP messages of "
        "kinds 4339 and 21339, well-known cards, a keyring).",
    )
    p.add_argument("--agents", type=int, default=None,
                   help="number of agents (default 20; 12 with --nostr)")
    p.add_argument("--messages", type=int, default=None,
                   help="number of lines (default 100000); with --nostr, SNAP message events "
                        "of kinds 4339 and 21339 (default 300)")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    p.add_argument("--attack-share", type=float, default=0.10,
                   help="share of attack/malformed lines (default 0.10)")
    p.add_argument("--bare-share", type=float, default=0.0,
                   help="share of lines written as bare messages without envelope (default 0)")
    p.add_argument("--out", default=None,
                   help="output file (.jsonl, or .jsonl.gz); required unless --nostr")
    p.add_argument("--labels", default=None,
                   help="also write one JSON label per line: kind and expected error code")
    p.add_argument("--tasks", default="", metavar="PATH",
                   help="where to write the expected tasks table: one JSON object per task "
                        "(task_id, context_id, owner, state, state_timestamp, last_message_id, "
                        "reports, transitions, illegal_transitions, foreign_reports), taken from "
                        "what the generator sent, not from the verifier; default "
                        "<stem>.expected-tasks.txt beside --out (a name the job and the "
                        "checker never read as traffic)")
    p.add_argument("--nostr", default=None, metavar="STEM",
                   help="write labelled Nostr traffic instead: STEM.events.jsonl, "
                        "STEM.labels.jsonl, STEM.keyring (mode 0600), STEM.well-known/ and "
                        "STEM.well-known-labels.jsonl (see snap_spark/samples/nostr)")
    p.add_argument("--cards", type=int, default=None,
                   help="with --nostr: kind-31337 agent-card events (default 60)")
    p.add_argument("--well-known", type=int, default=None,
                   help="with --nostr: signed well-known card documents (default 30)")


def cmd_sample(args: argparse.Namespace) -> int:
    from snap_spark.samples.messages import (
        HONEST_KINDS,
        SampleConfig,
        expected_tasks_path,
        write_sample,
    )

    if args.nostr is not None:
        return _sample_nostr(args)
    if args.out is None or args.cards is not None or args.well_known is not None:
        print("snap-spark sample: --out is required (--cards and --well-known go with --nostr)",
              file=sys.stderr)
        return EXIT_USAGE
    args.agents = 20 if args.agents is None else args.agents
    args.messages = 100_000 if args.messages is None else args.messages
    if args.agents < 2 or args.messages < 0:
        print("snap-spark sample: need --agents >= 2 and --messages >= 0", file=sys.stderr)
        return EXIT_USAGE
    config = SampleConfig(
        agents=args.agents, messages=args.messages, seed=args.seed,
        attack_share=args.attack_share, bare_share=args.bare_share,
    )
    started = time.monotonic()
    tasks = args.tasks or expected_tasks_path(args.out)
    for target in (args.out, args.labels, tasks):
        if target and target != "-" and os.path.dirname(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
    counts = write_sample(config, args.out, args.labels, tasks)
    elapsed = time.monotonic() - started
    attacks = sum(n for kind, n in counts.items() if kind not in HONEST_KINDS)
    print(
        f"wrote {sum(counts.values())} lines to {args.out} ({attacks} attack lines, "
        f"{len(counts)} kinds) in {elapsed:.1f}s; expected tasks in {tasks}",
        file=sys.stderr,
    )
    return 0


def _sample_nostr(args: argparse.Namespace) -> int:
    """``snap-spark sample --nostr STEM``: the Nostr generator (``snap_spark.samples.nostr``)."""
    from snap_spark.samples.nostr import NostrSampleConfig, summary, write_nostr_sample

    if args.out is not None or args.labels is not None or args.tasks:
        print("snap-spark sample: --out, --labels and --tasks do not go with --nostr "
              "(its files are named after STEM)", file=sys.stderr)
        return EXIT_USAGE
    given = {"agents": args.agents, "cards": args.cards, "messages": args.messages,
             "well_known": args.well_known}
    try:
        config = NostrSampleConfig(
            seed=args.seed, **{name: value for name, value in given.items() if value is not None}
        )
    except ValueError as exc:
        print(f"snap-spark sample --nostr: {exc}", file=sys.stderr)
        return EXIT_USAGE
    sample = write_nostr_sample(config, args.nostr)
    print(summary(sample, args.nostr), file=sys.stderr)
    return 0


def _add_keygen(sub: Any) -> None:
    p = sub.add_parser("keygen", help="make a new agent key and show its identities")
    p.add_argument("--network", choices=("mainnet", "testnet"), default="mainnet")
    p.add_argument("--private-key", default=None,
                   help="derive from this private key (exactly 64 hex digits, from 1 to the "
                   "secp256k1 group order minus 1) instead of a random one")


def cmd_keygen(args: argparse.Namespace) -> int:
    """``snap-spark keygen``: a new key, or the one of ``--private-key``, and its identities.

    A ``--private-key`` that is not exactly 64 hex digits of a valid key is refused with
    one line that does not quote it, and exit 2.
    """
    from snap_spark.protocol import keys

    try:
        priv = (
            keys.generate_private_key() if args.private_key is None
            else keys.parse_private_key(args.private_key)
        )
        internal = keys.internal_pubkey(priv)
    except keys.InvalidPrivateKey as exc:  # its message never quotes the key
        print(f"snap-spark keygen: bad private key: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps({
        "private_key": priv.hex(),
        "nostr_pubkey": internal.hex(),
        "tweaked_pubkey": keys.tweak_public_key(internal).hex(),
        "p2tr_address": keys.p2tr_address(internal, args.network),
        "network": args.network,
    }, indent=2))
    return 0


def _add_sign(sub: Any) -> None:
    p = sub.add_parser(
        "sign",
        help="sign a SNAP message (JSON object) with a private key",
        description=(
            "Read a message object (file or - for stdin), fill in 'from' from the key when "
            "absent, and print it with 'sig' (BIP-340 over the taproot-tweaked key)."
        ),
    )
    p.add_argument("message", help="message JSON file, or - for stdin")
    key = p.add_mutually_exclusive_group(required=True)
    key.add_argument("--key", help="private key: exactly 64 hex digits")
    key.add_argument("--key-file",
                     help="file holding the private key: exactly 64 hex digits (blanks and "
                     "the line end around them are ignored)")
    p.add_argument("--network", choices=("mainnet", "testnet"), default="mainnet",
                   help="network for a 'from' filled in from the key (default mainnet)")
    p.add_argument("--now", action="store_true", help="set timestamp to the current time")
    p.add_argument("--zero-aux", action="store_true",
                   help="use 32 zero bytes of aux randomness (deterministic, as the spec vectors)")


def cmd_sign(args: argparse.Namespace) -> int:
    """``snap-spark sign``: a message object signed with ``--key`` or ``--key-file``.

    A key that is not exactly 64 hex digits of a valid key is refused with one line that
    does not quote it, and exit 2.
    """
    from snap_spark.protocol import keys
    from snap_spark.protocol.errors import SnapError
    from snap_spark.protocol.jsonparse import loads
    from snap_spark.protocol.signing import sign_message
    from snap_spark.protocol.validate import ReceiptClock, check_message

    try:
        if args.key is not None:
            key_text = args.key
        else:
            with open(args.key_file, "rb") as handle:
                # undecodable bytes become U+FFFD, refused as not hex: a decoding error
                # would quote the byte
                key_text = handle.read().decode("ascii", errors="replace").strip()
        priv = keys.parse_private_key(key_text)
        internal = keys.internal_pubkey(priv)
    except OSError as exc:  # names the file, not what it holds
        print(f"snap-spark sign: cannot read the key file: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except keys.InvalidPrivateKey as exc:  # its message never quotes the key
        print(f"snap-spark sign: bad key: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.message == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(args.message, "rb") as handle:
                raw = handle.read()
        message = loads(raw)
    except (OSError, SnapError) as exc:
        print(f"snap-spark sign: cannot read message: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(message, dict):
        print("snap-spark sign: the message must be a JSON object", file=sys.stderr)
        return EXIT_USAGE
    message.setdefault("from", keys.p2tr_address(internal, args.network))
    if args.now:
        message["timestamp"] = int(time.time())
    probe = check_message({k: v for k, v in message.items() if k != "sig"}, None,
                          ReceiptClock("message"))
    if probe.pre_code is not None:
        print(f"snap-spark sign: message is not valid ({probe.pre_code}): {probe.pre_detail}",
              file=sys.stderr)
        return EXIT_USAGE
    if keys.decode_p2tr(message["from"]).program != keys.tweak_public_key(internal):
        print("snap-spark sign: 'from' is not the address of this key", file=sys.stderr)
        return EXIT_USAGE
    signed = sign_message(message, priv, aux=bytes(32) if args.zero_aux else None)
    print(json.dumps(signed, ensure_ascii=False))
    return 0


def _add_lake(sub: Any) -> None:
    p = sub.add_parser(
        "lake",
        help="look after a lake: check its tables, remove what killed runs left behind",
        description=(
            "check: open every Delta table of the lake and say, per table, its version or "
            "what is damaged (exit 1 when one is). "
            "clean: delete the uncommitted data files and staging folders that runs killed "
            "before their commits left in a lake, in every table a job writes (runs still "
            "writing are left alone; files the Delta log references and files snap-spark did "
            "not write are never touched)."
        ),
    )
    p.add_argument("action", choices=["check", "clean"], help="what to do")
    p.add_argument("--lake", required=True, metavar="DIR", help="the lake folder (or URI)")
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.add_argument("--stale-after", default="86400", metavar="SECONDS",
                   help="a run of another host whose marker is older than this is over "
                   "(default 86400)")


def cmd_lake(args: argparse.Namespace) -> int:
    from snap_spark.files import storage
    from snap_spark.pipeline.runs import clean_leftovers
    from snap_spark.settings import SettingsError, check_seconds

    try:
        stale_after = check_seconds("--stale-after", args.stale_after)
        lake = storage.normalize(args.lake)
    except (SettingsError, ValueError) as exc:
        print(f"snap-spark lake: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if storage.path_kind(lake) != "dir":
        print(f"snap-spark lake: no lake folder at {lake}", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "check":
        return _check_lake(lake)
    # every table a job writes (runs.swept_tables), and the runs' staging folders
    cleaned = clean_leftovers(lake, dry_run=args.dry_run, stale_after=stale_after)
    verb = "would remove" if args.dry_run else "removed"
    for path in [*cleaned.files, *cleaned.staging]:
        print(f"{verb} {path}")
    print(f"lake {lake}: {cleaned.summary()}")
    return 0


def _check_lake(lake: str) -> int:
    """``snap-spark lake check``: one line per Delta table of the lake (its folders that
    hold a ``_delta_log``): its version, or why it cannot be read."""
    from pyarrow import fs as pafs

    from snap_spark.files import storage
    from snap_spark.lake import DamagedTable, table_uri, table_version

    filesystem, root = storage.resolve(lake)
    folders = [info.base_name for info in filesystem.get_file_info(pafs.FileSelector(root))
               if info.type == pafs.FileType.Directory]
    tables = sorted(name for name in folders
                    if storage.is_dir(storage.join(lake, name, "_delta_log")))
    damaged = 0
    for name in tables:
        path = storage.join(lake, name)
        try:
            version = table_version(table_uri(path))
        except DamagedTable as exc:
            damaged += 1
            print(f"{name}: DAMAGED: {exc}")
            continue
        print(f"{name}: ok, version {version}")
    print(f"lake {lake}: {len(tables)} tables, {damaged} damaged")
    return 1 if damaged else 0


def _add_relay(sub: Any) -> None:
    p = sub.add_parser(
        "relay",
        help="run a local Nostr relay until SIGTERM or Ctrl-C (nostr-sdk's relay)",
        description=(
            "Run a local Nostr relay (nostr-sdk's LocalRelay) for tests, demos and the "
            "pipeline's development. It prints 'relay listening on ws://HOST:PORT' once it "
            "accepts connections and runs until SIGTERM or SIGINT (exit status 0; 1 when it "
            "cannot start). It refuses forged events, keeps only the newest card per "
            "pubkey and identity (refusing older ones), and refuses expired events (NIP-40). "
            "Events live in memory unless --database is given."
        ),
    )
    p.add_argument("--port", type=int, required=True,
                   help="TCP port to listen on (0: a free port, shown in the ready line)")
    p.add_argument("--host", default="127.0.0.1",
                   help="IP address to listen on (default 127.0.0.1; an address, not a name)")
    p.add_argument("--database", default=None, metavar="DIR",
                   help="keep events in an LMDB database in this folder (created when "
                   "missing), across restarts; default: in memory, gone when the relay stops")
    p.add_argument("--notes-per-minute", type=int, default=None, metavar="N",
                   help="events one connection may publish per minute (default: no limit; "
                   "nostr-sdk's own default is 60)")


def cmd_relay(args: argparse.Namespace) -> int:
    from snap_spark.nostr.relay import DEFAULT_NOTES_PER_MINUTE, RelaySettings, run_relay

    per_minute = (DEFAULT_NOTES_PER_MINUTE if args.notes_per_minute is None
                  else args.notes_per_minute)
    if not 0 <= args.port < 65536:
        print(f"snap-spark relay: --port must be 0-65535, not {args.port}", file=sys.stderr)
        return EXIT_USAGE
    if not 0 < per_minute <= DEFAULT_NOTES_PER_MINUTE:
        print(f"snap-spark relay: --notes-per-minute must be 1-{DEFAULT_NOTES_PER_MINUTE}",
              file=sys.stderr)
        return EXIT_USAGE
    settings = RelaySettings(host=args.host, port=args.port, database=args.database,
                             notes_per_minute=per_minute)
    return run_relay(settings)


def _add_publish(sub: Any) -> None:
    p = sub.add_parser(
        "publish",
        help="publish the Nostr events of a file to a relay, and say what it answered",
        description=(
            "Send every event of FILE to the relay, one after another, as given (nothing is "
            "re-signed). A line is an event object, a relay frame [\"EVENT\", <sub>, "
            "{...}] or an envelope {\"received_at\", \"relay\", \"event\"}. Prints one "
            "line per event, '<id> accepted|refused <reason>' ('-' for the id of a text "
            "that is not an event), one '- skipped line N: <reason>' per line holding no "
            "event, and a summary on stderr. Exit status: 0 when the relay was reachable "
            "(whatever it refused), 1 when it was not or the connection was lost, 2 for bad "
            "options or an unreadable FILE."
        ),
    )
    p.add_argument("file", help="NDJSON file (optionally .gz), or - for stdin")
    p.add_argument("--relay", required=True, metavar="URL", help="relay URL (ws:// or wss://)")
    p.add_argument("--timeout", default="10", metavar="SECONDS",
                   help="seconds for connecting, and for the relay's answer to each event "
                   "(default 10)")


def _publish_lines(location: str) -> Iterator[tuple[int, bytes | None, str | None]]:
    """``(line number, bytes, read error)`` of FILE or stdin, read as they are needed."""
    from snap_spark.files.lines import iter_file_lines

    if location != "-":
        yield from iter_file_lines(location)
        return
    for line_no, raw in enumerate(sys.stdin.buffer, start=1):
        yield line_no, raw[:-1] if raw.endswith(b"\n") else raw, None


def cmd_publish(args: argparse.Namespace) -> int:
    from snap_spark.nostr.client import PublishOutcome, RelayUnreachable, publish_events
    from snap_spark.nostr.lines import event_from_line
    from snap_spark.settings import SettingsError, check_seconds

    try:
        timeout = check_seconds("--timeout", args.timeout, allow_zero=False)
    except SettingsError as exc:
        print(f"snap-spark publish: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.file != "-" and not os.path.isfile(args.file):
        what = "not a file" if os.path.exists(args.file) else "no such file"
        print(f"snap-spark publish: {what}: {args.file}", file=sys.stderr)
        return EXIT_USAGE
    counts: Counter[str] = Counter()
    started = time.monotonic()

    def texts() -> Iterator[str]:
        for line_no, raw, error in _publish_lines(args.file):
            found = event_from_line(raw) if raw is not None else None
            text = found.event_json if found is not None else None
            if text is None:
                reason = (error if found is None
                          else found.reason or "the event nests too deeply to write as JSON")
                print(f"- skipped line {line_no}: {reason}", flush=True)
                counts["skipped"] += 1
                continue
            yield text

    def report(outcome: PublishOutcome) -> None:
        verdict = "accepted" if outcome.accepted else "refused"
        counts[verdict] += 1
        print(f"{outcome.event_id or '-'} {verdict} {outcome.message}".rstrip(), flush=True)

    try:
        outcomes = publish_events(args.relay, texts(), timeout, on_outcome=report)
    except RelayUnreachable as exc:
        print(f"snap-spark publish: relay {exc.url} unreachable: {exc.reason}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"snap-spark publish: cannot read {args.file}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    lost = any(o.connection_lost for o in outcomes)
    print(
        f"published to {args.relay}: {len(outcomes)} events, {counts['accepted']} accepted, "
        f"{counts['refused']} refused; {counts['skipped']} lines skipped "
        f"({time.monotonic() - started:.1f}s)" + ("; the connection was lost" if lost else ""),
        file=sys.stderr,
    )
    return 1 if lost else 0


def _add_submit(sub: Any) -> None:
    from snap_spark.runtime.submit import known_jobs

    p = sub.add_parser(
        "submit",
        help="run a job of jobs/ under spark-submit, with no activated virtualenv "
        "(cron, Airflow)",
        usage="snap-spark submit [--dry-run] [SPARK-SUBMIT OPTIONS] JOB [JOB ARGS ...]",
        description=(
            "Run jobs/JOB.py with Spark's spark-submit from any shell, cron or Airflow, with\n"
            "no activated virtualenv and nothing of it on PATH. It adds:\n"
            "  - this interpreter for the driver and the workers (PYSPARK_PYTHON and\n"
            "    PYSPARK_DRIVER_PYTHON unless set; its folder first on PATH);\n"
            "  - Spark's home: $SPARK_HOME when set, else the installed pyspark;\n"
            "  - --jars: Delta's cached JARs (unless --conf spark.snap.lake.backend=delta-rs),\n"
            "    and Kafka's for stream_verify --kafka-bootstrap, merged with your --jars;\n"
            "  - --conf spark.sql.session.timeZone=UTC, no console progress bar, and as\n"
            "    the driver's Java options the package's quieter conf/log4j2.properties\n"
            "    with the short-job JVM flags -XX:TieredStopAtLevel=1 -XX:+UseParallelGC\n"
            "    (unless --driver-java-options or spark.driver.extraJavaOptions is given);\n"
            "  - SPARK_LOCAL_IP=127.0.0.1 when unset and the master is local.\n"
            "\n"
            "The rule: spark-submit's options (--master, --conf, --jars, --packages,\n"
            "--driver-memory, --num-executors, --deploy-mode, ...) go BEFORE JOB; everything\n"
            "after JOB goes to the job unchanged (JOB --help shows the job's options).\n"
            "The command becomes spark-submit, so its exit status is the job's: 0 ok,\n"
            "1 failed, 2 usage error, 3 alert (audit thresholds crossed), 4 storage fault\n"
            "(the lake cannot be written: read-only, full, no permission, or gone)."
        ),
        epilog=(
            "examples:\n"
            "  snap-spark submit audit --lake data/lake --out data/audit "
            "--thresholds limits.toml\n"
            "  snap-spark submit --master yarn --driver-memory 4g audit --lake s3a://lake/snap "
            "--out /srv/audit\n"
            "  snap-spark submit --dry-run verify_messages --input data/sample --lake data/lake"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dry-run", action="store_true",
                   help="print the command (and the variables it sets) on one line, shell-"
                   "quoted, and exit 0 without running it")
    p.add_argument("job", metavar="JOB",
                   help=f"a job of jobs/, with or without .py: {', '.join(known_jobs())}")
    p.add_argument("job_args", nargs=argparse.REMAINDER, metavar="JOB ARGS",
                   help="the job's own options, passed unchanged")


def cmd_submit(argv: Sequence[str]) -> int:
    """``snap-spark submit``: split by :func:`snap_spark.runtime.submit.split_arguments` (argparse
    would take the job's options for its own), then run by :func:`snap_spark.runtime.submit.run`."""
    from snap_spark.runtime import submit

    try:
        request = submit.split_arguments(argv)
    except submit.SubmitError as exc:
        print(f"snap-spark submit: {exc}", file=sys.stderr)
        return exc.status
    if request.help:
        build_parser().parse_args(["submit", "--help"])  # prints the help, exits 0
    return submit.run(request)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="snap-spark",
        description="Verify SNAP agent-to-agent traffic (pure-Python tools; the Spark job is "
        "jobs/verify_messages.py).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_check(sub)
    _add_sample(sub)
    _add_keygen(sub)
    _add_sign(sub)
    _add_lake(sub)
    _add_relay(sub)
    _add_publish(sub)
    _add_submit(sub)
    return parser


COMMANDS = {"check": cmd_check, "sample": cmd_sample, "keygen": cmd_keygen, "sign": cmd_sign,
            "lake": cmd_lake, "relay": cmd_relay, "publish": cmd_publish}
#: Commands that need an optional part of the package (:mod:`snap_spark.common.extras`).
NEEDS_EXTRA = {"relay": "nostr", "publish": "nostr"}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``snap-spark`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["submit"]:  # spark-submit's options and the job's own, not argparse's
        return cmd_submit(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.command in NEEDS_EXTRA:
            require(NEEDS_EXTRA[args.command])
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        return 0
    except ImportError as exc:
        if (missing := missing_extra(exc)) is None:
            raise
        print(f"snap-spark {args.command}: {missing}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
