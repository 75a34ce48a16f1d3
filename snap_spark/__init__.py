"""snap-spark: verify SNAP agent-to-agent traffic at scale.

The Spark-free protocol core lives in :mod:`snap_spark.protocol`; everything else builds on it.
What a notebook calls is :mod:`snap_spark.api` (a classic or a Spark Connect session alike),
whose names this package also offers (``snap_spark.session``, ``snap_spark.register_views``,
...), imported on first use. Importing the package changes nothing in the process: no path,
setting or handler, and no Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__version__ = "0.1.0"

#: The names of :mod:`snap_spark.api` offered here too (imported when first asked for).
API_NAMES = (
    "REMOTE_SETTINGS", "TERMINAL", "ReceiptClock", "RemoteSessionError", "SampleConfig",
    "VerifySettings", "check", "check_lines", "is_connect", "lake_tables", "read_lines",
    "read_messages", "read_table", "register_views", "resolve_replay", "session",
    "snap_canonicalize", "snap_p2tr_key", "snap_verify", "sql", "write_sample",
)

__all__ = ["__version__", "register_udfs", *API_NAMES]


def __getattr__(name: str) -> Any:
    """``snap_spark.NAME`` for a name of :mod:`snap_spark.api`, and ``snap_spark.api``."""
    if name == "api" or name in API_NAMES:
        import importlib

        api = importlib.import_module("snap_spark.api")
        return api if name == "api" else getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from snap_spark.api import register_udfs as register

    return register(spark, max_drift=max_drift)
