"""A server the tests run in a child process on 127.0.0.1: started on a free port (again on
another if the port was taken meanwhile), awaited until it answers, its output kept in a log
file for failure messages, stopped with the test's fixture.

Subclasses say how to start theirs (:meth:`ChildServer.command`) and when it answers
(:meth:`ChildServer.answers`): ``tests/s3server.py`` (moto's S3), ``tests/connect_server.py``
(Spark Connect).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def wait_ready(process: subprocess.Popen[bytes], seconds: float,
               answers: Callable[[], bool]) -> bool:
    """Wait up to ``seconds`` until ``answers()``; ``False`` at once if ``process`` ended."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if answers():
            return True
        time.sleep(0.1)
    return False


class ChildServer:
    """One server process: :meth:`start`, :meth:`stop`, :meth:`log`; a context manager."""

    #: What the server is, for error messages.
    name = "server"
    #: Starts tried, each on a new free port.
    attempts = 2

    def __init__(self, startup_seconds: float, log_prefix: str) -> None:
        self.port = 0
        self.startup_seconds = startup_seconds
        self.log_path = Path(tempfile.mkdtemp(prefix=log_prefix)) / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    def command(self) -> tuple[list[str], dict[str, str] | None]:
        """The command line for :attr:`port`, and its environment (``None``: this one's)."""
        raise NotImplementedError

    def answers(self) -> bool:
        """Whether the started server answers requests yet."""
        return port_open(self.port)

    def start(self) -> Self:
        """Start the server and wait until it answers; ``RuntimeError`` if it does not."""
        for _attempt in range(self.attempts):  # the free port can be taken before the bind
            self.port = free_port()
            command, env = self.command()
            with open(self.log_path, "ab") as log:
                self._process = subprocess.Popen(command, env=env, stdout=log,
                                                 stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL)
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError(f"{self.name} did not start; see {self.log_path}:\n{self.log()}")

    def _wait_ready(self) -> bool:
        assert self._process is not None
        return wait_ready(self._process, self.startup_seconds, self.answers)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server process (terminate, then kill if it lingers)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log(self, last_chars: int = 4000) -> str:
        """The end of the server's log (for failure messages)."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-last_chars:]
        return ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
