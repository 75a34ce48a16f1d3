"""The batch job on a Spark standalone cluster on this machine, compared with local[*].

:func:`run_demo` generates a sample, runs ``spark-submit jobs/verify_messages.py`` on it on
``local[*]`` and on a :class:`~snap_spark.cluster.standalone.StandaloneCluster` (once per
way of shipping the project, :mod:`snap_spark.cluster.shipping`), and compares the lakes
row for row (:mod:`snap_spark.cluster.compare`). :func:`main` is its command line,
``python -m snap_spark.cluster demo|stop``, which ``make cluster-demo`` runs.

Examples:
    The demo, as ``make cluster-demo`` runs it::

        python -m snap_spark.cluster demo --workdir data/cluster-demo --messages 3000
        python -m snap_spark.cluster demo --ship archives   # a venv-pack'ed environment
        python -m snap_spark.cluster stop --workdir data/cluster-demo  # leftovers, if any
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from snap_spark.cluster.common import CHECKOUT, ClusterError
from snap_spark.cluster.compare import Submitted, committed_by, compare_lakes, submit
from snap_spark.cluster.shipping import deps_env, package_zip, packed_env
from snap_spark.cluster.standalone import StandaloneCluster, stop_recorded
from snap_spark.common.console import log

SHIPPING = ("py-files", "archives")


@dataclass
class DemoConfig:
    """What :func:`run_demo` runs."""

    workdir: Path
    messages: int = 3000
    agents: int = 6
    seed: int = 7
    #: how the project reaches the executors: ``py-files``, ``archives`` or both
    ship: tuple[str, ...] = ("py-files",)
    #: ``delta-rs`` (JAR-free) or ``delta-spark`` (the cached JARs shipped with ``--jars``)
    backend: str = "delta-rs"
    workers: int = 2
    rebuild_env: bool = False


@dataclass
class DemoReport:
    """What :func:`run_demo` found; ``ok`` when every cluster run matched ``local[*]``."""

    sample: str
    master: str = ""
    local: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    shipping: dict[str, dict[str, Any]] = field(default_factory=dict)
    tables: dict[str, dict[str, str]] = field(default_factory=dict)
    #: per run, the engine that committed each table
    engines: dict[str, dict[str, str]] = field(default_factory=dict)
    applications: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _shipping_args(how: str, config: DemoConfig, out: Path,
                   report: DemoReport) -> tuple[list[str], Path, str]:
    """``(spark-submit arguments, driver Python, executors' Python)`` of one way to ship."""
    if how == "py-files":
        started = time.perf_counter()
        python = deps_env(out / "deps-env")
        deps_seconds = time.perf_counter() - started
        started = time.perf_counter()
        archive = package_zip(out / "snap_spark.zip")
        report.shipping[how] = {
            "zip": str(archive), "size_bytes": archive.stat().st_size,
            "zip_seconds": round(time.perf_counter() - started, 3),
            "deps_env": str(python), "deps_env_seconds": round(deps_seconds, 2),
            "note": "dependencies pre-installed where executors run; only the zip ships"}
        return ["--py-files", str(archive)], python, str(python)
    packed = packed_env(out / "packed-env", rebuild=config.rebuild_env)
    report.shipping[how] = {
        "archive": str(packed.archive), "size_bytes": packed.size_bytes,
        "build_seconds": {k: round(v, 2) for k, v in packed.seconds.items()},
        "cached": packed.cached, "driver_python": str(packed.python)}
    return (["--archives", f"{packed.archive}#environment",
             "--conf", "spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python"],
            packed.python, "./environment/bin/python")


def _backend_args(backend: str) -> list[str]:
    args = ["--conf", f"spark.snap.lake.backend={backend}"]
    if backend == "delta-spark":
        from snap_spark.runtime.maven_jars import DELTA

        jars = DELTA.available()
        if jars is None:
            raise ClusterError("delta-spark needs Delta's JARs: run `make setup` "
                               f"(cached in {DELTA.cache_dir()})")
        args += ["--jars", ",".join(jars)]
    return args


def run_demo(config: DemoConfig) -> DemoReport:
    """Generate a sample, run the batch job on ``local[*]`` and on a standalone cluster of
    ``config.workers`` one-core workers (once per way of shipping), and compare: exit
    status, summary (timing aside) and the ``raw_messages`` and ``messages`` tables row
    for row. Everything goes under ``config.workdir``; ``report.json`` there holds the
    report. The cluster is stopped whatever happens.

    Raises:
        ClusterError: the cluster or an environment could not be made.

    Example (starts a cluster)::

        report = run_demo(DemoConfig(Path("data/cluster-demo")))
        report.ok, report.tables["py-files"]["messages"]    # (True, 'equal (3000 rows)')
    """
    work = config.workdir.resolve()
    for how in config.ship:
        if how not in SHIPPING:
            raise ClusterError(f"unknown way to ship {how!r}: {', '.join(SHIPPING)}")
    for old in ("lakes", "cluster"):
        shutil.rmtree(work / old, ignore_errors=True)
    sample = _sample(config, work)
    report = DemoReport(sample=str(sample))
    backend = _backend_args(config.backend)
    logs = work / "logs"
    shipping = _prepare_shipping(config, work, report)
    local = _run_local(work, backend, sample, logs)
    report.local = _run_facts(local)
    if local.returncode != 0:
        report.problems.append(f"local run exited {local.returncode} (see {local.log})")
        _write_report(work, report)
        return report
    _run_on_cluster(config, work, shipping, backend, sample, logs, local, report)
    if len(report.applications) != len(shipping):
        report.problems.append(f"the master lists {len(report.applications)} completed "
                               f"applications, expected {len(shipping)}")
    _write_report(work, report)
    return report


def _sample(config: DemoConfig, work: Path) -> Path:
    """The demo's input file under ``work``, generated unless it is there already."""
    from snap_spark.samples.messages import SampleConfig, write_sample

    sample = work / "input" / f"traffic-{config.messages}-{config.seed}.jsonl"
    if not sample.exists():
        log(f"cluster-demo: generating {config.messages} messages into {sample}")
        sample.parent.mkdir(parents=True, exist_ok=True)
        write_sample(SampleConfig(agents=config.agents, messages=config.messages,
                                  seed=config.seed), str(sample), tasks_path=None)
    return sample


def _prepare_shipping(config: DemoConfig, work: Path, report: DemoReport
                      ) -> dict[str, tuple[list[str], Path, str]]:
    """Per way of shipping in ``config``, its :func:`_shipping_args` (what each cost goes
    into ``report.shipping``)."""
    shipping: dict[str, tuple[list[str], Path, str]] = {}
    for how in config.ship:
        log(f"cluster-demo: preparing {how}")
        shipping[how] = _shipping_args(how, config, work / "ship", report)
        log(f"cluster-demo: {how}: {json.dumps(report.shipping[how])}")
    return shipping


def _run_local(work: Path, backend: list[str], sample: Path, logs: Path) -> Submitted:
    """The reference run: the job on ``local[*]`` with this interpreter and the checkout
    on its ``PYTHONPATH``."""
    log("cluster-demo: the job on local[*] (the reference)")
    local_env = dict(os.environ)
    local_env["PYTHONPATH"] = os.pathsep.join(
        [str(CHECKOUT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return submit("local", "local[*]", backend, driver_python=Path(sys.executable),
                  executor_python=sys.executable, lake=work / "lakes" / "local",
                  inputs=[sample], log_dir=logs, env=local_env)


def _run_on_cluster(config: DemoConfig, work: Path,
                    shipping: dict[str, tuple[list[str], Path, str]], backend: list[str],
                    sample: Path, logs: Path, local: Submitted, report: DemoReport) -> None:
    """Start a standalone cluster, run the job on it once per way of shipping, compare each
    run with ``local`` into ``report``, and record the applications the master completed;
    the cluster is stopped whatever happens."""
    cluster = StandaloneCluster(work / "cluster", workers=config.workers)
    log(f"cluster-demo: starting a master and {config.workers} workers "
        f"(logs in {cluster.log_dir})")
    started = time.perf_counter()
    with cluster:
        report.master = cluster.master_url
        log(f"cluster-demo: {cluster.master_url} up with {cluster.alive_workers()} workers "
            f"ALIVE in {time.perf_counter() - started:.1f}s (UI {cluster.webui_url})")
        clean_env = {k: v for k, v in os.environ.items()
                     if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
        for how, (args, driver, executor) in shipping.items():
            log(f"cluster-demo: spark-submit --master {cluster.master_url} ({how})")
            done = submit(how, cluster.master_url, [*args, *backend], driver_python=driver,
                          executor_python=executor, lake=work / "lakes" / how,
                          inputs=[sample], log_dir=logs, env=clean_env)
            _compare_run(how, done, local, work, report)
        with contextlib.suppress(OSError, ValueError):
            report.applications = [
                {k: app.get(k) for k in ("id", "name", "cores", "state", "duration")}
                for app in cluster.status().get("completedapps", [])]


def _compare_run(how: str, done: Submitted, local: Submitted, work: Path,
                 report: DemoReport) -> None:
    """Record a cluster run in ``report``: its facts, and unless it failed, its summary and
    tables compared with the ``local`` run's and the engine that committed each table;
    every difference is a problem."""
    report.runs[how] = _run_facts(done)
    if done.returncode != 0:
        report.problems.append(f"{how}: exit status {done.returncode} "
                               f"(see {done.log})")
        return
    if done.normalized_summary() != local.normalized_summary():
        report.problems.append(f"{how}: summary differs from local[*]'s")
    report.tables[how] = compare_lakes(work / "lakes" / "local", work / "lakes" / how)
    report.engines[how] = committed_by(work / "lakes" / how)
    report.problems += [f"{how}: {table} {what}"
                        for table, what in report.tables[how].items()
                        if not what.startswith("equal")]
    log(f"cluster-demo: {how}: exit 0 in {done.seconds:.1f}s (job {done.job_seconds}s); "
        f"tables vs local[*]: {report.tables[how]}")


def _run_facts(done: Submitted) -> dict[str, Any]:
    facts = asdict(done)
    facts["seconds"] = round(done.seconds, 2)
    return facts


def _write_report(work: Path, report: DemoReport) -> None:
    (work / "report.json").write_text(
        json.dumps({**asdict(report), "ok": report.ok}, indent=2, default=str) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.cluster demo|stop``; exit 0 when the demo's cluster runs
    equal the local one, 1 otherwise.

    Examples:
        >>> main(["stop", "--workdir", "/nonexistent"])
        0
    """
    parser = argparse.ArgumentParser(prog="python -m snap_spark.cluster",
                                     description=__doc__.split("\n\n")[0] if __doc__ else "")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="the batch job on local[*] and on a standalone "
                               "cluster, tables compared")
    demo.add_argument("--workdir", default="data/cluster-demo", type=Path)
    demo.add_argument("--messages", type=int, default=3000)
    demo.add_argument("--agents", type=int, default=6)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--workers", type=int, default=2)
    demo.add_argument("--ship", choices=[*SHIPPING, "both"], default="py-files",
                      help="py-files: a zip of snap_spark, dependencies pre-installed on "
                      "the workers; archives: a venv-pack'ed environment (built once: "
                      "pip needs its index or cache); both")
    demo.add_argument("--backend", choices=["delta-rs", "delta-spark"], default="delta-rs")
    demo.add_argument("--rebuild-env", action="store_true",
                      help="build the packed environment again even when it is current")
    stop = commands.add_parser("stop", help="stop a cluster its owner left running")
    stop.add_argument("--workdir", default="data/cluster-demo", type=Path)
    args = parser.parse_args(argv)
    if args.command == "stop":
        stopped = stop_recorded(args.workdir / "cluster")
        if stopped:
            print(f"stopped {len(stopped)} leftover cluster processes", file=sys.stderr)
        return 0
    config = DemoConfig(workdir=args.workdir, messages=args.messages, agents=args.agents,
                        seed=args.seed, workers=args.workers, backend=args.backend,
                        ship=SHIPPING if args.ship == "both" else (args.ship,),
                        rebuild_env=args.rebuild_env)
    try:
        report = run_demo(config)
    except ClusterError as error:
        print(f"cluster-demo: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the cluster and any spark-submit are stopped by now
        print("cluster-demo: interrupted; the cluster is stopped", file=sys.stderr)
        return 130
    work = config.workdir.resolve()
    print(f"sample: {report.sample}")
    print(f"local[*]: exit {report.local.get('returncode')}, "
          f"{report.local.get('seconds')}s, lake {report.local.get('lake')}")
    for how, facts in report.runs.items():
        print(f"{report.master} ({how}): exit {facts['returncode']}, {facts['seconds']}s "
              f"(job {facts['job_seconds']}s), lake {facts['lake']}")
        for table, what in report.tables.get(how, {}).items():
            engine = report.engines.get(how, {}).get(table)
            print(f"  {table}: {what} vs local[*] (committed by {engine})")
        shipped = report.shipping.get(how, {})
        print(f"  shipped: {shipped.get('size_bytes', 0) / 2**20:.1f} MiB "
              f"({shipped.get('zip') or shipped.get('archive')})")
    for line in report.local.get("summary", []):
        print(f"  {line}")
    print(f"logs: {work / 'logs'}, {work / 'cluster' / 'logs'}; report: {work / 'report.json'}")
    for problem in report.problems:
        print(f"PROBLEM: {problem}")
    print("cluster-demo: OK, the cluster's tables equal local[*]'s" if report.ok
          else "cluster-demo: FAILED")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
