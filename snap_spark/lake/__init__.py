"""Delta tables for snap-spark: one small API (:class:`Lake`), two backends.

- ``delta-spark`` (:class:`~snap_spark.lake.delta_spark.DeltaSparkLake`) when the session
  has Delta Lake's extension (``io.delta:delta-spark`` JARs: fetched once by ``make setup``,
  or a cluster's own).
- ``delta-rs`` (:class:`~snap_spark.lake.delta_rs.DeltaRsLake`) otherwise, the JAR-free
  backend: Spark tasks write the Parquet files, the driver commits them with the
  ``deltalake`` package in one transaction.

The Spark setting ``spark.snap.lake.backend`` (``auto``, ``delta-rs``, ``delta-spark``) or
``get_lake(spark, backend=...)`` picks one explicitly.

Both keep tables plain Delta (reader/writer protocol 1/2, no deletion vectors, microsecond UTC
timestamps), so Spark, delta-rs, DuckDB and Polars all read them, and both make every commit
idempotent with an app transaction ``(app_id, version)`` such as ``(run id, 1)`` or
``(query id, batch id)``.

Jobs write a table's Parquet files themselves (Spark tasks with
:class:`PartitionedFileWriter` under :meth:`Lake.data_root`, or :func:`commit_rows` for a few
rows on the driver), then commit them with :func:`commit_data_files`: added, replacing the
whole table, or replacing the rows of some keys; whatever is not committed is deleted.

This package is the lake's whole public API (``__all__``): other modules import from
``snap_spark.lake``, never from its submodules.

Examples (committing files: :func:`commit_data_files`):
    >>> from snap_spark.lake import get_lake
    >>> lake = get_lake(spark, backend="delta-rs")
    >>> lake.name, lake.exists(str(tmp / "lake" / "messages"))
    ('delta-rs', False)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from snap_spark.lake.api import (
    DamagedTable,
    DataCommit,
    Lake,
    LakeError,
    LakeLocationError,
    LakeSchemaError,
    RowUpdates,
    VersionConflict,
)
from snap_spark.lake.common import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    LAKE_BACKEND_CONF,
    LAKE_BACKENDS,
    has_delta_spark,
    marker_info,
    table_uri,
)
from snap_spark.lake.delta_log import (
    committed_info,
    newest_info_with,
    rows_at_most,
    table_row_count,
    table_version,
)
from snap_spark.lake.delta_rs import distinct_rows, read_data_files, rows_added_since
from snap_spark.lake.files import DataFile, PartitionedFileWriter, delete_data_files
from snap_spark.lake.lease import CommitContention, HeldLease, check_held, commit_lease
from snap_spark.lake.schema import to_arrow
from snap_spark.lake.where import Where, col

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "DELTA_CATALOG",
    "DELTA_EXTENSION",
    "LAKE_BACKENDS",
    "LAKE_BACKEND_CONF",
    "CommitContention",
    "DamagedTable",
    "DataCommit",
    "DataFile",
    "HeldLease",
    "Lake",
    "LakeError",
    "LakeLocationError",
    "LakeSchemaError",
    "PartitionedFileWriter",
    "RowUpdates",
    "VersionConflict",
    "Where",
    "check_held",
    "check_table_location",
    "col",
    "commit_data_files",
    "commit_lease",
    "commit_rows",
    "committed_info",
    "delete_data_files",
    "distinct_rows",
    "get_lake",
    "has_delta_spark",
    "marker_info",
    "newest_info_with",
    "read_arrow",
    "read_data_files",
    "read_frame",
    "rows_added_since",
    "rows_at_most",
    "table_file_uris",
    "table_present",
    "table_row_count",
    "table_rows",
    "table_uri",
    "table_version",
    "to_arrow",
]


def get_lake(spark: SparkSession, backend: str | None = None) -> Lake:
    """The Delta backend to use on this session.

    ``backend`` (else the session's ``spark.snap.lake.backend`` setting, else ``auto``):
    ``auto`` is delta-spark when Delta's session extension is loaded, delta-rs otherwise;
    ``delta-rs`` and ``delta-spark`` choose one (delta-spark needs the extension).

    Raises:
        LakeError: an unknown backend name, or ``delta-spark`` on a session without Delta's
            extension.

    Examples:
        On a session that loads Delta's extension but sets ``spark.snap.lake.backend``
        to ``delta-rs`` (as the tests' session does):

        >>> has_delta_spark(spark), spark.conf.get(LAKE_BACKEND_CONF)
        (True, 'delta-rs')
        >>> get_lake(spark).name
        'delta-rs'
        >>> get_lake(spark, backend="auto").name, get_lake(spark, backend="delta-spark").name
        ('delta-spark', 'delta-spark')
        >>> get_lake(spark, backend="iceberg")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        snap_spark.lake.api.LakeError: unknown Delta backend 'iceberg' ...
    """
    from snap_spark.lake.delta_rs import DeltaRsLake
    from snap_spark.lake.delta_spark import DeltaSparkLake

    choice = backend if backend is not None else spark.conf.get(LAKE_BACKEND_CONF, None)
    choice = (choice or "auto").strip().lower()
    if choice not in LAKE_BACKENDS:
        raise LakeError(
            f"unknown Delta backend {choice!r} ({LAKE_BACKEND_CONF}): "
            f"choose one of {', '.join(LAKE_BACKENDS)}"
        )
    if choice == "delta-rs":
        return DeltaRsLake()
    if has_delta_spark(spark):
        return DeltaSparkLake(spark)
    if choice == "delta-spark":
        raise LakeError(
            "the delta-spark backend needs Delta Lake's session extension, and this session "
            "has none: run `make setup` to cache Delta's JARs, then start the session with "
            "snap_spark.runtime.session.build_session (or spark-submit --jars from "
            "`python -m snap_spark.runtime.maven_jars jars delta`)"
        )
    return DeltaRsLake()


#: Names of the data files snap-spark runs write (:func:`snap_spark.pipeline.runs.file_prefix`).
_RUN_FILE = re.compile(r"part-[0-9a-f]{16}-")


def check_table_location(path: str, schema: StructType, partition_by: Sequence[str] = ()
                         ) -> bool:
    """Refuse a location that cannot take this table, before anything is written.

    Returns ``True`` when ``path`` holds a Delta table with ``schema``'s columns and
    partitioning, ``False`` when there is nothing there yet (or an empty folder).

    Raises:
        LakeLocationError: ``path`` (or its parent lake) is a file, holds files but no
            Delta table (plain Parquet, anything else), or holds a Delta table of other
            columns or partitioning. Nothing is ever converted in place.

    Examples:
        >>> from snap_spark.schemas.tables import RAW_MESSAGES
        >>> check_table_location("/nowhere/lake/raw_messages", RAW_MESSAGES)
        False
    """
    from snap_spark.files import storage
    from snap_spark.lake.delta_log import latest_table, table_schema
    from snap_spark.lake.schema import describe_mismatch, nullable_schema, same_columns

    kind = storage.path_kind(path)
    if kind == "missing":
        return False
    if kind != "dir":
        raise LakeLocationError(f"{path} is a {kind}, not a table folder; nothing was written")
    table = latest_table(table_uri(path))
    if table is None:
        # data files of snap-spark runs (``part-<run tag>-...``) before a table's first
        # commit are another writer creating it (or a killed run's, cleaned later)
        found = [f for f in storage.list_files(path)
                 if not _RUN_FILE.match(f.rsplit("/", 1)[-1])][:3]
        if not found:
            return False
        raise LakeLocationError(
            f"{path} holds files but no Delta table (e.g. {found[0]}); snap-spark never "
            "converts a folder in place: choose another --lake; nothing was written")
    existing = table_schema(table)
    wanted = nullable_schema(schema)
    if not same_columns(existing, wanted):
        raise LakeLocationError(
            f"{path} is a Delta table of other columns ({describe_mismatch(existing, wanted)});"
            " nothing was written")
    partitions = list(table.metadata().partition_columns)
    if partitions != list(partition_by):
        raise LakeLocationError(
            f"{path} is partitioned by {partitions}, not {list(partition_by)}; nothing was "
            "written")
    return True


def commit_data_files(
    spark: SparkSession, lake: Lake, path: str, root: str, files: Sequence[DataFile], *,
    schema: StructType, partition_by: Sequence[str] = (), app_id: str, version: int,
    commit_info: Mapping[str, Any] | None = None, replace: bool = False,
    keys: DataFrame | pa.Table | None = None, updates: RowUpdates | None = None,
    read_version: int | None = None, file_prefix: str | None = None,
) -> bool:
    """Commit Parquet files written under ``root`` (:meth:`Lake.data_root`) to the table at
    ``path`` in one commit with the app transaction ``(app_id, version)``, and leave none of
    them behind uncommitted. Returns whether this call committed.

    The arguments make one :class:`DataCommit` for :meth:`Lake.commit`: the commit adds the
    files (with ``updates`` and ``read_version`` when given); with ``replace`` it replaces
    every row of the table; with ``keys`` it replaces the rows of those keys (the copies of
    files that lose rows are named after ``file_prefix``: :attr:`DataCommit.file_prefix`).
    The table is created (``schema``, partitioned by ``partition_by``) when absent.

    The files are deleted when the table already holds the transaction (``False``) and when
    the commit fails, before the error is raised, with one exception: on
    :class:`VersionConflict` (another writer committed since ``read_version``) they are
    kept, for the caller to decide again and commit them, or delete them
    (:func:`delete_data_files`).

    Raises:
        ValueError: ``replace`` with ``keys``, or ``updates``/``read_version`` with either
            (nothing committed, the files deleted).
        VersionConflict: the table moved past ``read_version`` (the files kept).
        LakeError: the commit was refused (other columns or partitioning, an update that
            finds no row, ...): nothing committed, the files deleted.

    Examples:
        >>> import pyarrow as pa
        >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
        >>> schema = StructType([StructField("id", StringType()), StructField("n", LongType())])
        >>> lake, path = get_lake(spark, backend="delta-rs"), str(tmp / "lake" / "counts")
        >>> root = lake.data_root(path, str(tmp / "lake" / "_staging" / "run1"))
        >>> def write(ids, n):  # what a job's tasks do
        ...     writer = PartitionedFileWriter(root, to_arrow(schema), [])
        ...     writer.write(pa.record_batch({"id": ids, "n": [n] * len(ids)}))
        ...     return writer.close()
        >>> files = write(["a", "b"], 1)
        >>> commit_data_files(spark, lake, path, root, files, schema=schema, app_id="run1",
        ...                   version=1)
        True
        >>> again = write(["a", "b"], 1)  # the same run once more: committed already
        >>> commit_data_files(spark, lake, path, root, again, schema=schema, app_id="run1",
        ...                   version=1)
        False
        >>> (tmp / "lake" / "counts" / again[0].path).exists()  # its files deleted
        False
        >>> keys = spark.createDataFrame([("b",)], "id string")  # the rows of b replaced
        >>> commit_data_files(spark, lake, path, root, write(["b"], 2), schema=schema,
        ...                   app_id="run2", version=1, keys=keys)
        True
        >>> sorted((row["id"], row["n"]) for row in table_rows(path))
        [('a', 1), ('b', 2)]
    """
    try:
        change = DataCommit(path=path, root=root, files=files, schema=schema,
                            partition_by=partition_by, app_id=app_id, version=version,
                            commit_info=commit_info, replace=replace, keys=keys,
                            updates=updates, read_version=read_version,
                            file_prefix=file_prefix)
        done = lake.commit(spark, change)
    except VersionConflict:
        raise  # the files stay: decided again, they are committed on the next attempt
    except BaseException:
        delete_data_files(root, files)
        raise
    if not done:
        delete_data_files(root, files)
    return done


def commit_rows(
    spark: SparkSession, lake: Lake, path: str, root: str, rows: Any, *,
    schema: StructType, file_prefix: str, app_id: str, version: int,
    commit_info: Mapping[str, Any] | None = None, keys: DataFrame | pa.Table | None = None,
) -> bool:
    """Write a few rows held on the driver (a ``pyarrow.RecordBatch`` of ``schema``) as
    Parquet files under ``root`` (:meth:`Lake.data_root`), then commit them to the
    unpartitioned table at ``path`` with :func:`commit_data_files`: appended, or with
    ``keys`` replacing the rows of those keys (files copied without those rows are named
    ``<file_prefix>-kept-...``). Returns whether it committed; the files are
    deleted when it did not.

    Example (with a session)::

        commit_rows(spark, lake, "/lake/ingested_files", root, batch,
                    schema=INGESTED_FILES, file_prefix="part-run1-f", app_id="run1",
                    version=1)   # False when run1 committed already
    """
    writer = PartitionedFileWriter(root, to_arrow(schema), [], file_prefix=file_prefix)
    try:
        writer.write(rows)
        files = writer.close()
    except BaseException:
        writer.discard()
        raise
    return commit_data_files(spark, lake, path, root, files, schema=schema, app_id=app_id,
                             version=version, commit_info=commit_info, keys=keys,
                             file_prefix=f"{file_prefix}-kept")


def read_arrow(path: str, columns: Sequence[str] | None = None, version: int | None = None,
               where: Any = None) -> Any:
    """A Delta table (``columns`` only, at ``version`` when given, the rows matching the
    ``pyarrow.compute`` expression ``where`` when given) as a ``pyarrow.Table`` read on the
    driver by delta-rs, whichever backend wrote it; ``None`` when there is no table. The
    files read are kept (:mod:`snap_spark.lake.file_cache`): reading the table again reads
    only the files added since.

    Examples:
        >>> read_arrow("/nowhere/lake/messages") is None
        True
    """
    from snap_spark.files import storage
    from snap_spark.lake.delta_log import table_at

    table = table_at(storage.delta_table_uri(path), version)
    if table is None:
        return None
    # the files of the table this process read before are not read again (file_cache)
    from snap_spark.lake.file_cache import scan_columns

    names = list(columns) if columns is not None else _schema_names(table)
    scanned = scan_columns(table, storage.delta_table_uri(path), list(dict.fromkeys(
        [*names, *_fields_named(where, _schema_names(table))])))
    if scanned is not None:
        return (scanned if where is None else scanned.filter(where)).select(names)
    # a table that cannot be read file by file
    if columns is None:
        return table.to_pyarrow_table(filters=where)
    # The dataset of only the columns read and filtered on: delta-rs attaches each file's
    # statistics to its fragment as an expression over every column of the schema it is
    # given, which on the whole schema cost more than the scan and grew with the files,
    # while a few columns cost little (docs/speed.md, *Figures behind the code*).
    import pyarrow as pa

    schema = pa.schema(table.schema().to_arrow())
    wanted = set(columns) | _fields_named(where, schema.names) | set(table.metadata()
                                                                     .partition_columns)
    dataset = table.to_pyarrow_dataset(schema=pa.schema(
        [field for field in schema if field.name in wanted]))
    return dataset.to_table(columns=list(columns), filter=where)


def read_frame(spark: SparkSession, path: str, version: int | None = None, *,
               local_rows: int | None = None, cache: bool = True
               ) -> tuple[DataFrame, int | None] | None:
    """A Delta table (at ``version`` when given, else the newest) as a Spark DataFrame and
    its row count, ``None`` when there is no table.

    A table of at most ``local_rows`` rows (default: the ``read_rows`` of
    :func:`snap_spark.common.placement.limits`) is read on the driver by delta-rs and handed to
    Spark as Arrow (a Spark read of a small table costs more in its jobs than its rows):
    every later query of the DataFrame runs on those rows in memory, with no read of the
    table's log or files (on a small lake this made the audit much faster: docs/speed.md,
    *Figures behind the code*). A larger one is read by the session's Delta backend
    (:func:`get_lake`); with ``cache`` it is kept in memory and on disk and counted at once, so
    that queries after the first do not read its files again; without, it stays a lazy read and
    its count is ``None``. Either way the frame holds the one version it was read at.
    """
    from pyspark import StorageLevel

    from snap_spark.files import storage

    uri = storage.delta_table_uri(path)
    if version is None:
        version = table_version(uri)
    if version < 0:
        return None
    if local_rows is None:
        from snap_spark.common.placement import limits

        local_rows = limits().read_rows
    if rows_at_most(uri, local_rows, version):
        table = read_arrow(path, version=version)
        return spark.createDataFrame(table), table.num_rows
    frame = get_lake(spark).read(spark, path, version=version)
    if not cache:
        return frame, None
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    return frame, frame.count()


def _schema_names(table: Any) -> list[str]:
    """The column names of a delta-rs table's schema, in order."""
    return [field.name for field in table.schema().fields]


def _fields_named(where: Any, names: Sequence[str]) -> set[str]:
    """The names among ``names`` that the ``pyarrow.compute`` expression ``where`` refers to
    (a name that only looks like a reference may be included: one column more is read; a
    column left out would make the scan fail, never give other rows).

    Examples:
        >>> import pyarrow.compute as pc
        >>> sorted(_fields_named(pc.field("msg_id").is_valid() & (pc.field("a") > 1),
        ...                      ["a", "msg_id", "sender"]))
        ['a', 'msg_id']
    """
    if where is None:
        return set()
    text = str(where)
    return {name for name in names if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text)}


def table_present(path: str) -> bool:
    """True when ``path`` holds a Delta table (a damaged log raises
    :class:`DamagedTable`).

    Examples:
        >>> table_present("/nowhere/lake/messages")
        False
    """
    from snap_spark.files import storage
    from snap_spark.lake.delta_log import latest_table

    return latest_table(storage.delta_table_uri(path)) is not None


def table_file_uris(path: str) -> list[str]:
    """The URIs of the data files the table's latest version holds (``[]`` without one).

    Examples:
        >>> table_file_uris("/nowhere/lake/messages")
        []
    """
    from snap_spark.files import storage
    from snap_spark.lake.delta_log import latest_table

    table = latest_table(storage.delta_table_uri(path))
    return [] if table is None else list(table.file_uris())


def table_rows(path: str) -> list[dict[str, Any]]:
    """Every row of a small Delta table (a ledger, a directory) read on the driver by
    delta-rs, whichever backend wrote it; ``[]`` when there is no table.

    Examples:
        >>> table_rows("/nowhere/lake/ingested_files")
        []
    """
    table = read_arrow(path)
    rows: list[dict[str, Any]] = [] if table is None else table.to_pylist()
    return rows
