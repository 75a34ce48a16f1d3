"""The lake's tables for notebooks and ad-hoc queries: Spark temp views, or Arrow and pandas
read by delta-rs for people without Spark.

Every table snap-spark writes (``snap_spark.schemas.tables.TABLES``) is looked for under the
lake folder; the ones present are offered, the absent ones named, nothing fails because a
job has not run yet.

Examples (after ``make run``)::

    from snap_spark.views import lake_tables, read_table, register_views

    register_views(spark, "data/lake")           # ['messages', 'raw_messages', 'tasks', ...]
    spark.sql("select error_name, count(*) from messages group by 1").show()

    lake_tables("data/lake")["agent_cards"]      # False until jobs/ingest_nostr.py ran
    read_table("data/lake", "tasks", columns=["task_id", "state"], as_pandas=True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from snap_spark.files import storage

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession


def _known() -> list[str]:
    from snap_spark.schemas.tables import TABLES

    return sorted(TABLES)


def lake_tables(lake_dir: str) -> dict[str, bool]:
    """Every table snap-spark writes, and whether ``lake_dir`` holds it.

    Examples:
        >>> tables = lake_tables("/nowhere/lake")
        >>> tables["messages"], "agent_cards" in tables
        (False, True)
    """
    from snap_spark.lake import table_present

    return {name: table_present(storage.join(lake_dir, name)) for name in _known()}


def register_views(spark: SparkSession, lake_dir: str, prefix: str = "", *,
                   local_rows: int | None = None) -> list[str]:
    """Register each table the lake holds as a Spark temp view named ``prefix + table``;
    returns the view names, sorted. Absent tables get no view.

    Each view holds the version its table had when registered: call this again to see
    later commits. A table of at most ``local_rows`` rows (default: the ``read_rows`` of
    :func:`snap_spark.common.placement.limits`, 100,000) is read once, on the driver by
    delta-rs, and queried in memory; a larger one stays a lazy read by the session's Delta
    backend (:func:`snap_spark.lake.get_lake`; :func:`snap_spark.lake.read_frame`). On a
    small lake, ``notebooks/explore_lake.ipynb`` runs its queries far faster this way than
    with Spark reads of the tables at each query (docs/speed.md, *Figures behind the code*).

    Example::

        register_views(spark, "data/lake")
        spark.sql("select state, count(*) from tasks group by state").show()
    """
    from snap_spark.lake import read_frame

    names = []
    for name in _known():
        read = read_frame(spark, storage.join(lake_dir, name), local_rows=local_rows, cache=False)
        if read is not None:
            read[0].createOrReplaceTempView(prefix + name)
            names.append(prefix + name)
    return names


def read_table(lake_dir: str, name: str, *, columns: Sequence[str] | None = None,
               version: int | None = None, as_pandas: bool = False) -> pa.Table | Any:
    """One table (``columns`` only, at ``version`` when given) as an Arrow table, or a
    pandas DataFrame with ``as_pandas``, read by delta-rs: no Spark needed.

    Raises:
        ValueError: ``name`` is not a table snap-spark writes.
        FileNotFoundError: the lake does not hold it (yet).
    """
    from snap_spark.lake import read_arrow

    if name not in _known():
        raise ValueError(f"{name!r} is not a snap-spark table (one of {', '.join(_known())})")
    arrow = read_arrow(storage.join(lake_dir, name), columns, version)
    if arrow is None:
        raise FileNotFoundError(f"no {name} table under {lake_dir} (yet): run the job that "
                                "writes it")
    return arrow.to_pandas() if as_pandas else arrow
