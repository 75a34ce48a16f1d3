"""The warm interpreter for Spark's schema step (snap_spark.runtime.preinit), outside Spark.

The stream tests run every query start through it (the test session is local); what they
cannot show is checked here with real processes: the launcher's hand-over to the real
interpreter, the child's streams and exit status reaching the launcher's caller, the
server's refusals, and the server's end with its driver.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from snap_spark.runtime import preinit
from snap_spark.runtime.preinit import (
    LAUNCHER,
    PREINIT_MODULE,
    PYTHON_ENV,
    SOCKET_ENV,
    served,
    start_server,
)


def launch(args: list[str], socket_path: str | None, **env: str
           ) -> subprocess.CompletedProcess[str]:
    """Run the launcher as Spark does (``LAUNCHER -m MODULE``), with these variables."""
    environ = {k: v for k, v in os.environ.items()
               if k not in (SOCKET_ENV, "PYTHON_WORKER_FACTORY_PORT")}
    environ[PYTHON_ENV] = sys.executable
    if socket_path is not None:
        environ[SOCKET_ENV] = socket_path
    environ.update(env)
    return subprocess.run([LAUNCHER, *args], env=environ, capture_output=True, text=True,
                          timeout=60, check=False)


def server_socket(python: str) -> str:
    """This process's server, started if it is not running: its socket's name."""
    assert start_server(python)
    return preinit._socket_name()


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except OSError:
                pass
    return found


def free_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_launcher_is_the_real_interpreter_for_anything_but_the_step() -> None:
    path = server_socket(sys.executable)
    assert path is not None
    before = served()
    out = launch(["-c", "import sys; print(sys.executable, sys.argv[1:])", "x"], path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [sys.executable, "['x']"]
    out = launch(["-m", "json.tool", "--help"], path)
    assert out.returncode == 0 and "json.tool" in out.stdout
    assert served() == before  # neither went to the server


def test_the_step_runs_in_a_child_of_the_server_with_the_caller_s_streams_and_status(
        tmp_path: Path) -> None:
    path = server_socket(sys.executable)
    assert path is not None
    before = served()
    # Nobody listens on the port Spark's step connects back to: the step fails there, in
    # the server's child, and says so on the stderr the launcher was given.
    out = launch(["-m", PREINIT_MODULE], path,
                 PYTHON_WORKER_FACTORY_PORT=str(free_port()),
                 PYTHON_WORKER_FACTORY_SECRET="s")
    assert served() == before + 1
    assert out.returncode == 1
    assert "ConnectionRefusedError" in out.stderr or "Connection refused" in out.stderr
    assert "Warning" not in out.stderr  # running the imported module again is expected


def test_without_a_server_the_launcher_runs_the_step_in_the_real_interpreter(
        tmp_path: Path) -> None:
    before = served()
    for path in ("snap-spark-preinit-nobody-listens-here", ""):
        out = launch(["-m", PREINIT_MODULE], path,
                     PYTHON_WORKER_FACTORY_PORT=str(free_port()),
                     PYTHON_WORKER_FACTORY_SECRET="s")
        # the step itself ran (and failed to reach the JVM that is not there)
        assert out.returncode == 1
        assert "ConnectionRefusedError" in out.stderr or "Connection refused" in out.stderr
    assert served() == before


def test_the_server_runs_no_other_module() -> None:
    path = server_socket(sys.executable)
    assert path is not None
    before = served()
    request = json.dumps({"module": "json.tool", "cwd": "/", "env": {}}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect("\0" + path)
        message = len(request).to_bytes(4, "big") + request
        socket.send_fds(conn, [message], [0, 1, 2])
        answer = conn.recv(4)
    assert int.from_bytes(answer, "big", signed=True) == 0  # refused: the caller runs it
    assert served() == before


def test_a_signal_to_the_launcher_reaches_the_step(tmp_path: Path) -> None:
    path = server_socket(sys.executable)
    assert path is not None
    # A "JVM" that accepts the step's connection and then says nothing: the step waits.
    with socket.socket() as jvm:
        jvm.bind(("127.0.0.1", 0))
        jvm.listen(1)
        environ = {k: v for k, v in os.environ.items() if k != SOCKET_ENV}
        environ.update({PYTHON_ENV: sys.executable, SOCKET_ENV: path,
                        "PYTHON_WORKER_FACTORY_PORT": str(jvm.getsockname()[1]),
                        "PYTHON_WORKER_FACTORY_SECRET": "s"})
        proc = subprocess.Popen([LAUNCHER, "-m", PREINIT_MODULE], env=environ,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        jvm.settimeout(30)
        conn, _ = jvm.accept()
        with conn:
            children = children_of(preinit._SERVER["process"].pid)
            assert len(children) == 1  # the step runs in the server's child
            child = children[0]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the step outlived the launcher's SIGTERM")


def test_the_server_ends_with_its_driver(tmp_path: Path) -> None:
    # A driver process starts the server, prints its pid, then is killed (no clean-up).
    script = ("import sys; from snap_spark.runtime import preinit as p;"
              "p.start_server(sys.executable); path = p._socket_name();"
              "print(p._SERVER['process'].pid, path, flush=True); sys.stdin.read()")
    driver = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert driver.stdout is not None
    pid, path = driver.stdout.readline().split()
    server = int(pid)
    os.kill(server, 0)
    driver.kill()
    driver.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            # the server is the killed driver's child: reaped by init once it exits
            os.kill(server, 0)
            with open(f"/proc/{server}/stat", encoding="ascii") as stat:
                if stat.read().split()[2] == "Z":
                    break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the server outlived its driver")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn, \
            pytest.raises(ConnectionRefusedError):
        conn.connect("\0" + path)  # its socket is gone with it
