"""Spark's Kafka connector: its JARs fetched once into a cache, and the check a job runs
before it reads Kafka.

The pip PySpark ships no Kafka connector. This is the ``kafka`` entry of
:mod:`snap_spark.maven_jars`: ``make setup`` resolves
``org.apache.spark:spark-sql-kafka-0-10_2.13:<installed PySpark version>`` and its
dependencies (kafka-clients, commons-pool2, spark-token-provider-kafka, ...) once with
Spark's own resolver into ``.venv/kafka-jars`` (or ``$SNAP_SPARK_KAFKA_JARS``);
:func:`snap_spark.session.build_session` then puts them on ``spark.jars``, and under
``spark-submit`` (whose driver JVM starts before Python can add any JAR) they go to
``--jars``: ``$(python -m snap_spark.kafka_jars jars)``, or
``$(python -m snap_spark.maven_jars jars)`` for Delta's and Kafka's together.

A job that reads Kafka calls :func:`require_kafka_connector` first, so a session without
the connector stops with one clear line instead of Spark's ``DATA_SOURCE_NOT_FOUND``.

Importing this module imports no Spark.

Examples:
    >>> coordinate("4.0.1")
    'org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1'
    >>> from snap_spark.session import build_session
    >>> spark = build_session(master="local[2]")  # after make setup  # doctest: +SKIP
    >>> require_kafka_connector(spark)  # passes silently  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from snap_spark import maven_jars
from snap_spark.maven_jars import FETCH_TIMEOUT_SECONDS, KafkaJarsError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CACHE_ENV",
    "KAFKA",
    "KAFKA_SOURCE_PROVIDER",
    "KafkaConnectorMissing",
    "KafkaJarsError",
    "available",
    "cache_dir",
    "coordinate",
    "fetch",
    "main",
    "missing_connector_message",
    "require_kafka_connector",
]

#: The package set (see :mod:`snap_spark.maven_jars`).
KAFKA = maven_jars.JAR_SETS["kafka"]
#: Environment variable naming the cache folder.
CACHE_ENV = KAFKA.cache_env
#: The class behind ``format("kafka")``: the connector is loaded when the JVM can load it.
KAFKA_SOURCE_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


class KafkaConnectorMissing(KafkaJarsError):
    """The session's JVM cannot load Spark's Kafka connector."""


def coordinate(version: str | None = None) -> str:
    """Maven coordinate of the connector that fits the installed PySpark.

    Examples:
        >>> coordinate("4.0.1")
        'org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1'
    """
    return KAFKA.coordinate(version)


def cache_dir() -> Path:
    """The folder :func:`fetch` fills and :func:`available` reads.

    Examples:
        >>> cache_dir().name  # doctest: +SKIP
        'kafka-jars'
    """
    return maven_jars.cache_dir(KAFKA)


def available(directory: Path | None = None) -> list[str] | None:
    """Absolute paths of the cached connector JARs, or ``None`` when they are not (all)
    fetched for the installed PySpark version.

    Examples:
        >>> available(Path("/nowhere")) is None
        True
    """
    return maven_jars.available(KAFKA, directory)


def fetch(
    directory: Path | None = None,
    *,
    force: bool = False,
    timeout: float = FETCH_TIMEOUT_SECONDS,
) -> list[str]:
    """Resolve the connector's JARs into the cache once and return their paths (instant
    when cached).

    Raises:
        KafkaJarsError: resolution failed (no network, unknown version, timeout).

    Examples:
        >>> fetch()  # doctest: +SKIP
        ['/repo/.venv/kafka-jars/ivy/jars/org.apache.spark_spark-sql-kafka-0-10_2.13-4.0.1.jar',
         ...]
    """
    return maven_jars.fetch(KAFKA, directory, force=force, timeout=timeout)


def missing_connector_message(class_name: str = KAFKA_SOURCE_PROVIDER) -> str:
    """What :func:`require_kafka_connector` says when ``class_name`` cannot be loaded.

    Examples:
        >>> print(missing_connector_message())  # doctest: +SKIP
        the Kafka connector is not loaded: run make setup, or pass --packages
        org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1 (the driver's JVM cannot load
        org.apache.spark.sql.kafka010.KafkaSourceProvider)
    """
    return (
        f"the Kafka connector is not loaded: run make setup, or pass --packages "
        f"{coordinate()} (the driver's JVM cannot load {class_name}; under spark-submit "
        "give it --jars $(python -m snap_spark.kafka_jars jars) after make setup)"
    )


def require_kafka_connector(
    spark: SparkSession, class_name: str = KAFKA_SOURCE_PROVIDER
) -> None:
    """Fail with one clear line unless ``spark``'s JVM can load the Kafka connector.

    A streaming job calls this before ``spark.readStream.format("kafka")``. ``class_name``
    is the class probed (the connector's data source provider; tests pass another name to
    see the failure).

    Raises:
        KafkaConnectorMissing: the class is not on the driver's classpath (a
            :class:`KafkaJarsError`; a job maps it to its usage exit status).

    Examples:
        >>> require_kafka_connector(spark)  # doctest: +SKIP
        >>> require_kafka_connector(spark, "org.example.Missing")  # doctest: +SKIP
        Traceback (most recent call last):
        ...
        snap_spark.kafka_jars.KafkaConnectorMissing: the Kafka connector is not loaded: ...
    """
    from snap_spark.maven_jars import jvm_has_class

    if not jvm_has_class(class_name, spark):
        raise KafkaConnectorMissing(missing_connector_message(class_name))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.kafka_jars fetch|jars|status`` (as :mod:`snap_spark.delta_jars`).

    Examples:
        >>> main(["jars"])  # doctest: +SKIP
        /repo/.venv/kafka-jars/ivy/jars/org.apache.spark_spark-sql-kafka-0-10_2.13-4.0.1.jar,...
        0
    """
    return maven_jars.set_main(KAFKA, argv, prog="python -m snap_spark.kafka_jars")


if __name__ == "__main__":
    sys.exit(main())
