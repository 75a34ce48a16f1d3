"""A real S3-compatible server for tests: moto's server mode in a child process.

The server speaks the S3 REST protocol on ``127.0.0.1`` (a free port), so pyarrow's AWS SDK
client, delta-rs's ``object_store`` client and boto3 all talk to it over HTTP exactly as they
would to S3: nothing is mocked in the test process. It runs in its own process rather than a
thread so that no client call holding this interpreter's GIL can starve it.

Use it as ``tests/storage/conftest.py`` does: ``with S3Server() as server:``, then
``server.create_bucket("lake")`` and ``os.environ.update(server.environment())``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

#: Dummy credentials the server accepts (moto checks nothing, but clients must sign).
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"

#: Variables that would point clients elsewhere or slow them down; cleared for the tests.
CLEARED_VARIABLES = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_S3_ADDRESSING_STYLE",
    "AWS_ALLOW_HTTP",
    "AWS_S3_ALLOW_UNSAFE_RENAME",
    "AWS_S3_LOCKING_PROVIDER",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class S3Server:
    """``python -m moto.server`` on 127.0.0.1, started by :meth:`start`, ended by :meth:`stop`."""

    def __init__(self, startup_seconds: float = 30.0) -> None:
        self.port = 0
        self.startup_seconds = startup_seconds
        self.log_path = Path(tempfile.mkdtemp(prefix="moto-")) / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        """Start the server and wait until it answers; raises ``RuntimeError`` if it does not."""
        for _attempt in range(3):  # the free port can be taken between probe and bind
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                     "-p", str(self.port)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                )
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError(f"moto server did not start; see {self.log_path}:\n{self.log()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.startup_seconds
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return True
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        return False

    def stop(self) -> None:
        """Stop the server process (terminate, then kill if it lingers)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log(self, last_chars: int = 4000) -> str:
        """The end of the server's log (for failure messages)."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-last_chars:]
        return ""

    def environment(self) -> dict[str, str]:
        """The standard AWS variables pointing clients at this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            # no instance metadata service here: do not let an SDK wait for one
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self) -> Any:
        """A boto3 S3 client for this server (fixtures and independent checks)."""
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
        )

    def create_bucket(self, name: str) -> None:
        """Create a bucket."""
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix`` in ``bucket``, sorted (read with boto3, not pyarrow)."""
        paginator = self.client().get_paginator("list_objects_v2")
        return sorted(
            item["Key"]
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
            for item in page.get("Contents", [])
        )

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def apply_environment(variables: dict[str, str]) -> dict[str, str | None]:
    """Set ``variables`` in ``os.environ`` and clear :data:`CLEARED_VARIABLES`; returns the
    previous values for :func:`restore_environment`."""
    previous: dict[str, str | None] = {}
    for name in (*CLEARED_VARIABLES, *variables):
        previous.setdefault(name, os.environ.get(name))
    for name in CLEARED_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(variables)
    return previous


def restore_environment(previous: dict[str, str | None]) -> None:
    """Undo :func:`apply_environment`."""
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
