"""A Spark standalone cluster on this machine, and snap-spark shipped to its executors.

``make cluster-demo`` (``python -m snap_spark.standalone demo``) and the cluster test use
it; it is also the quickest way to try a change on a real cluster manager by hand. Three
pieces:

- :class:`StandaloneCluster`: a master and N workers started from the installed PySpark
  (``$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master`` / ``...Worker``, with
  ``SPARK_HOME`` the ``pyspark`` package folder) on free ports of 127.0.0.1, each in its own
  process group, with its work and log folders under one directory. A context manager: the
  master and workers — and the executors and Python workers they started — are stopped
  when the block ends, whether it ends normally, by an exception, Ctrl-C or SIGTERM.
- Two ways to ship the project to executors, as on a real cluster: :func:`package_zip` (a
  zip of the ``snap_spark`` package for ``--py-files``, with the dependencies installed on
  the workers beforehand: :func:`deps_env` makes such an environment here, one that cannot
  import ``snap_spark`` by itself) and :func:`packed_env` (a wheel of the project installed
  into a fresh virtualenv, packed with venv-pack for ``--archives env.tar.gz#environment``).
- :func:`run_demo`: one generated sample through ``spark-submit jobs/verify_messages.py`` on
  ``local[*]`` and on the cluster, and the two lakes compared row for row.

Examples:
    A cluster for a block::

        with StandaloneCluster(Path("/tmp/c"), workers=2) as cluster:
            print(cluster.master_url)      # spark://127.0.0.1:41235
            print(cluster.alive_workers()) # 2
        # master, workers, executors: all gone here

    The demo, as ``make cluster-demo`` runs it::

        python -m snap_spark.standalone demo --workdir data/cluster-demo --messages 3000
        python -m snap_spark.standalone demo --ship archives   # a venv-pack'ed environment
        python -m snap_spark.standalone stop --workdir data/cluster-demo  # leftovers, if any
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.error
import urllib.request
import venv
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from snap_spark.runner import log

#: The ``snap_spark`` package folder, and the checkout holding it (a source checkout has
#: ``jobs/`` and ``conf/`` beside it).
PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT = PACKAGE_DIR.parent
#: The batch job's entry point.
VERIFY_JOB = CHECKOUT / "jobs" / "verify_messages.py"
#: Which process groups a cluster started (read by ``stop`` when its owner died).
PIDS_FILE = "cluster-pids.json"
#: A Java system property on the master's and workers' command lines naming their cluster
#: folder, so that ``stop`` never signals a process it did not start.
MARKER_PROPERTY = "snap.standalone.dir"
#: Packages the executors get from Spark itself (``$SPARK_HOME/python/lib/pyspark.zip``):
#: not installed into a packed environment.
PROVIDED_BY_SPARK = ("pyspark",)
#: Installed into a packed environment without their dependencies (only the driver imports
#: ``delta``, and only for the delta-spark backend; its dependency is PySpark).
WITHOUT_DEPS = ("delta-spark",)
#: The tables the demo compares (per-run columns dropped).
COMPARED_TABLES = ("raw_messages", "messages")
PER_RUN_COLUMNS = ("ingest_id", "ingest_time")


class ClusterError(RuntimeError):
    """The cluster did not start, or a step of the demo failed (the message says which)."""


def spark_home() -> Path:
    """The installed PySpark's folder: it holds ``bin/spark-class``, ``jars/`` and
    ``python/lib/pyspark.zip`` (a pip-installed PySpark is a whole Spark distribution).

    Examples:
        >>> (spark_home() / "bin" / "spark-class").exists()
        True
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterError("PySpark is not installed in this environment")
    return Path(spec.origin).resolve().parent


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


def _end_groups(groups: Sequence[int], grace: float) -> list[int]:
    """SIGTERM the groups, wait up to ``grace`` seconds, SIGKILL what is left; return the
    processes still alive after that (none, normally)."""
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
        """Write which process groups are ours (``python -m snap_spark.standalone stop``)."""
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
        left = _end_groups(groups, grace)
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
    _end_groups(groups, grace)
    _end_stray_workers(workdir, 5.0)
    path.unlink()
    return signalled


# ---- shipping the project ---------------------------------------------------------------

def package_zip(dest: Path, package_dir: Path = PACKAGE_DIR) -> Path:
    """A zip of the ``snap_spark`` package (its ``.py`` files and ``py.typed``) for
    ``spark-submit --py-files``: executors put it first on their ``sys.path``. The
    dependencies must be installed where the executors' Python runs.

    Examples:
        >>> import tempfile
        >>> path = package_zip(Path(tempfile.mkdtemp()) / "snap_spark.zip")
        >>> "snap_spark/pipeline/job.py" in zipfile.ZipFile(path).namelist()
        True
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in package_dir.rglob("*")
                   if p.is_file() and p.suffix in (".py", ".typed")
                   and "__pycache__" not in p.parts)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            name = f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}"
            archive.write(path, name)
    return dest


def env_python(prefix: Path) -> Path:
    """The interpreter of the virtualenv at ``prefix``."""
    return prefix / "bin" / "python"


def _site_packages(prefix: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return prefix / "lib" / version / "site-packages"


def deps_env(prefix: Path) -> Path:
    """A virtualenv with the dependencies of this interpreter's environment and NOT the
    project: a ``.pth`` file puts this environment's ``site-packages`` on its path (paths
    named in a ``.pth`` file are not scanned for ``.pth`` files themselves, so an editable
    install of snap-spark there stays invisible). It stands for what a cluster's image has
    installed beforehand; the project must come with the application (``--py-files``).
    Returns its interpreter.

    Raises:
        ClusterError: it can import ``snap_spark`` or cannot import the dependencies.

    Examples:
        >>> import tempfile
        >>> python = deps_env(Path(tempfile.mkdtemp()) / "env")  # doctest: +SKIP
        >>> subprocess.run([python, "-c", "import snap_spark"]).returncode  # doctest: +SKIP
        1
    """
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(prefix)
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (_site_packages(prefix) / "snap-spark-deps.pth").write_text("\n".join(paths) + "\n")
    python = env_python(prefix)
    probe = ("import importlib.util as u, coincurve, pyarrow, pandas, deltalake, orjson; "
             "print(u.find_spec('snap_spark') is None)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                          env=env, cwd=prefix, check=False)  # cwd: not a checkout
    if done.returncode != 0 or done.stdout.strip() != "True":
        raise ClusterError(f"{python} must import the dependencies and not snap_spark: "
                           f"{done.stdout.strip()} {done.stderr.strip()[-500:]}")
    return python


def source_digest(root: Path = CHECKOUT) -> str:
    """SHA-256 over the package's sources and ``pyproject.toml``: a packed environment
    built from other sources is stale.

    Examples:
        >>> len(source_digest())
        64
    """
    digest = hashlib.sha256()
    files = sorted((root / "snap_spark").rglob("*.py"))
    for path in [root / "pyproject.toml", *files]:
        if path.exists():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def wheel_requirements(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` entries of a wheel, extras left out.

    Example::

        wheel_requirements(Path("dist/snap_spark-0.1.0-py3-none-any.whl"))
        # ['pyspark==4.0.1', 'delta-spark==4.0.1', ...]
    """
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(name).decode()
    requirements = []
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist:"):
            requirement = line.split(":", 1)[1].strip()
            if "extra ==" not in requirement:
                requirements.append(requirement)
    return requirements


def requirement_name(requirement: str) -> str:
    """The normalized project name of a requirement string.

    Examples:
        >>> requirement_name("Delta_Spark==4.0.1")
        'delta-spark'
        >>> requirement_name("protobuf<6,>=5.28.3")
        'protobuf'
    """
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group(0) if match else requirement).lower()


@dataclass
class PackedEnv:
    """A packed environment for ``--archives ARCHIVE#environment`` and what it cost."""

    archive: Path
    #: the unpacked environment it was packed from (the driver's Python in client mode)
    prefix: Path
    size_bytes: int
    #: seconds per step: wheel, venv, install, pack (as measured when it was built)
    seconds: dict[str, float]
    digest: str
    cached: bool = False

    @property
    def python(self) -> Path:
        return env_python(self.prefix)


def _run(cmd: Sequence[str], what: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(list(cmd), capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise ClusterError(f"{what} failed ({done.returncode}): {done.stderr.strip()[-1500:]}")


def packed_env(out_dir: Path, source: Path = CHECKOUT, *, rebuild: bool = False) -> PackedEnv:
    """Build a wheel of the project at ``source``, install it (not editable) with its
    dependencies into a fresh virtualenv, and pack that with venv-pack into
    ``out_dir/snap-spark-env.tar.gz``. PySpark is left out (:data:`PROVIDED_BY_SPARK`:
    executors import Spark's own ``pyspark.zip``, and it would add ~460 MB);
    delta-spark goes in without its dependencies. Pip resolves from its index (network,
    or its cache). Reused while :func:`source_digest` is unchanged, unless ``rebuild``.

    The archive holds no interpreter: its ``bin/python`` links to the base Python this one
    was made from, which must exist at the same path on every executor (same OS, same
    Python build: coincurve, pyarrow and others are native wheels).

    Raises:
        ClusterError: the wheel, an install or venv-pack failed.

    Example (a minute or more: builds and packs a venv)::

        env = packed_env(Path("data/cluster-demo/env"))
        env.archive.name, env.size_bytes // 2**20      # ('snap-spark-env.tar.gz', 199)
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    archive, prefix = out_dir / "snap-spark-env.tar.gz", out_dir / "venv"
    stamp = out_dir / "stamp.json"
    digest = source_digest(source)
    if not rebuild and archive.exists() and stamp.exists():
        recorded = json.loads(stamp.read_text())
        if recorded.get("digest") == digest and env_python(prefix).exists():
            return PackedEnv(archive, prefix, archive.stat().st_size, recorded["seconds"],
                             digest, cached=True)
    import venv_pack  # type: ignore[import-untyped]  # no type information shipped

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    wheels = out_dir / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
          str(wheels), str(source)], "building the project's wheel")
    wheel = next(wheels.glob("*.whl"))
    seconds["wheel"] = time.perf_counter() - started
    started = time.perf_counter()
    venv.EnvBuilder(with_pip=True, symlinks=True, clear=True).create(prefix)
    seconds["venv"] = time.perf_counter() - started
    started = time.perf_counter()
    pip = [str(env_python(prefix)), "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    requirements = wheel_requirements(wheel)
    wanted = [r for r in requirements
              if requirement_name(r) not in (*PROVIDED_BY_SPARK, *WITHOUT_DEPS)]
    alone = [r for r in requirements if requirement_name(r) in WITHOUT_DEPS]
    _run([*pip, *wanted], "installing the dependencies", env)
    _run([*pip, "--no-deps", str(wheel), *alone], "installing the project's wheel", env)
    seconds["install"] = time.perf_counter() - started
    started = time.perf_counter()
    archive.unlink(missing_ok=True)
    venv_pack.pack(prefix=str(prefix), output=str(archive), force=True)
    seconds["pack"] = time.perf_counter() - started
    stamp.write_text(json.dumps({"digest": digest, "seconds": seconds}) + "\n")
    return PackedEnv(archive, prefix, archive.stat().st_size, seconds, digest)


# ---- submitting and comparing -----------------------------------------------------------

@dataclass
class Submitted:
    """One ``spark-submit`` of the batch job: exit status, times and its summary."""

    name: str
    returncode: int
    #: wall time of spark-submit (JVM, executors, Python workers, the job)
    seconds: float
    #: the job's own time, from its summary line (``None`` when it printed none)
    job_seconds: float | None
    lines_read: int | None
    summary: list[str]
    lake: str
    log: str
    #: the driver's progress lines (spark-submit prints them before the summary)
    progress: list[str] = field(default_factory=list)

    def normalized_summary(self) -> list[str]:
        """The summary without its timing: equal for equal runs.

        Examples:
            >>> Submitted("x", 0, 1.0, 1.0, 3, ["rows written: +3   (1.0s, 3 lines/s)"],
            ...           "", "").normalized_summary()
            ['rows written: +3']
        """
        return [re.sub(r"\s*\([\d.]+s, [\d,]+ lines/s\)", "", line) for line in self.summary]


def submit(name: str, master: str, args: Sequence[str], *, driver_python: Path,
           executor_python: str, lake: Path, inputs: Sequence[Path], log_dir: Path,
           env: dict[str, str] | None = None, timeout: float = 600.0) -> Submitted:
    """``spark-submit --master master [args] jobs/verify_messages.py --input ... --lake``,
    in its own process group (stopped if the caller is interrupted). Its stderr goes to
    ``log_dir/<name>.log``; stdout is the job's summary.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` (it was stopped).
    """
    conf = CHECKOUT / "conf"
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master,
           "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
           "--conf", f"spark.pyspark.driver.python={driver_python}",
           "--conf", f"spark.pyspark.python={executor_python}"]
    if (conf / "spark-defaults.conf").exists():
        cmd += ["--properties-file", str(conf / "spark-defaults.conf")]
    if (conf / "log4j2.properties").exists():
        cmd += ["--driver-java-options",
                f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}"]
    cmd += [*args, str(VERIFY_JOB), *(a for i in inputs for a in ("--input", str(i))),
            "--lake", str(lake)]
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    run_env = dict(env if env is not None else os.environ)
    run_env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    started = time.perf_counter()
    with log_path.open("w") as err:
        err.write(" ".join(cmd) + "\n\n")
        err.flush()
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=err, text=True, env=run_env, cwd=log_dir,
                                   start_new_session=True)
        try:
            out, _ = process.communicate(timeout=timeout)
        except BaseException:
            _end_groups([process.pid], 10)
            process.wait()
            raise
    seconds = time.perf_counter() - started
    # spark-submit merges the driver's stderr (progress lines) into its stdout: the summary
    # is what follows the progress, from its first line ("files: ...") on
    lines_out = [line for line in out.splitlines() if line.strip()]
    first = next((i for i, line in enumerate(lines_out) if line.startswith("files: ")),
                 len(lines_out))
    summary = lines_out[first:]
    job_seconds = lines = None
    for line in summary:
        timing = re.search(r"\(([\d.]+)s, [\d,]+ lines/s\)", line)
        if timing:
            job_seconds = float(timing.group(1))
        read = re.match(r"lines read: (\d+)", line)
        if read:
            lines = int(read.group(1))
    progress = [line for line in lines_out[:first] if line.startswith("[snap-spark ")]
    return Submitted(name, process.returncode, seconds, job_seconds, lines, summary,
                     str(lake), str(log_path), progress)


def table_rows(path: Path) -> list[dict[str, Any]]:
    """A Delta table's rows read with delta-rs, per-run columns dropped, in input order
    (``source_file``, ``line_no``).

    Example::

        table_rows(Path("data/lake/messages"))[0]["verdict"]     # 'valid'
    """
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(path))
    rows: list[dict[str, Any]] = pa.table(
        QueryBuilder().register("t", table).execute("select * from t").read_all()).to_pylist()
    for row in rows:
        for column in PER_RUN_COLUMNS:
            row.pop(column, None)
    return sorted(rows, key=lambda r: (r["source_file"], r["line_no"]))


def committed_by(lake: Path, tables: Sequence[str] = COMPARED_TABLES) -> dict[str, str]:
    """Per table, the engine of its latest commit (delta-rs's or Spark's Delta writer).

    Example::

        committed_by(Path("data/lake"))
        # {'raw_messages': 'delta-rs:py-1.6.6', 'messages': 'delta-rs:py-1.6.6'}
    """
    from deltalake import DeltaTable

    return {table: str(DeltaTable(str(lake / table)).history(1)[0].get("engineInfo"))
            for table in tables}


def compare_lakes(expected: Path, got: Path,
                  tables: Sequence[str] = COMPARED_TABLES) -> dict[str, str]:
    """Per table, ``"equal (N rows)"`` or what differs, comparing every row and column but
    the per-run ones.

    Example::

        compare_lakes(Path("lake-a"), Path("lake-b"))
        # {'raw_messages': 'equal (3000 rows)', 'messages': 'equal (3000 rows)'}
    """
    outcome: dict[str, str] = {}
    for table in tables:
        want, have = table_rows(expected / table), table_rows(got / table)
        if want == have:
            outcome[table] = f"equal ({len(want)} rows)"
            continue
        if len(want) != len(have):
            outcome[table] = f"{len(have)} rows, expected {len(want)}"
            continue
        first = next(i for i, (a, b) in enumerate(zip(want, have, strict=True)) if a != b)
        columns = sorted(k for k in want[first] if want[first][k] != have[first].get(k))
        outcome[table] = (f"rows differ from row {first} (line {want[first]['line_no']}), "
                          f"columns {columns}")
    return outcome


# ---- the demo ---------------------------------------------------------------------------

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
        from snap_spark.maven_jars import DELTA

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
    from snap_spark.sample import SampleConfig, write_sample

    work = config.workdir.resolve()
    for how in config.ship:
        if how not in SHIPPING:
            raise ClusterError(f"unknown way to ship {how!r}: {', '.join(SHIPPING)}")
    for old in ("lakes", "cluster"):
        shutil.rmtree(work / old, ignore_errors=True)
    sample = work / "input" / f"traffic-{config.messages}-{config.seed}.jsonl"
    if not sample.exists():
        log(f"cluster-demo: generating {config.messages} messages into {sample}")
        sample.parent.mkdir(parents=True, exist_ok=True)
        write_sample(SampleConfig(agents=config.agents, messages=config.messages,
                                  seed=config.seed), str(sample), tasks_path=None)
    report = DemoReport(sample=str(sample))
    backend = _backend_args(config.backend)
    logs = work / "logs"

    shipping: dict[str, tuple[list[str], Path, str]] = {}
    for how in config.ship:
        log(f"cluster-demo: preparing {how}")
        shipping[how] = _shipping_args(how, config, work / "ship", report)
        log(f"cluster-demo: {how}: {json.dumps(report.shipping[how])}")

    log("cluster-demo: the job on local[*] (the reference)")
    local_env = dict(os.environ)
    local_env["PYTHONPATH"] = os.pathsep.join(
        [str(CHECKOUT), *filter(None, [os.environ.get("PYTHONPATH")])])
    local = submit("local", "local[*]", backend, driver_python=Path(sys.executable),
                   executor_python=sys.executable, lake=work / "lakes" / "local",
                   inputs=[sample], log_dir=logs, env=local_env)
    report.local = _run_facts(local)
    if local.returncode != 0:
        report.problems.append(f"local run exited {local.returncode} (see {local.log})")
        _write_report(work, report)
        return report

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
            report.runs[how] = _run_facts(done)
            if done.returncode != 0:
                report.problems.append(f"{how}: exit status {done.returncode} "
                                       f"(see {done.log})")
                continue
            if done.normalized_summary() != local.normalized_summary():
                report.problems.append(f"{how}: summary differs from local[*]'s")
            report.tables[how] = compare_lakes(work / "lakes" / "local", work / "lakes" / how)
            report.engines[how] = committed_by(work / "lakes" / how)
            report.problems += [f"{how}: {table} {what}"
                                for table, what in report.tables[how].items()
                                if not what.startswith("equal")]
            log(f"cluster-demo: {how}: exit 0 in {done.seconds:.1f}s (job {done.job_seconds}s); "
                f"tables vs local[*]: {report.tables[how]}")
        with contextlib.suppress(OSError, ValueError):
            report.applications = [
                {k: app.get(k) for k in ("id", "name", "cores", "state", "duration")}
                for app in cluster.status().get("completedapps", [])]
    if len(report.applications) != len(shipping):
        report.problems.append(f"the master lists {len(report.applications)} completed "
                               f"applications, expected {len(shipping)}")
    _write_report(work, report)
    return report


def _run_facts(done: Submitted) -> dict[str, Any]:
    facts = asdict(done)
    facts["seconds"] = round(done.seconds, 2)
    return facts


def _write_report(work: Path, report: DemoReport) -> None:
    (work / "report.json").write_text(
        json.dumps({**asdict(report), "ok": report.ok}, indent=2, default=str) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.standalone demo|stop``; exit 0 when the demo's cluster runs
    equal the local one, 1 otherwise.

    Examples:
        >>> main(["stop", "--workdir", "/nonexistent"])
        0
    """
    parser = argparse.ArgumentParser(prog="python -m snap_spark.standalone",
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
