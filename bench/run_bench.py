"""`make bench`: where snap-spark stands against the crypto floor and a naive Spark UDF.

Measured in one run, on one generated corpus (default 200,000 lines, 10% attacks):

1. floor     -- raw libsecp256k1 BIP-340 verifies per second, every core busy (digests, keys
                and signatures prepared beforehand: nothing but the verify call is timed).
2. row_udf   -- a row-at-a-time Python UDF doing the verification the way a user writes it
                first: json.loads, rfc8785, bech32m.decode and coincurve per row.
3. row_core  -- a row-at-a-time Python UDF calling snap-spark's own checker (same core,
                no vectorization), to separate the two gains.
4. job       -- jobs/verify_messages.py end to end (read, check, replay, two Delta tables)
                on a warm session, lines per second of the whole run.
5. no_spark  -- the job's per-line work (read, check, write both tables' files) in one
                plain process per core, no Spark: the ceiling if Spark cost nothing; once
                on the native checking core and once on the Python core (no_spark_python).

Every Spark measurement first runs on the corpus's first 200 lines (Python workers started,
JVM warm), then runs ``--runs`` times and keeps the fastest; all timings are recorded.

Prints messages/second and ratios, and writes them to bench/results.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_corpus(path: Path, messages: int, seed: int) -> None:
    from snap_spark.samples.messages import SampleConfig, write_sample

    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_sample(SampleConfig(messages=messages, seed=seed, attack_share=0.10), str(path))


# ---- 1. the floor ----------------------------------------------------------------------

def _verify_chunk(items: list[tuple[bytes, bytes, bytes]]) -> tuple[int, float]:
    from coincurve import PublicKeyXOnly

    keys: dict[bytes, Any] = {}
    parsed = [(keys.setdefault(k, PublicKeyXOnly(k)), s, d) for k, s, d in items]
    started = time.perf_counter()
    ok = 0
    for key, sig, digest in parsed:
        ok += key.verify(sig, digest)
    return ok, time.perf_counter() - started


def measure_floor(corpus: Path, cores: int) -> dict[str, Any]:
    """Verifies/s of libsecp256k1 through coincurve with one process per core."""
    from snap_spark.files.lines import iter_file_lines
    from snap_spark.protocol.keys import decode_p2tr
    from snap_spark.protocol.records import parse_line
    from snap_spark.protocol.signing import signature_input
    from snap_spark.protocol.validate import ReceiptClock, check_record

    items: list[tuple[bytes, bytes, bytes]] = []
    clock = ReceiptClock("message")
    for _, raw, _ in iter_file_lines(str(corpus)):
        rec = parse_line(raw)
        checked = check_record(rec, clock)
        if checked.pre_code is None and checked.has_sig and checked.auth_code is None:
            msg = rec.message
            assert checked.canonical_payload is not None and checked.timestamp is not None
            digest = hashlib.sha256(signature_input(
                msg["id"], msg["from"], msg.get("to"), msg["type"], msg["method"],
                checked.canonical_payload.encode(), checked.timestamp)).digest()
            items.append((decode_p2tr(msg["from"]).program, bytes.fromhex(msg["sig"]), digest))
    chunks = [items[i::cores] for i in range(cores)]
    walls = []
    with mp.get_context("fork").Pool(cores) as pool:
        pool.map(_verify_chunk, [c[:200] for c in chunks])  # warm the workers
        for _ in range(3):  # short and noisy: keep the fastest of three
            started = time.perf_counter()
            results = pool.map(_verify_chunk, chunks)
            walls.append(time.perf_counter() - started)
    wall = min(walls)
    verified = sum(ok for ok, _ in results)
    assert verified == len(items), "every prepared signature must verify"
    return {"verifies": len(items), "seconds": wall, "per_second": len(items) / wall,
            "all_seconds": [round(w, 2) for w in walls],
            "per_core_per_second": len(items) / max(s for _, s in results) / cores}


# ---- 2./3. row-at-a-time UDFs ---------------------------------------------------------

def naive_verify(line: str) -> int:
    """What a user writes first: parse, canonicalize, decode, verify, one row at a time.

    Returns a SNAP-like code: 0 valid, 1003 not JSON/object, 2002 no sig, 2005 bad address,
    2001 bad signature, 1004 anything else that breaks the steps.
    """
    import json as _json

    import bech32m
    import rfc8785
    from coincurve import PublicKeyXOnly

    try:
        doc = _json.loads(line)
    except ValueError:
        return 1003
    if not isinstance(doc, dict):
        return 1003
    msg = doc.get("message", doc)
    if isinstance(msg, str):
        try:
            msg = _json.loads(msg)
        except ValueError:
            return 1003
    if not isinstance(msg, dict):
        return 1003
    try:
        sender = msg["from"]
        decoded = bech32m.decode(sender[:2], sender)
        to = msg.get("to")
        if to is not None:
            bech32m.decode(to[:2], to)
    except Exception:
        return 2005
    if "sig" not in msg:
        return 2002 if msg.get("type") == "request" else 0
    try:
        payload = rfc8785.dumps(msg["payload"]).decode()
        text = "\x00".join([msg["id"], sender, to or "", msg["type"], msg["method"], payload,
                            str(msg["timestamp"])])
        digest = hashlib.sha256(text.encode()).digest()
        key = PublicKeyXOnly(bytes(decoded.witprog))
        return 0 if key.verify(bytes.fromhex(msg["sig"]), digest) else 2001
    except Exception:
        return 1004


def core_verify(line: bytes) -> int:
    """Row UDF over snap-spark's own checker (no vectorization, same rules)."""
    from snap_spark.protocol.records import parse_line
    from snap_spark.protocol.validate import ReceiptClock, check_record

    checked = check_record(parse_line(line), ReceiptClock("message"))
    return checked.stateless_code or 0


def best_of(runs: int, measure: Any) -> dict[str, Any]:
    """Run ``measure`` ``runs`` times; keep the fastest (all timings are reported)."""
    results = [measure() for _ in range(runs)]
    best = min(results, key=lambda r: r["seconds"])
    return {**best, "all_seconds": [round(r["seconds"], 2) for r in results]}


def measure_row_udf(spark: Any, corpus: Path, fn: Any, binary: bool,
                    runs: int) -> dict[str, Any]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    udf = F.udf(fn, IntegerType(), useArrow=False)

    def once(path: Path) -> dict[str, Any]:
        df = spark.read.option("lineSep", "\n").text(str(path))
        col = F.col("value").cast("binary") if binary else F.col("value")
        started = time.perf_counter()
        rows = df.select(udf(col).alias("code")).groupBy("code").count().collect()
        wall = time.perf_counter() - started
        lines = sum(r["count"] for r in rows)
        return {"lines": lines, "seconds": wall, "per_second": lines / wall}

    once(warmup_file(corpus))
    return best_of(runs, lambda: once(corpus))


def warmup_file(corpus: Path) -> Path:
    """The first 200 lines of the corpus: starts Python workers and warms the JVM."""
    warm = corpus.parent / "warmup.jsonl"
    if not warm.exists():
        with corpus.open("rb") as src:
            warm.write_bytes(b"".join(src.readline() for _ in range(200)))
    return warm


# ---- 4. the job -----------------------------------------------------------------------

def _land_ranges(args: tuple[list[tuple[str, int, int | None, int]], str, bool]) -> None:
    """Land some ranges of one file in this process (as Spark tasks would, minus Spark)."""
    from snap_spark.pipeline.land import LandSpec, land_range
    from snap_spark.settings import VerifySettings

    ranges, out, python_core = args
    os.environ["SNAP_SPARK_NATIVE"] = "0" if python_core else "1"
    path = ranges[0][0]
    spec = LandSpec(ingest_id="b" * 32, ingest_time_us=int(time.time() * 1e6),
                    file_keys={path: "bench"}, raw_keys=frozenset(["bench"]),
                    msg_keys=frozenset(["bench"]), raw_root=f"{out}/raw",
                    staging=f"{out}/staging",
                    settings=VerifySettings(bare_clock="message", verify_threads=1))
    for index, (p, start, end, first) in enumerate(ranges):
        for _batch in land_range(spec, index, p, start, end, first):
            pass


def measure_ceiling(corpus: Path, cores: int, python_core: bool = False) -> dict[str, Any]:
    """The job's own per-line work (read, check, write both tables' files) with one plain
    process per core and no Spark: what the job could reach if Spark cost nothing
    (``python_core``: checked by the Python core instead of the native one)."""
    from snap_spark.files.lines import plan_line_ranges

    ranges = [(r.path, r.start, r.end, r.first_line)
              for r in plan_line_ranges(str(corpus), 4 * 1024 * 1024)]
    chunks = [ranges[i::cores] for i in range(cores)]
    walls = []
    with mp.get_context("fork").Pool(cores) as pool:
        for _ in range(3):
            out = tempfile.mkdtemp(prefix="snap-bench-ceiling-")
            started = time.perf_counter()
            pool.map(_land_ranges, [(c, out, python_core) for c in chunks])
            walls.append(time.perf_counter() - started)
            shutil.rmtree(out, ignore_errors=True)
    lines = sum(1 for _ in corpus.open("rb"))
    wall = min(walls)
    return {"lines": lines, "seconds": wall, "per_second": lines / wall,
            "all_seconds": [round(w, 2) for w in walls]}


def measure_job(spark: Any, corpus: Path, runs: int, backend: str = "delta-rs"
                ) -> dict[str, Any]:
    """``jobs/verify_messages.py`` on one backend: the fastest of ``runs`` warm runs."""
    return measure_jobs(spark, corpus, runs, [backend])[backend]


def measure_jobs(spark: Any, corpus: Path, runs: int, backends: list[str]
                 ) -> dict[str, dict[str, Any]]:
    """``jobs/verify_messages.py`` end to end on each backend, a new lake each run; the
    backends' runs alternate (round after round), so that a slower minute of the machine or
    the JVM's warming falls on both alike. The fastest of ``runs`` per backend is kept."""
    from snap_spark.lake import LAKE_BACKEND_CONF
    from snap_spark.pipeline.batch_job import run

    lake = Path(tempfile.mkdtemp(prefix="snap-bench-lake-"))
    counter = iter(range(1_000))

    def once(path: Path, backend: str) -> dict[str, Any]:
        spark.conf.set(LAKE_BACKEND_CONF, backend)
        target = lake / f"run{next(counter)}"  # a new lake each time: nothing is skipped
        started = time.perf_counter()
        result = run(spark, [str(path)], str(target))
        wall = time.perf_counter() - started
        shutil.rmtree(target, ignore_errors=True)
        return {"lines": result.lines_read, "seconds": wall,
                "per_second": result.lines_read / wall,
                "valid": result.valid, "rejected": result.rejected}

    try:
        # The warm-up's 200 lines would land on the driver (a small run starts no Spark
        # task): it lands them in Spark tasks, as the timed runs do, so that their workers,
        # imports and the JVM's compiled code are warm.
        from snap_spark.common.placement import ENV as LIMITS_ENV

        saved = os.environ.get(LIMITS_ENV)
        os.environ[LIMITS_ENV] = "land_bytes=0"
        try:
            for backend in backends:
                once(warmup_file(corpus), backend)
        finally:
            if saved is None:
                os.environ.pop(LIMITS_ENV, None)
            else:
                os.environ[LIMITS_ENV] = saved
        measured: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
        for _ in range(runs):
            for backend in backends:
                measured[backend].append(once(corpus, backend))
        out = {}
        for backend, results in measured.items():
            best = min(results, key=lambda r: r["seconds"])
            out[backend] = {**best, "all_seconds": [round(r["seconds"], 2) for r in results]}
        return out
    finally:
        spark.conf.set(LAKE_BACKEND_CONF, "delta-rs")
        shutil.rmtree(lake, ignore_errors=True)


def measure_stream(spark: Any, corpus: Path, runs: int = 1, drops: int = 20,
                   backend: str = "delta-rs") -> dict[str, Any]:
    """``jobs/stream_verify.py`` over the corpus cut into ``drops`` files in a landing
    folder, available-now, on a new lake and checkpoint each run (the same work as the job,
    plus the replay state and the streaming machinery). Warm like the job: a stream over
    the warm-up file first (a long-running stream has its classes loaded and its Python
    workers started), then the fastest of ``runs``."""
    import uuid

    from snap_spark.lake import LAKE_BACKEND_CONF
    from snap_spark.settings import VerifySettings
    from snap_spark.stream.stream_job import StreamPlan, run_stream

    spark.conf.set(LAKE_BACKEND_CONF, backend)
    partitions = spark.conf.get("spark.sql.shuffle.partitions")

    def once(lines: list[bytes], pieces: int) -> dict[str, Any]:
        work = Path(tempfile.mkdtemp(prefix="snap-bench-stream-"))
        try:
            landing = work / "landing"
            landing.mkdir()
            size = -(-len(lines) // pieces)
            for i in range(pieces):
                (landing / f"drop-{i:03d}.jsonl").write_bytes(
                    b"\n".join(lines[i * size:(i + 1) * size]) + b"\n")
            plan = StreamPlan(lake_dir=str(work / "lake"), checkpoint=str(work / "ckpt"),
                              settings=VerifySettings(), lateness=600.0,
                              run_id=uuid.uuid4().hex, landing=str(landing))
            started = time.perf_counter()
            result = run_stream(spark, plan, {"availableNow": True})
            wall = time.perf_counter() - started
            return {"lines": result.lines_read, "seconds": wall, "drops": pieces,
                    "batches": result.batches, "per_second": result.lines_read / wall,
                    "valid": result.valid, "rejected": result.rejected}
        finally:
            spark.conf.set("spark.sql.shuffle.partitions", partitions)
            shutil.rmtree(work, ignore_errors=True)

    once(warmup_file(corpus).read_bytes().splitlines(), 2)
    lines = corpus.read_bytes().splitlines()
    return best_of(runs, lambda: once(lines, drops))


def measure_cold(corpus: Path, runs: int = 3) -> dict[str, Any]:
    """The fixed cost of one job process on 200 lines (``cold_fixed_s``): ``spark-submit``
    of ``jobs/verify_messages.py`` as an operator runs it (with the driver's JVM flags
    ``make run`` and ``snap-spark submit`` pass), from start to exit, and when
    each of its progress lines arrived (JVM and session start, landing, both commits, the
    task refresh). Fastest of ``runs``, all kept. Each run alternates with one landing in
    Spark tasks (``SNAP_SPARK_DRIVER_LIMITS=land_bytes=0``; 200 lines land on the driver by
    default): the baseline of the same run, under ``spark_tasks``."""
    default: list[dict[str, float]] = []
    tasks: list[dict[str, float]] = []
    for _ in range(runs):
        default.append(_cold_once(corpus, {}))
        tasks.append(_cold_once(corpus, {"SNAP_SPARK_DRIVER_LIMITS": "land_bytes=0"}))

    def fastest(measured: list[dict[str, float]]) -> dict[str, Any]:
        best = min(measured, key=lambda m: m["seconds"])
        return {"lines": 200, "cold_fixed_s": best["seconds"], "parts": best,
                "all": measured}

    return {**fastest(default), "spark_tasks": fastest(tasks)}


def _cold_once(corpus: Path, extra_env: dict[str, str]) -> dict[str, float]:
    """One cold ``spark-submit`` of the job on 200 lines (see :func:`measure_cold`)."""
    import subprocess

    from snap_spark.runtime.jvm_archive import driver_jvm_flags

    small = warmup_file(corpus)
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           **extra_env}
    marks = {"stage 1/4": "inputs_listed_s", "stage 2/4": "landed_s",
             "stage 3/4": "raw_committed_s", "stage 4/4": "messages_committed_s",
             "tasks:": "tasks_refreshed_s"}
    lake = tempfile.mkdtemp(prefix="snap-bench-cold-")
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.snap.lake.backend=delta-rs",
         "--driver-java-options", driver_jvm_flags(),
         str(ROOT / "jobs" / "verify_messages.py"), "--input", str(small), "--lake", lake],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
    parts: dict[str, float] = {}
    assert proc.stdout is not None
    for raw in proc.stdout:  # progress lines: stdout under spark-submit
        text = raw.decode("utf-8", "replace")
        for mark, name in marks.items():
            if "[snap-spark" in text and mark in text and name not in parts:
                parts[name] = round(time.perf_counter() - started, 2)
    code = proc.wait()
    wall = time.perf_counter() - started
    shutil.rmtree(lake, ignore_errors=True)
    if code != 0:
        raise RuntimeError(f"spark-submit of the job on 200 lines exited {code}")
    return {"seconds": round(wall, 2), **parts}


def measure_latency(spark: Any, corpus: Path, rate: int = 2_000, seconds: int = 40,
                    trigger: str = "2 seconds", backend: str = "delta-rs") -> dict[str, Any]:
    """Latency from file landing to commit: ``jobs/stream_verify.py`` under a
    processing-time trigger while one file of ``rate`` corpus lines lands in its folder
    every second for ``seconds`` (written aside, then renamed in). Latency of a file =
    the time its batch committed minus its modification time, as the stream's
    ``--progress-json`` reports it; p50/p95 over every file.

    The running stream is measured: it is started, and its first micro-batch (one warm-up
    file of ``rate`` other lines) committed, before the timed files land. That first
    micro-batch pays the query's start (planning, the Python workers, the state store);
    its latency is reported on its own as ``first_batch_latency``."""
    import threading
    import uuid

    from snap_spark.lake import LAKE_BACKEND_CONF
    from snap_spark.settings import VerifySettings
    from snap_spark.stream.progress import percentile
    from snap_spark.stream.stream_job import StreamPlan, run_stream

    spark.conf.set(LAKE_BACKEND_CONF, backend)
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    work = Path(tempfile.mkdtemp(prefix="snap-bench-latency-"))
    lines = corpus.read_bytes().splitlines()
    landing, progress = work / "landing", work / "progress.jsonl"
    landing.mkdir()
    plan = StreamPlan(lake_dir=str(work / "lake"), checkpoint=str(work / "ckpt"),
                      settings=VerifySettings(), lateness=600.0, run_id=uuid.uuid4().hex,
                      landing=str(landing), progress_json=str(progress))
    outcome: dict[str, Any] = {}

    def stream() -> None:
        try:
            outcome["result"] = run_stream(spark, plan, {"processingTime": trigger})
        except BaseException as exc:  # reported below
            outcome["error"] = exc

    def committed() -> list[dict[str, Any]]:
        if not progress.exists():
            return []
        return [json.loads(line) for line in progress.read_text().splitlines() if line]

    runner = threading.Thread(target=stream, daemon=True)
    runner.start()
    try:
        while not spark.streams.active and runner.is_alive():
            time.sleep(0.1)
        # the warm-up file: the corpus's first lines, the timed files the ones after them,
        # so receipt times only move forward, as on a live feed (before session 18 it held
        # the corpus's last lines: every timed line then arrived hours behind the
        # watermark, and nearly every candidate was decided again against the lake)
        warmup = work / "warmup.jsonl"
        warmup.write_bytes(b"\n".join(lines[:rate]) + b"\n")
        warmup.rename(landing / warmup.name)
        deadline = time.time() + 300
        while not committed() and time.time() < deadline and runner.is_alive():
            time.sleep(0.1)
        started = time.time()
        for i in range(seconds):
            part = lines[((i + 1) * rate) % len(lines):][:rate]
            aside = work / f"drop-{i:04d}.jsonl"
            aside.write_bytes(b"\n".join(part) + b"\n")
            aside.rename(landing / aside.name)
            time.sleep(max(0.0, started + i + 1 - time.time()))
        expected = (seconds + 1) * rate
        deadline = time.time() + 300
        while sum(b["lines"] for b in committed()) < expected and time.time() < deadline \
                and runner.is_alive():
            time.sleep(0.5)
    finally:
        for query in spark.streams.active:
            query.stop()
        runner.join(timeout=120)
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    if "error" in outcome:
        raise outcome["error"]
    first, *batches = committed()
    shutil.rmtree(work, ignore_errors=True)
    latencies = [x for b in batches for x in b["latencies"]]
    if len(latencies) != seconds:
        raise RuntimeError(f"{len(latencies)} of {seconds} files committed")
    return {"rate_lines_per_second": rate, "files": len(latencies), "trigger": trigger,
            "batches": len(batches), "lines": sum(b["lines"] for b in batches),
            "latency_p50": percentile(latencies, 0.50),
            "latency_p95": percentile(latencies, 0.95), "latency_max": max(latencies),
            "batch_seconds_p50": percentile([b["batch_seconds"] for b in batches], 0.5),
            "first_batch_latency": max(first["latencies"]),
            # in batch order, for figures over a part of the run (its later minutes)
            "latencies": [round(x, 3) for x in latencies]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    parser.add_argument("--skip-naive", action="store_true", help="skip the slow naive UDF")
    parser.add_argument("--delta-spark", action="store_true",
                        help="also time the job on the delta-spark backend (its runs "
                             "alternate with delta-rs's; fastest of --runs each)")
    parser.add_argument("--trigger", default="1 second",
                        help="the latency measure's processing-time trigger (default 1 second, "
                             "the stream target's; sessions before 11 used 2 seconds)")
    parser.add_argument("--runs", type=int, default=3,
                        help="timed runs per Spark measurement, fastest kept (default 3)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    corpus = ROOT / "bench" / "out" / f"corpus-{args.messages}-{args.seed}.jsonl"
    print(f"[bench] corpus {corpus.name}: generating if absent", flush=True)
    make_corpus(corpus, args.messages, args.seed)

    from snap_spark.udfs.verify import core_name

    print(f"[bench] checking core: {core_name()} (SNAP_SPARK_NATIVE=0 forces the Python core)",
          flush=True)
    print(f"[bench] 1/5 libsecp256k1 verify floor on {cores} cores", flush=True)
    floor = measure_floor(corpus, cores)
    print(f"        {floor['per_second']:,.0f} verifies/s", flush=True)

    from snap_spark.runtime.session import build_session

    spark = build_session("snap-spark bench", master=f"local[{cores}]", extra_conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, Any] = {"floor": floor}
    if not args.skip_naive:
        print("[bench] 2/5 row-at-a-time UDF, naive libraries", flush=True)
        results["row_udf"] = measure_row_udf(spark, corpus, naive_verify, binary=False,
                                             runs=args.runs)
        print(f"        {results['row_udf']['per_second']:,.0f} lines/s", flush=True)
    print("[bench] 3/5 row-at-a-time UDF over snap-spark's core", flush=True)
    results["row_core"] = measure_row_udf(spark, corpus, core_verify, binary=True,
                                          runs=args.runs)
    print(f"        {results['row_core']['per_second']:,.0f} lines/s", flush=True)
    from snap_spark.lake import has_delta_spark

    backends = ["delta-rs"]
    if args.delta_spark and has_delta_spark(spark):
        backends.append("delta-spark")
    print("[bench] 4/5 jobs/verify_messages.py end to end (warm session: "
          + " and ".join(backends) + (", runs alternated)" if len(backends) > 1 else ")"),
          flush=True)
    jobs = measure_jobs(spark, corpus, args.runs, backends)
    results["job"] = jobs["delta-rs"]
    print(f"        {results['job']['per_second']:,.0f} lines/s", flush=True)
    if "delta-spark" in jobs:
        results["job_delta_spark"] = jobs["delta-spark"]
        print(f"        {results['job_delta_spark']['per_second']:,.0f} lines/s on delta-spark",
              flush=True)
    print("[bench] 4c  jobs/stream_verify.py, available-now over the corpus in 20 drops",
          flush=True)
    results["stream"] = measure_stream(spark, corpus, args.runs)
    print(f"        {results['stream']['per_second']:,.0f} lines/s", flush=True)
    print("[bench] 4d  stream latency, processing-time trigger, steady rate", flush=True)
    results["stream_latency"] = measure_latency(spark, corpus, trigger=args.trigger)
    latency = results["stream_latency"]
    print(f"        p50 {latency['latency_p50']:.1f} s, p95 {latency['latency_p95']:.1f} s "
          f"({latency['rate_lines_per_second']:,} lines/s, trigger {latency['trigger']}; "
          f"the first micro-batch after the start: {latency['first_batch_latency']:.1f} s)",
          flush=True)
    spark.stop()
    print("[bench] 4f  live Nostr stream: relay publish to commit, 50 events/s over two "
          "relays, trigger 1 s (bench/nostr_live.py)", flush=True)
    from bench.nostr_live import measure_nostr_live

    results["nostr_live"] = measure_nostr_live(rate=50.0, seconds=30.0, trigger="1s")
    live = results["nostr_live"]
    print(f"        p50 {live['latency_p50']:.2f} s, p95 {live['latency_p95']:.2f} s "
          f"({live['landed']} of {live['accepted']} accepted events landed; micro-batch p50 "
          f"{live['batch_seconds_p50']:.2f} s)", flush=True)
    print("[bench] 4e  cold start: spark-submit of the job on 200 lines", flush=True)
    results["cold"] = measure_cold(corpus)
    print(f"        {results['cold']['cold_fixed_s']:.1f} s ({results['cold']['parts']})",
          flush=True)
    print(f"[bench] 5/5 the job's per-line work without Spark ({cores} processes)", flush=True)
    results["no_spark"] = measure_ceiling(corpus, cores)
    print(f"        {results['no_spark']['per_second']:,.0f} lines/s", flush=True)
    print(f"[bench] 5b  the same on the Python core ({cores} processes)", flush=True)
    results["no_spark_python"] = measure_ceiling(corpus, cores, python_core=True)
    print(f"        {results['no_spark_python']['per_second']:,.0f} lines/s", flush=True)

    job_rate = results["job"]["per_second"]
    ratios = {"job_vs_floor": job_rate / floor["per_second"],
              "job_vs_row_core": job_rate / results["row_core"]["per_second"],
              "job_vs_no_spark": job_rate / results["no_spark"]["per_second"]}
    if "row_udf" in results:
        ratios["job_vs_row_udf"] = job_rate / results["row_udf"]["per_second"]
    ratios["stream_vs_job"] = results["stream"]["per_second"] / job_rate
    # a time against a time (lower is shorter): the cold run against its Spark-tasks baseline
    ratios["cold_vs_spark_tasks"] = (results["cold"]["cold_fixed_s"]
                                     / results["cold"]["spark_tasks"]["cold_fixed_s"])
    ratios["no_spark_vs_floor"] = results["no_spark"]["per_second"] / floor["per_second"]
    ratios["no_spark_python_vs_floor"] = (results["no_spark_python"]["per_second"]
                                          / floor["per_second"])
    if "job_delta_spark" in results:
        ratios["job_delta_spark_vs_floor"] = (results["job_delta_spark"]["per_second"]
                                              / floor["per_second"])
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cores": cores, "python": platform.python_version(),
                    "platform": platform.platform()},
        "corpus": {"lines": args.messages, "seed": args.seed, "attack_share": 0.10},
        "results": results,
        "ratios": ratios,
        # The measure that counts: the job's rate against the libsecp256k1 floor of the same
        # run (the earlier "3x the naive row UDF" target was withdrawn).
        "targets": {"job_vs_floor": 0.8, "job_delta_spark_vs_floor": 0.75,
                    "no_spark_vs_floor": 0.95, "stream_vs_job": 0.8, "stream_p95_s": 3.0,
                    "nostr_live_p95_s": 2.0},
        "checking_core": core_name(),
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print("\n[bench] lines (or verifies) per second, same corpus, same run:")
    print(f"  floor (libsecp256k1, {cores} cores)   {floor['per_second']:>10,.0f}")
    for name in ("row_udf", "row_core", "job", "stream", "job_delta_spark", "no_spark",
                 "no_spark_python"):
        if name in results:
            print(f"  {name:<34}{results[name]['per_second']:>10,.0f}")
    for name, value in ratios.items():
        print(f"  {name:<34}{value:>10.2f}x")
    latency = results["stream_latency"]
    print(f"  stream latency p50 / p95 (s)      {latency['latency_p50']:>5.1f} / "
          f"{latency['latency_p95']:.1f}")
    live = results["nostr_live"]
    print(f"  live Nostr publish->commit p50 / p95 (s) {live['latency_p50']:>5.2f} / "
          f"{live['latency_p95']:.2f}")
    print(f"  cold_fixed_s (200 lines, spark-submit) {results['cold']['cold_fixed_s']:>5.1f}")
    print(f"    the same landing in Spark tasks       "
          f"{results['cold']['spark_tasks']['cold_fixed_s']:>5.1f}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
