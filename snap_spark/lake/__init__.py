"""Delta tables for snap-spark: one small API (:class:`Lake`), two backends.

- ``delta-spark`` (:class:`DeltaSparkLake`) when the session has Delta Lake's extension
  (production clusters with ``io.delta:delta-spark`` JARs).
- ``delta-rs`` (:class:`DeltaRsLake`) otherwise, the embedded default: Spark tasks write the
  Parquet files, the driver commits them with the ``deltalake`` package in one transaction.

Both keep tables plain Delta (reader/writer protocol 1/2, no deletion vectors, microsecond UTC
timestamps), so Spark, delta-rs, DuckDB and Polars all read them, and both make appends
idempotent with an app transaction ``(app_id, version)`` such as ``(query id, batch id)``.

Examples:
    >>> from snap_spark.lake import get_lake
    >>> lake = get_lake(spark)  # doctest: +SKIP
    >>> lake.append(batch_df, "/lake/messages", app_id=query_id, version=batch_id)
    ... # doctest: +SKIP
    True
    >>> lake.read(spark, "/lake/messages").count()  # doctest: +SKIP
    1000
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from snap_spark.lake.api import Lake, LakeError, LakeSchemaError
from snap_spark.lake.common import table_uri
from snap_spark.lake.delta_rs import DeltaRsLake
from snap_spark.lake.delta_spark import DeltaSparkLake
from snap_spark.lake.files import (
    DataFile,
    PartitionedFileWriter,
    delete_data_files,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DataFile",
    "DeltaRsLake",
    "DeltaSparkLake",
    "Lake",
    "LakeError",
    "LakeSchemaError",
    "PartitionedFileWriter",
    "delete_data_files",
    "get_lake",
    "table_uri",
]


def get_lake(spark: SparkSession) -> Lake:
    """The Delta backend for this session: delta-spark when its extension is loaded, else
    delta-rs.

    Examples:
        >>> get_lake(spark).name  # doctest: +SKIP
        'delta-rs'
    """
    from snap_spark.session import has_delta_spark

    if has_delta_spark(spark):
        return DeltaSparkLake(spark)
    return DeltaRsLake()
