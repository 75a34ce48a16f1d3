"""Shared fixtures: the spec vector files (the SparkSession, ``spark``, is in the root
``conftest.py``, which the docstring examples share)."""

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
