"""The runtime's one switch (``SNAP_SPARK_RUNTIME``, :mod:`snap_spark.runtime.scope`): off,
a session snap-spark builds gets none of the runtime's pieces; on, a local one gets them.
Checked on the plan a session is started from, without starting Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from snap_spark.runtime import preinit
from snap_spark.runtime.scope import RUNTIME_ENV, local_master, local_parallelism, switched_off
from snap_spark.runtime.session import (
    DEFER_ENV,
    DRIVER_JAVA_OPTIONS_CONF,
    WORKER_DAEMON_CONF,
    WORKER_DAEMON_MODULE,
    _plan,
)

ROOT = Path(__file__).resolve().parents[2]


def _local_plan(monkeypatch: pytest.MonkeyPatch, runtime: str | None) -> object:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    if runtime is None:
        monkeypatch.delenv(RUNTIME_ENV, raising=False)
    else:
        monkeypatch.setenv(RUNTIME_ENV, runtime)
    return _plan("scope", "local[2]", None, None, delta=False, kafka=False)


def test_off_leaves_a_local_session_without_any_piece_of_the_runtime(
        monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _local_plan(monkeypatch, "off")
    assert DRIVER_JAVA_OPTIONS_CONF not in plan.settings  # type: ignore[attr-defined]
    assert WORKER_DAEMON_CONF not in plan.settings  # type: ignore[attr-defined]
    assert plan.local_workers is False  # type: ignore[attr-defined]  # so no launcher
    assert switched_off(DEFER_ENV)  # so the session starts at once (_SessionPlan.deferrable)
    # what it keeps: snap-spark's settings, which the jobs' results depend on
    assert plan.settings["spark.sql.session.timeZone"] == "UTC"  # type: ignore[attr-defined]


def test_on_gives_a_local_session_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _local_plan(monkeypatch, None)
    settings = plan.settings  # type: ignore[attr-defined]
    assert "-XX:TieredStopAtLevel=1" in settings[DRIVER_JAVA_OPTIONS_CONF]
    assert settings[WORKER_DAEMON_CONF] == WORKER_DAEMON_MODULE
    assert plan.local_workers is True  # type: ignore[attr-defined]
    assert not switched_off(DEFER_ENV)


def test_a_cluster_master_gets_neither_the_flags_nor_the_daemon(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUNTIME_ENV, raising=False)
    plan = _plan("scope", "spark://127.0.0.1:7077", None, None, delta=False, kafka=False)
    assert WORKER_DAEMON_CONF not in plan.settings
    assert "TieredStopAtLevel" not in plan.settings.get(DRIVER_JAVA_OPTIONS_CONF, "")


@pytest.mark.parametrize("env,on", [({}, True), ({RUNTIME_ENV: "off"}, False),
                                    ({preinit.SWITCH_ENV: "0"}, False),
                                    ({RUNTIME_ENV: "on", preinit.SWITCH_ENV: "1"}, True)])
def test_the_warm_interpreter_follows_the_switch_and_its_own(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], on: bool) -> None:
    for name in (RUNTIME_ENV, preinit.SWITCH_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # a stand-in for a SparkContext: enabled() reads its master alone, and a second
    # SparkContext cannot be started in this process
    local, cluster = SimpleNamespace(master="local[2]"), SimpleNamespace(master="yarn")
    assert preinit.enabled(local) is on  # type: ignore[arg-type]
    assert preinit.enabled(cluster) is False  # type: ignore[arg-type]


@pytest.mark.parametrize("master", ["local", "local[*]", "local[4]", "local[2,3]", None])
def test_every_in_process_local_master_is_local_and_has_slots(master: str | None) -> None:
    assert local_master(master) and local_parallelism(master) is not None


@pytest.mark.parametrize("master", ["yarn", "k8s://https://h:6443", "spark://h:7077",
                                    "sc://h:15002", "localhost", ""])
def test_other_masters_are_a_cluster_s(master: str) -> None:
    assert not local_master(master)
    assert local_parallelism(master) is None


def test_a_workspace_linking_the_checkout_keeps_the_runtime(tmp_path: Path) -> None:
    """``spark-submit jobs/...`` run in a folder that links the checkout's files (the docs
    test's workspaces; a copy of a checkout made of links): Python resolves the linked
    script's folder, so the driver imports ``snap_spark`` from the checkout itself, while
    its workers, started in that folder, find it through the link. The same files: its
    local session gets the worker daemon and the warm interpreter, as in the checkout.
    Checked in a child interpreter started there, importing as that driver does."""
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "snap_spark").symlink_to(ROOT / "snap_spark")
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import snap_spark; "
             "from snap_spark.runtime.session import _local_workers_import_snap_spark; "
             "print(snap_spark.__file__); print(_local_workers_import_snap_spark('local[2]'))")
    done = subprocess.run([sys.executable, "-c", probe, str(ROOT)], cwd=linked,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    where, answer = done.stdout.split()
    assert where == str(ROOT / "snap_spark" / "__init__.py")  # not through the link
    assert answer == "True"
