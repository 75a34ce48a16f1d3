"""The batch job on each Delta backend: delta-rs and delta-spark write equal tables.

Both lakes are read back with delta-rs's own engine, so the comparison does not go through
either writer's reader. Only per-run columns (``ingest_id``, ``ingest_time``) may differ.
"""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from snap_spark.pipeline.batch_job import run
from snap_spark.samples.messages import SampleConfig, generate
from tests.jobs import files_under
from tests.lake.helpers import delta_rows, delta_spark_lake, table_facts, use_backend

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLES = ("raw_messages", "messages")
PER_RUN = ("ingest_id", "ingest_time")


def rows(lake: Path, table: str) -> list[dict[str, Any]]:
    """A table's rows in input order, per-run columns dropped."""
    got = delta_rows(lake / table)
    for row in got:
        for column in PER_RUN:
            assert row.pop(column) is not None
    return sorted(got, key=lambda r: (r["source_file"], r["line_no"]))


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,200 labelled lines with attacks and replays, over a plain and a .gz file."""
    folder = tmp_path_factory.mktemp("sample")
    lines = [line for line, _ in generate(SampleConfig(agents=6, messages=1200, seed=5,
                                                       attack_share=0.3))]
    (folder / "a.jsonl").write_bytes(b"\n".join(lines[:700]) + b"\n")
    with gzip.open(folder / "b.jsonl.gz", "wb") as f:
        f.write(b"\n".join(lines[700:]) + b"\n")
    return folder


@pytest.fixture(scope="module")
def lakes(spark: SparkSession, sample: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> dict[str, Any]:
    """The job run once per backend, each into its own lake (``{"missing": why}`` without
    Delta's JARs: the tests then fail with that message, a fixture would only error)."""
    try:
        delta_spark_lake(spark)
    except pytest.fail.Exception as missing:
        return {"missing": str(missing)}
    out: dict[str, Any] = {}
    for backend in ("delta-rs", "delta-spark"):
        lake = tmp_path_factory.mktemp(backend)
        with use_backend(spark, backend):
            out[backend] = {"lake": lake, "result": run(spark, [str(sample)], str(lake))}
    return out


def ran(lakes: dict[str, Any]) -> dict[str, Any]:
    if "missing" in lakes:
        pytest.fail(lakes["missing"], pytrace=False)
    return lakes


def test_the_job_writes_equal_tables_on_both_backends(spark: SparkSession,
                                                      lakes: dict[str, Any]) -> None:
    lakes = ran(lakes)
    rs, ds = lakes["delta-rs"], lakes["delta-spark"]
    assert ds["result"].lines_read == 1200
    assert ds["result"].rejected > 0 and ds["result"].counts.get(2006)  # attacks, replays
    same = {"seconds": 0.0}
    assert dataclasses.replace(ds["result"], **same) == dataclasses.replace(rs["result"], **same)
    for table in TABLES:
        expected = rows(rs["lake"], table)
        assert len(expected) == 1200
        assert rows(ds["lake"], table) == expected, table
        assert table_facts(ds["lake"] / table) == table_facts(rs["lake"] / table)
    assert table_facts(ds["lake"] / "messages")["partition_columns"] == ["event_date"]
    assert table_facts(ds["lake"] / "messages")["protocol"] == (1, 2)
    # plain tables take the tasks' files in place on delta-spark too (a Delta commit of add
    # actions, written by delta-rs): each row is written once, and Delta itself reads them
    for table in TABLES:
        path = ds["lake"] / table
        assert DeltaTable(str(path)).history(1)[0].get("engineInfo", "").startswith("delta-rs")
        assert spark.read.format("delta").load(str(path)).count() == 1200
    # nothing staged is left behind
    assert not files_under(ds["lake"] / "_staging")


def test_a_rerun_on_delta_spark_adds_nothing(
    spark: SparkSession, sample: Path, lakes: dict[str, Any],
    capsys: pytest.CaptureFixture[str]
) -> None:
    lake = ran(lakes)["delta-spark"]["lake"]
    versions = [DeltaTable(str(lake / t)).version() for t in TABLES]
    with use_backend(spark, "delta-spark"):
        again = run(spark, [str(sample)], str(lake))
    assert "backend=delta-spark" in capsys.readouterr().err
    assert (again.files_seen, again.files_processed, again.lines_read) == (2, 0, 0)
    assert [DeltaTable(str(lake / t)).version() for t in TABLES] == versions


@pytest.mark.parametrize("backend", ["delta-rs", "delta-spark"])
def test_commits_record_the_settings_that_decided_the_verdicts(
        lakes: dict[str, Any], backend: str) -> None:
    from deltalake import DeltaTable

    from snap_spark.lake.common import marker_info
    from snap_spark.settings import VerifySettings

    for table in ("raw_messages", "messages"):
        history = DeltaTable(str(ran(lakes)[backend]["lake"] / table)).history()
        infos = [marker_info(entry.get("userMetadata")) for entry in history]
        landed = [info for info in infos if info and info.get("job") == "verify_messages"]
        assert len(landed) == 1, (table, infos)
        assert landed[0]["settings"] == VerifySettings().validated().as_record()
        assert landed[0]["files"] == 2 and len(landed[0]["ingest_id"]) == 32
        if table == "messages":  # decided against no table yet (a fresh lake)
            assert landed[0]["replay_read_version"] == -1
