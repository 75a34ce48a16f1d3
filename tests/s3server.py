"""A real S3-compatible server for tests: moto's server mode in a child process.

The server speaks the S3 REST protocol on ``127.0.0.1`` (a free port), so pyarrow's AWS SDK
client, delta-rs's ``object_store`` client and boto3 all talk to it over HTTP exactly as they
would to S3: nothing is mocked in the test process. It runs in its own process rather than a
thread so that no client call holding this interpreter's GIL can starve it.

Use it as ``tests/storage/conftest.py`` does: ``with S3Server() as server:``, then
``server.create_bucket("lake")`` and ``os.environ.update(server.environment())``.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from typing import Any

from tests.child_server import ChildServer, free_port

__all__ = ["S3Server", "apply_environment", "free_port", "restore_environment"]

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


class S3Server(ChildServer):
    """``python -m moto.server`` on 127.0.0.1, started by :meth:`start`, ended by :meth:`stop`."""

    name = "moto server"
    attempts = 3

    def __init__(self, startup_seconds: float = 30.0) -> None:
        super().__init__(startup_seconds, "moto-")

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> tuple[list[str], dict[str, str] | None]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)], None

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            return False

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
