"""The live Nostr stream's latency: relay publish to the commit that lands the event.

`jobs/stream_nostr.py` runs as people run it (`snap-spark submit stream_nostr`, a process of
its own, processing-time trigger) against two local relay processes (`snap-spark relay`).
Once its tap follows both relays, SNAP events of every kind (cards 31337, messages 4339 and
21339, from the labelled Nostr sample: valid traffic and attacks) are published at a steady
rate, each to one relay and every fifth to both. The publish time of each event is taken
just before it is sent; the commit time of each micro-batch is in the stream's
`--progress-json` (`committed_at`, with the batch's `ingest_id`), and `nostr_events` names
the `ingest_id` of the micro-batch that first wrote each event. Latency = commit time - first
publish time, for every accepted event that landed.

    .venv/bin/python bench/nostr_live.py [--rate 50] [--seconds 30] [--trigger 1s]

writes bench/results-nostr-live.json; `make bench` (bench/run_bench.py) runs the same
measure as its step 4f.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def _start_relay(folder: Path, name: str) -> tuple[subprocess.Popen[str], str]:
    from snap_spark.nostr.relay import free_port

    port = free_port()
    log = open(folder / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "snap-spark"), "relay", "--port",
                             str(port)], stdout=log, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while "listening" not in (folder / f"{name}.log").read_text():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"relay {name} did not start")
        time.sleep(0.1)
    return proc, f"ws://127.0.0.1:{port}"


async def _publish(relays: list[str], texts: list[str], rate: float) -> dict[str, float]:
    """Publish ``texts`` at ``rate`` a second (each to one relay, every fifth to both);
    the first publish time of each accepted event, by id."""
    from snap_spark.nostr.client import RelayConnection, publish_one

    connections = [await RelayConnection.open(url, time.monotonic() + 10) for url in relays]
    sent: dict[str, float] = {}
    start = time.monotonic()
    try:
        for n, text in enumerate(texts):
            wait = start + n / rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            targets = connections if n % 5 == 0 else [connections[n % len(connections)]]
            for connection in targets:
                at = time.time()
                outcome = await publish_one(connection, text, 10.0)
                if outcome.accepted and outcome.event_id is not None:
                    sent.setdefault(outcome.event_id, at)
    finally:
        for connection in connections:
            await connection.close()
    return sent


def measure_nostr_live(rate: float = 50.0, seconds: float = 30.0, trigger: str = "1s",
                       workdir: Path | None = None) -> dict[str, Any]:
    """The measure of the module docstring; returns its figures."""
    from deltalake import DeltaTable

    from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample

    folder = Path(workdir or tempfile.mkdtemp(prefix="snap-bench-nostr-"))
    folder.mkdir(parents=True, exist_ok=True)
    count = int(rate * seconds)
    stem = str(folder / "traffic")
    write_nostr_sample(NostrSampleConfig(cards=max(20, count // 10), messages=count,
                                         well_known=0, seed=17), stem)
    paths = output_paths(stem)
    texts: list[str] = []
    from snap_spark.nostr.lines import event_from_line

    with open(paths["events"], "rb") as handle:
        for line in handle:
            found = event_from_line(line)
            if found.event is not None:
                texts.append(json.dumps(found.event, separators=(",", ":")))
    texts = texts[:count]
    relays = [_start_relay(folder, "relay-a"), _start_relay(folder, "relay-b")]
    lake, checkpoint = folder / "lake", folder / "checkpoint"
    progress = folder / "progress.jsonl"
    command = [str(ROOT / ".venv" / "bin" / "snap-spark"), "submit",
               "--conf", "spark.snap.lake.backend=delta-rs", "stream_nostr",
               "--lake", str(lake), "--checkpoint", str(checkpoint),
               "--keyring", paths["keyring"], "--all-messages",
               "--trigger", f"processing-time={trigger}", "--progress-json", str(progress)]
    for _, url in relays:
        command += ["--relay", url]
    stderr_path = folder / "stream.err"
    started = time.monotonic()
    with open(stderr_path, "w") as err:
        # (snap-spark submit hands the job's progress lines to stdout: both go to one file)
        stream = subprocess.Popen(command, stdout=err, stderr=subprocess.STDOUT,
                                  start_new_session=True, env={**os.environ,
                                                               "SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        deadline = time.monotonic() + 180
        while stderr_path.read_text().count("stored backlog read") < len(relays):
            if time.monotonic() > deadline or stream.poll() is not None:
                raise RuntimeError("the stream did not start:\n"
                                   + stderr_path.read_text()[-3000:])
            time.sleep(0.2)
        ready_s = time.monotonic() - started
        holder: dict[str, dict[str, float]] = {}
        publisher = threading.Thread(target=lambda: holder.update(sent=asyncio.run(
            _publish([url for _, url in relays], texts, rate))))
        publisher.start()
        publisher.join()
        sent = holder["sent"]
        # wait until what was accepted has landed (or nothing more lands for 20 s)
        landed: set[str] = set()
        quiet_until = time.monotonic() + 20
        while time.monotonic() < quiet_until:
            time.sleep(1.0)
            if (lake / "nostr_events" / "_delta_log").is_dir():
                now = {r["event_key"] for r in DeltaTable(str(lake / "nostr_events"))
                       .to_pyarrow_table(columns=["event_key"]).to_pylist()}
                if len(now) > len(landed):
                    landed, quiet_until = now, time.monotonic() + 20
                if set(sent) <= landed:
                    break
    finally:
        os.killpg(stream.pid, signal.SIGTERM)
        try:
            stream.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(stream.pid, signal.SIGKILL)
        for proc, _ in relays:
            proc.terminate()
            proc.wait(10)
    batches = {}
    for line in progress.read_text().splitlines():
        row = json.loads(line)
        batches[row["ingest_id"]] = row
    rows = DeltaTable(str(lake / "nostr_events")).to_pyarrow_table(
        columns=["event_key", "ingest_id", "kind"]).to_pylist()
    waits = {r["event_key"]: batches[r["ingest_id"]]["committed_at"] - sent[r["event_key"]]
             for r in rows if r["event_key"] in sent and r["ingest_id"] in batches}
    values = list(waits.values())
    by_kind: dict[str, list[float]] = {}
    for r in rows:
        if r["event_key"] in waits:
            by_kind.setdefault(str(r["kind"]), []).append(waits[r["event_key"]])
    seconds_batch = [b["seconds"] for b in batches.values()]
    return {
        "rate_events_per_second": rate, "seconds": seconds, "trigger": trigger,
        "relays": len(relays), "published": len(texts), "accepted": len(sent),
        "landed": len(waits), "stream_ready_s": round(ready_s, 2),
        "latency_p50": round(_percentile(values, 0.5), 3),
        "latency_p95": round(_percentile(values, 0.95), 3),
        "latency_max": round(max(values, default=0.0), 3),
        "latency_p95_by_kind": {k: round(_percentile(v, 0.95), 3)
                                for k, v in sorted(by_kind.items())},
        "batches": len(batches),
        "batch_seconds_p50": round(_percentile(seconds_batch, 0.5), 3),
        "batch_seconds_p95": round(_percentile(seconds_batch, 0.95), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="events a second (50)")
    parser.add_argument("--seconds", type=float, default=30.0, help="publishing time (30)")
    parser.add_argument("--trigger", default="1s", help="the stream's trigger (1s)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results-nostr-live.json"))
    args = parser.parse_args()
    result = measure_nostr_live(args.rate, args.seconds, args.trigger)
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cores": os.cpu_count(), "nostr_live": result, "target_p95_s": 2.0}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
