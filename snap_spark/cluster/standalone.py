"""A Spark standalone master and workers on this machine, and the process-group handling
that stops them (and everything they started) when their owner is done or died.

:class:`StandaloneCluster` starts a master and N workers from the installed PySpark
(``$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master`` / ``...Worker``,
with ``SPARK_HOME`` the ``pyspark`` package folder) on free ports of 127.0.0.1, each in its
own process group, with its work and log folders under one directory. It records their
process groups in ``workdir/cluster-pids.json``; :func:`stop_recorded` (``python -m
snap_spark.cluster stop``) ends them when the owner could not.

Examples:
    A cluster for a block::

        with StandaloneCluster(Path("/tmp/c"), workers=2) as cluster:
            print(cluster.master_url)      # spark://127.0.0.1:41235
            print(cluster.alive_workers()) # 2
        # master, workers, executors: all gone here
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from snap_spark.cluster.common import ClusterError, spark_home

#: Which process groups a cluster started (read by ``stop`` when its owner died).
PIDS_FILE = "cluster-pids.json"
#: A Java system property on the master's and workers' command lines naming their cluster
#: folder, so that ``stop`` never signals a process it did not start.
MARKER_PROPERTY = "snap.standalone.dir"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it).

    Examples:
        >>> 1024 < free_port() < 65536
        True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _process_groups() -> dict[int, int]:
    """``{pid: process group}`` of every process this user can see (from ``/proc``)."""
    groups: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields and fields[0] != b"Z":  # a zombie is dead, only not yet reaped
            groups[int(entry.name)] = int(fields[2])
    return groups


def _cmdline(pid: int) -> str:
    """A process's command line ('' when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def group_members(groups: Sequence[int]) -> list[int]:
    """Live processes in any of the process groups ``groups``.

    Examples:
        >>> os.getpid() in group_members([os.getpgid(0)])
        True
    """
    wanted = set(groups)
    return sorted(pid for pid, group in _process_groups().items() if group in wanted)


def processes_under(folder: Path) -> list[int]:
    """Live processes whose working directory is ``folder`` or below it: an executor's
    Python workers run in the executor's folder, in a process group of their own
    (``pyspark.daemon`` calls ``setpgid``), so the workers' groups do not hold them.

    Examples:
        >>> processes_under(Path("/nonexistent"))
        []
    """
    root = str(folder.resolve())
    found = []
    for pid in _process_groups():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + os.sep):
            found.append(pid)
    return sorted(found)


def _spark_processes_under(folder: Path) -> list[int]:
    """:func:`processes_under` that are Spark's or PySpark's (never, say, a shell that
    happens to sit in the folder)."""
    return [pid for pid in processes_under(folder)
            if any(name in _cmdline(pid) for name in ("pyspark", "org.apache.spark"))]


def _end_stray_workers(folder: Path, grace: float = 10.0) -> list[int]:
    """Wait for the Python workers of the executors that ran under ``folder`` to leave
    (they do once their executor is gone), SIGKILL those still there after ``grace``
    seconds; return any that survive even that."""
    deadline = time.monotonic() + grace
    while _spark_processes_under(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in _spark_processes_under(folder):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    if _spark_processes_under(folder):
        time.sleep(0.5)
    return _spark_processes_under(folder)


def _signal_groups(groups: Sequence[int], sig: signal.Signals) -> None:
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)


def end_groups(groups: Sequence[int], grace: float) -> list[int]:
    """SIGTERM the process groups ``groups``, wait up to ``grace`` seconds, SIGKILL what is
    left; return the processes still alive after that (none, normally). A cluster's stop
    ends its daemons' groups with it, and a ``spark-submit`` run in its own group is ended
    with it when its caller is interrupted.

    Examples:
        >>> end_groups([], grace=0.0)
        []
    """
    _signal_groups(groups, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while group_members(groups) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_members(groups):
        _signal_groups(groups, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while group_members(groups) and time.monotonic() < deadline:
            time.sleep(0.1)
    return group_members(groups)


@dataclass
class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers on ``host``, run from ``workdir``.

    :meth:`start` launches them (free ports, ``workdir/logs/*.log``, each worker's
    ``--work-dir`` under ``workdir/work/``) and waits until the master's JSON status
    (``http://host:webui_port/json``) lists every worker ALIVE; :meth:`stop` ends their
    process groups, executors and Python workers included. Used as a context manager it
    starts on entry and always stops on exit (SIGTERM is turned into an exception for the
    block's duration, so ``kill`` of the owner cleans up too).

    The daemons get no ``PYTHONPATH`` nor ``PYSPARK_PYTHON`` of the caller: executors see
    only what the application ships or names (``--py-files``, ``--archives``,
    ``spark.pyspark.python``).

    Example (starts two JVMs)::

        with StandaloneCluster(Path(tempfile.mkdtemp()), workers=1) as c:
            c.master_url, c.alive_workers()     # ('spark://127.0.0.1:38211', 1)
    """

    workdir: Path
    workers: int = 2
    #: cores and memory each worker offers
    cores: int = 1
    memory: str = "1536m"
    host: str = "127.0.0.1"
    start_timeout: float = 120.0
    #: heap of the master and worker JVMs themselves (Spark's default is 1g each)
    daemon_memory: str = "512m"
    master_port: int = 0
    webui_port: int = 0
    #: ``with`` waits for the workers on entry; ``False`` returns once they are launched
    #: (do something else while the JVMs boot, then call :meth:`wait_for_workers`)
    wait_on_enter: bool = True
    _processes: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    #: the SIGTERM handler to put back on exit, as ``(handler,)`` while ours is installed
    _previous_sigterm: tuple[Any] | None = None

    @property
    def master_url(self) -> str:
        """``spark://host:port`` for ``spark-submit --master``."""
        return f"spark://{self.host}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        """The master's web UI (its JSON status is at ``/json``)."""
        return f"http://{self.host}:{self.webui_port}"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def worker_dir(self, index: int) -> Path:
        """``--work-dir`` of worker ``index``: one folder per application and executor."""
        return self.workdir / "work" / f"worker-{index}"

    def daemon_env(self) -> dict[str, str]:
        """The environment of the master and workers (and so of their executors)."""
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                              "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")}
        conf_dir = self.workdir / "conf"  # empty: no spark-defaults.conf of anyone else
        conf_dir.mkdir(parents=True, exist_ok=True)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_LOCAL_IP=self.host,
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            SPARK_DAEMON_JAVA_OPTS=f"-D{MARKER_PROPERTY}={self.workdir.resolve()}",
            SPARK_LOG_DIR=str(self.log_dir),
        )
        return env

    def _launch(self, role: str, args: list[str]) -> None:
        spark_class = spark_home() / "bin" / "spark-class"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / f"{role}.log").open("ab") as out:
            process = subprocess.Popen(
                [str(spark_class), *args], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, env=self.daemon_env(), cwd=self.workdir,
                start_new_session=True,  # its own process group: stopped as one
            )
        self._processes.append((role, process))
        self._record()

    def _record(self) -> None:
        """Write which process groups are ours (``python -m snap_spark.cluster stop``)."""
        entries = [{"role": role, "pid": p.pid} for role, p in self._processes]
        (self.workdir / PIDS_FILE).write_text(json.dumps(
            {"master": self.master_url, "processes": entries}, indent=1) + "\n")

    def start(self, *, wait: bool = True) -> StandaloneCluster:
        """Start the master, then the workers; return when all workers are ALIVE (with
        ``wait=False`` at once: call :meth:`wait_for_workers` before submitting).

        Raises:
            ClusterError: a daemon exited, or the workers were not all ALIVE within
                :attr:`start_timeout` (everything started is stopped first).
        """
        if self._processes:
            raise ClusterError("this cluster is already started")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.master_port = self.master_port or free_port(self.host)
        self.webui_port = self.webui_port or free_port(self.host)
        try:
            self._launch("master", [
                "org.apache.spark.deploy.master.Master", "--host", self.host,
                "--port", str(self.master_port), "--webui-port", str(self.webui_port)])
            for index in range(self.workers):
                work = self.worker_dir(index)
                work.mkdir(parents=True, exist_ok=True)
                self._launch(f"worker-{index}", [
                    "org.apache.spark.deploy.worker.Worker", "--host", self.host,
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--webui-port", str(free_port(self.host)), "--work-dir", str(work),
                    self.master_url])
            if wait:
                self.wait_for_workers(self.start_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, running and completed applications).

        Raises:
            OSError: the master does not answer.
        """
        with urllib.request.urlopen(f"{self.webui_url}/json", timeout=5) as response:
            status: dict[str, Any] = json.load(response)
        return status

    def alive_workers(self) -> int:
        """How many workers the master lists as ALIVE (0 when it does not answer)."""
        try:
            workers = self.status().get("workers", [])
        except (OSError, ValueError):
            return 0
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def wait_for_workers(self, timeout: float) -> None:
        """Wait until all workers are ALIVE.

        Raises:
            ClusterError: a daemon exited meanwhile, or the time ran out (with the tail of
                its log).
        """
        if not self._processes:
            raise ClusterError("this cluster is not started")
        deadline = time.monotonic() + timeout
        while True:
            for role, process in self._processes:
                if process.poll() is not None:
                    raise ClusterError(f"the {role} exited with status {process.returncode}: "
                                       f"{self._log_tail(role)}")
            if self.alive_workers() >= self.workers:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{self.alive_workers()} of {self.workers} workers ALIVE after "
                    f"{timeout:.0f}s: {self._log_tail('master')}")
            time.sleep(0.25)

    def _log_tail(self, role: str, lines: int = 8) -> str:
        path = self.log_dir / f"{role}.log"
        if not path.exists():
            return "(no log)"
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])

    @property
    def process_groups(self) -> list[int]:
        """The process groups of the master and workers (their pids): executors and
        Python workers they start join them."""
        return [p.pid for _, p in self._processes]

    def processes(self) -> list[int]:
        """Live processes of this cluster: the daemons and everything they started (the
        executors in the workers' groups, their Python workers in the executors' folders)."""
        return sorted(set(group_members(self.process_groups))
                      | set(processes_under(self.workdir)))

    def stop(self, grace: float = 20.0) -> None:
        """Stop the workers (and their executors), then the master; SIGKILL what does not
        end within ``grace`` seconds.

        Raises:
            ClusterError: processes of the cluster are still alive afterwards.
        """
        groups = [p.pid for role, p in reversed(self._processes)]
        left = end_groups(groups, grace)
        for _, process in self._processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        left += _end_stray_workers(self.workdir)
        self._processes.clear()
        with contextlib.suppress(FileNotFoundError):
            (self.workdir / PIDS_FILE).unlink()
        if left:
            raise ClusterError(f"cluster processes still alive after stop: {left}")

    def __enter__(self) -> StandaloneCluster:
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = (signal.signal(signal.SIGTERM, _sigterm_to_exit),)
        try:
            return self.start(wait=self.wait_on_enter)
        except BaseException:
            self._restore_sigterm()
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        try:
            self.stop()
        finally:
            self._restore_sigterm()

    def _restore_sigterm(self) -> None:
        if self._previous_sigterm is not None:
            handler = self._previous_sigterm[0]
            signal.signal(signal.SIGTERM, signal.SIG_DFL if handler is None else handler)
            self._previous_sigterm = None


def _sigterm_to_exit(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as an exception, so ``finally`` blocks (the cluster's stop) run."""
    raise SystemExit(128 + signum)


def stop_recorded(workdir: Path, grace: float = 20.0) -> list[int]:
    """Stop what a cluster recorded in ``workdir`` when its owner could not (``kill -9``,
    a crash): the process groups of its master and workers, only if their leader is one
    of them (its command line carries the cluster's marker) or, the leader gone, the
    members are Spark's or PySpark's. Returns the pids signalled.

    Examples:
        >>> stop_recorded(Path("/nonexistent"))
        []
    """
    path = workdir / PIDS_FILE
    if not path.exists():
        return []
    marker = f"-D{MARKER_PROPERTY}={workdir.resolve()}"
    groups: list[int] = []
    members = _process_groups()
    for entry in json.loads(path.read_text()).get("processes", []):
        group = int(entry["pid"])
        pids = [pid for pid, g in members.items() if g == group]
        if not pids:
            continue
        if group in pids:
            if marker not in _cmdline(group):
                continue  # a recycled pid: not ours
        elif not all("org.apache.spark" in _cmdline(p) or "pyspark" in _cmdline(p)
                     for p in pids):
            continue
        groups.append(group)
    signalled = group_members(groups)
    end_groups(groups, grace)
    _end_stray_workers(workdir, 5.0)
    path.unlink()
    return signalled

