"""snap_spark.views on a lake the batch job wrote: temp views and delta-rs reads agree with
each other and with the job's own counts; absent tables are named, never fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from snap_spark.pipeline.batch_job import run
from snap_spark.samples.messages import SampleConfig, write_sample
from snap_spark.views import lake_tables, read_table, register_views

pytestmark = [pytest.mark.spark]


def test_views_and_delta_rs_reads_agree(spark: Any, tmp_path: Path) -> None:
    """Views, delta-rs reads and the job's counts agree; the views read on the driver (small
    tables) equal those read by delta-spark (the backend of ``make notebook``;
    ``local_rows=-1``) in columns, types and rows; a view holds the version it was
    registered at until it is registered again."""
    from deltalake import DeltaTable

    from tests.lake.helpers import use_backend

    archive = tmp_path / "traffic.jsonl"
    write_sample(SampleConfig(agents=4, messages=600, seed=3), str(archive))
    lake = str(tmp_path / "lake")
    assert not any(lake_tables(lake).values())
    result = run(spark, [str(archive)], lake)
    present = {name for name, here in lake_tables(lake).items() if here}
    assert present == {"raw_messages", "messages", "ingested_files", "task_events", "tasks"}
    views = register_views(spark, lake, prefix="t_")
    assert views == sorted(f"t_{name}" for name in present)
    counted = {row["verdict"]: row["n"] for row in spark.sql(
        "select verdict, count(*) as n from t_messages group by verdict").collect()}
    assert counted == {"valid": result.valid, "rejected": result.rejected}
    frame = read_table(lake, "messages", columns=["verdict", "error_code"], as_pandas=True)
    assert list(frame.columns) == ["verdict", "error_code"]
    assert frame["verdict"].value_counts().to_dict() == counted
    tasks = read_table(lake, "tasks")
    assert tasks.num_rows == spark.sql("select count(*) from t_tasks").first()[0] > 0
    with pytest.raises(FileNotFoundError, match="agent_cards"):
        read_table(lake, "agent_cards")
    with pytest.raises(ValueError, match="not a snap-spark table"):
        read_table(lake, "nope")

    with use_backend(spark, "delta-spark"):
        read = register_views(spark, lake, prefix="s_", local_rows=-1)
    assert [v[2:] for v in views] == [v[2:] for v in read]
    for view in views:
        name = view[2:]
        mine, theirs = spark.table(f"t_{name}"), spark.table(f"s_{name}")
        assert mine.schema == theirs.schema, name
        rows = DeltaTable(f"{lake}/{name}").to_pyarrow_table().num_rows
        got, wanted = sorted(mine.collect(), key=repr), sorted(theirs.collect(), key=repr)
        assert got == wanted and len(got) == rows > 0, name
    more = tmp_path / "more.jsonl"
    write_sample(SampleConfig(agents=4, messages=50, seed=6), str(more))
    run(spark, [str(more)], lake)
    assert spark.table("t_messages").count() == spark.table("s_messages").count() == 600
    register_views(spark, lake, prefix="t_")
    assert spark.table("t_messages").count() == 650

