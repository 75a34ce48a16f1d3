"""Read Delta tables back with delta-rs's own query engine, independently of the lake code.

``QueryBuilder`` (DataFusion inside delta-rs) is used rather than ``to_pyarrow_table()``: it
applies the log's partition values and file statistics itself, and it avoids pyarrow dataset
threads that can abort the interpreter at exit (delta-io/delta-rs#2184).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import DataFrame, SparkSession

from snap_spark.lake import (
    LAKE_BACKEND_CONF,
    DataFile,
    Lake,
    LakeError,
    PartitionedFileWriter,
    commit_data_files,
    get_lake,
    to_arrow,
)
from snap_spark.lake.delta_spark import DeltaSparkLake
from snap_spark.runtime.maven_jars import DELTA


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


def write_files(lake: Lake, path: str | Path, df: DataFrame, partition_by: Sequence[str] = (),
                root: str | None = None) -> tuple[str, list[DataFile]]:
    """Write ``df``'s rows as Parquet data files for the table at ``path``, as the jobs'
    tasks do: each Spark task writes its own files with :class:`PartitionedFileWriter` under
    ``lake.data_root`` (or ``root``: a staging folder makes delta-spark copy the rows with
    Delta's own writer). Returns the root and the files, not committed."""
    table = str(path)
    if root is None:
        parent = table.rstrip("/").rsplit("/", 1)[0]
        root = lake.data_root(table, f"{parent}/_staging/{uuid.uuid4().hex}")
    schema, columns, where = to_arrow(df.schema), list(partition_by), root

    def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writer = PartitionedFileWriter(where, schema, columns,
                                       file_prefix=f"part-test-{uuid.uuid4().hex[:8]}")
        try:
            for batch in batches:
                writer.write(batch)
            files = writer.close()
        except BaseException:
            writer.discard()
            raise
        yield pa.RecordBatch.from_pylist(
            [{"info": json.dumps(dataclasses.asdict(f))} for f in files],
            schema=pa.schema([pa.field("info", pa.string())]))

    rows = df.mapInArrow(write, "info string").collect()
    return root, [DataFile(**json.loads(row["info"])) for row in rows]


def add_rows(spark: SparkSession, lake: Lake, path: str | Path, df: DataFrame, *, app_id: str,
             version: int, partition_by: Sequence[str] = (), root: str | None = None,
             keys: DataFrame | None = None, commit_info: Mapping[str, Any] | None = None
             ) -> bool:
    """Commit ``df``'s rows to the table at ``path`` the way jobs do: written by the tasks
    (:func:`write_files`), then :func:`commit_data_files` (added, or replacing the rows of
    ``keys``). Returns whether it committed."""
    root, files = write_files(lake, path, df, partition_by, root)
    return commit_data_files(spark, lake, str(path), root, files, schema=df.schema,
                             partition_by=partition_by, app_id=app_id, version=version,
                             keys=keys, commit_info=commit_info)


def parquet_names(folder: str | Path) -> set[str]:
    """Names of the Parquet files under ``folder`` (a table's, or a staging folder)."""
    return {p.name for p in Path(folder).rglob("*.parquet")}
