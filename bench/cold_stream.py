"""A cold stream's start, this checkout against an earlier commit, in one run.

What people run for a small catch-up: ``python jobs/stream_verify.py --trigger
available-now`` over a landing folder of generated traffic, a new process, checkpoint and
lake each time. The runs of this checkout and of the baseline (``--baseline REV``, checked
out into a temporary git worktree, with its own class archive built by its own code)
alternate, so a machine that changes speed during the bench changes both alike. Each run's
cost is the whole machine's busy CPU (``/proc/stat``) and its wall time; the summary gives
the means and this checkout's ratio to the baseline.

Usage::

    .venv/bin/python bench/cold_stream.py --baseline 17b100b [--pairs 7] [--lines 2000]
        [--backend delta-rs] [--out bench/results-cold-stream.json]

Linux only (``/proc/stat``); the machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def busy_seconds() -> float:
    """CPU seconds the whole machine has been busy since boot (every core)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def prepare_baseline(rev: str, work: Path) -> dict[str, str]:
    """A worktree of ``rev`` with this checkout's native core, and its class archive built by
    its own code into ``work/archive``: the environment its runs take."""
    tree = work / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), rev], cwd=ROOT,
                   check=True)
    native = ROOT / "snap_spark" / "_native.abi3.so"
    if native.is_file():
        shutil.copy2(native, tree / "snap_spark" / native.name)
    env = {"PYTHONPATH": str(tree), "SNAP_SPARK_JVM_ARCHIVE": str(work / "archive")}
    subprocess.run([sys.executable, "-m", "snap_spark.runtime.jvm_archive", "build"],
                   cwd=tree, env={**os.environ, **env}, check=True)
    return {"cwd": str(tree), **env}


def cold_run(cwd: str, env: dict[str, str], landing: Path, scratch: Path,
             backend: str) -> dict[str, float]:
    """One cold stream over ``landing``: wall seconds and the machine's busy CPU seconds."""
    shutil.rmtree(scratch, ignore_errors=True)
    command = [sys.executable, "jobs/stream_verify.py", "--master", "local[2]",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
               "--conf", f"spark.snap.lake.backend={backend}", "--landing", str(landing),
               "--checkpoint", str(scratch / "checkpoint"), "--lake", str(scratch / "lake"),
               "--trigger", "available-now"]
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                   "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                   **env}
    cpu, start = busy_seconds(), time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=600)
    wall, cpu = time.monotonic() - start, busy_seconds() - cpu
    if done.returncode != 0:
        raise SystemExit(f"cold_stream: a run in {cwd} exited {done.returncode}:\n"
                         + done.stderr[-2000:])
    return {"wall": round(wall, 2), "cpu": round(cpu, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare with")
    parser.add_argument("--pairs", type=int, default=7, help="alternated pairs (default 7)")
    parser.add_argument("--lines", type=int, default=2000, help="lines of traffic (2000)")
    parser.add_argument("--backend", default="delta-rs", help="lake backend (delta-rs)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results-cold-stream.json")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="snap-cold-stream-"))
    try:
        landing = work / "landing"
        subprocess.run([str(Path(sys.executable).parent / "snap-spark"), "sample",
                        "--messages", str(args.lines), "--seed", "7",
                        "--out", str(landing / "traffic.jsonl")], check=True,
                       capture_output=True)
        (landing / "traffic.expected-tasks.txt").unlink(missing_ok=True)
        print(f"cold_stream: building the baseline {args.baseline} and its class archive",
              file=sys.stderr)
        baseline = prepare_baseline(args.baseline, work)
        base_cwd = baseline.pop("cwd")
        runs: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
        for pair in range(args.pairs):
            for name, cwd, env in (("this", str(ROOT), {}), ("baseline", base_cwd, baseline)):
                runs[name].append(cold_run(cwd, env, landing, work / "scratch", args.backend))
            print(f"cold_stream: pair {pair + 1}/{args.pairs}: this {runs['this'][-1]}, "
                  f"baseline {runs['baseline'][-1]}", file=sys.stderr)
        summary: dict[str, Any] = {
            kind: {"cpu": round(mean(r["cpu"] for r in runs[kind]), 2),
                   "wall": round(mean(r["wall"] for r in runs[kind]), 2)} for kind in runs}
        summary["ratio"] = {key: round(summary["this"][key] / summary["baseline"][key], 3)
                            for key in ("cpu", "wall")}
        summary["lower_in_pairs"] = sum(t["cpu"] < b["cpu"] for t, b in
                                        zip(runs["this"], runs["baseline"], strict=True))
        result = {"baseline": args.baseline, "lines": args.lines, "backend": args.backend,
                  "pairs": args.pairs, "runs": runs, "summary": summary,
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(summary))
        return 0
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(work / "baseline")],
                       cwd=ROOT, check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
