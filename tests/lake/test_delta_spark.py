"""The delta-spark backend on real Delta Lake: the JARs ``make setup`` cached, loaded into the
shared test session, tables checked with delta-rs (``deltalake``), independently of Spark.

Most tests stage the files outside the table folder (:func:`staged`): delta-spark then
commits them with Delta's own writer (an append, an overwrite, or a MERGE for
keys replaced), the path a table with features only Delta keeps takes. Files written in
the folder of a plain table are committed in place (``test_commit_adds_staged_parquet_once``,
and ``tests/lake/test_replace_keys.py``).

These tests fail (never skip) when Delta's JARs are missing: run ``make setup``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from snap_spark.lake import (
    DELTA_CATALOG,
    DataCommit,
    Lake,
    LakeError,
    LakeSchemaError,
    commit_data_files,
    get_lake,
    has_delta_spark,
)
from snap_spark.lake.common import marker_write_id
from snap_spark.lake.delta_rs import DeltaRsLake
from snap_spark.lake.delta_spark import (
    TIMESTAMP_TYPE_CONF,
    TXN_APP_ID_CONF,
    TXN_VERSION_CONF,
    USER_METADATA_CONF,
    DeltaSparkLake,
)
from snap_spark.runtime.maven_jars import DELTA, KAFKA
from tests.driver_limits import set_limits
from tests.lake.helpers import (
    add_rows,
    delta_rows,
    delta_spark_lake,
    parquet_names,
    table_facts,
    use_backend,
)

pytestmark = pytest.mark.spark

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
DAY1, DAY2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
SCHEMA = "id long, sender string, received_at timestamp, day date, tags array<string>"
TASKS = "task_id string, state string, updated_at timestamp, transitions int"
AT = dt.datetime(2024, 5, 1, tzinfo=UTC)


def messages(spark: SparkSession, ids: range, day: dt.date | None = DAY1) -> DataFrame:
    """Rows with a null sender now and then; ``day=None`` puts odd ids on DAY1, even on DAY2."""
    rows = [
        (
            i,
            f"agent-{i % 3}" if i % 4 else None,
            dt.datetime(2024, 5, 1, 12, 0, i % 60, 123456 + i, tzinfo=UTC),
            day if day is not None else (DAY1 if i % 2 else DAY2),
            [f"t{i}"],
        )
        for i in ids
    ]
    return spark.createDataFrame(rows, SCHEMA)


def tasks(spark: SparkSession, rows: list[tuple[str, str, int, int]]) -> DataFrame:
    """Task rows ``(task_id, state, seconds after AT, transitions)``."""
    return spark.createDataFrame(
        [(t, s, AT + dt.timedelta(seconds=sec), n) for t, s, sec, n in rows], TASKS
    )


def ids_of(path: str | Path) -> list[int]:
    return [row["id"] for row in delta_rows(path, "select id from t order by id")]


def staged(path: str | Path) -> str:
    """A staging folder beside the table: files written there are committed by Delta's own
    writer, not in place."""
    return str(Path(path).parent / "_staging" / f"{Path(path).name}-{uuid.uuid4().hex[:8]}")


def add(spark: SparkSession, lake: Lake, path: str | Path, df: DataFrame, **commit: Any) -> bool:
    """``df``'s rows committed to ``path`` from a staging folder (:func:`staged`)."""
    return add_rows(spark, lake, path, df, root=staged(path), **commit)


def test_session_loads_the_cached_jars_and_the_backend_setting_chooses(spark: SparkSession) -> None:
    lake = delta_spark_lake(spark)
    jars = DELTA.available()
    assert jars is not None and any("io.delta_delta-spark_" in jar for jar in jars)
    # Delta's JARs, then Spark's Kafka connector's when make setup cached it (KAFKA)
    listed = spark.sparkContext.getConf().get("spark.jars").split(",")
    assert listed == [*jars, *(KAFKA.available() or [])]
    assert has_delta_spark(spark)
    assert spark.conf.get("spark.sql.catalog.spark_catalog") == DELTA_CATALOG

    assert isinstance(lake, Lake) and lake.name == "delta-spark"
    assert get_lake(spark).name == "delta-rs"  # the test session's default setting
    assert get_lake(spark, backend="auto").name == "delta-spark"  # the extension is loaded
    with use_backend(spark, "auto"):
        assert isinstance(get_lake(spark), DeltaSparkLake)
    with use_backend(spark, "delta-spark"):
        assert isinstance(get_lake(spark), DeltaSparkLake)
        assert isinstance(get_lake(spark, backend="delta-rs"), DeltaRsLake)  # argument wins
    assert get_lake(spark).name == "delta-rs"  # restored
    with pytest.raises(LakeError, match="unknown Delta backend 'delta'"):
        get_lake(spark, backend="delta")
    # Delta writes microsecond timestamps, not Spark's default INT96
    assert spark.conf.get(TIMESTAMP_TYPE_CONF) == "TIMESTAMP_MICROS"


def test_add_is_idempotent_per_app_transaction_and_reads_old_versions_and_history(
        spark: SparkSession, tmp_path: Path) -> None:
    """A replayed add (same or older version of its app id) writes nothing and its staged
    files are deleted; another app id has its own sequence. The table the three adds that
    wrote left is then read at an old version and whole, and its history lists each add,
    newest first, with its marker (app id and version, write id)."""
    lake = delta_spark_lake(spark)
    path = str(tmp_path / "messages")
    assert not lake.exists(path)
    assert add(spark, lake, path, messages(spark, range(5)), app_id="q", version=7) is True
    assert lake.exists(path)
    # a replayed batch (same or older version) writes nothing, whatever its rows, and its
    # staged files are deleted
    left = parquet_names(tmp_path / "_staging")  # the committed ones (a job deletes them)
    assert add(spark, lake, path, messages(spark, range(5)), app_id="q", version=7) is False
    assert add(spark, lake, path, messages(spark, range(100, 105)), app_id="q",
               version=3) is False
    assert DeltaTable(path).version() == 0
    assert parquet_names(tmp_path / "_staging") == left
    # another app id has its own sequence; a newer version writes
    assert add(spark, lake, path, messages(spark, range(5, 8)), app_id="other", version=0)
    assert add(spark, lake, path, messages(spark, range(8, 10)), app_id="q", version=8)

    assert ids_of(path) == list(range(10))
    assert DeltaTable(path).version() == 2
    assert (lake.txn_version(path, "q"), lake.txn_version(path, "other")) == (8, 0)
    assert DeltaTable(path).transaction_version("q") == 8  # Delta's own txn action
    assert lake.txn_version(path, "never") is None
    assert lake.txn_version(str(tmp_path / "absent"), "q") is None

    # old versions and the history of the three adds that wrote
    assert sorted(r.id for r in lake.read(spark, path, version=0).collect()) == list(range(5))
    assert lake.read(spark, path).count() == 10
    history = lake.history(path)
    assert [h["version"] for h in history] == [2, 1, 0]
    assert [h["operation"] for h in history] == ["WRITE", "WRITE", "WRITE"]
    assert all(isinstance(h["timestamp"], int) and h["timestamp"] > 0 for h in history)
    assert history[0]["operationParameters"]["mode"] == "Append"
    markers = [json.loads(h["userMetadata"]) for h in history]
    assert [(m["appId"], m["txnVersion"]) for m in markers] == [("q", 8), ("other", 0),
                                                                ("q", 7)]
    assert all(marker_write_id(h["userMetadata"]) for h in history)


def test_partitioned_add_read_back_refusals_distinct_values_and_a_plain_merge(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adds to a table partitioned by day, read back (by delta-rs and through the lake);
    another partitioning, a column the table lacks and a column of another type are each
    refused before Delta writes (the refused staged files deleted); the columns of a frame
    may come in any order; an absent table is an error to read and has no history. Then
    a MERGE replaces the rows of two keys, one on each day: the table stays plain Delta
    with UTC microsecond timestamps, to the last microsecond, read back either way.
    Distinct values come from delta-rs on the driver for a small table, and the same from
    a Spark job for a large one (``distinct_rows``)."""
    lake = delta_spark_lake(spark)
    path = str(tmp_path / "raw")
    assert lake.distinct_values(spark, path, "sender") == set()  # no table yet
    df = messages(spark, range(10), day=None)
    assert add(spark, lake, path, df, app_id="raw", version=0, partition_by=["day"])
    assert add(spark, lake, path, messages(spark, range(10, 12)), app_id="raw", version=1,
               partition_by=["day"])
    # another partitioning is refused before Delta writes
    with pytest.raises(LakeSchemaError, match="partitioned by"):
        add(spark, lake, path, df, app_id="raw", version=2, partition_by=["sender"])
    assert DeltaTable(path).version() == 1
    # so are a column the table lacks and a column of another type, their files deleted
    left = parquet_names(tmp_path / "_staging")
    wider = messages(spark, range(12, 14)).withColumn("extra", F.lit(1))
    with pytest.raises(LakeSchemaError, match=r"columns not in the table \['extra'\]"):
        add(spark, lake, path, wider, app_id="raw", version=2, partition_by=["day"])
    retyped = messages(spark, range(12, 14)).withColumn("id", F.col("id").cast("string"))
    with pytest.raises(LakeSchemaError, match="'id' is string"):
        add(spark, lake, path, retyped, app_id="raw", version=2, partition_by=["day"])
    assert DeltaTable(path).version() == 1
    assert parquet_names(tmp_path / "_staging") == left

    table = DeltaTable(path)
    assert table.metadata().partition_columns == ["day"]
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    assert {a["partition.day"] for a in actions} == {DAY1, DAY2}
    assert all(a["path"].startswith(f"day={a['partition.day']}/") for a in actions)
    day2 = delta_rows(path, "select id from t where day = date '2024-05-02' and id < 10")
    assert sorted(r["id"] for r in day2) == [0, 2, 4, 6, 8]

    back = lake.read(spark, path)
    assert back.columns == df.columns
    assert_df_equality(back.where(F.col("id") < 10), df, ignore_row_order=True,
                       ignore_nullable=True)
    assert lake.distinct_values(spark, path, "day") == {DAY1, DAY2}  # a partition column
    assert lake.distinct_values(spark, path, "sender") == {None, "agent-0", "agent-1",
                                                           "agent-2"}
    with monkeypatch.context() as patched:  # the Spark job's way, not delta-rs's

        def refused(*args: Any) -> set[Any]:
            raise AssertionError("read on the driver")

        set_limits(patched, distinct_rows="spark")
        patched.setattr(DeltaRsLake, "distinct_values", refused)
        assert lake.distinct_values(spark, path, "sender") == {None, "agent-0", "agent-1",
                                                               "agent-2"}
        assert lake.distinct_values(spark, str(tmp_path / "none"), "sender") == set()
    # column order does not matter
    shuffled = messages(spark, range(12, 14)).select("tags", "id", "day", "received_at",
                                                     "sender")
    assert add(spark, lake, path, shuffled, app_id="raw", version=2, partition_by=["day"])
    assert ids_of(path) == list(range(14))
    for call in (lambda: lake.read(spark, str(tmp_path / "absent")),
                 lambda: lake.history(str(tmp_path / "absent"))):
        with pytest.raises(LakeError, match="no Delta table"):
            call()

    # the rows of ids 1 and 2 (one on each day) replaced by one MERGE, with timestamps at
    # the edge of a microsecond: it rewrites files, and the table stays plain Delta
    moment = dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    later = spark.createDataFrame([(1, "agent-1", moment - dt.timedelta(microseconds=1), DAY1,
                                    ["t1"]), (2, "agent-2", moment, DAY2, ["t2"])], SCHEMA)
    assert add(spark, lake, path, later, app_id="raw", version=3, partition_by=["day"],
               keys=later.select("id"))
    assert_plain_delta_with_utc_microsecond_timestamps(Path(path), "received_at")
    got = {r["id"]: r["received_at"]
           for r in delta_rows(path, "select id, received_at from t where id < 3")}
    assert got == {0: dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC),
                   1: moment - dt.timedelta(microseconds=1), 2: moment}
    back = lake.read(spark, path).where("id = 2").select(F.unix_micros("received_at").alias("us"))
    assert back.first()["us"] == (moment - EPOCH) // dt.timedelta(microseconds=1)  # type: ignore[index]
    assert ids_of(path) == list(range(14))


def assert_plain_delta_with_utc_microsecond_timestamps(path: Path, column: str) -> None:
    """The table at ``path``, after a MERGE, is plain Delta: protocol 1/2, no table
    features, no deletion vectors (neither enabled nor in any action), statistics in every
    add, and a remove (the merge did rewrite); ``column`` is written as microsecond UTC
    timestamps in every data file."""
    facts = table_facts(path)
    assert facts["protocol"] == (1, 2)
    assert facts["features"] == (None, None)
    assert "delta.enableDeletionVectors" not in facts["configuration"]
    actions = [
        json.loads(line)
        for commit in sorted((path / "_delta_log").glob("*.json"))
        for line in commit.read_text().splitlines()
    ]
    assert not any("deletionVector" in json.dumps(a) for a in actions)
    assert all(a["add"]["stats"] for a in actions if "add" in a)
    assert any("remove" in a for a in actions)  # the merge did rewrite

    for data_file in DeltaTable(str(path)).file_uris():
        assert pq.read_schema(data_file).field(column).type == pa.timestamp("us", tz="UTC")
        schema = pq.ParquetFile(data_file).schema
        (leaf,) = [schema.column(i) for i in range(len(schema)) if schema.column(i).path == column]
        logical = json.loads(leaf.logical_type.to_json())
        assert (logical["Type"], logical["isAdjustedToUTC"], logical["timeUnit"]) == (
            "Timestamp", True, "microseconds")


def test_commit_of_keys_merges_skips_a_replayed_transaction_and_equals_delta_rs(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Replacing the rows of keys by staged files is one Delta MERGE: the rows of the keys replaced,
    the others kept; a replayed transaction is skipped. Each replacement is also committed,
    in place, by the delta-rs backend to a table of its own, which returns what delta-spark
    returns and ends equal to delta-spark's: rows, schema, partitioning, protocol, features,
    configuration and app transaction (the task tables of the batch job are folded so)."""
    lake = delta_spark_lake(spark)
    path = str(tmp_path / "tasks")
    twin = tmp_path / "delta-rs" / "tasks"
    rs_lake = DeltaRsLake()

    def replace(rows: list[tuple[str, str, int, int]], keys: list[str], version: int) -> bool:
        frame = tasks(spark, rows)
        keyed = spark.createDataFrame([(k,) for k in keys], "task_id string")
        on_rs = add_rows(spark, rs_lake, twin, frame, app_id="fold", version=version,
                         keys=keyed, commit_info={"job": "test"})
        on_ds = add(spark, lake, path, frame, app_id="fold", version=version, keys=keyed,
                    commit_info={"job": "test"})
        assert on_rs == on_ds, (rows, keys, version)
        return on_ds

    # the table is created by the first one
    assert replace([("t1", "submitted", 0, 0), ("t2", "working", 0, 1)], ["t1", "t2"], 0)
    assert replace([("t2", "completed", 5, 2), ("t3", "submitted", 5, 0)], ["t2", "t3"], 1)
    # replaying the same transaction, even with other rows, is skipped
    assert replace([("t2", "failed", 9, 9)], ["t2"], 1) is False
    # Delta's idempotent-DML and commit-info settings are set for the one statement only
    for setting in (TXN_APP_ID_CONF, TXN_VERSION_CONF, USER_METADATA_CONF):
        assert spark.conf.get(setting, None) is None

    got = {r["task_id"]: (r["state"], r["transitions"], r["updated_at"])
           for r in delta_rows(path)}
    assert got == {
        "t1": ("submitted", 0, AT),
        "t2": ("completed", 2, AT + dt.timedelta(seconds=5)),
        "t3": ("submitted", 0, AT + dt.timedelta(seconds=5)),
    }
    assert lake.txn_version(path, "fold") == 1
    history = lake.history(path)
    assert [h["operation"] for h in history] == ["MERGE", "WRITE"]
    assert json.loads(history[0]["userMetadata"])["info"] == {"job": "test"}
    assert replace([("t3", "working", 7, 1)], ["t3"], 2)
    assert lake.txn_version(path, "fold") == 2
    assert {r["state"] for r in delta_rows(path, "select state from t where task_id='t3'")} == {
        "working"}
    # a key whose rows are not replaced by any loses them
    assert replace([], ["t1"], 3)
    assert sorted(r["task_id"] for r in delta_rows(path)) == ["t2", "t3"]

    # keys that are not columns of the table are refused before Delta writes
    left = parquet_names(tmp_path / "_staging")
    with pytest.raises(LakeSchemaError):
        add(spark, lake, path, tasks(spark, [("t9", "working", 1, 1)]), app_id="fold",
            version=4, keys=spark.createDataFrame([("t9",)], "nope string"))
    assert DeltaTable(path).version() == 3
    assert parquet_names(tmp_path / "_staging") == left  # the refused files were deleted

    # delta-rs, committing the same replacements in place, wrote an equal table
    sql = "select * from t order by task_id"
    assert delta_rows(twin, sql) == delta_rows(path, sql)
    assert table_facts(path) == table_facts(twin)
    assert DeltaTable(str(twin)).transaction_version("fold") == DeltaTable(
        path).transaction_version("fold") == 3


@pytest.mark.parametrize("deletion_vectors", [False, True])
def test_commit_adds_staged_parquet_once(spark: SparkSession, tmp_path: Path,
                                               deletion_vectors: bool) -> None:
    """The batch job's path: files written under ``data_root`` go in as one commit; a re-run
    of the same transaction adds nothing. A plain table (every table snap-spark creates)
    commits them in place, each row written once; a table with a feature only Delta's
    writer keeps (deletion vectors) gets them staged and copied by Delta's writer."""
    lake = delta_spark_lake(spark)
    from snap_spark.lake.common import table_uri
    from snap_spark.lake.delta_spark import commits_in_place
    from snap_spark.lake.files import PartitionedFileWriter
    from snap_spark.pipeline.land import table_arrow_schema
    from snap_spark.schemas.tables import MESSAGES

    path = str(tmp_path / "lake" / "messages")
    if deletion_vectors:
        ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in MESSAGES.fields)
        spark.sql(f"CREATE TABLE delta.`{path}` ({ddl}) USING delta PARTITIONED BY "
                  "(event_date) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        assert DeltaTable(path).protocol().writer_features  # table features: not plain
    assert commits_in_place(path) is not deletion_vectors
    root = lake.data_root(path, str(tmp_path / "lake" / "_staging" / "run1"))
    if deletion_vectors:
        assert root.startswith(str(tmp_path / "lake" / "_staging" / "run1"))
    else:
        assert root == table_uri(path)
    schema = table_arrow_schema("messages")
    moment = dt.datetime(2026, 2, 4, 1, 2, 3, 456789, tzinfo=UTC)
    rows = [{**{f.name: None for f in schema}, "ingest_id": "i", "ingest_time": moment,
             "source_file": "f", "file_key": "k", "line_no": n, "has_sig": False,
             "verdict": "valid", "event_date": dt.date(2026, 2, 4 + n % 2)}
            for n in range(1, 6)]
    writer = PartitionedFileWriter(root, schema, ["event_date"])
    writer.write(pa.RecordBatch.from_pylist(rows, schema=schema))
    files = writer.close()
    assert len(files) == 2

    run = DataCommit(path=path, root=root, files=files, schema=MESSAGES,
                     partition_by=["event_date"], app_id="run", version=1)
    assert lake.commit(spark, run)
    assert not lake.commit(spark, run)
    empty = dataclasses.replace(run, files=[], app_id="empty")
    assert lake.commit(spark, empty)  # no files: only the transaction

    table = DeltaTable(path)
    created = 1 if deletion_vectors else 0  # the CREATE TABLE is a version of its own
    assert (table.version(), table.transaction_version("empty")) == (1 + created, 1)
    assert table.metadata().partition_columns == ["event_date"]
    if not deletion_vectors:  # the files the tasks wrote are the table's, not copies
        assert sorted(table.file_uris()) == sorted(
            f"{table_uri(path)}/{f.path}" for f in files)
    assert [f.name for f in table.schema().fields] == MESSAGES.fieldNames()
    got = delta_rows(path, "select line_no, event_date, ingest_time from t order by line_no")
    assert got == [{"line_no": r["line_no"], "event_date": r["event_date"],
                    "ingest_time": moment} for r in rows]


def test_empty_commit_records_only_the_transaction(spark: SparkSession,
                                                    tmp_path: Path) -> None:
    """No files: Delta's writer still commits the app transaction and creates the table
    with its schema and partitioning; a replay of it is skipped."""
    lake = delta_spark_lake(spark)
    path = str(tmp_path / "messages")
    empty = messages(spark, range(0))

    def commit(version: int, partition_by: list[str]) -> bool:
        return commit_data_files(spark, lake, path, staged(path), [], schema=empty.schema,
                                 partition_by=partition_by, app_id="q", version=version)

    assert commit(0, ["day"])
    table = DeltaTable(path)
    assert (table.version(), table.transaction_version("q"), table.file_uris()) == (0, 0, [])
    assert table.metadata().partition_columns == ["day"]
    back = lake.read(spark, path)
    assert back.count() == 0 and back.columns == empty.columns
    assert commit(0, ["day"]) is False
    assert commit(1, ["day"])
    assert DeltaTable(path).version() == 1


def lake_scenario(spark: SparkSession, lake: Lake, root: Path, staging: bool) -> list[bool]:
    """The same adds to a partitioned table, a replay and an empty commit among them, run
    against one backend (from ``staging`` or in place); returns what each commit returned.
    (Key replacements on both backends: test_commit_of_keys_merges_skips_a_replayed_\
    transaction_and_equals_delta_rs.)"""
    raw = root / "raw"

    def commit(path: Path, df: DataFrame, **txn: Any) -> bool:
        return add_rows(spark, lake, path, df, root=staged(path) if staging else None, **txn)

    return [
        commit(raw, messages(spark, range(8), day=None), app_id="ingest", version=0,
               partition_by=["day"]),
        commit(raw, messages(spark, range(50, 53), day=None), app_id="ingest", version=0,
               partition_by=["day"]),  # a replay: nothing
        commit(raw, messages(spark, range(8, 12)), app_id="ingest", version=1,
               partition_by=["day"]),
        commit(raw, messages(spark, range(0)), app_id="empty", version=3, partition_by=["day"]),
    ]


def test_both_backends_write_equal_tables(spark: SparkSession, tmp_path: Path) -> None:
    """:func:`lake_scenario` on delta-rs (in place) and on delta-spark (staged): the same
    results, and tables equal in rows, schema, partitioning, protocol, features,
    configuration and app transactions."""
    lake = delta_spark_lake(spark)
    runs: dict[str, tuple[list[bool], Path]] = {}
    backends: dict[str, Callable[[], Lake]] = {"delta-rs": DeltaRsLake, "delta-spark": lambda: lake}
    for name, make in backends.items():
        runs[name] = (lake_scenario(spark, make(), tmp_path / name, name == "delta-spark"),
                      tmp_path / name)
    (rs_results, rs_root), (ds_results, ds_root) = runs["delta-rs"], runs["delta-spark"]
    assert rs_results == ds_results == [True, False, True, True]
    sql = "select * from t order by id"
    rs_rows: list[dict[str, Any]] = delta_rows(rs_root / "raw", sql)
    assert rs_rows and delta_rows(ds_root / "raw", sql) == rs_rows
    assert table_facts(ds_root / "raw") == table_facts(rs_root / "raw")
    for app_id in ("ingest", "empty"):
        versions = {DeltaTable(str(root / "raw")).transaction_version(app_id)
                    for root in (rs_root, ds_root)}
        assert len(versions) == 1 and None not in versions
