"""``Lake.commit`` of keys (a :class:`DataCommit` with ``keys``) on both backends: the rows
of some keys replaced by staged files in one commit, every other row untouched; tables read
back with delta-rs."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    DateType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from snap_spark.lake import DataCommit, Lake, LakeSchemaError, PartitionedFileWriter, to_arrow
from snap_spark.lake.common import marker_write_id
from snap_spark.lake.delta_rs import DeltaRsLake
from snap_spark.lake.files import DataFile
from tests.lake.helpers import delta_rows, delta_spark_lake, table_facts

pytestmark = pytest.mark.spark

UTC = dt.UTC
AT = dt.datetime(2026, 2, 4, 1, 2, 3, 456789, tzinfo=UTC)
SCHEMA = StructType([StructField("task_id", StringType()), StructField("seq", LongType()),
                     StructField("state", StringType()), StructField("at", TimestampType()),
                     StructField("day", DateType())])
PARTITIONS = ["day"]
D1, D2 = dt.date(2026, 2, 4), dt.date(2026, 2, 5)


@pytest.fixture(params=["delta-rs", "delta-spark"])
def lake(request: pytest.FixtureRequest, spark: SparkSession) -> Lake:
    if request.param == "delta-rs":
        return DeltaRsLake()
    return delta_spark_lake(spark)


def row(task: str, seq: int, state: str, day: dt.date = D1) -> dict[str, Any]:
    return {"task_id": task, "seq": seq, "state": state,
            "at": AT + dt.timedelta(seconds=seq), "day": day}


def stage(lake: Lake, path: Path, rows: list[dict[str, Any]]) -> tuple[str, list[DataFile]]:
    """Write ``rows`` where ``lake`` wants files for ``path``, as a batch job's tasks do."""
    root = lake.data_root(str(path), str(path.parent / "_staging" / uuid.uuid4().hex))
    schema = to_arrow(SCHEMA)
    writer = PartitionedFileWriter(root, schema, PARTITIONS,
                                   file_prefix=f"test-{uuid.uuid4().hex[:8]}")
    if rows:
        writer.write(pa.RecordBatch.from_pylist(rows, schema=schema))
    return root, writer.close()


def replace_rows(spark: SparkSession, lake: Lake, path: Path, keys: list[str],
            rows: list[dict[str, Any]], version: int, app_id: str = "refresh",
            arrow: bool = False) -> bool:
    """Replace the rows of ``keys`` by ``rows``; the keys as a DataFrame, or with ``arrow``
    as a ``pyarrow.Table`` gathered on the driver."""
    root, files = stage(lake, path, rows)
    frame = (pa.table({"task_id": pa.array(keys, pa.string())}) if arrow
             else spark.createDataFrame([(k,) for k in keys], "task_id string"))
    return lake.commit(spark, DataCommit(path=str(path), root=root, files=files, keys=frame,
                                         schema=SCHEMA, partition_by=PARTITIONS,
                                         app_id=app_id, version=version,
                                         commit_info={"job": "test"}))


def content(path: Path) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) for r in
            delta_rows(path, "select task_id, seq, state, at, day from t order by task_id, seq")]


@pytest.mark.parametrize("arrow", [False, True], ids=["keys-frame", "keys-arrow"])
def test_replace_keys_replaces_only_the_named_keys(spark: SparkSession, lake: Lake,
                                                   tmp_path: Path, arrow: bool) -> None:
    path = tmp_path / "lake" / "tasks"

    def replace(*args: Any, **kwargs: Any) -> bool:
        return replace_rows(*args, **kwargs, arrow=arrow)

    first = [row("a", 0, "submitted"), row("a", 1, "working", D2), row("b", 0, "working"),
             row("c", 0, "completed", D2)]
    assert replace(spark, lake, path, ["a", "b", "c"], first, 1)  # creates the table
    assert content(path) == [tuple(r.values()) for r in first]
    assert DeltaTable(str(path)).metadata().partition_columns == PARTITIONS

    # a re-folded (one event fewer, new state), b gone, c untouched, d new; "zz" unknown
    second = [row("a", 0, "completed", D2), row("d", 0, "working"), row("d", 1, "failed", D2)]
    before = DeltaTable(str(path)).version()
    assert replace(spark, lake, path, ["a", "b", "d", "zz", "a", None], second, 2)  # type: ignore[list-item]
    table = DeltaTable(str(path))
    assert table.version() == before + 1  # one commit
    assert content(path) == [tuple(r.values()) for r in
                             [second[0], first[3], second[1], second[2]]]
    entry = table.history(1)[0]
    assert marker_write_id(entry.get("userMetadata"))
    assert json.loads(entry["userMetadata"])["info"] == {"job": "test"}
    assert table.transaction_version("refresh") == 2
    assert table_facts(path)["protocol"] == (1, 2)
    if lake.name == "delta-rs":  # every file on disk is one the log names (added or removed)
        listed = {Path(p).name for p in table.file_uris()}
        on_disk = {p.name for p in path.rglob("*.parquet")}
        assert on_disk <= listed | {Path(p).name for p in _removed(table)}

    # the same transaction again: nothing changes; a later one with the same rows: same rows
    assert not replace(spark, lake, path, ["a"], [], 2)
    assert content(path) == [tuple(r.values()) for r in
                             [second[0], first[3], second[1], second[2]]]
    assert DeltaTable(str(path)).version() == before + 1
    assert replace(spark, lake, path, ["a", "d"], second, 3)
    assert len(content(path)) == 4

    # many keys (a join, not a predicate), most unknown; no rows: those keys disappear
    many = [f"k{i}" for i in range(5000)] + ["d"]
    assert replace(spark, lake, path, many, [], 4)
    assert content(path) == [tuple(r.values()) for r in [second[0], first[3]]]

    # no keys, no rows; then keys the table does not hold: only the transaction is recorded
    assert replace(spark, lake, path, [], [], 5)
    assert DeltaTable(str(path)).transaction_version("refresh") == 5
    assert replace(spark, lake, path, ["zz", "yy"], [], 6)
    assert DeltaTable(str(path)).transaction_version("refresh") == 6
    assert not replace(spark, lake, path, ["zz"], [], 6)
    assert len(content(path)) == 2


def _removed(table: DeltaTable) -> list[str]:
    """Files earlier versions held (removed by later commits)."""
    names: list[str] = []
    for version in range(table.version() + 1):
        names += DeltaTable(table.table_uri, version=version).file_uris()
    return names


def test_replace_keys_refuses_keys_of_other_types(spark: SparkSession, lake: Lake,
                                                  tmp_path: Path) -> None:
    path = tmp_path / "tasks"
    assert replace_rows(spark, lake, path, ["a"], [row("a", 0, "working")], 1)
    root, files = stage(lake, path, [])
    wrong = spark.createDataFrame([(1,)], StructType([StructField("task_id", LongType())]))
    unknown = spark.createDataFrame([("x",)], StructType([StructField("nope", StringType())]))
    wrong_arrow = pa.table({"task_id": pa.array([1], pa.int64())})
    for keys in (wrong, unknown, wrong_arrow):
        with pytest.raises(LakeSchemaError):
            lake.commit(spark, DataCommit(path=str(path), root=root, files=files, keys=keys,
                                          schema=SCHEMA, partition_by=PARTITIONS,
                                          app_id="x", version=1))
    assert content(path) == [tuple(row("a", 0, "working").values())]


def test_both_backends_replace_to_equal_tables(spark: SparkSession, tmp_path: Path) -> None:
    lakes: list[Lake] = [DeltaRsLake(), delta_spark_lake(spark)]
    for lake in lakes:
        path = tmp_path / lake.name / "tasks"
        replace_rows(spark, lake, path, ["a", "b"], [row("a", 0, "working"),
                                                     row("b", 0, "failed")], 1)
        replace_rows(spark, lake, path, ["a", "c"], [row("a", 0, "completed", D2),
                                                     row("c", 0, "working")], 2, arrow=True)
    rs, ds = (tmp_path / name / "tasks" for name in ("delta-rs", "delta-spark"))
    assert content(rs) == content(ds) == [tuple(r.values()) for r in [
        row("a", 0, "completed", D2), row("b", 0, "failed"), row("c", 0, "working")]]
    assert table_facts(rs) == table_facts(ds)


#: The child of the kill test: a run (its marker written, as every run's is) replaces the
#: rows of key "b" on the delta-rs backend, and kills itself (SIGKILL, no clean-up of any
#: kind) at the instant its commit would start: the copies of the files that lose rows are
#: written, not committed. Where the kill falls is chosen by wrapping ``commit_files``; the
#: commit itself is the real one.
KILLED_CHILD = r"""
import os, signal, sys
import pyarrow as pa
from snap_spark.lake import DataCommit, PartitionedFileWriter, to_arrow
from snap_spark.lake import delta_rs
from snap_spark.lake.delta_rs import DeltaRsLake
from snap_spark.pipeline.runs import file_prefix, run_marker
from tests.lake.test_replace_keys import PARTITIONS, SCHEMA, row

lake, ingest_id = sys.argv[1], sys.argv[2]
path = os.path.join(lake, "tasks")
with run_marker(lake, ingest_id):
    writer = PartitionedFileWriter(path, to_arrow(SCHEMA), PARTITIONS,
                                   file_prefix=file_prefix(ingest_id, "tasks"))
    writer.write(pa.RecordBatch.from_pylist([row("b", 9, "failed")],
                                            schema=to_arrow(SCHEMA)))
    files = writer.close()
    delta_rs.commit_files = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
    DeltaRsLake().commit(None, DataCommit(
        path=path, root=path, files=files, schema=SCHEMA, partition_by=PARTITIONS,
        app_id="refresh", version=1, keys=pa.table({"task_id": ["b"]}),
        file_prefix=file_prefix(ingest_id, "tasks-kept")))
print("not killed")
"""


def test_a_run_killed_while_replacing_keys_leaves_only_files_its_sweep_removes(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 47: replacing keys on delta-rs was a delta-rs merge, which names the files it
    writes itself (``part-00000-<uuid>``): a run killed during it left Parquet files no log
    references and no sweep could tell from another program's. The copies are now written
    under the run's name prefix, so ``lake clean --dry-run`` names them and the sweep
    removes them, leaving the table as it was."""
    import os
    import subprocess
    import sys

    from snap_spark.cli import main as cli_main

    lake_dir = tmp_path / "lake"
    path = lake_dir / "tasks"
    rs = DeltaRsLake()
    # a and b share one file: replacing b copies that file with a's rows only
    root, files = stage(rs, path, [row("a", 1, "working"), row("b", 2, "working")])
    rs.commit(spark, DataCommit(path=str(path), root=root, files=files, schema=SCHEMA,
                                partition_by=PARTITIONS, app_id="load", version=1))
    root, files = stage(rs, path, [row("c", 3, "working", D2)])
    rs.commit(spark, DataCommit(path=str(path), root=root, files=files, schema=SCHEMA,
                                partition_by=PARTITIONS, app_id="load", version=2))
    before, on_disk = content(path), set(path.rglob("*.parquet"))

    ingest_id = uuid.uuid4().hex
    child = subprocess.run([sys.executable, "-c", KILLED_CHILD, str(lake_dir), ingest_id],
                           capture_output=True, cwd=Path(__file__).parents[2],
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
                           timeout=120)
    assert child.returncode == -9, child.stdout.decode() + child.stderr.decode()

    left = set(path.rglob("*.parquet")) - on_disk
    names = sorted(p.name for p in left)
    tag = ingest_id[:16]
    assert any(n.startswith(f"part-{tag}-tasks-kept-") for n in names), names
    assert all(n.startswith(f"part-{tag}-") for n in names), names
    assert content(path) == before  # nothing committed

    capsys.readouterr()
    assert cli_main(["lake", "clean", "--lake", str(lake_dir), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert all(f"would remove {p}" in listed for p in left), listed
    assert set(path.rglob("*.parquet")) == on_disk | left  # a dry run removes nothing
    assert cli_main(["lake", "clean", "--lake", str(lake_dir)]) == 0
    assert set(path.rglob("*.parquet")) == on_disk
    assert content(path) == before
