"""Compatibility name for the ``delta`` set of :mod:`snap_spark.maven_jars` (the one JAR
cache module): ``python -m snap_spark.delta_jars fetch|jars|status`` is
``python -m snap_spark.maven_jars fetch|jars|status delta``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from snap_spark.maven_jars import (
    DELTA,
    FETCH_TIMEOUT_SECONDS,
    MANIFEST_NAME,
    SCALA_BINARY_VERSION,
    DeltaJarsError,
    set_main,
)

__all__ = ["CACHE_ENV", "DELTA", "FETCH_TIMEOUT_SECONDS", "MANIFEST_NAME",
           "SCALA_BINARY_VERSION", "DeltaJarsError", "available", "cache_dir", "coordinate",
           "delta_version", "fetch", "main"]

CACHE_ENV = DELTA.cache_env
available, cache_dir, coordinate, fetch = DELTA.available, DELTA.cache_dir, DELTA.coordinate, \
    DELTA.fetch
delta_version = DELTA.versions


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.delta_jars fetch [--force]|jars|status``."""
    return set_main(DELTA, argv, prog="python -m snap_spark.delta_jars")


if __name__ == "__main__":
    sys.exit(main())
