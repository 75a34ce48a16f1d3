"""Parquet data files, statistics, partition encoding and the delta-rs commit, without Spark."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql.types import (
    DateType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from snap_spark.lake import LakeSchemaError
from snap_spark.lake.common import marker_write_id, table_uri
from snap_spark.lake.delta_rs import commit_files, write_committed
from snap_spark.lake.files import (
    FileStats,
    PartitionedFileWriter,
    escape_path_name,
    partition_folder,
    partition_string,
    unescape_path_name,
)
from snap_spark.lake.schema import (
    check_delta_compatible,
    check_partition_columns,
    same_columns,
    to_arrow,
)
from tests.lake.helpers import delta_rows

UTC = dt.UTC

SCHEMA = StructType(
    [
        StructField("id", LongType(), False),
        StructField("sender", StringType()),
        StructField("received_at", TimestampType()),
        StructField("day", DateType()),
    ]
)


def _batch(ids: list[int], days: list[dt.date | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "id": ids,
            "sender": [f"agent-{i % 3}" if i % 5 else None for i in ids],
            "received_at": [dt.datetime(2024, 5, 1, 12, 0, 0, i, tzinfo=UTC) for i in ids],
            "day": days,
        },
        schema=to_arrow(SCHEMA),
    )


@pytest.mark.parametrize(
    "raw",
    ["2024-05-01", "a b", "a:b", "a/b=c", "100%", "é", "x#y?z", "__odd__", "\x01tab\t"],
)
def test_hive_escaping_round_trips(raw: str) -> None:
    escaped = escape_path_name(raw)
    assert "/" not in escaped and "=" not in escaped and ":" not in escaped
    assert unescape_path_name(escaped) == raw


def test_partition_strings_follow_the_delta_protocol() -> None:
    assert partition_string(dt.date(2024, 5, 1)) == "2024-05-01"
    assert partition_string(-3) == "-3"
    assert partition_string(False) == "false"
    assert partition_string("") is None
    assert partition_string(None) is None
    with pytest.raises(TypeError):
        partition_string(dt.datetime(2024, 5, 1, tzinfo=UTC))
    assert partition_folder(["day"], [None]) == "day=__HIVE_DEFAULT_PARTITION__"


def test_arrow_schema_is_nullable_with_utc_microseconds() -> None:
    arrow = to_arrow(SCHEMA)
    assert arrow.field("received_at").type == pa.timestamp("us", tz="UTC")
    assert all(field.nullable for field in arrow)


def test_schema_rules() -> None:
    check_delta_compatible(SCHEMA)
    with pytest.raises(LakeSchemaError, match="timestamp_ntz"):
        check_delta_compatible(StructType([StructField("t", TimestampNTZType())]))
    with pytest.raises(LakeSchemaError, match="case"):
        check_delta_compatible(
            StructType([StructField("Id", LongType()), StructField("id", LongType())])
        )
    with pytest.raises(LakeSchemaError, match="timestamp"):
        check_partition_columns(SCHEMA, ["received_at"])
    with pytest.raises(LakeSchemaError, match="not a column"):
        check_partition_columns(SCHEMA, ["nope"])
    assert check_partition_columns(SCHEMA, ("day",)) == ["day"]
    reordered = StructType(list(reversed(SCHEMA.fields)))
    assert same_columns(SCHEMA, reordered)
    assert not same_columns(SCHEMA, StructType(SCHEMA.fields[:3]))


def test_table_uri_normalises_local_paths(tmp_path: Path) -> None:
    assert table_uri(f"file://{tmp_path}/t/") == f"{tmp_path}/t"
    assert table_uri("s3://bucket/lake/t") == "s3://bucket/lake/t"


def test_stats_cover_nulls_bounds_and_long_strings() -> None:
    table = pa.table(
        {
            "n": pa.array([3, None, -2], pa.int64()),
            "x": pa.array([0.5, float("nan"), 1.0]),
            "s": pa.array(["b" * 40, "a", None]),
            "at": pa.array([5, 1, None], pa.timestamp("us", tz="UTC")),
            "tags": pa.array([["a"], [], None], pa.list_(pa.string())),
        }
    )
    stats = FileStats(table.schema)
    stats.update(table.slice(0, 2))
    stats.update(table.slice(2))
    parsed = json.loads(stats.to_json())
    assert parsed["numRecords"] == 3
    assert parsed["nullCount"] == {"n": 1, "x": 0, "s": 1, "at": 1}
    assert parsed["minValues"] == {"n": -2, "s": "a", "at": "1970-01-01T00:00:00.000001Z"}
    # a NaN makes float bounds unusable; a 40-char max is not stored truncated (it would lie)
    assert parsed["maxValues"] == {"n": 3, "at": "1970-01-01T00:00:00.000005Z"}


def test_partitioned_writer_splits_batches_and_commits(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    day1, day2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
    writer = PartitionedFileWriter(uri, to_arrow(SCHEMA), ["day"], file_prefix="part-00001")
    writer.write(_batch([1, 2, 3], [day1, day2, None]))
    writer.write(_batch([4], [day1]))
    files = writer.close()
    assert sorted(f.partition_values["day"] or "" for f in files) == [
        "",
        "2024-05-01",
        "2024-05-02",
    ]
    assert sum(f.num_records for f in files) == 4
    for data_file in files:  # partition columns are not stored in the data files
        on_disk = pq.read_schema(tmp_path / "t" / data_file.path)
        assert on_disk.names == ["id", "sender", "received_at"]

    assert commit_files(uri, files, SCHEMA, ["day"], app_id="unit", version=0, write_id="w0")
    table = DeltaTable(uri)
    assert table.metadata().partition_columns == ["day"]
    assert table.transaction_version("unit") == 0
    rows = delta_rows(uri, "select * from t order by id")
    assert [r["id"] for r in rows] == [1, 2, 3, 4]
    assert [r["day"] for r in rows] == [day1, day2, None, day1]
    assert rows[0]["received_at"] == dt.datetime(2024, 5, 1, 12, 0, 0, 1, tzinfo=UTC)
    assert write_committed(uri, "w0", -1)
    assert marker_write_id(table.history(1)[0]["userMetadata"]) == "w0"


def test_commit_refuses_a_transaction_already_committed(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    first = PartitionedFileWriter(uri, to_arrow(SCHEMA), [])
    first.write(_batch([1], [None]))
    assert commit_files(uri, first.close(), SCHEMA, [], app_id="a", version=3, write_id="w1")
    # a writer that checked before the first one committed must not commit again
    second = PartitionedFileWriter(uri, to_arrow(SCHEMA), [])
    second.write(_batch([2], [None]))
    files = second.close()
    assert not commit_files(uri, files, SCHEMA, [], app_id="a", version=3, write_id="w2")
    assert not commit_files(uri, files, SCHEMA, [], app_id="a", version=2, write_id="w2")
    assert DeltaTable(uri).version() == 0
    assert not write_committed(uri, "w2", 0)


def test_commit_rejects_a_changed_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    writer = PartitionedFileWriter(uri, to_arrow(SCHEMA), [])
    writer.write(_batch([1], [None]))
    files = writer.close()
    assert commit_files(uri, files, SCHEMA, [], app_id="a", version=0, write_id="w1")
    narrower = StructType(SCHEMA.fields[:2])
    with pytest.raises(LakeSchemaError, match="changed while writing"):
        commit_files(uri, [], narrower, [], app_id="a", version=1, write_id="w2")
    with pytest.raises(LakeSchemaError, match="partitioned"):
        commit_files(uri, [], SCHEMA, ["day"], app_id="a", version=1, write_id="w3")


def test_discard_removes_written_files(tmp_path: Path) -> None:
    writer = PartitionedFileWriter(str(tmp_path / "t"), to_arrow(SCHEMA), ["day"])
    writer.write(_batch([1, 2], [dt.date(2024, 5, 1), None]))
    writer.discard()
    assert not [p for p in (tmp_path / "t").rglob("*.parquet")]
