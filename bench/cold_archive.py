"""The batch job as people run it: one cold ``snap-spark submit`` per archive, over traffic
of thousands of agents, against the libsecp256k1 floor of the same run.

Measured here, in one run (``python bench/cold_archive.py``, or step 6 of ``make bench``):

- the floor (:func:`bench.run_bench.measure_floor`) before and after the job runs: verifies
  per second with every core busy, on the corpus's signatures;
- cold runs: ``snap-spark submit --master local[N] verify_messages --input FILE --lake NEW``
  (the command docs/audit-job.md gives for cron; a new process and a new lake each time)
  over 400,000 and 1,600,000 lines of a 5,000-agent corpus, on both backends; each run's
  wall time from the command's start to its exit, and when each of the job's progress
  lines arrived, from which the stages are told apart (:func:`stage_times`);
- warm runs: the same job on the same corpus in one long-lived session (the first run
  discarded), for the cold/warm comparison.

Runs of different kinds alternate (cold delta-rs, cold delta-spark, ...), so a machine that
slows down during the bench slows every kind alike. Rates are lines per second of the
whole run (``wall``); ``× floor`` divides them by the floor's verifies per second.

Usage::

    .venv/bin/python bench/cold_archive.py [--sizes 400000 1600000] [--runs 2]
        [--backends delta-rs delta-spark] [--skip-warm] [--out bench/results-cold.json]
        [--variant NAME=ENV=VALUE ...]

``--variant`` adds a cold run with an environment setting (for example
``--variant c2=SNAP_SPARK_JVM_FLAGS=``), alternated with the default: a before/after pair
measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The corpus: agents, attack share and seed of the archive every run reads.
AGENTS = 5_000
ATTACK_SHARE = 0.10
SEED = 44
#: The job's progress lines and the moment each marks (the first occurrence counts).
MARKS = {
    "inputs": "stage 1/4",
    "landed": "stage 2/4",
    "raw_committed": "stage 3/4",
    "messages_committed": "stage 4/4",
    "tasks_refreshed": "tasks:",
    "balance": "lines read:",
}


def corpus_file(lines: int) -> Path:
    """A corpus of ``lines`` lines from :data:`AGENTS` agents, generated once into
    ``bench/out/`` (the smaller sizes are the first lines of the largest one generated)."""
    from snap_spark.samples.messages import SampleConfig, write_sample

    out = ROOT / "bench" / "out"
    path = out / f"archive-{AGENTS}agents-{lines}-{SEED}.jsonl"
    if path.exists():
        return path
    out.mkdir(parents=True, exist_ok=True)
    larger = sorted((p for p in out.glob(f"archive-{AGENTS}agents-*-{SEED}.jsonl")
                     if int(p.name.split("-")[2]) > lines), key=lambda p: p.stat().st_size)
    partial = path.with_suffix(".partial")
    if larger:  # its first lines: the same traffic, cut shorter
        with larger[0].open("rb") as source, partial.open("wb") as target:
            for _, line in zip(range(lines), source, strict=False):
                target.write(line)
    else:
        print(f"[bench] generating {lines:,} lines from {AGENTS:,} agents (once)", flush=True)
        write_sample(SampleConfig(agents=AGENTS, messages=lines, seed=SEED,
                                  attack_share=ATTACK_SHARE), str(partial), tasks_path=None)
    partial.rename(path)
    return path


def submit_command(corpus: Path, lake: str, backend: str, cores: int,
                   jvm_flags: str | None = None) -> list[str]:
    """``snap-spark submit`` of the batch job, as an operator's script runs it; with
    ``jvm_flags``, those in place of the short-job flags (the rest of the driver's options,
    the logging configuration and the class archive, as ``snap-spark submit`` gives them)."""
    options: list[str] = []
    if jvm_flags is not None:
        from snap_spark.runtime.jvm_archive import DRIVER_JVM_FLAGS, driver_jvm_flags
        from snap_spark.runtime.submit import LOG4J2_CONF

        archive = driver_jvm_flags().replace(DRIVER_JVM_FLAGS, "").strip()
        options = ["--driver-java-options",
                   f"-Dlog4j2.configurationFile={LOG4J2_CONF} {jvm_flags} {archive}".strip()]
    return [str(Path(sys.executable).parent / "snap-spark"), "submit",
            "--master", f"local[{cores}]", "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.snap.lake.backend={backend}", *options,
            "verify_messages", "--input", str(corpus), "--lake", lake]


def cold_run(corpus: Path, lines: int, backend: str, cores: int,
             env: dict[str, str] | None = None, jvm_flags: str | None = None
             ) -> dict[str, Any]:
    """One cold run: a new process, a new lake. Returns its wall time, when each
    :data:`MARKS` line arrived (seconds from the start) and its rate."""
    lake = tempfile.mkdtemp(prefix="snap-bench-cold-")
    shutil.rmtree(lake)
    environ = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})}
    started = time.perf_counter()
    proc = subprocess.Popen(submit_command(corpus, lake, backend, cores, jvm_flags),
                            cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environ)
    sampler = CpuSampler(proc.pid) if Path("/proc/self/stat").exists() else None
    marks: dict[str, float] = {}
    first: float | None = None
    tail: list[str] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        text = raw.decode("utf-8", "replace")
        tail = [*tail[-40:], text]
        at = time.perf_counter() - started
        if first is None and "[snap-spark" in text:
            first = at
        for name, mark in MARKS.items():
            if mark in text and name not in marks:
                marks[name] = round(at, 2)
    code = proc.wait()
    wall = time.perf_counter() - started
    cpu = sampler.stop() if sampler is not None else {}
    shutil.rmtree(lake, ignore_errors=True)
    if code != 0:
        raise RuntimeError(f"the cold run exited {code}:\n{''.join(tail)}")
    return {"lines": lines, "backend": backend, "wall_s": round(wall, 2),
            "per_second": lines / wall, "first_line_s": round(first or 0.0, 2),
            "marks": marks, "stages": stage_times(marks, first or 0.0, wall),
            "cpu_s": cpu}


class CpuSampler:
    """CPU seconds used by each kind of process under a run (the driver JVM, the driver's
    Python, Python workers, the rest), read from ``/proc`` every ``every`` seconds; a process
    that ends between two looks loses at most that much of its time. Linux only (empty
    elsewhere)."""

    def __init__(self, root: int, every: float = 0.2) -> None:
        import threading

        self.root, self.every = root, every
        self.seen: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._thread.start()

    def _children(self) -> dict[int, int]:
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                parents[int(entry.name)] = int(fields[1])
        return parents

    def _kind(self, pid: int) -> str:
        try:
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            return "other"
        text = b" ".join(argv).decode("utf-8", "replace")
        if "java" in argv[0].decode("utf-8", "replace"):
            return "driver_jvm"
        if "pyspark.daemon" in text or "pyspark.worker" in text or "worker_daemon" in text:
            return "python_workers"
        if "verify_messages" in text and "python" in text:
            return "driver_python"
        return "python_workers" if "python" in text else "other"

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            parents = self._children()
            tree, frontier = {self.root}, [self.root]
            while frontier:
                pid = frontier.pop()
                for child, parent in parents.items():
                    if parent == pid and child not in tree:
                        tree.add(child)
                        frontier.append(child)
            for pid in tree:
                try:
                    fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)
                    values = fields[1].split()
                except OSError:
                    continue
                cpu = (int(values[11]) + int(values[12])) / self._tick
                # looked at each time: the command's process becomes the driver JVM (exec);
                # a process that is ending has no command line left ("other"): kept as it was
                kind = self._kind(pid)
                if kind == "other" and pid in self.seen:
                    kind = self.seen[pid][0]
                self.seen[pid] = (kind, cpu)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        out: dict[str, float] = {}
        for kind, cpu in self.seen.values():
            out[kind] = round(out.get(kind, 0.0) + cpu, 2)
        return out


def stage_times(marks: dict[str, float], first: float, wall: float) -> dict[str, float]:
    """A cold run's stages, in seconds, from when its lines arrived: ``start`` (the JVM,
    the session and the job's set-up, up to its first progress line), ``listing``,
    ``landing`` (reading and checking every line, both tables' files written), the commit of
    ``raw_messages``, the replay fold and commit of ``messages``, the ``tasks`` refresh,
    the summary, and ``exit`` (from the last line to the process's end).

    Examples:
        >>> stage_times({"inputs": 5.0, "landed": 20.0, "raw_committed": 20.5,
        ...              "messages_committed": 23.0, "tasks_refreshed": 24.0,
        ...              "balance": 24.2}, 4.0, 25.0)["landing"]
        15.0
    """
    order = ["inputs", "landed", "raw_committed", "messages_committed", "tasks_refreshed",
             "balance"]
    names = ["listing", "landing", "raw_commit", "messages_fold_commit", "tasks_refresh",
             "summary"]
    out = {"start": round(first, 2)}
    previous = first
    for mark, name in zip(order, names, strict=True):
        if mark in marks:
            out[name] = round(marks[mark] - previous, 2)
            previous = marks[mark]
    out["exit"] = round(wall - previous, 2)
    return out


def warm_runs(corpora: dict[int, Path], backends: list[str], runs: int,
              cores: int) -> dict[str, Any]:
    """The same job on the same corpora in one long-lived session: a first run (discarded)
    warms the JVM and the Python workers, then ``runs`` timed runs per size and backend,
    alternated; the fastest kept."""
    from snap_spark.pipeline.batch_job import run
    from snap_spark.runtime.session import build_session

    spark = build_session("snap-spark cold-archive bench (warm runs)",
                          master=f"local[{cores}]",
                          extra_conf={"spark.ui.enabled": "false",
                                      "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    from snap_spark.lake import has_delta_spark

    usable = [b for b in backends if b != "delta-spark" or has_delta_spark(spark)]
    results: dict[str, Any] = {}
    try:
        smallest = corpora[min(corpora)]
        for backend in usable:  # warm-up, discarded
            _warm_once(spark, run, smallest, backend)
        for _ in range(runs):
            for lines, corpus in sorted(corpora.items()):
                for backend in usable:
                    seconds = _warm_once(spark, run, corpus, backend)
                    key = f"{backend}/{lines}"
                    entry = results.setdefault(key, {"lines": lines, "backend": backend,
                                                      "all_s": []})
                    entry["all_s"].append(round(seconds, 2))
        for entry in results.values():
            entry["wall_s"] = min(entry["all_s"])
            entry["per_second"] = entry["lines"] / entry["wall_s"]
    finally:
        spark.stop()
    return results


def _warm_once(spark: Any, run: Any, corpus: Path, backend: str) -> float:
    lake = tempfile.mkdtemp(prefix="snap-bench-warm-")
    shutil.rmtree(lake)
    spark.conf.set("spark.snap.lake.backend", backend)
    started = time.perf_counter()
    try:
        run(spark, [str(corpus)], lake)
        return time.perf_counter() - started
    finally:
        shutil.rmtree(lake, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[400_000, 1_600_000])
    parser.add_argument("--backends", nargs="+", default=["delta-rs", "delta-spark"])
    parser.add_argument("--runs", type=int, default=2,
                        help="cold runs per size, backend and variant (default 2)")
    parser.add_argument("--warm-runs", type=int, default=2)
    parser.add_argument("--skip-warm", action="store_true")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=ENV=VALUE: also a cold run with that setting, alternated; "
                             "NAME=jvm=FLAGS: with those driver JVM flags in place of the "
                             "short-job flags (jvm= alone: none, the JVM's defaults)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results-cold.json"))
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    from bench.run_bench import measure_floor

    corpora = {n: corpus_file(n) for n in sorted(args.sizes, reverse=True)}
    floor_corpus = corpus_file(min(args.sizes))
    print(f"[bench] floor before, {cores} cores", flush=True)
    floors = [measure_floor(floor_corpus, cores)]
    print(f"        {floors[0]['per_second']:,.0f} verifies/s", flush=True)
    variants: dict[str, dict[str, str]] = {"default": {}}
    for text in args.variant:
        name, _, setting = text.partition("=")
        key, _, value = setting.partition("=")
        variants[name] = {key: value}
    jvm = {name: env.pop("jvm") for name, env in variants.items() if "jvm" in env}
    cold: dict[str, Any] = {}
    for attempt in range(args.runs):
        for lines in sorted(corpora):
            for backend in args.backends:
                for variant, env in variants.items():
                    print(f"[bench] cold {variant} {backend} {lines:,} lines "
                          f"(run {attempt + 1}/{args.runs})", flush=True)
                    measured = cold_run(corpora[lines], lines, backend, cores, env,
                                        jvm.get(variant))
                    print(f"        {measured['wall_s']:.1f} s, "
                          f"{measured['per_second']:,.0f} lines/s; {measured['stages']}; "
                          f"cpu {measured['cpu_s']}", flush=True)
                    cold.setdefault(f"{variant}/{backend}/{lines}", []).append(measured)
    warm = {} if args.skip_warm else warm_runs(corpora, args.backends, args.warm_runs, cores)
    print(f"[bench] floor after, {cores} cores", flush=True)
    floors.append(measure_floor(floor_corpus, cores))
    floor = sum(f["per_second"] for f in floors) / len(floors)
    best = {key: min(runs, key=lambda r: r["wall_s"]) for key, runs in cold.items()}
    report: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cores": cores, "python": platform.python_version(),
                    "platform": platform.platform()},
        "corpus": {"agents": AGENTS, "seed": SEED, "attack_share": ATTACK_SHARE,
                   "sizes": sorted(corpora)},
        "floor": {"per_second": floor, "before": floors[0]["per_second"],
                  "after": floors[1]["per_second"]},
        "cold": {key: {**b, "x_floor": b["per_second"] / floor, "all": cold[key]}
                 for key, b in best.items()},
        "warm": {key: {**w, "x_floor": w["per_second"] / floor} for key, w in warm.items()},
        "targets": {"cold_1600000_x_floor": 0.8, "cold_400000_x_floor": 0.6,
                    "warm_400000_x_floor": 1.0},
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n[bench] floor {floor:,.0f} verifies/s (before {floors[0]['per_second']:,.0f}, "
          f"after {floors[1]['per_second']:,.0f}); {AGENTS:,} agents")
    for key, entry in report["cold"].items():
        print(f"  cold {key:<34}{entry['per_second']:>9,.0f} lines/s {entry['x_floor']:>6.2f}x"
              f"  {entry['stages']}")
    for key, entry in report["warm"].items():
        print(f"  warm {key:<34}{entry['per_second']:>9,.0f} lines/s {entry['x_floor']:>6.2f}x")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
