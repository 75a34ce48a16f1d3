"""The batch job on a real Spark standalone cluster (a master and two one-core workers on
127.0.0.1, from the installed PySpark), the project shipped to the executors with
``spark-submit --py-files``, compared row for row with a local run of the same input.

Why ``--py-files`` here and not the packed environment (``--archives``, run by
``make cluster-demo CLUSTER_SHIP=archives`` and measured in docs/cluster.md): building that
environment pip-installs the project's wheel and every dependency into a fresh virtualenv
and packs it (70-85 s here from pip's cache, and it needs the package index or that cache),
and every executor then fetches and unpacks 200 MiB. ``--py-files`` with
the dependencies pre-installed proves the same thing that matters — the executors run code
they got from the application, not from their own environment — in about a second of set-up:
the executors' (and the driver's) interpreter cannot import ``snap_spark`` at all, which the
test checks first.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from snap_spark.cluster.compare import Submitted, compare_lakes, submit
from snap_spark.cluster.shipping import deps_env, package_zip
from snap_spark.cluster.standalone import StandaloneCluster, group_members
from snap_spark.pipeline.batch_job import format_summary, run
from snap_spark.samples.messages import SampleConfig, write_sample

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def ps_lines(needle: str) -> list[str]:
    """``ps`` lines (every process of the machine) whose command line holds ``needle``."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,pgid,args"], capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if needle in line]


def running_in(folder: Path) -> list[str]:
    """Processes whose working directory is in ``folder`` (executors and their Python
    workers run in their executor's folder), read from /proc independently of the module."""
    root, found = str(folder.resolve()), []
    for entry in Path("/proc").iterdir():
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/"):
            found.append(f"{entry.name} {cwd}")
    return found


def without_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}


def test_the_job_on_a_standalone_cluster_lands_what_a_local_run_lands(
        spark: Any, tmp_path: Path) -> None:
    sample = tmp_path / "input" / "traffic.jsonl"
    sample.parent.mkdir()
    write_sample(SampleConfig(agents=6, messages=3000, seed=7), str(sample), tasks_path=None)

    # Executors and driver run an interpreter holding the dependencies but not the project.
    python = deps_env(tmp_path / "deps-env")
    probe = subprocess.run([str(python), "-c", "import snap_spark"], capture_output=True,
                           text=True, cwd=tmp_path, env=without_pythonpath(), check=False)
    assert probe.returncode != 0, "the executors' Python must not see snap_spark by itself"
    assert "No module named 'snap_spark'" in probe.stderr
    shipped = package_zip(tmp_path / "snap_spark.zip")

    cluster = StandaloneCluster(tmp_path / "cluster", workers=2, wait_on_enter=False)
    marker = f"-Dsnap.standalone.dir={cluster.workdir.resolve()}"
    with cluster:
        # the reference while the master's and workers' JVMs boot: the same input on the
        # local session (local[2]: every core here)
        reference = run(spark, [str(sample)], str(tmp_path / "lake-local"))
        assert reference.lines_read == 3000 and reference.rejected > 0
        cluster.wait_for_workers(120)
        groups = cluster.process_groups
        assert len(groups) == 3 and cluster.alive_workers() == 2
        assert len(ps_lines(marker)) == 3  # the master's and the workers' JVMs
        done: Submitted = submit(
            "cluster", cluster.master_url,
            ["--py-files", str(shipped), "--conf", "spark.snap.lake.backend=delta-rs"],
            driver_python=python, executor_python=str(python),
            lake=tmp_path / "lake-cluster", inputs=[sample], log_dir=tmp_path / "logs",
            # Spark tasks on the executors, even for this small input (which the driver
            # would otherwise land itself: snap_spark.common.placement, land_bytes)
            env={**without_pythonpath(), "SNAP_SPARK_DRIVER_LIMITS": "land_bytes=0"}, timeout=300)
        apps = cluster.status()["completedapps"]

    # stopped: no JVM of the cluster, no executor, no Python worker left
    assert group_members(groups) == []
    assert ps_lines(marker) == []
    assert not ps_lines(str(cluster.workdir))
    assert running_in(cluster.workdir) == []

    assert done.returncode == 0, Path(done.log).read_text()[-3000:]
    assert done.lines_read == 3000
    expected = Submitted("local", 0, 0.0, None, None, format_summary(reference).splitlines(),
                         "", "").normalized_summary()
    assert done.normalized_summary() == expected
    assert "balance: OK" in "\n".join(done.summary)
    # it ran on the cluster: one application, both workers' cores, an executor on each
    # worker that fetched the shipped zip into its folder
    assert [(app["name"], app["cores"], app["state"]) for app in apps] == [
        ("snap-spark verify_messages", 2, "FINISHED")]
    for index in range(2):
        fetched = list(cluster.worker_dir(index).glob("app-*/*/snap_spark.zip"))
        assert len(fetched) == 1, f"worker {index} ran no executor with the shipped code"
    assert compare_lakes(tmp_path / "lake-local", tmp_path / "lake-cluster") == {
        "raw_messages": "equal (3000 rows)", "messages": "equal (3000 rows)"}


def test_the_cluster_stops_when_its_owner_gets_sigterm(tmp_path: Path) -> None:
    """SIGTERM (a killed ``make``, a CI timeout) inside the block still stops everything,
    as an exception or Ctrl-C would: the context manager's exit runs on the way out."""
    cluster = StandaloneCluster(tmp_path / "cluster", workers=1)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped, cluster:
        groups = cluster.process_groups
        assert len(group_members(groups)) >= 2
        assert (cluster.workdir / "cluster-pids.json").exists()
        os.kill(os.getpid(), signal.SIGTERM)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert group_members(groups) == []
    assert ps_lines(f"-Dsnap.standalone.dir={cluster.workdir.resolve()}") == []
    assert running_in(cluster.workdir) == []
    assert not (cluster.workdir / "cluster-pids.json").exists()
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is undone
