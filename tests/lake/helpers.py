"""Read Delta tables back with delta-rs's own query engine, independently of the lake code.

``QueryBuilder`` (DataFusion inside delta-rs) is used rather than ``to_pyarrow_table()``: it
applies the log's partition values and file statistics itself, and it avoids pyarrow dataset
threads that can abort the interpreter at exit (delta-io/delta-rs#2184).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import SparkSession

from snap_spark.lake import LAKE_BACKEND_CONF, DeltaSparkLake, LakeError, get_lake
from snap_spark.maven_jars import DELTA


def delta_rows(path: str | Path, sql: str = "select * from t") -> list[dict[str, Any]]:
    """Rows of ``sql`` over the latest version of the table at ``path``, registered as ``t``."""
    table = DeltaTable(str(path))
    return pa.table(QueryBuilder().register("t", table).execute(sql).read_all()).to_pylist()


def delta_spark_lake(spark: SparkSession) -> DeltaSparkLake:
    """The real delta-spark backend of the test session. Fails, never skips, when Delta's
    JARs are not loaded: the suite must cover both backends."""
    try:
        lake = get_lake(spark, backend="delta-spark")
    except LakeError as error:
        problem = str(error)
    else:
        assert isinstance(lake, DeltaSparkLake)
        return lake
    cached = DELTA.available() is not None
    pytest.fail(  # outside the except block: one message, no chained traceback
        f"delta-spark tests need Delta's JARs: run `make setup` (it fetches them once into "
        f"{DELTA.cache_dir()}; cached now: {cached}). {problem}",
        pytrace=False,
    )


@contextmanager
def use_backend(spark: SparkSession, name: str) -> Iterator[None]:
    """Set the session's ``spark.snap.lake.backend`` to ``name`` for a block, then restore it
    (code under test calls ``get_lake(spark)`` itself, as the batch job does)."""
    if name == "delta-spark":
        delta_spark_lake(spark)  # fail clearly here rather than deep inside the job
    previous = spark.conf.get(LAKE_BACKEND_CONF, None)
    spark.conf.set(LAKE_BACKEND_CONF, name)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(LAKE_BACKEND_CONF)
        else:
            spark.conf.set(LAKE_BACKEND_CONF, previous)


def table_facts(path: str | Path) -> dict[str, Any]:
    """What must match between two tables besides their rows, read with delta-rs: schema,
    partition columns, protocol, table features and configuration."""
    table = DeltaTable(str(path))
    protocol = table.protocol()
    return {
        "schema": table.schema().to_json(),
        "partition_columns": list(table.metadata().partition_columns),
        "protocol": (protocol.min_reader_version, protocol.min_writer_version),
        "features": (protocol.reader_features, protocol.writer_features),
        "configuration": dict(table.metadata().configuration),
    }
