"""Fixtures for storage tests: a real S3-compatible server (moto) and a Spark session that
can reach it.

``s3`` starts the server once per test session, creates :data:`BUCKET` and points the
standard AWS variables at it for this process. Spark's Python workers do NOT see variables
set after the JVM started (they inherit the JVM's environment, a copy taken at launch), so
``s3_spark`` also puts them in ``SparkContext.environment``, which PySpark sends with every
Python function it ships; tests prove the workers see them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.s3server import S3Server, apply_environment, restore_environment

#: The bucket every storage test writes under (each test in its own prefix).
BUCKET = "snap-test"


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """The running server, with ``os.environ`` pointing the AWS clients at it."""
    server = S3Server().start()
    previous = apply_environment(server.environment())
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        restore_environment(previous)
        server.stop()


@pytest.fixture
def s3_prefix(s3: S3Server) -> str:
    """A fresh ``s3://`` folder for one test."""
    return f"s3://{BUCKET}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def s3_spark(spark: Any, s3: S3Server) -> Iterator[Any]:
    """The session's SparkSession, its Python workers given the server's AWS variables."""
    environment = spark.sparkContext.environment
    previous = {name: environment.get(name) for name in s3.environment()}
    environment.update(s3.environment())
    yield spark
    for name, value in previous.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
