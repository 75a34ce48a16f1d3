"""`make bench-cluster`: the batch job's throughput on a Spark standalone cluster of one and
of two one-core workers, against the libsecp256k1 floor and ``local[*]`` of the same run.

Measured in one run, on one generated corpus (default 60,000 lines, 10% attacks):

1. floor      -- ``run_bench.measure_floor``: raw BIP-340 verifies/s, one process per core;
2. local      -- ``run_bench.measure_job`` on a ``local[*]`` session (warm, delta-rs);
3. cluster_1  -- the same on a standalone cluster with one worker of one core;
4. cluster_2  -- the same with two workers of one core each.

The cluster runs use :class:`snap_spark.cluster.standalone.StandaloneCluster` (a master
and workers from the installed PySpark on 127.0.0.1) with the driver in this process, the
executors' Python an environment that has the dependencies but not the project
(:func:`snap_spark.cluster.shipping.deps_env`), and the project shipped as a zip
(``addPyFile``, what ``spark-submit --py-files`` does). Every Spark measurement runs the
warm-up file first (executors registered, Python workers started), then ``--runs`` times;
the fastest is kept and every timing recorded, with the load average around it (other work
on the machine shows there). Writes ``bench/results-cluster.json``.
"""

from __future__ import annotations

import argparse
import json
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
sys.path.insert(0, str(ROOT / "bench"))

from run_bench import make_corpus, measure_floor, measure_job  # noqa: E402

SESSION_CONF = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def measure_local(corpus: Path, runs: int, cores: int) -> dict[str, Any]:
    """The job on ``local[cores]`` (what ``make bench`` calls ``job``)."""
    from snap_spark.runtime.session import build_session

    spark = build_session("snap-spark bench local", master=f"local[{cores}]",
                          extra_conf=SESSION_CONF, delta=False, kafka=False)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        load = _load()
        result = measure_job(spark, corpus, runs)
        return {**result, "load_before": load, "load_after": _load()}
    finally:
        spark.stop()


def measure_cluster(corpus: Path, runs: int, workers: int, work: Path,
                    python: Path, shipped: Path) -> dict[str, Any]:
    """The job with this process as the driver of a standalone cluster of ``workers``
    one-core workers (started here, stopped whatever happens)."""
    from snap_spark.cluster.standalone import StandaloneCluster
    from snap_spark.runtime.session import build_session

    with StandaloneCluster(work / f"cluster-{workers}", workers=workers) as cluster:
        previous = os.environ.get("PYSPARK_PYTHON")
        os.environ["PYSPARK_PYTHON"] = str(python)  # the executors' interpreter
        try:
            spark = build_session(f"snap-spark bench cluster-{workers}",
                                  master=cluster.master_url, extra_conf=SESSION_CONF,
                                  delta=False, kafka=False)
        finally:
            if previous is None:
                os.environ.pop("PYSPARK_PYTHON", None)
            else:
                os.environ["PYSPARK_PYTHON"] = previous
        spark.sparkContext.setLogLevel("ERROR")
        try:
            spark.sparkContext.addPyFile(str(shipped))
            load = _load()
            result = measure_job(spark, corpus, runs)
            apps = cluster.status().get("activeapps", [])
            cores = apps[0].get("cores") if apps else None
        finally:
            spark.stop()
    return {**result, "workers": workers, "executor_cores": cores,
            "load_before": load, "load_after": _load()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--runs", type=int, default=3,
                        help="timed runs per measurement, fastest kept (default 3)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results-cluster.json"))
    args = parser.parse_args()
    from snap_spark.cluster.shipping import deps_env, package_zip

    cores = os.cpu_count() or 1
    corpus = ROOT / "bench" / "out" / f"corpus-{args.messages}-{args.seed}.jsonl"
    print(f"[bench-cluster] corpus {corpus.name}: generating if absent", flush=True)
    make_corpus(corpus, args.messages, args.seed)
    work = Path(tempfile.mkdtemp(prefix="snap-bench-cluster-"))
    results: dict[str, Any] = {}
    try:
        python = deps_env(work / "deps-env")
        shipped = package_zip(work / "snap_spark.zip")
        print(f"[bench-cluster] 1/4 libsecp256k1 verify floor on {cores} cores", flush=True)
        results["floor"] = measure_floor(corpus, cores)
        print(f"        {results['floor']['per_second']:,.0f} verifies/s", flush=True)
        print(f"[bench-cluster] 2/4 the job on local[{cores}]", flush=True)
        results["local"] = measure_local(corpus, args.runs, cores)
        print(f"        {results['local']['per_second']:,.0f} lines/s", flush=True)
        for step, workers in ((3, 1), (4, 2)):
            print(f"[bench-cluster] {step}/4 the job on a standalone cluster, {workers} "
                  "worker(s) of 1 core", flush=True)
            # the floor again just before: how much of the machine this run got (other
            # work on a shared machine moves both)
            floor_now = measure_floor(corpus, cores)["per_second"]
            results[f"cluster_{workers}"] = {
                **measure_cluster(corpus, args.runs, workers, work, python, shipped),
                "floor_just_before": floor_now}
            print(f"        {results[f'cluster_{workers}']['per_second']:,.0f} lines/s "
                  f"(runs {results[f'cluster_{workers}']['all_seconds']} s)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rate = {name: r["per_second"] for name, r in results.items()}
    ratios = {
        "cluster_2_vs_cluster_1": rate["cluster_2"] / rate["cluster_1"],
        "cluster_2_vs_local": rate["cluster_2"] / rate["local"],
        "cluster_1_vs_local": rate["cluster_1"] / rate["local"],
        "local_vs_floor": rate["local"] / rate["floor"],
        "cluster_2_vs_floor": rate["cluster_2"] / rate["floor"],
    }
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cores": cores, "python": platform.python_version(),
                    "platform": platform.platform()},
        "corpus": {"lines": args.messages, "seed": args.seed, "attack_share": 0.10},
        "backend": "delta-rs",
        "results": results,
        "ratios": ratios,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print("\n[bench-cluster] lines (or verifies) per second, same corpus, same run:")
    for name, value in rate.items():
        print(f"  {name:<34}{value:>10,.0f}")
    for name, value in ratios.items():
        print(f"  {name:<34}{value:>10.2f}x")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
