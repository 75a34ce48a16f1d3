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

from tests.child_server import ChildServer


class ConnectServer(ChildServer):
    """A Spark Connect server, started by :meth:`start`, ended by :meth:`stop`."""

    name = "Spark Connect server"

    def __init__(self, startup_seconds: float = 120.0) -> None:
        super().__init__(startup_seconds, "spark-connect-")

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:<port>``."""
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> tuple[list[str], dict[str, str] | None]:
        from snap_spark.runtime.connect_server import server_command, server_environment

        command = server_command(self.port, master="local[2]", delta=True, conf={
            "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "1g"})
        return command, server_environment()

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server (its JVM takes longer than a small server to end)."""
        super().stop(timeout)
