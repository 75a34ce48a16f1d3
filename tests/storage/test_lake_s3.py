"""The delta-rs lake on a real S3-compatible server: Spark tasks write, delta-rs commits."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from snap_spark.files import storage
from snap_spark.lake import DataCommit, commit_rows, table_file_uris
from snap_spark.lake.common import marker_write_id
from snap_spark.lake.delta_log import commit_files, open_table
from snap_spark.lake.delta_rs import DeltaRsLake
from snap_spark.lake.files import PartitionedFileWriter
from snap_spark.lake.schema import to_arrow
from tests.lake.helpers import add_rows
from tests.s3server import S3Server
from tests.storage.conftest import BUCKET

pytestmark = pytest.mark.spark

UTC = dt.UTC
DAY1, DAY2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
SCHEMA = "id long, sender string, received_at timestamp, day date, tags array<string>"


def messages(spark: SparkSession, ids: range) -> DataFrame:
    rows = [
        (i, f"agent-{i % 3}" if i % 4 else None,
         dt.datetime(2024, 5, 1, 12, 0, i % 60, 123456 + i, tzinfo=UTC),
         DAY1 if i % 2 else DAY2, [f"t{i}"])
        for i in ids
    ]
    return spark.createDataFrame(rows, SCHEMA)


def delta_rows(uri: str, sql: str) -> list[dict[str, Any]]:
    """Rows of ``sql`` over the table, read by delta-rs's own engine (independent of Spark)."""
    table = DeltaTable(storage.delta_table_uri(uri),
                       storage_options=storage.delta_storage_options(uri))
    return pa.table(QueryBuilder().register("t", table).execute(sql).read_all()).to_pylist()


def key_of(uri: str) -> str:
    return uri.split("://", 1)[1].removeprefix(f"{BUCKET}/")


def test_spark_python_workers_see_the_s3_settings(s3_spark: SparkSession, s3: S3Server) -> None:
    def environment(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os

        for _ in batches:
            yield pa.RecordBatch.from_pydict({
                "endpoint": [os.environ.get("AWS_ENDPOINT_URL")],
                "key": [os.environ.get("AWS_ACCESS_KEY_ID")],
            })

    rows = s3_spark.range(1, numPartitions=1).mapInArrow(
        environment, "endpoint string, key string").collect()
    assert [(r.endpoint, r.key) for r in rows] == [(s3.endpoint, "testing")]


def test_delta_rs_lake_on_s3(s3_spark: SparkSession, s3: S3Server, s3_prefix: str) -> None:
    spark, lake = s3_spark, DeltaRsLake()
    path = f"{s3_prefix}/lake/messages"
    df = messages(spark, range(20)).repartition(2)
    assert not lake.exists(path)
    assert lake.txn_version(path, "ingest") is None
    assert lake.distinct_values(spark, path, "id") == set()

    # written by the Spark tasks and committed
    assert add_rows(spark, lake, path, df, app_id="ingest", version=0,
                    partition_by=["day"]) is True
    keys = s3.keys(BUCKET, key_of(path))
    assert f"{key_of(path)}/_delta_log/00000000000000000000.json" in keys
    data_keys = [k for k in keys if k.endswith(".parquet")]
    assert len(data_keys) == 4  # two Spark tasks x two days, straight into the table folder
    assert all("/day=2024-05-0" in k for k in data_keys)
    assert not any(k.endswith("/") for k in keys)  # no folder marker objects
    # the same app transaction again: skipped, and the files written for it deleted
    # (pyarrow's S3 file system leaves a marker object for their folders: not data)
    assert add_rows(spark, lake, path, df, app_id="ingest", version=0,
                    partition_by=["day"]) is False
    assert lake.exists(path) and lake.txn_version(path, "ingest") == 0
    assert [k for k in s3.keys(BUCKET, key_of(path)) if k.endswith(".parquet")] == data_keys

    assert_df_equality(lake.read(spark, path), df, ignore_row_order=True, ignore_nullable=True)
    assert sorted(r["id"] for r in delta_rows(path, "select id from t")) == list(range(20))

    # files written by executors-to-be straight into data_root, then committed as one add
    root = lake.data_root(path, f"{s3_prefix}/staging")
    extra = messages(spark, range(100, 105))
    writer = PartitionedFileWriter(root, to_arrow(extra.schema), ["day"], file_prefix="part-x")
    for batch in extra.toArrow().to_batches():
        writer.write(batch)
    files = writer.close()
    assert len(files) == 2
    backfill = DataCommit(path=path, root=root, files=files, schema=extra.schema,
                          partition_by=["day"], app_id="backfill", version=3)
    assert lake.commit(spark, backfill) is True
    assert lake.commit(spark, backfill) is False
    assert lake.txn_version(path, "backfill") == 3 and lake.txn_version(path, "ingest") == 0

    history = lake.history(path)
    assert [h["version"] for h in history] == [1, 0]
    assert all(marker_write_id(h.get("userMetadata")) for h in history)
    assert lake.distinct_values(spark, path, "id") == set(range(20)) | set(range(100, 105))
    assert lake.distinct_values(spark, path, "day") == {DAY1, DAY2}
    # whole rows were compared above; here the added files and their partition values
    expected = sorted((i, DAY1 if i % 2 else DAY2) for i in [*range(20), *range(100, 105)])
    assert sorted(tuple(r) for r in lake.read(spark, path).select("id", "day").collect()) == (
        expected
    )
    assert lake.read(spark, path, version=0).count() == 20
    day1 = delta_rows(path, "select id from t where day = date '2024-05-01'")
    assert sorted(r["id"] for r in day1) == [i for i in [*range(20), *range(100, 105)] if i % 2]


def test_replace_keys_on_s3a(s3_spark: SparkSession, s3_prefix: str) -> None:
    """Rows of some keys replaced on an ``s3a://`` table (the file holding b copied without
    it, on S3, and read back by Spark); a replayed transaction is skipped."""
    spark, lake = s3_spark, DeltaRsLake()
    path = s3_prefix.replace("s3://", "s3a://") + "/tasks"
    schema = StructType([StructField("task_id", StringType()), StructField("n", LongType())])

    def commit(rows: list[tuple[str, int]], keys: list[str], version: int) -> bool:
        batch = pa.RecordBatch.from_pylist([{"task_id": t, "n": n} for t, n in rows],
                                           schema=to_arrow(schema))
        return commit_rows(spark, lake, path, lake.data_root(path, f"{s3_prefix}/staging"),
                           batch, schema=schema, file_prefix="part-t", app_id="fold",
                           version=version,
                           keys=spark.createDataFrame([(k,) for k in keys], "task_id string"))

    assert commit([("a", 1), ("b", 1)], ["a", "b"], 0)
    assert commit([("b", 2), ("c", 2)], ["b", "c"], 1)
    assert not commit([("b", 9)], ["b"], 1)  # the same transaction again: skipped
    assert delta_rows(path, "select task_id, n from t order by task_id") == [
        {"task_id": "a", "n": 1}, {"task_id": "b", "n": 2}, {"task_id": "c", "n": 2}
    ]
    assert lake.txn_version(path, "fold") == 1
    # the file of a and b replaced by a copy holding a alone, named after the caller
    names = {u.rsplit("/", 1)[-1] for u in table_file_uris(path)}
    assert any(n.startswith("part-t-kept-") for n in names), names
    # the copy read back through Spark too
    assert sorted(tuple(r) for r in lake.read(spark, path).collect()) == [
        ("a", 1), ("b", 2), ("c", 2)
    ]


def test_stale_writers_never_overwrite_a_commit(s3: S3Server, s3_prefix: str) -> None:
    """delta-rs commits with a conditional put; the server must refuse an existing version,
    else the second stale writer would replace version 1 and lose a row."""
    key = f"{key_of(s3_prefix)}/probe"
    s3.client().put_object(Bucket=BUCKET, Key=key, Body=b"1")
    with pytest.raises(Exception, match="PreconditionFailed"):
        s3.client().put_object(Bucket=BUCKET, Key=key, Body=b"2", IfNoneMatch="*")

    uri = f"{s3_prefix}/race"
    options = storage.delta_storage_options(uri)
    write_deltalake(uri, pa.table({"x": [0]}), storage_options=options)
    first = DeltaTable(uri, storage_options=options)
    second = DeltaTable(uri, storage_options=options)  # both see version 0
    write_deltalake(first, pa.table({"x": [1]}), mode="append")
    write_deltalake(second, pa.table({"x": [2]}), mode="append")
    assert DeltaTable(uri, storage_options=options).version() == 2
    assert sorted(r["x"] for r in delta_rows(uri, "select x from t")) == [0, 1, 2]


def test_endpoint_only_in_aws_endpoint_url_s3(
    s3: S3Server, s3_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither pyarrow's S3FileSystem nor delta-rs reads AWS_ENDPOINT_URL_S3: the storage
    layer passes it to both, so files and commits still reach the server."""
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.endpoint)
    uri = f"{s3_prefix}/only-s3-variable"
    schema = StructType([StructField("id", LongType())])
    writer = PartitionedFileWriter(uri, to_arrow(schema), [])
    writer.write(pa.record_batch({"id": [1, 2, 3]}))
    assert commit_files(uri, writer.close(), schema, [], app_id="a", version=0, write_id="w")
    table = open_table(uri)
    assert table is not None and table.transaction_version("a") == 0
    assert sorted(r["id"] for r in delta_rows(uri, "select id from t")) == [1, 2, 3]
    assert any(k.endswith(".parquet") for k in s3.keys(BUCKET, key_of(uri)))
