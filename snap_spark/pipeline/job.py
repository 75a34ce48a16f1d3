"""``jobs/verify_messages.py``: land SNAP message archives into Delta with a verdict per line.

Usage (see ``--help``)::

    spark-submit jobs/verify_messages.py --input PATH [--input PATH ...] --lake DIR

Re-runs are idempotent: every input file has an ingest key (path, size, modification time);
files whose key is already in a table are not written to it again, and each commit carries
a Delta app transaction naming the exact set of files it holds.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
import tomllib
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PIPELINE_CONF = Path(__file__).resolve().parents[2] / "conf" / "pipeline.toml"
APP_ID_PREFIX = "snap-spark/verify_messages/"
EXIT_USAGE = 2


@dataclass
class JobResult:
    """What a run did: per-table rows written and verdict counts of this run's lines."""

    files_seen: int = 0
    files_processed: int = 0
    lines_read: int = 0
    raw_rows_written: int = 0
    message_rows_written: int = 0
    counts: dict[int | None, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def valid(self) -> int:
        return self.counts.get(None, 0)

    @property
    def rejected(self) -> int:
        return sum(n for code, n in self.counts.items() if code is not None)


def file_key(path: str) -> str:
    """Ingest key of one input file: its absolute path, size and modification time."""
    stat = os.stat(path)
    ident = f"{os.path.abspath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def batch_app_id(keys: Sequence[str]) -> str:
    """Delta app transaction id naming one set of files (order does not matter)."""
    digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:32]
    return APP_ID_PREFIX + digest


def log(message: str) -> None:
    """Progress line for people following a long run (stderr, flushed)."""
    print(f"[snap-spark {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verify_messages.py",
        description=(
            "Verify SNAP message archives (NDJSON, optionally .gz) and land them into Delta "
            "tables raw_messages and messages under --lake, with a verdict for every line."
        ),
        epilog=(
            "Bare lines (no envelope received_at) need --bare-clock. Settings also come from "
            "--config (default conf/pipeline.toml); command-line options win."
        ),
    )
    parser.add_argument("--input", "-i", action="append", required=True, metavar="PATH",
                        help="input file or folder (repeatable); folders are read recursively "
                        "for .jsonl/.ndjson/.json and their .gz")
    parser.add_argument("--lake", default=None, metavar="DIR",
                        help="folder of the Delta tables (default: [lake] path of --config)")
    parser.add_argument("--config", default=None, metavar="TOML",
                        help="pipeline settings file (default conf/pipeline.toml)")
    parser.add_argument("--bare-clock", default=None, metavar="CLOCK",
                        help="receipt time for bare lines: 'now' (job start, same for all), "
                        "'message' (trust the message timestamp), or unix seconds; "
                        "without it a bare line stops the job before anything is written")
    parser.add_argument("--max-drift", type=float, default=None, metavar="SECONDS",
                        help="allowed |received_at - timestamp| (default 60; 60 passes)")
    parser.add_argument("--replay-window", type=float, default=None, metavar="SECONDS",
                        help="an accepted (from, id) makes repeats within this many seconds "
                        "of receipt time a 2006 (default 120)")
    parser.add_argument("--master", default=None,
                        help="Spark master when not launched by spark-submit (default local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting (repeatable)")
    parser.add_argument("--batch-rows", type=int, default=8192,
                        help="lines per Arrow batch when reading (default 8192)")
    parser.add_argument("--verify-threads", type=int, default=0, metavar="N",
                        help="signature-verification threads per task (default 0 = one per "
                        "core a task owns: spark.task.cpus, or idle cores in local mode)")
    return parser


def load_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Merge ``--config`` (TOML) with command-line options (which win)."""
    path = Path(args.config) if args.config else DEFAULT_PIPELINE_CONF
    conf: dict[str, Any] = {}
    if path.exists():
        with path.open("rb") as handle:
            conf = tomllib.load(handle)
    elif args.config:
        raise FileNotFoundError(f"config file not found: {path}")
    verify = conf.get("verify", {})
    lake = conf.get("lake", {})
    return {
        "lake": args.lake or lake.get("path", "data/lake"),
        "bare_clock": args.bare_clock if args.bare_clock is not None
        else str(verify.get("bare_clock", "")),
        "max_drift": args.max_drift if args.max_drift is not None
        else float(verify.get("max_drift_seconds", 60)),
        "replay_window": args.replay_window if args.replay_window is not None
        else float(verify.get("replay_window_seconds", 120)),
    }


def auto_verify_threads(spark: Any) -> int:
    """Verification threads per task: the cores a task owns. libsecp256k1 releases the GIL,
    so a task given several cores (``spark.task.cpus``), or one slot of a local master on a
    machine with more cores, verifies on all of them; with one task per core it is 1.

    Measured on 2 cores, 200k lines: local[1] 13.5 s -> 10.6 s with 2 threads; local[2]
    7.6 s either way (bench/README.md).
    """
    task_cpus = int(spark.conf.get("spark.task.cpus", "1") or 1)
    master = str(spark.sparkContext.master)
    if master.startswith("local["):
        spec = master[len("local["):].split(",")[0].rstrip("]")
        cores = os.cpu_count() or 1
        slots = cores if spec == "*" else max(1, int(spec))
        return max(task_cpus, cores // slots)
    return max(1, task_cpus)


def _ingested_keys(spark: Any, lake: Any, path: str) -> set[str]:
    """File keys already present in a table (empty when the table does not exist yet)."""
    if not lake.exists(path):
        return set()
    rows = lake.read(spark, path).select("file_key").distinct().collect()
    return {row[0] for row in rows}


def run(
    spark: Any,
    inputs: Sequence[str],
    lake_dir: str,
    *,
    bare_clock: str = "",
    max_drift: float = 60.0,
    replay_window: float = 120.0,
    batch_rows: int = 8192,
    verify_threads: int = 0,
) -> JobResult:
    """Verify ``inputs`` and append new files' lines to ``raw_messages`` and ``messages``.

    Raises:
        FileNotFoundError: an input path does not exist, or holds no input files.
        MissingReceiptTime: a bare line needs ``bare_clock`` (nothing is written then).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from schemas.tables import MESSAGES_PARTITION
    from snap_spark.lake import get_lake
    from snap_spark.pipeline.checked_source import read_checked
    from snap_spark.pipeline.source import list_input_files
    from snap_spark.pipeline.verify import (
        DUPLICATES_SCHEMA,
        VerifySettings,
        apply_duplicates,
        find_duplicates,
        to_messages,
        to_raw_messages,
    )
    from snap_spark.protocol.validate import MissingReceiptTime, ReceiptClock

    started = time.monotonic()
    result = JobResult()
    lake = get_lake(spark)
    raw_path = os.path.join(lake_dir, "raw_messages")
    msg_path = os.path.join(lake_dir, "messages")

    files = list_input_files(inputs)
    if not files:
        raise FileNotFoundError(f"no .jsonl/.ndjson/.json(.gz) files under {list(inputs)}")
    keys = {path: file_key(path) for path in files}
    result.files_seen = len(files)
    done_raw = _ingested_keys(spark, lake, raw_path)
    done_msg = _ingested_keys(spark, lake, msg_path)
    todo = [p for p in files if keys[p] not in done_raw or keys[p] not in done_msg]
    log(f"stage 1/4 inputs: {len(files)} files ({len(files) - len(todo)} already ingested) "
        f"lake={lake_dir} backend={lake.name}")
    if not todo:
        log("nothing new to ingest")
        result.seconds = time.monotonic() - started
        return result
    result.files_processed = len(todo)

    clock_now = float(int(time.time()))
    ReceiptClock.parse(bare_clock, now=clock_now)  # fail fast on a bad spelling
    settings = VerifySettings(max_drift=max_drift, replay_window=replay_window,
                              bare_clock=bare_clock, clock_now=clock_now,
                              verify_threads=verify_threads or auto_verify_threads(spark))
    key_map = F.create_map(*[x for p in todo for x in (F.lit(p), F.lit(keys[p]))])
    checked = (
        read_checked(spark, todo, settings, batch_rows=batch_rows)
        .withColumn("file_key", key_map[F.col("source_file")])
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        # One pass over the cached checks: lines per file, bare lines, stateless verdicts.
        per_file: dict[str, tuple[int, int]] = {}
        stateless: Counter[int | None] = Counter()
        for row in checked.groupBy(
            "file_key", F.coalesce("pre_code", "auth_code").alias("code")
        ).agg(
            F.count(F.lit(1)).alias("lines"),
            F.sum(F.col("needs_clock").cast("int")).alias("bare"),
        ).collect():
            lines, bare = per_file.get(row["file_key"], (0, 0))
            per_file[row["file_key"]] = (lines + int(row["lines"]), bare + int(row["bare"]))
            stateless[row["code"]] += int(row["lines"])
        result.lines_read = sum(lines for lines, _ in per_file.values())
        log(f"stage 2/4 read and checked {result.lines_read} lines from {len(todo)} files")
        if any(bare for _, bare in per_file.values()):
            raise MissingReceiptTime(
                "input has bare message lines (no envelope received_at): choose their "
                "receipt clock with --bare-clock now|message|<unix seconds>"
            )
        ingest_id = uuid.uuid4().hex
        ingest_us = int(time.time() * 1_000_000)

        raw_keys = [keys[p] for p in todo if keys[p] not in done_raw]
        if raw_keys:
            raw = checked.filter(F.col("file_key").isin(raw_keys)).transform(
                to_raw_messages(ingest_id, ingest_us)
            )
            if lake.append(raw, raw_path, app_id=batch_app_id(raw_keys), version=1):
                result.raw_rows_written = sum(per_file.get(k, (0, 0))[0] for k in raw_keys)
        log(f"stage 3/4 raw_messages: +{result.raw_rows_written} rows")

        msg_keys = [keys[p] for p in todo if keys[p] not in done_msg]
        # Replays are few: bring the 2006 rows to the driver, then broadcast them.
        dup_rows = checked.transform(find_duplicates(settings)).collect()
        for row in dup_rows:
            stateless[row["prior_code"]] -= 1
            stateless[row["replay_code"]] += 1
        result.counts = {code: n for code, n in stateless.items() if n}
        duplicates = spark.createDataFrame(dup_rows, DUPLICATES_SCHEMA)
        if msg_keys:
            messages = (
                checked.filter(F.col("file_key").isin(msg_keys))
                .transform(apply_duplicates(duplicates))
                .transform(to_messages(ingest_id, ingest_us))
            )
            if lake.append(messages, msg_path, app_id=batch_app_id(msg_keys), version=1,
                           partition_by=list(MESSAGES_PARTITION)):
                result.message_rows_written = sum(per_file.get(k, (0, 0))[0] for k in msg_keys)
        log(f"stage 4/4 messages: +{result.message_rows_written} rows "
            f"({len(dup_rows)} replays found)")
    finally:
        checked.unpersist()
    result.seconds = time.monotonic() - started
    return result


def format_summary(result: JobResult) -> str:
    """The end-of-run balance: valid + rejected = lines read, and counts per code."""
    from snap_spark.protocol.checker import format_balance

    rate = result.lines_read / result.seconds if result.seconds else 0.0
    balance = format_balance(result.lines_read, result.counts)
    return "\n".join([
        f"files: {result.files_seen} seen, {result.files_processed} processed",
        balance[0],
        f"rows written: raw_messages +{result.raw_rows_written}, "
        f"messages +{result.message_rows_written}   ({result.seconds:.1f}s, {rate:,.0f} lines/s)",
        *balance[1:],
    ])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``jobs/verify_messages.py``."""
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args)
    except (FileNotFoundError, tomllib.TOMLDecodeError, ValueError) as exc:
        print(f"verify_messages: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from snap_spark.lake import LakeError
    from snap_spark.protocol.validate import MissingReceiptTime, ReceiptClock

    try:
        ReceiptClock.parse(settings["bare_clock"])
    except ValueError as exc:
        print(f"verify_messages: {exc}", file=sys.stderr)
        return EXIT_USAGE
    extra: dict[str, str] = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"verify_messages: --conf wants KEY=VALUE, got {item!r}", file=sys.stderr)
            return EXIT_USAGE
        extra[key] = value
    from snap_spark.session import build_session

    spark = build_session("snap-spark verify_messages", master=args.master, extra_conf=extra)
    spark.sparkContext.setLogLevel(os.environ.get("SNAP_SPARK_LOG_LEVEL", "WARN"))
    try:
        result = run(
            spark, args.input, settings["lake"], bare_clock=settings["bare_clock"],
            max_drift=settings["max_drift"], replay_window=settings["replay_window"],
            batch_rows=args.batch_rows, verify_threads=args.verify_threads,
        )
    except (FileNotFoundError, NotADirectoryError, ValueError, MissingReceiptTime) as exc:
        print(f"verify_messages: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LakeError as exc:
        print(f"verify_messages: the Delta tables refused the write: {exc}", file=sys.stderr)
        return 1
    print(format_summary(result))
    return 0
