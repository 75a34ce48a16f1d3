"""A warm interpreter for the Python step Spark runs on the driver at every start of a stream.

Before the first micro-batch of every query run, Spark learns the replay state's schema by
running :class:`~snap_spark.stream.replay_state.ReplayStateProcessor`'s ``init`` in a new
Python process on the driver (``python -m
pyspark.sql.streaming.transform_with_state_driver_worker``). That process spends about
0.5 s importing PySpark (and NumPy through it) before it does 10 ms of work, and no Spark
setting skips or reuses it. In a local session (driver and workers on one machine) this
module serves that step from a **warm interpreter** instead:

- :func:`warm_python` starts a server process once per driver process. It imports what the
  step imports, then waits on a Unix socket in a private folder (mode 0700).
- While :func:`~snap_spark.stream.replay_state.replay_verdicts` builds the replay state's
  operator, Spark's "python" for that operator is the launcher script next to this file
  (``preinit_python``). For the schema step it runs this file as a small client
  (standard library only, ``python -I -S``); for anything else (the workers' daemon) it
  execs the real interpreter with the same arguments.
- The client passes its standard streams, environment and folder to the server, which
  forks a child. The child takes them over, runs the step's module as ``__main__`` (it
  connects to the JVM with the address and secret Spark put in the environment), and its
  exit status is the client's.

If the server is not running, refuses, or does not answer in :data:`ANSWER_TIMEOUT_S`, the
client execs the real interpreter: the step then costs what it costs without this module.
``SNAP_SPARK_WARM_PREINIT=0`` turns it off; a session that is not local never uses it (the
launcher must exist on every executor, and the server on the driver is no help to them).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark import SparkContext

#: The module Spark runs on the driver to learn a ``transformWithStateInPandas`` state's
#: schema; the only one the server runs.
PREINIT_MODULE = "pyspark.sql.streaming.transform_with_state_driver_worker"
#: What the server imports before it forks: the step's module, what the processor's
#: ``init`` imports when it first talks to the JVM's state server (protobuf messages,
#: 50 ms), and the processor's module.
PRELOADED = (PREINIT_MODULE, "pyspark.sql.streaming.proto.StateMessage_pb2",
             "snap_spark.stream.replay_state")
#: Environment variable naming the server's socket (set on the replay state's functions).
SOCKET_ENV = "SNAP_SPARK_PREINIT_SOCKET"
#: Environment variable naming the real interpreter the launcher hands everything else to.
PYTHON_ENV = "SNAP_SPARK_PYTHON"
#: Environment switch: ``0`` leaves the step to a fresh interpreter, as Spark starts it.
SWITCH_ENV = "SNAP_SPARK_WARM_PREINIT"
#: Seconds the client waits for the server to fork the step (its imports take about 0.5 s
#: when the step comes right after its start) before it runs the step itself.
ANSWER_TIMEOUT_S = 20.0

#: The script Spark starts as "python" for the replay state's functions while this is on.
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preinit_python")

#: File in the server's folder: a line (the child's pid) per step it ran.
SERVED_LOG = "served"

_HEADER = struct.Struct("!I")
_STATUS = struct.Struct("!i")


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the other end closed the connection")
        data += chunk
    return data


# --------------------------------------------------------------------------------------
# The driver's side: the server's start and stop, and the launcher in Spark's place.
# --------------------------------------------------------------------------------------

_SERVER: dict[str, Any] = {}


def enabled(sc: SparkContext) -> bool:
    """Whether functions made on ``sc`` may run the schema step warm: a local session,
    :data:`SWITCH_ENV` not ``0``, and the launcher executable."""
    return (os.environ.get(SWITCH_ENV, "1") != "0" and str(sc.master).startswith("local")
            and os.access(LAUNCHER, os.X_OK))


def server_socket(python: str) -> str | None:
    """The socket of this driver process's server, started on the first call with the
    interpreter ``python`` (the one Spark would start for the step); ``None`` if it cannot
    start. The server ends when this process does."""
    import atexit
    import subprocess
    import tempfile

    process = _SERVER.get("process")
    if process is not None and process.poll() is None and _SERVER.get("python") == python:
        return str(_SERVER["path"])
    stop_server()
    folder = tempfile.mkdtemp(prefix="snap-spark-preinit-")  # mode 0700: this user's only
    path = os.path.join(folder, "socket")
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    # The driver's own modules, whatever the folder it was started from.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.setdefault("PYTHONHASHSEED", "0")
    env["OPENBLAS_NUM_THREADS"] = "1"  # NumPy's import starts no threads in a process that forks
    try:
        process = subprocess.Popen(
            [python, "-m", "snap_spark.stream.preinit", "serve", path, str(read_end)],
            pass_fds=(read_end,), env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL)
    except OSError:
        os.close(write_end)
        os.rmdir(folder)
        return None
    finally:
        os.close(read_end)
    if not _SERVER.get("registered"):
        atexit.register(stop_server)
    _SERVER.update(process=process, path=path, folder=folder, write_end=write_end,
                   python=python, registered=True)
    return path


def served() -> int:
    """How many schema steps this driver process's server has run (0 when none runs)."""
    folder = _SERVER.get("folder")
    if folder is None:
        return 0
    try:
        with open(os.path.join(folder, SERVED_LOG), encoding="ascii") as log:
            return sum(1 for _ in log)
    except FileNotFoundError:
        return 0


def stop_server() -> None:
    """Stop this driver process's server, if it runs, and remove its folder."""
    import shutil
    import subprocess

    process = _SERVER.pop("process", None)
    write_end = _SERVER.pop("write_end", None)
    if write_end is not None:
        os.close(write_end)  # the server's end of the pipe reaches its end: it returns
    if process is not None:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    folder = _SERVER.pop("folder", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
    _SERVER.pop("path", None)


@contextlib.contextmanager
def warm_preinit(sc: SparkContext) -> Iterator[bool]:
    """While active, Python functions made on ``sc`` run Spark's driver-side schema step
    in the warm server (yields ``True``), or as Spark runs it (``False``: not
    :func:`enabled`, or no server). Their workers run the same interpreter as before.

    Example::

        with warm_preinit(spark.sparkContext):
            verdicts = df.groupBy("b").transformWithStateInPandas(...)
    """
    real = sc.pythonExec
    path = server_socket(real) if enabled(sc) and real != LAUNCHER else None
    if path is None:
        yield False
        return
    sc.pythonExec = LAUNCHER
    sc.environment[PYTHON_ENV] = real
    sc.environment[SOCKET_ENV] = path
    try:
        yield True
    finally:
        sc.pythonExec = real
        sc.environment.pop(PYTHON_ENV, None)
        sc.environment.pop(SOCKET_ENV, None)


# --------------------------------------------------------------------------------------
# The client: run by the launcher as ``python -I -S preinit.py -m MODULE`` (no site, no
# snap_spark import), in place of the interpreter Spark meant to start.
# --------------------------------------------------------------------------------------

def client(argv: list[str]) -> int:
    """Have the server run ``python -m MODULE`` (``argv == ["-m", MODULE]``) with this
    process's standard streams, environment and folder; return its exit status. Execs the
    real interpreter (:data:`PYTHON_ENV`) with ``argv`` when the server cannot."""
    real = os.environ.get(PYTHON_ENV) or "python3"
    path = os.environ.get(SOCKET_ENV, "")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if argv != ["-m", PREINIT_MODULE] or not path:
            raise OSError("not a step the server runs")
        conn.settimeout(ANSWER_TIMEOUT_S)
        conn.connect(path)
        request = json.dumps({"module": PREINIT_MODULE, "cwd": os.getcwd(),
                              "env": dict(os.environ)}).encode()
        message = _HEADER.pack(len(request)) + request
        sent = socket.send_fds(conn, [message], [0, 1, 2])
        conn.sendall(message[sent:])
        (pid,) = _STATUS.unpack(_read_exactly(conn, _STATUS.size))
        if pid <= 0:
            raise OSError("the server refused the step")
    except OSError:
        conn.close()
        os.execv(real, [real, *argv])
    import signal

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    conn.settimeout(None)
    try:
        status: int = _STATUS.unpack(_read_exactly(conn, _STATUS.size))[0]
    except OSError:
        status = 1
    return status


# --------------------------------------------------------------------------------------
# The server: ``python -m snap_spark.stream.preinit serve SOCKET PARENT_FD``.
# --------------------------------------------------------------------------------------

def serve(path: str, parent_fd: int) -> None:
    """Listen on ``path``, import the step's modules, then fork one child per request
    until ``parent_fd`` (the read end of a pipe the driver holds open) reaches its end."""
    import importlib
    import selectors
    import shutil
    import signal

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)  # requests wait in the backlog while the imports run
    for module in PRELOADED:
        importlib.import_module(module)

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda _n, _f: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "request")
    selector.register(parent_fd, selectors.EVENT_READ, "parent")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    waiting: dict[int, socket.socket] = {}
    served_log = os.path.join(os.path.dirname(path), SERVED_LOG)
    closing = [listener.fileno(), parent_fd, wake_read, wake_write, selector]

    while True:
        for key, _ in selector.select():
            if key.data == "parent":  # the driver is gone (or done): so is the server
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
                return
            if key.data == "child":
                os.read(wake_read, 512)
                _reap(waiting)
            else:
                conn, _ = listener.accept()
                pid = _start(conn, closing)
                if pid:
                    waiting[pid] = conn
                    with open(served_log, "a", encoding="ascii") as log:
                        log.write(f"{pid}\n")
                else:
                    conn.close()
        _reap(waiting)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                conn.sendall(_STATUS.pack(code if code >= 0 else 128 - code))
            conn.close()


def _gone(conn: socket.socket) -> bool:
    """Whether the client at the other end of ``conn`` has closed it."""
    timeout = conn.gettimeout()
    conn.setblocking(False)  # a socket with a timeout would wait for data to peek at
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        conn.settimeout(timeout)


def _start(conn: socket.socket, closing: list[object]) -> int:
    """Read one request from ``conn`` and fork its child; the child's pid, or 0 when the
    request is not one to run (the client then runs the step itself)."""
    fds: list[int] = []
    try:
        conn.settimeout(5.0)
        data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
        if len(data) < _HEADER.size:
            data += _read_exactly(conn, _HEADER.size - len(data))
        (size,) = _HEADER.unpack(data[:_HEADER.size])
        body = data[_HEADER.size:]
        if len(body) < size:
            body += _read_exactly(conn, size - len(body))
        request = json.loads(body)
        if request.get("module") != PREINIT_MODULE or len(fds) != 3:
            raise ValueError("not a step this server runs")
        if _gone(conn):  # a client that gave up waiting: do not start its step
            raise OSError("the client left")
        pid = os.fork()
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall(_STATUS.pack(0))
        return 0
    if pid == 0:
        _child(request, fds, closing)  # never returns
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):  # a client gone: the child's JVM socket ends it
        conn.sendall(_STATUS.pack(pid))
    return pid


def _child(request: dict[str, Any], fds: list[int], closing: list[object]) -> None:
    """In the forked child: take over the client's streams, environment and folder, and
    run the step's module as ``__main__``. Exits with its status."""
    import io
    import runpy
    import signal
    import traceback
    import warnings

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        for item in closing:
            if isinstance(item, int):
                os.close(item)
            else:
                item.close()  # type: ignore[attr-defined]
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = [request["module"]]
        # The module was imported before the fork; running it again as __main__ is what
        # `python -m` would do, so runpy's warning about it has nothing to say here.
        warnings.filterwarnings("ignore", message=".* found in sys.modules after import",
                                category=RuntimeWarning)
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(client(sys.argv[1:]))
