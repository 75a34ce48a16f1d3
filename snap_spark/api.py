"""The notebook API: what a notebook calls, on a classic session and a Spark Connect session
alike.

Every function here works on both kinds of session: none touches ``sparkContext`` or the
JVM, the SQL functions' UDFs are built when registered (for the kind of session the process
runs), and settings are read from ``spark.conf``. Jobs that write the lake from the driver
(the batch job, the stream, Nostr ingestion, the task rebuild, the audit) are not here: they
need a classic session, and given a Connect one they stop with one line naming the job to
submit instead (:class:`RemoteSessionError`).

=====================  ============================================================
session                 :func:`session` (Connect when ``remote`` or ``SPARK_REMOTE``
                        names an endpoint), :func:`is_connect`
SQL                     :func:`register_udfs` (``snap_canonicalize``, ``snap_verify``,
                        ``snap_p2tr_key``), :func:`sql` (values bound as a relation)
DataFrame functions     :func:`snap_canonicalize`, :func:`snap_verify`,
                        :func:`snap_p2tr_key`
transforms              :func:`read_lines`, :func:`check`, :func:`resolve_replay`,
                        :func:`read_messages`
the lake's tables       :func:`register_views`, :func:`lake_tables`, :func:`read_table`
(Spark-free helpers)    :class:`VerifySettings`, :class:`SampleConfig`,
                        :func:`write_sample`, :func:`check_lines`, :class:`ReceiptClock`,
                        :data:`TERMINAL`
=====================  ============================================================

Examples:
    A classic session (the tests' ``spark``) or a Connect one is used the same way:

    >>> register_udfs(spark)
    ['snap_canonicalize', 'snap_verify', 'snap_p2tr_key']
    >>> sql(spark, "SELECT snap_p2tr_key(p.address).error AS e FROM {params} p",
    ...     address="bc1qxyz").first().e
    'P2TR address must be 62 characters, got 7'

    In a notebook (``SPARK_REMOTE=sc://host:15002`` makes it a Connect session)::

        from snap_spark import api

        spark = api.session(app_name="explore")
        api.register_views(spark, "s3://bucket/lake")
        api.sql(spark, "SELECT * FROM messages m, {params} p WHERE m.sender = p.sender",
                sender="bc1p...")
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from snap_spark.common.remote import RemoteSessionError, is_connect
from snap_spark.pipeline.read import read_lines
from snap_spark.pipeline.transforms import check, read_messages, resolve_replay
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.tasks import TERMINAL
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages.config import SampleConfig
from snap_spark.samples.messages.writer import write_sample
from snap_spark.settings import VerifySettings
from snap_spark.udfs.sql import snap_canonicalize, snap_p2tr_key, snap_verify
from snap_spark.views import lake_tables, read_table, register_views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "REMOTE_SETTINGS",
    "TERMINAL",
    "ReceiptClock",
    "RemoteSessionError",
    "SampleConfig",
    "VerifySettings",
    "check",
    "check_lines",
    "is_connect",
    "lake_tables",
    "read_lines",
    "read_messages",
    "read_table",
    "register_udfs",
    "register_views",
    "resolve_replay",
    "session",
    "snap_canonicalize",
    "snap_p2tr_key",
    "snap_verify",
    "sql",
    "write_sample",
]

#: What :func:`session` sets on a Spark Connect session (then ``extra_conf``): the time zone
#: the lake's times are shown in, and Arrow for ``toPandas``. The server's own settings
#: stay otherwise.
REMOTE_SETTINGS: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def session(app_name: str = "snap-spark", *, remote: str | None = None,
            master: str | None = None, extra_conf: Mapping[str, str] | None = None
            ) -> SparkSession:
    """A session for a notebook: Spark Connect when ``remote`` (else the ``SPARK_REMOTE``
    environment variable, as for ``pyspark``) names an endpoint, else snap-spark's own
    classic session (:func:`snap_spark.runtime.session.build_session` with ``master`` and
    ``extra_conf``; Delta from the JARs ``make setup`` cached).

    A Connect session gets :data:`REMOTE_SETTINGS` and then ``extra_conf``, each where the
    server takes it at run time; the others (``spark.driver.memory``, JARs, the UI) are the
    server's to set, and are skipped. ``master`` means nothing there.

    Example::

        spark = session(remote="sc://127.0.0.1:15002")     # or SPARK_REMOTE in the env
        spark = session(master="local[2]")                 # classic, on this machine
    """
    url = remote or os.environ.get("SPARK_REMOTE", "").strip()
    if not url:
        from snap_spark.runtime.session import build_session

        return build_session(app_name=app_name, master=master,
                             extra_conf=dict(extra_conf or {}))
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
    for key, value in {**REMOTE_SETTINGS, **(extra_conf or {})}.items():
        try:
            spark.conf.set(key, value)
        except Exception:  # a static setting (CANNOT_MODIFY_CONFIG): the server's to choose
            continue
    return spark


def sql(spark: SparkSession, query: str, /, **params: Any) -> DataFrame:
    """Run a Spark SQL ``query``; ``params`` become the one row of a relation the query
    names ``{params}`` (``... CROSS JOIN {params} p WHERE sender = p.sender``).

    This binds values on every Spark line and session kind. SQL parameter markers
    (``spark.sql(q, args={...})``) do not: from Spark 4.1 Delta's SQL parser drops them
    (``UNBOUND_SQL_PARAMETER``, delta-io/delta#7640); snap-spark's classic sessions work
    around that, Spark Connect sessions cannot (docs/development.md, *Spark lines*).
    Each value's type is Spark's inference of it (an ``int`` is BIGINT, a ``float``
    DOUBLE, a list of strings ARRAY<STRING>); a query without ``params`` is
    ``spark.sql(query)`` (braces then need no doubling).

    Examples:
        >>> sql(spark, "SELECT count(*) AS n FROM range(10) CROSS JOIN {params} p "
        ...     "WHERE id >= p.low AND array_contains(p.names, 'b')",
        ...     low=7, names=["a", "b"]).first().n
        3
        >>> sql(spark, "SELECT '{}' AS braces").first().braces
        '{}'
    """
    if not params:
        return spark.sql(query)
    row = spark.createDataFrame([tuple(params.values())], list(params))
    return spark.sql(query, params=row)


def register_udfs(spark: SparkSession, *, max_drift: float | None = None) -> list[str]:
    """Register ``snap_canonicalize``, ``snap_verify`` and ``snap_p2tr_key`` for SQL in
    ``spark`` (:func:`snap_spark.udfs.sql.register_udfs`; ``max_drift``: the timestamp drift
    limit in seconds, default the spec's 60). Their Python code runs on the cluster's
    workers, which need snap-spark installed (docs/cluster.md)."""
    from snap_spark.udfs.sql import register_udfs as register

    return register(spark) if max_drift is None else register(spark, max_drift=max_drift)
