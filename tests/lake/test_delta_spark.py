"""The delta-spark backend, as far as it runs without Delta's JARs (it runs on clusters)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from snap_spark.lake import DeltaRsLake, DeltaSparkLake, Lake, get_lake
from snap_spark.lake.delta_spark import (
    TIMESTAMP_TYPE_CONF,
    TXN_APP_ID_CONF,
    TXN_VERSION_CONF,
    _dml_transaction,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def restore_timestamp_conf(spark: SparkSession):  # type: ignore[no-untyped-def]
    previous = spark.conf.get(TIMESTAMP_TYPE_CONF, None)
    yield
    if previous is None:
        spark.conf.unset(TIMESTAMP_TYPE_CONF)
    else:
        spark.conf.set(TIMESTAMP_TYPE_CONF, previous)


@pytest.mark.usefixtures("restore_timestamp_conf")
def test_get_lake_picks_delta_spark_when_the_extension_is_loaded(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("snap_spark.session.has_delta_spark", lambda _spark: True)
    chosen = get_lake(spark)
    assert isinstance(chosen, DeltaSparkLake) and isinstance(chosen, Lake)
    assert chosen.name == "delta-spark"
    # Delta writes microsecond timestamps, not Spark's default INT96
    assert spark.conf.get(TIMESTAMP_TYPE_CONF) == "TIMESTAMP_MICROS"


def test_idempotent_merge_settings_are_scoped(spark: SparkSession) -> None:
    with _dml_transaction(spark, ("fold", 4)):
        assert spark.conf.get(TXN_APP_ID_CONF) == "fold"
        assert spark.conf.get(TXN_VERSION_CONF) == "4"
    assert spark.conf.get(TXN_APP_ID_CONF, None) is None
    assert spark.conf.get(TXN_VERSION_CONF, None) is None
    with _dml_transaction(spark, None):
        assert spark.conf.get(TXN_APP_ID_CONF, None) is None


@pytest.mark.usefixtures("restore_timestamp_conf")
def test_txn_version_reads_any_delta_table(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    assert DeltaRsLake().append(spark.range(3), path, app_id="q", version=5)
    assert DeltaSparkLake(spark).txn_version(path, "q") == 5
    assert DeltaSparkLake(spark).txn_version(path, "other") is None


def test_staged_files_read_back_as_the_rows_delta_spark_appends(
    spark: SparkSession, tmp_path: Path
) -> None:
    """What ``DeltaSparkLake.add_files`` hands to Delta's writer: the landed rows, partition
    column included, in the table's column order (the append itself needs Delta's JARs)."""
    import datetime as dt

    import pyarrow as pa

    from snap_spark.lake.delta_spark import staged_frame
    from snap_spark.lake.files import PartitionedFileWriter
    from snap_spark.pipeline.land import table_arrow_schema
    from snap_spark.schemas.tables import MESSAGES

    schema = table_arrow_schema("messages")
    rows = [{**{f.name: None for f in schema}, "ingest_id": "i", "source_file": "f",
             "file_key": "k", "line_no": n, "has_sig": False, "verdict": "valid",
             "event_date": dt.date(2026, 2, 4 + n % 2)}
            for n in range(1, 6)]
    writer = PartitionedFileWriter(str(tmp_path), schema, ["event_date"])
    writer.write(pa.RecordBatch.from_pylist(rows, schema=schema))
    files = writer.close()
    assert len(files) == 2
    df = staged_frame(spark, str(tmp_path), files, MESSAGES)
    assert df.columns == MESSAGES.fieldNames()
    got = sorted((r["line_no"], r["event_date"]) for r in df.collect())
    assert got == [(r["line_no"], r["event_date"]) for r in rows]
    assert staged_frame(spark, str(tmp_path), [], MESSAGES).count() == 0
