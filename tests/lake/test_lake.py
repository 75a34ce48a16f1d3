"""The delta-rs Lake backend end to end: real Spark, real Delta tables, checked with delta-rs."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from snap_spark.lake import DeltaRsLake, Lake, LakeError, LakeSchemaError, get_lake
from snap_spark.lake.common import marker_write_id
from tests.lake.helpers import delta_rows

pytestmark = pytest.mark.spark

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
DAY1, DAY2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
SCHEMA = (
    "id long, sender string, received_at timestamp, day date, score double, "
    "tags array<string>, meta struct<kind:string,size:int>"
)


def messages(spark: SparkSession, ids: range, day: dt.date | None = DAY1) -> DataFrame:
    rows = [
        (
            i,
            f"agent-{i % 3}" if i % 4 else None,
            dt.datetime(2024, 5, 1, 12, 0, i % 60, 123456 + i, tzinfo=UTC),
            day if day is not None else (DAY1 if i % 2 else DAY2),
            i / 2,
            [f"t{i}"],
            ("msg", i),
        )
        for i in ids
    ]
    return spark.createDataFrame(rows, SCHEMA)


@pytest.fixture(scope="module")
def lake() -> DeltaRsLake:
    return DeltaRsLake()


def ids_of(path: Path) -> list[int]:
    return [row["id"] for row in delta_rows(path, "select id from t order by id")]


def test_get_lake_picks_delta_rs_without_delta_jars(spark: SparkSession) -> None:
    chosen = get_lake(spark)
    assert chosen.name == "delta-rs"
    assert isinstance(chosen, Lake)


def test_append_creates_table_and_reads_back(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = tmp_path / "messages"
    df = messages(spark, range(20)).repartition(2)
    assert lake.append(df, str(path), app_id="ingest", version=0) is True

    table = DeltaTable(str(path))
    assert table.version() == 0
    assert table.transaction_version("ingest") == 0
    assert lake.exists(str(path)) and not lake.exists(str(tmp_path / "absent"))
    assert ids_of(path) == list(range(20))
    assert len(table.file_uris()) == 2  # one file per Spark task, one commit
    assert_df_equality(lake.read(spark, str(path)), df, ignore_row_order=True, ignore_nullable=True)


def test_same_txn_is_skipped_higher_version_appends(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = str(tmp_path / "messages")
    assert lake.append(messages(spark, range(5)), path, app_id="q", version=7)
    # a replayed batch (same or older version) writes nothing, whatever its rows
    assert lake.append(messages(spark, range(5)), path, app_id="q", version=7) is False
    assert lake.append(messages(spark, range(100, 105)), path, app_id="q", version=3) is False
    assert DeltaTable(path).version() == 0
    # another app id has its own sequence
    assert lake.append(messages(spark, range(5, 8)), path, app_id="other", version=0)
    assert lake.append(messages(spark, range(8, 10)), path, app_id="q", version=8)

    assert ids_of(Path(path)) == list(range(10))
    assert lake.txn_version(path, "q") == 8
    assert lake.txn_version(path, "other") == 0
    assert lake.txn_version(path, "never") is None
    assert lake.txn_version(str(tmp_path / "absent"), "q") is None


def test_partitioned_append_by_date(spark: SparkSession, lake: DeltaRsLake, tmp_path: Path) -> None:
    path = tmp_path / "raw"
    df = messages(spark, range(10), day=None)  # odd ids on DAY1, even on DAY2
    assert lake.append(df, str(path), app_id="raw", version=0, partition_by=["day"])
    # later appends may omit partition_by; a different one is refused
    assert lake.append(messages(spark, range(10, 12)), str(path), app_id="raw", version=1)
    with pytest.raises(LakeSchemaError, match="partitioned by"):
        lake.append(df, str(path), app_id="raw", version=2, partition_by=["sender"])

    table = DeltaTable(str(path))
    assert table.metadata().partition_columns == ["day"]
    assert sorted(p["day"] for p in table.partitions()) == ["2024-05-01", "2024-05-02"]
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    assert {a["partition.day"] for a in actions} == {DAY1, DAY2}
    assert all(a["path"].startswith(f"day={a['partition.day']}/") for a in actions)
    assert all(a["num_records"] and a["min.id"] is not None for a in actions)
    day2 = delta_rows(path, "select id from t where day = date '2024-05-02' and id >= 2")
    assert sorted(r["id"] for r in day2) == [2, 4, 6, 8]

    back = lake.read(spark, str(path))
    assert back.columns == df.columns
    assert_df_equality(
        back.where(F.col("id") < 10), df, ignore_row_order=True, ignore_nullable=True
    )
    pruned = back.where(F.col("day") == F.lit(DAY2))
    assert "PartitionFilters: [isnotnull(day" in pruned._jdf.queryExecution().toString()
    assert sorted(r.id for r in pruned.collect()) == [0, 2, 4, 6, 8]


ODD_VALUES = ["007", "a b", "é", None, "", "x:y/z", "1.50", "100%", "__x__"]


def test_odd_partition_values_round_trip(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    """Values that need escaping come back exact ("" is null, as in Delta), read with Spark's
    partition discovery (one scan, so partition filters prune files)."""
    path = str(tmp_path / "odd")
    rows = [(n, v, n % 2 == 0) for n, v in enumerate(ODD_VALUES)]
    df = spark.createDataFrame(rows, "n long, src string, flag boolean")
    assert lake.append(df, path, app_id="q", version=0, partition_by=["src", "flag"])

    expected = [(n, v or None, n % 2 == 0) for n, v in enumerate(ODD_VALUES)]
    from_delta_rs = delta_rows(path, "select * from t order by n")
    assert [(r["n"], r["src"], r["flag"]) for r in from_delta_rs] == expected
    back = lake.read(spark, path)
    assert "Union" not in back._jdf.queryExecution().optimizedPlan().toString()
    assert sorted((r.n, r.src, r.flag) for r in back.collect()) == expected


def test_read_partitions_laid_out_by_delta_rs(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    """delta-rs percent-encodes folder names in a way Spark would misread: those tables are
    read partition by partition, values taken from the log."""
    path = str(tmp_path / "foreign")
    at = dt.datetime(2024, 5, 1, 1, 2, 3, 456789, tzinfo=UTC)
    stamps = [at + dt.timedelta(hours=n % 2) for n in range(len(ODD_VALUES))]
    write_deltalake(
        path,
        pa.table(
            {
                "n": list(range(len(ODD_VALUES))),
                "src": ODD_VALUES,
                "at": pa.array(stamps, pa.timestamp("us", tz="UTC")),
            }
        ),
        partition_by=["src", "at"],
    )
    back = lake.read(spark, path).select("n", "src", F.unix_micros("at").alias("at"))
    expected = [
        (n, v or None, (stamp - EPOCH) // dt.timedelta(microseconds=1))
        for n, (v, stamp) in enumerate(zip(ODD_VALUES, stamps, strict=True))
    ]
    assert sorted((r.n, r.src, r.at) for r in back.collect()) == expected


def test_merge_upserts_by_key(spark: SparkSession, lake: DeltaRsLake, tmp_path: Path) -> None:
    path = str(tmp_path / "tasks")
    schema = "task_id string, state string, updated_at timestamp, transitions int"
    at = dt.datetime(2024, 5, 1, tzinfo=UTC)
    first = spark.createDataFrame([("t1", "submitted", at, 0), ("t2", "working", at, 1)], schema)
    lake.merge(first, path, ["task_id"])  # creates the table

    later = at + dt.timedelta(seconds=5)
    update = spark.createDataFrame(
        [("t2", "completed", later, 2), ("t3", "submitted", later, 0)], schema
    )
    lake.merge(update, path, ["task_id"], app_id="fold", version=1)
    # replaying the same merge is skipped
    stale = spark.createDataFrame([("t2", "failed", later, 9)], schema)
    lake.merge(stale, path, ["task_id"], app_id="fold", version=1)

    table = DeltaTable(path)
    got = {r["task_id"]: (r["state"], r["transitions"]) for r in delta_rows(path)}
    assert got == {"t1": ("submitted", 0), "t2": ("completed", 2), "t3": ("submitted", 0)}
    assert table.transaction_version("fold") == 1
    assert [h["operation"] for h in lake.history(path)][:1] == ["MERGE"]

    with pytest.raises(LakeError, match="several rows"):
        lake.merge(update.unionByName(update), path, ["task_id"])
    with pytest.raises(LakeSchemaError, match="missing columns"):
        lake.merge(update.drop("transitions"), path, ["task_id"])
    with pytest.raises(ValueError, match="both app_id and version"):
        lake.merge(update, path, ["task_id"], app_id="fold")


def test_read_old_version_and_history(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = str(tmp_path / "messages")
    assert lake.append(messages(spark, range(3)), path, app_id="q", version=0)
    assert lake.append(messages(spark, range(3, 6)), path, app_id="q", version=1)

    assert sorted(r.id for r in lake.read(spark, path, version=0).collect()) == [0, 1, 2]
    assert lake.read(spark, path).count() == 6

    history = lake.history(path)
    assert [h["version"] for h in history] == [1, 0]
    assert [h["operation"] for h in history] == ["WRITE", "CREATE TABLE"]
    assert all(isinstance(h["timestamp"], int) for h in history)
    markers = [json.loads(h["userMetadata"]) for h in history]
    assert [(m["appId"], m["txnVersion"]) for m in markers] == [("q", 1), ("q", 0)]
    assert all(marker_write_id(h["userMetadata"]) for h in history)


def test_tables_are_plain_delta(spark: SparkSession, lake: DeltaRsLake, tmp_path: Path) -> None:
    path = tmp_path / "messages"
    assert lake.append(messages(spark, range(3)), str(path), app_id="q", version=0)
    lake.merge(messages(spark, range(2, 4)), str(path), ["id"])

    table = DeltaTable(str(path))
    protocol = table.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
    assert not protocol.reader_features and not protocol.writer_features
    assert "delta.enableDeletionVectors" not in table.metadata().configuration
    actions = [
        json.loads(line)
        for commit in sorted((path / "_delta_log").glob("*.json"))
        for line in commit.read_text().splitlines()
    ]
    assert not any("deletionVector" in json.dumps(a) for a in actions)
    assert all(a["add"]["stats"] for a in actions if "add" in a)


def test_timestamps_round_trip_as_utc_microseconds(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = tmp_path / "events"
    moment = dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    df = spark.createDataFrame([(1, moment)], "id int, at timestamp")
    assert lake.append(df, str(path), app_id="q", version=0)

    (data_file,) = DeltaTable(str(path)).file_uris()
    assert pq.read_schema(data_file).field("at").type == pa.timestamp("us", tz="UTC")
    logical = json.loads(pq.ParquetFile(data_file).schema.column(1).logical_type.to_json())
    assert (logical["Type"], logical["isAdjustedToUTC"], logical["timeUnit"]) == (
        "Timestamp",
        True,
        "microseconds",
    )
    assert [r["at"] for r in delta_rows(path)] == [moment]
    back = lake.read(spark, str(path)).select(F.unix_micros("at").alias("us")).first()
    assert back is not None and back["us"] == (moment - EPOCH) // dt.timedelta(microseconds=1)


def test_empty_append_commits_only_the_transaction(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    """An empty batch still advances the app transaction (and creates the table with its
    schema), so a replay of it is skipped like any other batch."""
    path = str(tmp_path / "messages")
    empty = messages(spark, range(0))
    assert lake.append(empty, path, app_id="q", version=0, partition_by=["day"])
    table = DeltaTable(path)
    assert (table.version(), table.transaction_version("q"), table.file_uris()) == (0, 0, [])
    assert table.metadata().partition_columns == ["day"]
    back = lake.read(spark, path)
    assert back.count() == 0 and back.columns == empty.columns

    assert lake.append(empty, path, app_id="q", version=0) is False
    assert lake.append(empty, path, app_id="q", version=1)
    assert DeltaTable(path).version() == 1


def test_schema_mismatch_is_refused_before_writing(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = str(tmp_path / "messages")
    assert lake.append(messages(spark, range(2)), path, app_id="q", version=0)
    wider = messages(spark, range(2, 4)).withColumn("extra", F.lit(1))
    with pytest.raises(LakeSchemaError, match=r"columns not in the table \['extra'\]"):
        lake.append(wider, path, app_id="q", version=1)
    retyped = messages(spark, range(2, 4)).withColumn("score", F.col("score").cast("string"))
    with pytest.raises(LakeSchemaError, match="'score' is string"):
        lake.append(retyped, path, app_id="q", version=1)
    # column order does not matter
    shuffled = messages(spark, range(2, 4)).select(
        "meta", "id", "day", "score", "tags", "received_at", "sender"
    )
    assert lake.append(shuffled, path, app_id="q", version=1)
    assert ids_of(Path(path)) == [0, 1, 2, 3]
    with pytest.raises(LakeSchemaError, match="timestamp_ntz"):
        lake.append(
            spark.sql("select timestamp_ntz'2024-01-01 00:00:00' as t"),
            str(tmp_path / "ntz"),
            app_id="q",
            version=0,
        )


def test_failed_job_commits_nothing(spark: SparkSession, lake: DeltaRsLake, tmp_path: Path) -> None:
    """A failing task deletes its own files and the job commits nothing, so the same
    transaction can be retried. (Files of other tasks still running when Spark aborts a job
    can stay behind unreferenced, as with delta-spark; VACUUM removes them.)"""
    path = tmp_path / "messages"
    assert lake.append(messages(spark, range(4)), str(path), app_id="q", version=0)
    before = {p.name for p in path.rglob("*.parquet")}

    @F.udf("long")
    def explode_on_seven(value: int) -> int:
        if value == 7:
            raise ValueError("boom")
        return value

    batch = messages(spark, range(4, 10)).coalesce(1)
    with pytest.raises(Exception, match="boom"):
        lake.append(
            batch.withColumn("id", explode_on_seven("id")), str(path), app_id="q", version=1
        )

    assert DeltaTable(str(path)).version() == 0
    assert lake.txn_version(str(path), "q") == 0
    assert {p.name for p in path.rglob("*.parquet")} == before
    assert lake.append(batch, str(path), app_id="q", version=1)
    assert ids_of(path) == list(range(10))


def test_refuses_streaming_frames_and_missing_tables(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    stream = spark.readStream.format("rate").load()
    with pytest.raises(LakeError, match="foreachBatch"):
        lake.append(stream, str(tmp_path / "s"), app_id="q", version=0)
    with pytest.raises(LakeError, match="no Delta table"):
        lake.read(spark, str(tmp_path / "absent"))
    with pytest.raises(LakeError, match="no Delta table"):
        lake.history(str(tmp_path / "absent"))


def test_distinct_values_of_a_column(spark: SparkSession, lake: DeltaRsLake,
                                     tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    assert lake.distinct_values(spark, path, "sender") == set()  # no table yet
    lake.append(messages(spark, range(12), day=None), path, app_id="a", version=1,
                partition_by=["day"])
    expected = {r["sender"] for r in messages(spark, range(12)).collect()}
    assert None in expected and len(expected) == 4
    assert lake.distinct_values(spark, path, "sender") == expected
    assert lake.distinct_values(spark, path, "day") == {DAY1, DAY2}  # a partition column
