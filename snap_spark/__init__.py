"""snap-spark: verify SNAP agent-to-agent traffic at scale.

The Spark-free protocol core lives in :mod:`snap_spark.protocol`; everything else builds on it.
Importing the package changes nothing in the process: no path, setting or handler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__version__ = "0.1.0"

__all__ = ["__version__", "register_udfs"]


def register_udfs(spark: SparkSession, *, max_drift: float | None = None) -> list[str]:
    """Register the SNAP SQL functions (``snap_canonicalize``, ``snap_verify``,
    ``snap_p2tr_key``) in ``spark``; see :func:`snap_spark.udfs.sql.register_udfs`
    (``max_drift``: the timestamp drift limit in seconds, default the spec's 60).

    Imports Spark only when called: ``import snap_spark`` (and so the protocol core) stays
    Spark-free.

    Examples:
        >>> import snap_spark
        >>> snap_spark.register_udfs(spark)
        ['snap_canonicalize', 'snap_verify', 'snap_p2tr_key']
        >>> spark.sql("SELECT snap_p2tr_key('bc1qxyz').error AS e").first().e
        'P2TR address must be 62 characters, got 7'
    """
    from snap_spark.udfs.sql import register_udfs as register

    if max_drift is None:
        return register(spark)
    return register(spark, max_drift=max_drift)
