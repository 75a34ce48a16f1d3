"""A real Spark Connect server for tests, in a child process on 127.0.0.1 (a free port).

It is the server ``python -m snap_spark.runtime.connect_server`` runs: the installed
PySpark's Connect server class under ``spark-submit``, with Delta's JARs and extension
and this interpreter as its workers' Python. Clients reach it with
``SparkSession.builder.remote(server.url)``.

A process that has made a remote session is a Spark Connect process from then on (PySpark
sets ``SPARK_CONNECT_MODE_ENABLED`` in its environment, and every later ``F.col`` builds a
Connect column), so the tests connect from child processes (a client script, a notebook
kernel), never from the test process with its classic session.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from tests.s3server import free_port


class ConnectServer:
    """A Spark Connect server, started by :meth:`start`, ended by :meth:`stop`."""

    def __init__(self, startup_seconds: float = 120.0) -> None:
        self.port = 0
        self.startup_seconds = startup_seconds
        self.log_path = Path(tempfile.mkdtemp(prefix="spark-connect-")) / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:<port>``."""
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> ConnectServer:
        """Start the server and wait until its port answers; ``RuntimeError`` if it does not."""
        from snap_spark.runtime.connect_server import server_command, server_environment

        for _attempt in range(2):  # the free port can be taken between probe and bind
            self.port = free_port()
            command = server_command(self.port, master="local[2]", delta=True, conf={
                "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "1g"})
            with open(self.log_path, "ab") as log:
                self._process = subprocess.Popen(command, env=server_environment(),
                                                 stdout=log, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL)
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError(f"Spark Connect server did not start; see {self.log_path}:\n"
                           f"{self.log()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.startup_seconds
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                return False
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=1):
                return True
            time.sleep(0.25)
        return False

    def stop(self) -> None:
        """Stop the server (terminate, then kill if it lingers)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log(self, last_chars: int = 4000) -> str:
        """The end of the server's log (for failure messages)."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-last_chars:]
        return ""

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
