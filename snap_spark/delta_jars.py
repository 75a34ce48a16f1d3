"""Delta Lake's JARs for the delta-spark backend: fetched once into a cache, then loaded from it.

The ``delta`` entry of :mod:`snap_spark.maven_jars` (which holds the machinery shared with
the Kafka connector's JARs, :mod:`snap_spark.kafka_jars`). ``make setup`` fetches it:
Spark's own dependency resolver (``spark.jars.packages`` with ``spark.jars.ivy`` pointing
into the cache folder) downloads ``io.delta:delta-spark_2.13:<version of the installed
delta-spark package>`` and its dependencies once, and a manifest (``jars.json``) records the
resolved files. Afterwards :func:`available` lists those local files,
:func:`snap_spark.session.build_session` puts them on ``spark.jars`` and ``make run`` hands
them to ``spark-submit --jars``, so no run resolves anything over the network.

The cache folder is, first match wins: ``$SNAP_SPARK_DELTA_JARS``; ``.venv/delta-jars`` of
this source checkout; ``<sys.prefix>/delta-jars`` (an installed wheel's environment).

Importing this module imports no Spark: ``make`` calls it to learn the JAR list cheaply.

Examples:
    >>> from snap_spark import delta_jars
    >>> delta_jars.coordinate()  # doctest: +SKIP
    'io.delta:delta-spark_2.13:4.0.1'
    >>> delta_jars.available()  # doctest: +SKIP
    ['/repo/.venv/delta-jars/ivy/jars/io.delta_delta-spark_2.13-4.0.1.jar', ...]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from snap_spark import maven_jars
from snap_spark.maven_jars import (
    FETCH_TIMEOUT_SECONDS,
    MANIFEST_NAME,
    SCALA_BINARY_VERSION,
    DeltaJarsError,
)

__all__ = [
    "CACHE_ENV",
    "DELTA",
    "FETCH_TIMEOUT_SECONDS",
    "MANIFEST_NAME",
    "SCALA_BINARY_VERSION",
    "DeltaJarsError",
    "available",
    "cache_dir",
    "coordinate",
    "delta_version",
    "fetch",
    "main",
]

#: The package set (see :mod:`snap_spark.maven_jars`).
DELTA = maven_jars.JAR_SETS["delta"]
#: Environment variable naming the cache folder (overrides the defaults above).
CACHE_ENV = DELTA.cache_env


def delta_version() -> str:
    """Version of the installed ``delta-spark`` Python package; the JARs must match it.

    Examples:
        >>> delta_version()  # doctest: +SKIP
        '4.0.1'
    """
    return DELTA.versions()


def coordinate(version: str | None = None) -> str:
    """Maven coordinate of the delta-spark JAR that fits the installed packages.

    Examples:
        >>> coordinate("4.0.1")
        'io.delta:delta-spark_2.13:4.0.1'
    """
    return DELTA.coordinate(version)


def cache_dir() -> Path:
    """The folder :func:`fetch` fills and :func:`available` reads (see the module docs).

    Examples:
        >>> cache_dir().name  # doctest: +SKIP
        'delta-jars'
    """
    return maven_jars.cache_dir(DELTA)


def available(directory: Path | None = None) -> list[str] | None:
    """Absolute paths of the cached JARs, or ``None`` when they are not (all) fetched for the
    installed delta-spark version.

    Examples:
        >>> available(Path("/nowhere")) is None
        True
    """
    return maven_jars.available(DELTA, directory)


def fetch(
    directory: Path | None = None,
    *,
    force: bool = False,
    timeout: float = FETCH_TIMEOUT_SECONDS,
) -> list[str]:
    """Resolve Delta's JARs into the cache once and return their paths (instant when cached).

    Raises:
        DeltaJarsError: resolution failed (no network, unknown version, timeout).

    Examples:
        >>> fetch()  # doctest: +SKIP
        ['/repo/.venv/delta-jars/ivy/jars/io.delta_delta-spark_2.13-4.0.1.jar', ...]
    """
    return maven_jars.fetch(DELTA, directory, force=force, timeout=timeout)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.delta_jars fetch|jars|status``.

    ``fetch`` prints one line and exits 1 when resolution fails; ``jars`` prints the cached
    JARs comma-separated (for ``spark-submit --jars``) or nothing; ``status`` says whether
    they are cached (exit 0) or not (exit 1).

    Examples:
        >>> main(["status"])  # doctest: +SKIP
        Delta JARs for io.delta:delta-spark_2.13:4.0.1: 3 cached in /repo/.venv/delta-jars
        0
    """
    return maven_jars.set_main(DELTA, argv, prog="python -m snap_spark.delta_jars")


if __name__ == "__main__":
    sys.exit(main())
