"""Classic and Spark Connect sessions told apart, without importing Spark.

A Spark Connect session (``SparkSession.builder.remote("sc://...")``, Databricks serverless
and shared clusters, ``pyspark --remote``) has no ``sparkContext`` and no JVM in the
client. The notebook API (:mod:`snap_spark.api`) works on both kinds; the jobs that write
the lake from the driver (they commit through delta-rs or the files ledger in the driver
process, next to the data) need a classic session and refuse a remote one in one line
(:func:`refuse_remote`), naming the job to submit instead.

Examples:
    >>> is_connect(spark)  # the tests' session is a classic one
    False
    >>> parallelism(spark) >= 1
    True
"""

from __future__ import annotations

from typing import Any

from snap_spark.common.console import UsageError

__all__ = ["RemoteSessionError", "is_connect", "parallelism", "refuse_remote"]


class RemoteSessionError(UsageError):
    """A piece of snap-spark that needs a classic session was given a Spark Connect one."""


def is_connect(spark: Any) -> bool:
    """True when ``spark`` is a Spark Connect session (or a DataFrame of one).

    Examples:
        >>> is_connect(spark.range(1))
        False
    """
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def parallelism(spark: Any) -> int:
    """The number of tasks Spark runs at once by default in ``spark``'s cluster.

    A classic session asks its SparkContext. A Connect session has none: its
    ``spark.default.parallelism`` setting when set, else its shuffle partitions (what a
    server that sets neither uses for a shuffle), else 2.
    """
    if not is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    for key in ("spark.default.parallelism", "spark.sql.shuffle.partitions"):
        text = str(spark.conf.get(key, None) or "").strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
    return 2


def refuse_remote(spark: Any, what: str, submit: str) -> None:
    """Raise :class:`RemoteSessionError` when ``spark`` is a Spark Connect session:
    ``what`` cannot run there, ``submit`` is the job to run on the cluster instead.

    Examples:
        >>> refuse_remote(spark, "the batch job", "jobs/verify_messages.py")  # classic: fine
    """
    if is_connect(spark):
        raise RemoteSessionError(
            f"{what} writes the lake from the Spark driver, which a Spark Connect session "
            f"does not have: run `spark-submit {submit}` on the cluster (docs/cluster.md), "
            "and read its tables here with snap_spark.api.register_views")
