"""The delta-rs Lake backend end to end through the operations jobs use: Spark tasks write
the Parquet files, :func:`commit_data_files` commits them (:meth:`Lake.commit`: added,
replacing the table, replacing the rows of keys); real Spark, real Delta tables, checked
with delta-rs."""

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

from snap_spark.lake import (
    Lake,
    LakeError,
    LakeSchemaError,
    RowUpdates,
    VersionConflict,
    commit_data_files,
    commit_rows,
    get_lake,
    to_arrow,
)
from snap_spark.lake.common import marker_write_id
from snap_spark.lake.delta_rs import DeltaRsLake
from snap_spark.lake.schema import nullable_schema
from tests.lake.helpers import add_rows, delta_rows, parquet_names, write_files

pytestmark = pytest.mark.spark

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
DAY1, DAY2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
SCHEMA = (
    "id long, sender string, received_at timestamp, day date, score double, "
    "tags array<string>, meta struct<kind:string,size:int>"
)
TASKS = "task_id string, state string, updated_at timestamp, transitions int"
AT = dt.datetime(2024, 5, 1, tzinfo=UTC)


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


def task_rows(spark: SparkSession, rows: list[tuple[str, str, int, int]]) -> pa.RecordBatch:
    """Task rows ``(task_id, state, seconds after AT, transitions)`` held on the driver."""
    schema = to_arrow(spark.createDataFrame([], TASKS).schema)
    return pa.RecordBatch.from_pylist(
        [{"task_id": t, "state": s, "updated_at": AT + dt.timedelta(seconds=sec),
          "transitions": n} for t, s, sec, n in rows], schema=schema)


def task_keys(spark: SparkSession, ids: list[str]) -> DataFrame:
    return spark.createDataFrame([(i,) for i in ids], "task_id string")


@pytest.fixture(scope="module")
def lake() -> DeltaRsLake:
    return DeltaRsLake()


def ids_of(path: str | Path) -> list[int]:
    return [row["id"] for row in delta_rows(path, "select id from t order by id")]


def stray_files(path: str | Path) -> set[str]:
    """Parquet files in the table folder that no version of the table ever held (files
    written for a commit that did not happen)."""
    latest = DeltaTable(str(path)).version()
    held = {Path(uri).name for version in range(latest + 1)
            for uri in DeltaTable(str(path), version=version).file_uris()}
    return parquet_names(path) - held


def test_get_lake_picks_delta_rs_without_delta_jars(spark: SparkSession) -> None:
    chosen = get_lake(spark)
    assert chosen.name == "delta-rs"
    assert isinstance(chosen, Lake)


def test_add_creates_the_table_with_its_schema_and_reads_back(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = tmp_path / "messages"
    df = messages(spark, range(20)).repartition(2)
    assert not lake.exists(str(path))
    assert add_rows(spark, lake, path, df, app_id="ingest", version=0) is True

    table = DeltaTable(str(path))
    assert table.version() == 0
    assert table.transaction_version("ingest") == 0
    assert lake.exists(str(path)) and not lake.exists(str(tmp_path / "absent"))
    assert json.loads(table.schema().to_json()) == json.loads(nullable_schema(df.schema).json())
    assert ids_of(path) == list(range(20))
    assert len(table.file_uris()) == 2  # one file per Spark task, one commit
    assert_df_equality(lake.read(spark, str(path)), df, ignore_row_order=True, ignore_nullable=True)


def test_same_txn_is_skipped_and_its_files_deleted(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = str(tmp_path / "messages")
    assert add_rows(spark, lake, path, messages(spark, range(5)), app_id="q", version=7)
    # a replayed batch (same or older version) commits nothing, whatever its rows, and
    # leaves none of its files behind
    assert add_rows(spark, lake, path, messages(spark, range(5)), app_id="q", version=7) is False
    assert add_rows(spark, lake, path, messages(spark, range(100, 105)), app_id="q",
                    version=3) is False
    assert DeltaTable(path).version() == 0
    assert stray_files(path) == set()
    # another app id has its own sequence
    assert add_rows(spark, lake, path, messages(spark, range(5, 8)), app_id="other", version=0)
    assert add_rows(spark, lake, path, messages(spark, range(8, 10)), app_id="q", version=8)

    assert ids_of(path) == list(range(10))
    assert lake.txn_version(path, "q") == 8
    assert lake.txn_version(path, "other") == 0
    assert lake.txn_version(path, "never") is None
    assert lake.txn_version(str(tmp_path / "absent"), "q") is None


def test_partitioned_add_by_date(spark: SparkSession, lake: DeltaRsLake, tmp_path: Path) -> None:
    path = tmp_path / "raw"
    df = messages(spark, range(10), day=None)  # odd ids on DAY1, even on DAY2
    assert add_rows(spark, lake, path, df, app_id="raw", version=0, partition_by=["day"])
    assert add_rows(spark, lake, path, messages(spark, range(10, 12)), app_id="raw", version=1,
                    partition_by=["day"])
    # files of another partitioning (or none) are refused, and deleted
    for other in (["sender"], []):
        with pytest.raises(LakeSchemaError, match="partitioned by"):
            add_rows(spark, lake, path, df, app_id="raw", version=2, partition_by=other)
    assert DeltaTable(str(path)).version() == 1
    assert stray_files(path) == set()

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
    assert add_rows(spark, lake, path, df, app_id="q", version=0, partition_by=["src", "flag"])

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


def test_commit_rows_replaces_the_rows_of_keys(spark: SparkSession, lake: DeltaRsLake,
                                               tmp_path: Path) -> None:
    """Rows held on the driver, committed with keys: the rows of those keys are replaced,
    the others stay; a replayed transaction changes nothing and leaves no file behind."""
    path = str(tmp_path / "tasks")
    schema = spark.createDataFrame([], TASKS).schema

    def commit(rows: list[tuple[str, str, int, int]], keys: list[str] | None,
               version: int, app_id: str = "fold") -> bool:
        return commit_rows(spark, lake, path, lake.data_root(path, str(tmp_path / "staging")),
                           task_rows(spark, rows), schema=schema, file_prefix="part-t",
                           app_id=app_id, version=version,
                           keys=None if keys is None else task_keys(spark, keys))

    # keys on a table not there yet: the table is created with the rows
    assert commit([("t1", "submitted", 0, 0), ("t2", "working", 0, 1)], ["t1", "t2"], 0)
    assert commit([("t2", "completed", 5, 2), ("t3", "submitted", 5, 0)], ["t2", "t3"], 1)
    # replaying the same transaction, even with other rows, changes nothing
    assert commit([("t2", "failed", 9, 9)], ["t2"], 1) is False
    assert stray_files(path) == set()

    got = {r["task_id"]: (r["state"], r["transitions"], r["updated_at"])
           for r in delta_rows(path)}
    assert got == {"t1": ("submitted", 0, AT),
                   "t2": ("completed", 2, AT + dt.timedelta(seconds=5)),
                   "t3": ("submitted", 0, AT + dt.timedelta(seconds=5))}
    assert DeltaTable(path).transaction_version("fold") == 1
    # the file holding t2 (with t1) was replaced by a copy holding t1 alone, named after
    # the caller's prefix like every file of the table (none named by Delta)
    names = {u.rsplit("/", 1)[-1] for u in DeltaTable(path).file_uris()}
    assert any(n.startswith("part-t-kept-") for n in names), names
    assert all(n.startswith("part-t-") for n in names), names
    # a key with no new row loses its rows; without keys the rows are appended
    assert commit([], ["t1"], 2)
    assert commit([("t4", "working", 6, 1)], None, 0, app_id="other")
    assert sorted(r["task_id"] for r in delta_rows(path)) == ["t2", "t3", "t4"]

    before = DeltaTable(path).version()
    with pytest.raises(LakeSchemaError):  # keys must be columns of the table
        commit_rows(spark, lake, path, path, task_rows(spark, [("t2", "x", 1, 1)]),
                    schema=schema, file_prefix="part-t", app_id="fold", version=3,
                    keys=spark.createDataFrame([("t2",)], "nope string"))
    assert DeltaTable(path).version() == before
    assert stray_files(path) == set()


def test_replace_and_updates_in_one_commit(spark: SparkSession, lake: DeltaRsLake,
                                           tmp_path: Path) -> None:
    """``replace`` swaps every row of the table in one commit; an add with ``updates``
    rewrites the rows they name in the same commit as its files."""
    path = str(tmp_path / "messages")
    assert add_rows(spark, lake, path, messages(spark, range(6)), app_id="q", version=0)
    root, files = write_files(lake, path, messages(spark, range(100, 103)))
    schema = messages(spark, range(0)).schema
    assert commit_data_files(spark, lake, path, root, files, schema=schema, app_id="swap",
                             version=1, replace=True)
    assert ids_of(path) == [100, 101, 102]
    assert lake.read(spark, path, version=0).count() == 6  # earlier versions stay readable
    root, files = write_files(lake, path, messages(spark, range(0, 3)))
    assert not commit_data_files(spark, lake, path, root, files, schema=schema, app_id="swap",
                                 version=1, replace=True)
    assert ids_of(path) == [100, 101, 102] and stray_files(path) == set()

    updates = RowUpdates(pa.table({"id": [101], "score": [-1.0]}), ("id",))
    root, files = write_files(lake, path, messages(spark, range(103, 104)))
    assert commit_data_files(spark, lake, path, root, files, schema=schema, app_id="q",
                             version=1, updates=updates)
    got = {r["id"]: r["score"] for r in delta_rows(path, "select id, score from t")}
    assert got == {100: 50.0, 101: -1.0, 102: 51.0, 103: 51.5}
    assert DeltaTable(path).version() == 2  # files and update in one commit


def test_rows_rewritten_for_a_run_carry_its_tag_and_a_dead_run_s_are_swept(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    """Updated rows are copied into files named with the run's tag (``RowUpdates.file_prefix``):
    committed, they are the table's; written by a run that died before its commit, the
    next sweep (``clean_leftovers``) removes them as that run's leftovers."""
    from snap_spark.lake.delta_rs import rewrite_updated
    from snap_spark.pipeline.runs import RUNS_FOLDER, RunMarker, clean_leftovers, file_prefix

    lake_dir = tmp_path / "lake"
    path = str(lake_dir / "messages")
    schema = messages(spark, range(0)).schema
    assert add_rows(spark, lake, path, messages(spark, range(6)), app_id="q", version=0)
    committer, dead = "c" * 32, "d" * 32
    before = parquet_names(path)
    updates = RowUpdates(pa.table({"id": [1], "score": [-1.0]}), ("id",),
                         file_prefix(committer, "updated"))
    root, files = write_files(lake, path, messages(spark, range(10, 11)))
    assert commit_data_files(spark, lake, path, root, files, schema=schema, app_id="q",
                             version=1, updates=updates)
    rewritten = {n for n in parquet_names(path) - before
                 if n.startswith(f"part-{'c' * 16}-updated-")}
    assert len(rewritten) == 1 and stray_files(path) == set()

    table = DeltaTable(path)
    committed = (table.version(), sorted((r["id"], r["score"]) for r in delta_rows(
        path, "select id, score from t")))
    before = parquet_names(path)
    rewrite_updated(path, RowUpdates(pa.table({"id": [2], "score": [-2.0]}), ("id",),
                                     file_prefix(dead, "updated")),
                    schema, table.metadata().partition_columns)  # and then killed
    left = parquet_names(path) - before
    assert left and all(n.startswith(f"part-{'d' * 16}-updated-") for n in left)
    runs = lake_dir / RUNS_FOLDER
    runs.mkdir()
    (runs / f"{dead}.json").write_bytes(RunMarker(dead, pid=2**22 + 17).to_json())
    cleaned = clean_leftovers(str(lake_dir), ["messages"])
    assert cleaned.runs == [dead] and {Path(f).name for f in cleaned.files} == left
    assert parquet_names(path) == before
    assert (DeltaTable(path).version(), sorted((r["id"], r["score"]) for r in delta_rows(
        path, "select id, score from t"))) == committed


def test_a_version_conflict_keeps_the_files_for_the_retry(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    """Decided against a version another writer has moved past: nothing is committed and
    the files stay, for the caller to decide again and commit them; every other failure
    deletes them."""
    path = str(tmp_path / "messages")
    schema = messages(spark, range(0)).schema
    assert add_rows(spark, lake, path, messages(spark, range(2)), app_id="a", version=0)
    root, files = write_files(lake, path, messages(spark, range(2, 4)))
    assert add_rows(spark, lake, path, messages(spark, range(4, 5)), app_id="b", version=0)
    with pytest.raises(VersionConflict):
        commit_data_files(spark, lake, path, root, files, schema=schema, app_id="c",
                          version=0, read_version=0)
    assert {Path(f.path).name for f in files} <= parquet_names(path)  # kept
    assert commit_data_files(spark, lake, path, root, files, schema=schema, app_id="c",
                             version=0, read_version=1)
    assert ids_of(path) == [0, 1, 2, 3, 4]

    root, files = write_files(lake, path, messages(spark, range(5, 6)))
    with pytest.raises(ValueError, match="not both"):
        commit_data_files(spark, lake, path, root, files, schema=schema, app_id="d",
                          version=0, replace=True, keys=spark.createDataFrame([(1,)], "id long"))
    with pytest.raises(ValueError, match="with an add"):
        commit_data_files(spark, lake, path, root, files, schema=schema, app_id="d",
                          version=0, replace=True, read_version=2)
    assert stray_files(path) == set() and DeltaTable(path).version() == 2


def test_read_old_version_and_history(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = str(tmp_path / "messages")
    assert add_rows(spark, lake, path, messages(spark, range(3)), app_id="q", version=0)
    assert add_rows(spark, lake, path, messages(spark, range(3, 6)), app_id="q", version=1,
                    commit_info={"job": "test"})

    assert sorted(r.id for r in lake.read(spark, path, version=0).collect()) == [0, 1, 2]
    assert lake.read(spark, path).count() == 6

    history = lake.history(path)
    assert [h["version"] for h in history] == [1, 0]
    assert [h["operation"] for h in history] == ["WRITE", "CREATE TABLE"]
    assert all(isinstance(h["timestamp"], int) for h in history)
    markers = [json.loads(h["userMetadata"]) for h in history]
    assert [(m["appId"], m["txnVersion"]) for m in markers] == [("q", 1), ("q", 0)]
    assert markers[0]["info"] == {"job": "test"}
    assert all(marker_write_id(h["userMetadata"]) for h in history)


def test_tables_are_plain_delta(spark: SparkSession, lake: DeltaRsLake, tmp_path: Path) -> None:
    path = tmp_path / "messages"
    assert add_rows(spark, lake, path, messages(spark, range(3)), app_id="q", version=0)
    # the rows of ids 2 and 3 replaced (a merge that rewrites a file)
    assert add_rows(spark, lake, path, messages(spark, range(2, 4)), app_id="q", version=1,
                    keys=spark.createDataFrame([(2,), (3,)], "id long"))
    assert ids_of(path) == [0, 1, 2, 3]

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
    assert any("remove" in a for a in actions)  # the merge did rewrite
    assert not any("deletionVector" in json.dumps(a) for a in actions)
    assert all(a["add"]["stats"] for a in actions if "add" in a)


def test_timestamps_round_trip_as_utc_microseconds(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    path = tmp_path / "events"
    moment = dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    df = spark.createDataFrame([(1, moment)], "id int, at timestamp")
    assert add_rows(spark, lake, path, df, app_id="q", version=0)

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


def test_empty_commit_records_only_the_transaction(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    """No files still commits the app transaction (and creates the table with its schema
    and partitioning), so a replay of it is skipped like any other batch."""
    path = str(tmp_path / "messages")
    empty = messages(spark, range(0))
    assert add_rows(spark, lake, path, empty, app_id="q", version=0, partition_by=["day"])
    table = DeltaTable(path)
    assert (table.version(), table.transaction_version("q"), table.file_uris()) == (0, 0, [])
    assert table.metadata().partition_columns == ["day"]
    back = lake.read(spark, path)
    assert back.count() == 0 and back.columns == empty.columns

    def commit(version: int) -> bool:
        return commit_data_files(spark, lake, path, path, [], schema=empty.schema,
                                 partition_by=["day"], app_id="q", version=version)

    assert commit(0) is False
    assert commit(1)
    assert DeltaTable(path).version() == 1


def test_schema_mismatch_is_refused_and_the_files_deleted(
    spark: SparkSession, lake: DeltaRsLake, tmp_path: Path
) -> None:
    """Files of other columns or types are refused before anything is committed, and
    deleted; the same transaction commits when tried again with fitting files."""
    path = str(tmp_path / "messages")
    assert add_rows(spark, lake, path, messages(spark, range(2)), app_id="q", version=0)
    wider = messages(spark, range(2, 4)).withColumn("extra", F.lit(1))
    with pytest.raises(LakeSchemaError, match=r"columns not in the table \['extra'\]"):
        add_rows(spark, lake, path, wider, app_id="q", version=1)
    retyped = messages(spark, range(2, 4)).withColumn("score", F.col("score").cast("string"))
    with pytest.raises(LakeSchemaError, match="'score' is string"):
        add_rows(spark, lake, path, retyped, app_id="q", version=1)
    assert DeltaTable(path).version() == 0 and lake.txn_version(path, "q") == 0
    assert stray_files(path) == set()
    # column order does not matter
    shuffled = messages(spark, range(2, 4)).select(
        "meta", "id", "day", "score", "tags", "received_at", "sender"
    )
    assert add_rows(spark, lake, path, shuffled, app_id="q", version=1)
    assert ids_of(path) == [0, 1, 2, 3]
    assert_df_equality(lake.read(spark, path), messages(spark, range(4)), ignore_row_order=True,
                       ignore_nullable=True)


def test_refuses_missing_tables(lake: DeltaRsLake, spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(LakeError, match="no Delta table"):
        lake.read(spark, str(tmp_path / "absent"))
    with pytest.raises(LakeError, match="no Delta table"):
        lake.history(str(tmp_path / "absent"))
    with pytest.raises(LakeError, match="table folder"):  # delta-rs commits in place only
        commit_data_files(spark, lake, str(tmp_path / "t"), str(tmp_path / "elsewhere"), [],
                          schema=messages(spark, range(0)).schema, app_id="q", version=0)
    assert not lake.exists(str(tmp_path / "t"))


def test_distinct_values_of_a_column(spark: SparkSession, lake: DeltaRsLake,
                                     tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    assert lake.distinct_values(spark, path, "sender") == set()  # no table yet
    add_rows(spark, lake, path, messages(spark, range(12), day=None), app_id="a", version=1,
             partition_by=["day"])
    expected = {r["sender"] for r in messages(spark, range(12)).collect()}
    assert None in expected and len(expected) == 4
    assert lake.distinct_values(spark, path, "sender") == expected
    assert lake.distinct_values(spark, path, "day") == {DAY1, DAY2}  # a partition column
