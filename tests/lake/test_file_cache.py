"""``snap_spark.lake.file_cache``: a driver read that keeps what it read, file by file,
equals a fresh delta-rs read of the table after every kind of change a writer makes
(appends, replaced keys, an overwrite, a table deleted and written again at its place), on
tables written by delta-rs and by delta-spark (timestamps, lists, a partition column),
reads each file once, and leaves a table with deletion vectors to the plain read."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from snap_spark.lake import read_arrow
from snap_spark.lake.file_cache import cache_stats, readable_by_file
from tests.lake.helpers import delta_spark_lake


def fresh(path: str, columns: list[str] | None = None, where: Any = None) -> pa.Table:
    """The table read whole by a new delta-rs object, nothing kept."""
    table = DeltaTable(path).to_pyarrow_table()
    if where is not None:
        table = table.filter(where)
    return table.select(columns) if columns else table


def same(got: pa.Table, expected: pa.Table) -> None:
    assert got.schema.names == expected.schema.names
    for name in got.schema.names:  # the types the plain read gives, nested ones included
        assert got.schema.field(name).type == expected.schema.field(name).type, name
    key = got.schema.names
    assert sorted(map(repr, got.select(key).to_pylist())) == \
        sorted(map(repr, expected.select(key).to_pylist()))


def rows(n: int, start: int) -> pa.Table:
    return pa.table({
        "k": [f"k{i}" for i in range(start, start + n)],
        "n": pa.array(range(start, start + n), pa.int64()),
        "at": pa.array([dt.datetime(2026, 11, 28, tzinfo=dt.UTC)
                        + dt.timedelta(seconds=i) for i in range(start, start + n)],
                       pa.timestamp("us", tz="UTC")),
        "tags": pa.array([[f"t{i % 3}"] * (i % 3) for i in range(start, start + n)],
                         pa.list_(pa.string())),
        "day": pa.array([dt.date(2026, 11, 27 + i % 2) for i in range(start, start + n)]),
    })


def test_a_delta_rs_table_read_after_each_change_equals_a_fresh_read(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    columns = ["k", "n", "at", "tags", "day"]
    checks = [None, ["k", "day"], ["tags"]]
    write_deltalake(path, rows(20, 0), partition_by=["day"])
    for step in range(4):
        for cols in checks:
            same(read_arrow(path, cols), fresh(path, cols))
        before = cache_stats()["files_read"]
        same(read_arrow(path, columns), fresh(path, columns))
        assert cache_stats()["files_read"] == before  # every file was read already
        write_deltalake(path, rows(10, 100 * (step + 1)), mode="append", partition_by=["day"])
        before = cache_stats()["files_read"]
        same(read_arrow(path, columns), fresh(path, columns))
        added = len(DeltaTable(path).file_uris())
        assert 0 < cache_stats()["files_read"] - before < added  # the new files only
    # replaced keys (files removed and written again), then an overwrite
    DeltaTable(path).merge(rows(5, 100), "s.k = t.k", source_alias="s", target_alias="t") \
        .when_matched_delete().execute()
    same(read_arrow(path, columns), fresh(path, columns))
    where = pc.field("n") >= pc.scalar(300)
    same(read_arrow(path, ["k"], where=where), fresh(path, ["k"], where))
    write_deltalake(path, rows(3, 7), mode="overwrite", partition_by=["day"])
    same(read_arrow(path, columns), fresh(path, columns))
    assert read_arrow(path, ["k"]).num_rows == 3


def test_a_table_written_again_at_its_place_is_read_anew(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(4, 0))
    assert sorted(read_arrow(path, ["k"]).column("k").to_pylist()) == ["k0", "k1", "k2", "k3"]
    shutil.rmtree(path)
    write_deltalake(path, rows(2, 50))
    same(read_arrow(path, ["k", "n"]), fresh(path, ["k", "n"]))
    assert read_arrow(path, ["k"]).num_rows == 2


def test_delta_spark_tables_read_as_delta_rs_reads_them(spark: SparkSession,
                                                        tmp_path: Path) -> None:
    delta_spark_lake(spark)  # fails clearly without Delta's JARs
    path = str(tmp_path / "s")
    frame = spark.createDataFrame(rows(30, 0).to_pandas())
    frame.write.format("delta").partitionBy("day").save(path)
    spark.createDataFrame(rows(12, 40).to_pandas()).write.format("delta").mode("append") \
        .save(path)
    for cols in (None, ["at", "tags"], ["day", "k"]):
        same(read_arrow(path, cols), fresh(path, cols))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE n < 5")  # files rewritten (no DVs here)
    same(read_arrow(path, None), fresh(path, None))
    assert read_arrow(path, ["k"]).num_rows == 37


def test_a_table_with_deletion_vectors_is_left_to_the_plain_read(spark: SparkSession,
                                                                 tmp_path: Path) -> None:
    delta_spark_lake(spark)
    path = str(tmp_path / "dv")
    spark.createDataFrame(rows(30, 0).to_pandas()).write.format("delta") \
        .option("delta.enableDeletionVectors", "true").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE n < 5")
    table = DeltaTable(path)
    assert not readable_by_file(table)
    # its one file holds all 30 rows: read file by file it would give 5 rows too many. The
    # plain read refuses such a table (delta-rs 1.6.6 reads no deletion vectors): the read
    # must refuse it the same way, never give the file's rows
    assert spark.read.format("delta").load(path).count() == 25
    with pytest.raises(Exception) as plain:
        fresh(path, ["k"])
    with pytest.raises(type(plain.value)):
        read_arrow(path, ["k"])


def test_in_place_commits_keep_the_log_short_with_checkpoints(tmp_path: Path) -> None:
    """Every tenth version a commit writes a checkpoint (delta-rs's own interval is 100), so
    bringing a table up to date replays at most nine commits; the rows are unchanged."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from snap_spark.lake import to_arrow
    from snap_spark.lake.delta_log import CHECKPOINT_EVERY, commit_files
    from snap_spark.lake.files import PartitionedFileWriter

    path = str(tmp_path / "ledger")
    schema = StructType([StructField("k", StringType()), StructField("n", LongType())])
    for n in range(2 * CHECKPOINT_EVERY + 3):
        writer = PartitionedFileWriter(path, to_arrow(schema), [], file_prefix=f"part-{n:04d}")
        writer.write(pa.RecordBatch.from_pylist([{"k": f"k{n}", "n": n}],
                                                schema=to_arrow(schema)))
        assert commit_files(path, writer.close(), schema, [], app_id="t", version=n + 1,
                            write_id=f"w{n}")
    log = sorted(p.name for p in (tmp_path / "ledger" / "_delta_log").iterdir())
    checkpoints = [name for name in log if name.endswith(".checkpoint.parquet")]
    assert checkpoints == [f"{v:020d}.checkpoint.parquet"
                           for v in (CHECKPOINT_EVERY, 2 * CHECKPOINT_EVERY)]
    same(read_arrow(path, ["k", "n"]), fresh(path, ["k", "n"]))
    assert read_arrow(path, ["k"]).num_rows == 2 * CHECKPOINT_EVERY + 3


def test_distinct_values_kept_per_file_equal_a_fresh_distinct(tmp_path: Path) -> None:
    from snap_spark.lake.delta_rs import DeltaRsLake

    path = str(tmp_path / "d")
    lake = DeltaRsLake()

    def expected(column: str) -> set[Any]:
        return set(pc.unique(fresh(path, [column]).column(column)).to_pylist())

    write_deltalake(path, rows(12, 0), partition_by=["day"])
    for step in range(3):
        write_deltalake(path, rows(6, 50 * (step + 1)), mode="append", partition_by=["day"])
        before = cache_stats()["files_read"]
        for column in ("k", "day", "n"):
            assert lake.distinct_values(None, path, column) == expected(column)  # type: ignore[arg-type]
        first = cache_stats()["files_read"] - before
        assert lake.distinct_values(None, path, "k") == expected("k")  # type: ignore[arg-type]
        assert cache_stats()["files_read"] - before == first  # nothing read again
    DeltaTable(path).delete("n < 5")
    assert lake.distinct_values(None, path, "k") == expected("k")  # type: ignore[arg-type]
    assert "k0" not in lake.distinct_values(None, path, "k")  # type: ignore[arg-type]
    write_deltalake(path, rows(2, 900), mode="overwrite", partition_by=["day"])
    assert lake.distinct_values(None, path, "k") == {"k900", "k901"}  # type: ignore[arg-type]


def test_a_large_table_is_left_to_the_pruned_read(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Above MAX_ROWS (by the log's record counts) a read goes the plain way, which skips
    the files a filter's partition values rule out, instead of keeping every file."""
    import snap_spark.lake.file_cache as file_cache

    path = str(tmp_path / "big")
    write_deltalake(path, rows(20, 0), partition_by=["day"])
    monkeypatch.setattr(file_cache, "MAX_ROWS", 10)
    before = cache_stats()["files_read"]
    where = pc.field("day") == pc.scalar(dt.date(2026, 11, 27))
    same(read_arrow(path, ["k", "day"], where=where), fresh(path, ["k", "day"], where))
    assert read_arrow(path, ["k"]).num_rows == 20
    assert cache_stats()["files_read"] == before


def test_the_cache_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "off")
    write_deltalake(path, rows(5, 0))
    monkeypatch.setenv("SNAP_SPARK_FILE_CACHE", "0")
    before = cache_stats()["files_read"]
    same(read_arrow(path, ["k", "n"]), fresh(path, ["k", "n"]))
    assert cache_stats()["files_read"] == before
    monkeypatch.delenv("SNAP_SPARK_FILE_CACHE")
    same(read_arrow(path, ["k", "n"]), fresh(path, ["k", "n"]))
    assert cache_stats()["files_read"] == before + 1
