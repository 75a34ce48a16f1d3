"""Shared fixtures: vector files, and one session-scoped local SparkSession for Spark tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Timing is not what property tests check: a loaded CI machine must not fail them on
# Hypothesis's per-example deadline. Tests that set their own settings keep them.
settings.register_profile(
    "snap-spark", deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
settings.load_profile("snap-spark")

VECTORS = Path(__file__).parent / "vectors"


def load_vector(name: str) -> Any:
    """Load a copied spec vector file from ``tests/vectors``."""
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def key_vectors() -> Any:
    return load_vector("key-encoding.json")


@pytest.fixture(scope="session")
def jcs_vectors() -> Any:
    return load_vector("jcs-payloads.json")


@pytest.fixture(scope="session")
def signature_vectors() -> Any:
    return load_vector("schnorr-signatures.json")


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] SparkSession for the whole run (delta's python tests do the same).

    It loads Delta Lake from the JARs ``make setup`` cached, so the delta-spark tests run on
    it, but its default backend is delta-rs: tests that want delta-spark ask for it
    (``get_lake(spark, backend="delta-spark")``, ``tests.lake.helpers.use_backend``).
    ``build_session`` also puts Spark's Kafka connector (cached by ``make setup`` too) on
    its ``spark.jars``: the Kafka tests (``tests/stream``) read and write with it.
    """
    from snap_spark.session import LAKE_BACKEND_CONF, build_session

    session = build_session(
        app_name="snap-spark-tests",
        master="local[2]",
        extra_conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "2g",
            LAKE_BACKEND_CONF: "delta-rs",
            "spark.databricks.delta.snapshotPartitions": "2",  # small logs, 2 cores
        },
    )
    yield session
    session.stop()
