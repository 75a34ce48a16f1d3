"""Compatibility name for the ``kafka`` set of :mod:`snap_spark.maven_jars` (the one JAR
cache module, which also holds :func:`require_kafka_connector`):
``python -m snap_spark.kafka_jars fetch|jars|status`` is
``python -m snap_spark.maven_jars fetch|jars|status kafka``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from snap_spark.maven_jars import (
    KAFKA,
    KAFKA_SOURCE_PROVIDER,
    KafkaConnectorMissing,
    KafkaJarsError,
    missing_connector_message,
    require_kafka_connector,
    set_main,
)

__all__ = ["CACHE_ENV", "KAFKA", "KAFKA_SOURCE_PROVIDER", "KafkaConnectorMissing",
           "KafkaJarsError", "available", "cache_dir", "coordinate", "fetch", "main",
           "missing_connector_message", "require_kafka_connector"]

CACHE_ENV = KAFKA.cache_env
available, cache_dir, coordinate, fetch = KAFKA.available, KAFKA.cache_dir, KAFKA.coordinate, \
    KAFKA.fetch


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.kafka_jars fetch [--force]|jars|status``."""
    return set_main(KAFKA, argv, prog="python -m snap_spark.kafka_jars")


if __name__ == "__main__":
    sys.exit(main())
