"""A warm interpreter for the Python step Spark runs on the driver at every start of a stream.

Before the first micro-batch of every query run, Spark learns the replay state's schema by
running :class:`~snap_spark.stream.replay_state.ReplayStateProcessor`'s ``init`` in a new
Python process on the driver (``python -m
pyspark.sql.streaming.transform_with_state_driver_worker``). That process spends far longer
importing PySpark (and NumPy through it) than doing its work (docs/speed.md, *Figures
behind the code*), and no Spark setting skips or reuses it. In a local session (driver and
workers on one machine) this module serves that step from a **warm interpreter** instead:

- Spark's "python" for the session's functions is the launcher script next to this file
  (``preinit_python``): :func:`adopt` makes it so for a local session
  :func:`snap_spark.runtime.session.build_session` builds (other sessions keep Spark's step). For
  the schema step the launcher runs this
  file as a small client (standard library only, ``python -I -S``); for anything else
  (the workers' daemon) it execs the real interpreter with the same arguments.
- :func:`start_server` starts a server process once per driver process, when the first
  stream builds its replay state. It imports what the step imports, then waits on a Unix
  socket in Linux's abstract namespace (no file to leave behind, gone with the process);
  both ends check that the other runs as the same user (``SO_PEERCRED``), since anyone
  on the machine may connect to such a socket.
- The client passes its standard streams, environment and folder to the server, which
  forks a child. The child takes them over, runs the step's module as ``__main__`` (it
  connects to the JVM with the address and secret Spark put in the environment), and its
  exit status is the client's.

If the server is not running, refuses, or does not answer in :data:`ANSWER_TIMEOUT_S`, the
client execs the real interpreter: the step then costs what it costs without this module.
``SNAP_SPARK_WARM_PREINIT=0`` turns it all off; a session that is not local never uses it
(the launcher must exist on every executor, and the server on the driver is no help to
them), nor does a system other than Linux.
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
#: What the server imports before it forks: the step's module and what a processor's
#: ``init`` imports when it first talks to the JVM's state server (protobuf messages, a
#: noticeable import of their own: docs/speed.md, *Figures behind the code*);
#: :func:`warm_preinit`'s caller adds its processor's module.
PRELOADED = (PREINIT_MODULE, "pyspark.sql.streaming.proto.StateMessage_pb2")
#: Environment variable naming the server's socket in the abstract namespace (its name
#: without the leading NUL byte, which an environment variable cannot hold).
SOCKET_ENV = "SNAP_SPARK_PREINIT_SOCKET"
#: Environment variable naming the real interpreter the launcher hands everything else to.
PYTHON_ENV = "SNAP_SPARK_PYTHON"
#: Environment switch: ``0`` leaves the step to a fresh interpreter, as Spark starts it.
SWITCH_ENV = "SNAP_SPARK_WARM_PREINIT"
#: Seconds the client waits for the server to fork the step before it runs the step itself:
#: ample even when the step comes right after the server's start, while the server is still
#: importing (docs/speed.md, *Figures behind the code*).
ANSWER_TIMEOUT_S = 20.0

#: The script Spark starts as "python" for the replay state's functions while this is on.
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preinit_python")

#: Request that asks the server how many steps it has run (:func:`served`).
COUNT_REQUEST = "count"

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
    neither :data:`SWITCH_ENV` nor the whole runtime switched off
    (:func:`snap_spark.runtime.scope.switched_off`), and the launcher executable."""
    from snap_spark.runtime.scope import local_master, switched_off

    return (not switched_off(SWITCH_ENV) and local_master(str(sc.master))
            and os.access(LAUNCHER, os.X_OK))


def adopt(sc: SparkContext) -> bool:
    """Make the launcher the interpreter of every Python function made on ``sc`` from now
    on, if :func:`enabled`: Spark starts it in place of ``sc.pythonExec`` (which it then
    execs) and, for the schema step, it asks this process's server. Every function of the
    session then has the same interpreter and environment, so Spark starts one worker
    daemon for the landing's functions and the replay state's, not one for each. Returns
    whether the launcher is the session's interpreter. Nothing starts here: the server
    starts with the first stream (:func:`warm_preinit`).

    Example::

        spark = SparkSession.builder.master("local[2]").getOrCreate()
        adopt(spark.sparkContext)  # build_session does it for a local session
    """
    if sc.pythonExec == LAUNCHER:
        return True
    if not enabled(sc):
        return False
    sc.environment[PYTHON_ENV] = sc.pythonExec
    sc.environment[SOCKET_ENV] = _socket_name()
    sc.pythonExec = LAUNCHER
    return True


def _socket_name() -> str:
    """The name of this process's server socket in the abstract namespace, random, chosen
    once (:func:`_address` gives its address)."""
    import secrets

    if "name" not in _SERVER:
        _SERVER["name"] = f"snap-spark-preinit-{os.getuid()}-{secrets.token_hex(12)}"
    return str(_SERVER["name"])


def _address(name: str) -> str:
    """The address of the abstract socket ``name``."""
    return "\0" + name


def _same_user(conn: socket.socket) -> bool:
    """Whether the process at the other end of ``conn`` runs as this process's user."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def start_server(python: str, preload: tuple[str, ...] = ()) -> bool:
    """Start this process's server (once; again if it stopped), with the interpreter
    ``python`` (the one Spark would start for the step), on :func:`_socket_name`, importing
    :data:`PRELOADED` and the modules ``preload`` names before it forks. Returns
    whether it runs; ``False`` on a system without abstract sockets or when the process
    cannot start (the launcher then runs the step in ``python``). The server ends when
    this process does, and so does its socket."""
    import atexit
    import subprocess

    if not sys.platform.startswith("linux"):
        return False
    process = _SERVER.get("process")
    modules = tuple(dict.fromkeys((*PRELOADED, *preload)))
    if process is not None and process.poll() is None and _SERVER.get("python") == python \
            and set(modules) <= set(_SERVER.get("modules", ())):
        return True
    stop_server()
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    # The driver's own modules, whatever the folder it was started from.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.setdefault("PYTHONHASHSEED", "0")
    env["OPENBLAS_NUM_THREADS"] = "1"  # NumPy's import starts no threads in a process that forks
    try:
        process = subprocess.Popen(
            [python, "-m", "snap_spark.runtime.preinit", "serve", _socket_name(), str(read_end),
             *modules],
            pass_fds=(read_end,), env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL)
    except OSError:
        os.close(write_end)
        return False
    finally:
        os.close(read_end)
    if not _SERVER.get("registered"):
        atexit.register(stop_server)
    _SERVER.update(process=process, write_end=write_end, python=python, modules=modules,
                   registered=True)
    return True


def served() -> int:
    """How many schema steps this process's server has run (0 when none runs)."""
    process = _SERVER.get("process")
    if process is None or process.poll() is not None:
        return 0
    import time

    request = json.dumps({"module": COUNT_REQUEST}).encode()
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while True:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(ANSWER_TIMEOUT_S)
            try:
                conn.connect(_address(_socket_name()))
            except ConnectionRefusedError:  # a server just started, not listening yet
                if process.poll() is not None or time.monotonic() > deadline:
                    return 0
                time.sleep(0.01)
                continue
            conn.sendall(_HEADER.pack(len(request)) + request)
            count: int = _STATUS.unpack(_read_exactly(conn, _STATUS.size))[0]
            return count


def stop_server() -> None:
    """Stop this process's server, if it runs (a later :func:`start_server` starts it
    again, on the same socket name)."""
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


@contextlib.contextmanager
def warm_preinit(sc: SparkContext, preload: tuple[str, ...] = ()) -> Iterator[bool]:
    """While active, Python functions made on ``sc`` run Spark's driver-side schema step
    in the warm server (yields ``True``), or as Spark runs it (``False``: a session
    :func:`adopt` did not make its own, :data:`SWITCH_ENV` set to ``0`` since, or no
    server). ``preload`` names the modules the server imports before it forks, besides
    :data:`PRELOADED`: the stateful processor's. Giving the launcher to these functions
    alone would split the session's workers over two daemons again, so a session that is
    not adopted keeps Spark's step.

    Example::

        with warm_preinit(spark.sparkContext, ("my_jobs.processor",)):
            verdicts = df.groupBy("b").transformWithStateInPandas(...)
    """
    if sc.pythonExec != LAUNCHER:
        yield False
        return
    if enabled(sc) and start_server(sc.environment.get(PYTHON_ENV) or sys.executable,
                                    preload):
        yield True
        return
    # switched off since (or no server): functions made here name no socket, so the
    # launcher runs the step in the real interpreter
    socket_name = sc.environment.pop(SOCKET_ENV, None)
    try:
        yield False
    finally:
        if socket_name is not None:
            sc.environment[SOCKET_ENV] = socket_name


# --------------------------------------------------------------------------------------
# The client: run by the launcher as ``python -I -S preinit.py -m MODULE`` (no site, no
# snap_spark import), in place of the interpreter Spark meant to start.
# --------------------------------------------------------------------------------------

def client(argv: list[str]) -> int:
    """Have the server run ``python -m MODULE`` (``argv == ["-m", MODULE]``) with this
    process's standard streams, environment and folder; return its exit status. Execs the
    real interpreter (:data:`PYTHON_ENV`) with ``argv`` when the server cannot."""
    real = os.environ.get(PYTHON_ENV) or "python3"
    name = os.environ.get(SOCKET_ENV, "")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if argv != ["-m", PREINIT_MODULE] or not name:
            raise OSError("not a step the server runs")
        conn.settimeout(ANSWER_TIMEOUT_S)
        conn.connect(_address(name))
        if not _same_user(conn):  # not this user's server: it gets neither env nor streams
            raise OSError("the socket is another user's")
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
        # as the launcher runs the step without the server: PySpark from its folder
        fix = ["-m", "snap_spark.runtime.spark_path"] if argv[:1] == ["-m"] else []
        os.execv(real, [real, *fix, *argv])
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
# The server: ``python -m snap_spark.runtime.preinit serve NAME PARENT_FD``.
# --------------------------------------------------------------------------------------

def serve(name: str, parent_fd: int, modules: tuple[str, ...] = PRELOADED) -> None:
    """Listen on the abstract socket ``name``, import ``modules`` (the step's), then fork
    one child per request until ``parent_fd`` (the read end of a pipe the driver holds
    open) reaches its end."""
    import importlib
    import selectors
    import signal

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(_address(name))  # taken (another server of this name): exits, no server
    listener.listen(16)  # requests wait in the backlog while the imports run
    for module in modules:
        importlib.import_module(module)

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda _n, _f: None)
    # Ctrl-C reaches the whole process group: the driver stops its stream, then this server
    # ends with the driver (``parent_fd``); its children take the default back (_start)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "request")
    selector.register(parent_fd, selectors.EVENT_READ, "parent")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    waiting: dict[int, socket.socket] = {}
    count = 0
    closing = [listener.fileno(), parent_fd, wake_read, wake_write, selector]

    while True:
        for key, _ in selector.select():
            if key.data == "parent":  # the driver is gone (or done): so is the server
                return
            if key.data == "child":
                os.read(wake_read, 512)
                _reap(waiting)
            else:
                conn, _ = listener.accept()
                pid = _start(conn, closing, count) if _same_user(conn) else 0
                if pid > 0:
                    waiting[pid] = conn
                    count += 1
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


def _start(conn: socket.socket, closing: list[object], count: int) -> int:
    """Read one request from ``conn`` and fork its child; the child's pid, or 0 when the
    request is not one to run (the client then runs the step itself) or asked for the
    ``count`` of steps run (answered)."""
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
        if request.get("module") == COUNT_REQUEST and not fds:
            conn.sendall(_STATUS.pack(count))
            return 0
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


#: Log levels (``SNAP_SPARK_LOG_LEVEL``) at which the state step's own prints are shown.
VERBOSE_LEVELS = frozenset({"INFO", "DEBUG", "TRACE", "ALL"})


def verbose(env: dict[str, str]) -> bool:
    """Whether the job's log level (``SNAP_SPARK_LOG_LEVEL`` in ``env``, default ``WARN``)
    shows more than warnings.

    Examples:
        >>> verbose({}), verbose({"SNAP_SPARK_LOG_LEVEL": "debug"})
        (False, True)
    """
    return env.get("SNAP_SPARK_LOG_LEVEL", "WARN").upper() in VERBOSE_LEVELS


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
        # the step prints five "Streaming TransformWithStateInPandas Python worker ..."
        # paragraphs (its UDF's repr and schema) at every stream start: kept off the
        # console unless the job's log level asks for more than warnings
        sys.stdout = (io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
                      if verbose(request["env"]) else open(os.devnull, "w"))  # noqa: SIM115
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
        serve(sys.argv[2], int(sys.argv[3]), tuple(sys.argv[4:]))
    else:
        sys.exit(client(sys.argv[1:]))
