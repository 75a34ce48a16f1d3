"""The delta-spark backend: Delta Lake's own Spark integration (``delta-spark``).

Chosen by :func:`snap_spark.lake.get_lake` (backend ``auto``, or ``delta-spark``) when
``io.delta.sql.DeltaSparkSessionExtension`` is loaded (Delta's JARs cached by ``make setup``,
see :mod:`snap_spark.runtime.maven_jars`, or a cluster's own). Files written in the folder of
a plain table (protocol 1/2, no features: every table snap-spark creates) are committed in place
through the delta-rs commit (:func:`commits_in_place`). Files staged elsewhere go in through
Delta's own writer: an append (or overwrite) with Delta's idempotent writes
(``txnAppId``/``txnVersion`` writer options: Delta skips the write, before computing it, when
the table already has that transaction), or a ``DeltaTable.merge`` with the same transaction
set through Delta's session settings ``spark.databricks.delta.write.txnAppId``/``txnVersion``;
reads use ``versionAsOf``.

Besides those commits, delta-rs reads a few things on the driver, with no Spark job: app
transaction versions, which delta-spark has no Python API for (``txn_version``, and the
replay check that lets a replayed merge skip its work), whether a table exists
(:meth:`DeltaSparkLake.exists`; Delta's ``isDeltaTable`` loads the log in the JVM), a
table's protocol
(:func:`commits_in_place`) and its latest version (the ``read_version`` check of
:meth:`DeltaSparkLake.commit`). delta-rs reads any plain Delta table at a path it
understands (local, ``s3://`` / ``s3a://``, ``gs://``, ``abfss://``; credentials from the
environment).

Building the backend sets ``spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS`` on a
session left at Spark's default (INT96), so Delta writes timestamps as microsecond UTC.

It behaves as the delta-rs backend does where Delta alone would differ: a partitioning that
does not match the table and a missing table are refused with :class:`LakeError` before
anything is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from snap_spark.common.remote import is_connect
from snap_spark.lake.api import (
    DataCommit,
    LakeError,
    LakeSchemaError,
    RowUpdates,
    VersionConflict,
)
from snap_spark.lake.common import (
    DELETE_FLAG,
    check_key_columns,
    check_txn,
    key_schema,
    marker_write_id,
    quote_identifier,
    replace_keys_merge,
    table_uri,
    write_marker,
)
from snap_spark.lake.delta_log import table_exists, table_version
from snap_spark.lake.delta_rs import read_txn_version
from snap_spark.lake.schema import check_delta_compatible, check_partition_columns, conform

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from snap_spark.lake.delta_rs import DeltaRsLake
    from snap_spark.lake.files import DataFile

#: Delta's session settings that make MERGE/UPDATE/DELETE idempotent (Delta >= 2.3).
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
#: Delta's session setting for the ``userMetadata`` of the next commits (DML included).
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"

#: Parquet timestamp encoding Spark (and so Delta) writes; INT96 unless set.
TIMESTAMP_TYPE_CONF = "spark.sql.parquet.outputTimestampType"

#: Commits :func:`_write_committed` reads at first to find its own.
_HISTORY_PAGE = 16

#: History columns returned by :meth:`DeltaSparkLake.history` (besides ``timestamp``).
_HISTORY_COLUMNS = (
    "version",
    "operation",
    "operationParameters",
    "operationMetrics",
    "userMetadata",
    "readVersion",
    "isBlindAppend",
    "engineInfo",
)


class DeltaSparkLake:
    """:class:`~snap_spark.lake.Lake` backend on delta-spark (sessions with Delta's JARs).

    Examples:
        On a session with Delta's extension (:func:`snap_spark.lake.get_lake` picks it
        there unless told otherwise); building it makes Spark write microsecond timestamps:

        >>> lake = DeltaSparkLake(spark)
        >>> lake.name, spark.conf.get(TIMESTAMP_TYPE_CONF)
        ('delta-spark', 'TIMESTAMP_MICROS')
    """

    name = "delta-spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        if spark.conf.get(TIMESTAMP_TYPE_CONF, "INT96") == "INT96":  # Spark's default
            spark.conf.set(TIMESTAMP_TYPE_CONF, "TIMESTAMP_MICROS")

    def read(self, spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
        """``spark.read.format("delta")``, with ``versionAsOf`` when ``version`` is given.

        Examples:
            >>> path, lake = str(tmp / "ids"), DeltaSparkLake(spark)
            >>> spark.range(2).write.format("delta").save(path)
            >>> spark.range(5, 6).write.format("delta").mode("append").save(path)
            >>> lake.read(spark, path).count(), lake.read(spark, path, version=0).count()
            (3, 2)
        """
        from delta.tables import DeltaTable

        # DeltaTable's own calls need Delta's Connect plugin on a Connect server; the read
        # below does not, and fails there on a folder that holds no table.
        if not is_connect(spark) and not DeltaTable.isDeltaTable(spark, path):
            raise LakeError(f"no Delta table at {path}")
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(path)

    def history(self, path: str) -> list[dict[str, Any]]:
        """``DeltaTable.history()``, newest first, ``timestamp`` as ms since the epoch.

        Examples:
            The same entries as the delta-rs backend's
            (:meth:`~snap_spark.lake.delta_rs.DeltaRsLake.history`), from Delta's own reader:

            >>> spark.range(3).write.format("delta").save(str(tmp / "t"))
            >>> spark.range(2).write.format("delta").mode("append").save(str(tmp / "t"))
            >>> history = DeltaSparkLake(spark).history(str(tmp / "t"))
            >>> [(h["version"], h["operation"], type(h["timestamp"])) for h in history]
            [(1, 'WRITE', <class 'int'>), (0, 'WRITE', <class 'int'>)]
        """
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        if not DeltaTable.isDeltaTable(self.spark, path):
            raise LakeError(f"no Delta table at {path}")
        frame = DeltaTable.forPath(self.spark, path).history()
        rows = (
            frame.select(
                *[F.col(c) for c in _HISTORY_COLUMNS if c in frame.columns],
                F.unix_millis(F.col("timestamp")).alias("timestamp"),
            )
            .orderBy(F.col("version").desc())
            .collect()
        )
        return [row.asDict(recursive=True) for row in rows]

    def txn_version(self, path: str, app_id: str) -> int | None:
        """Latest app transaction version of ``app_id``, read with delta-rs.

        Examples:
            A transaction Delta's own writer recorded (its ``txnAppId``/``txnVersion``):

            >>> (spark.range(1).write.format("delta").option("txnAppId", "ingest")
            ...  .option("txnVersion", 4).save(str(tmp / "messages")))
            >>> path, lake = str(tmp / "messages"), DeltaSparkLake(spark)
            >>> lake.txn_version(path, "ingest"), lake.txn_version(path, "other")
            (4, None)
        """
        return read_txn_version(table_uri(path), app_id)

    def exists(self, path: str) -> bool:
        """True when ``path`` holds a Delta table, read with delta-rs on the driver as
        :meth:`txn_version` is (Delta's ``DeltaTable.isDeltaTable`` loads the table's log in
        the JVM, slow on a cold driver, and a batch run makes four calls: docs/speed.md,
        *Figures behind the code*).

        Examples:
            >>> import pyarrow as pa
            >>> from deltalake import write_deltalake
            >>> write_deltalake(str(tmp / "tasks"), pa.table({"n": [1]}))
            >>> lake = DeltaSparkLake(spark)
            >>> lake.exists(str(tmp / "tasks")), lake.exists(str(tmp / "nothing"))
            (True, False)
        """
        return table_exists(table_uri(path))

    def distinct_values(self, spark: SparkSession, path: str, column: str) -> set[Any]:
        """Distinct values of ``column`` through Spark; see :meth:`Lake.distinct_values`.

        Examples:
            >>> import pyarrow as pa
            >>> from deltalake import write_deltalake
            >>> path = str(tmp / "raw_messages")
            >>> write_deltalake(path, pa.table({"file_key": ["k1", "k2", "k1"],
            ...                                 "line_no": [1, 1, 2]}))
            >>> sorted(DeltaSparkLake(spark).distinct_values(spark, path, "file_key"))
            ['k1', 'k2']
        """
        from snap_spark.common.placement import limits
        from snap_spark.lake.delta_log import rows_at_most
        from snap_spark.lake.delta_rs import DeltaRsLake

        # A table of a few rows is read on the driver, as the delta-rs backend reads any:
        # Spark's first read of a table replays its log in a job of its own (for two tables,
        # a large part of a small Nostr ingestion: docs/speed.md, *Figures behind the code*):
        # snap_spark.common.placement.DriverLimits distinct_rows
        if rows_at_most(table_uri(path), limits().distinct_rows):
            return DeltaRsLake().distinct_values(spark, path, column)
        if not self.exists(path):
            return set()
        rows = self.read(spark, path).select(column).distinct().collect()
        return {row[0] for row in rows}

    def data_root(self, path: str, staging: str) -> str:
        """Where the tasks write a table's files before the commit.

        The table folder itself when the table takes commits in place
        (:func:`commits_in_place`): the files are then committed where they are, through
        the Delta protocol, and every row is written once. Otherwise a folder under
        ``staging``, from which Delta's own writer copies the rows into the table.

        Examples:
            No table yet (or a plain one): the table folder itself.

            >>> import pyarrow as pa
            >>> from deltalake import write_deltalake
            >>> lake, staging = DeltaSparkLake(spark), str(tmp / "_staging" / "r1")
            >>> lake.data_root(str(tmp / "messages"), staging) == table_uri(str(tmp / "messages"))
            True

            A table with change data feed on (writer protocol 4) is written by Delta:

            >>> write_deltalake(str(tmp / "feed"), pa.table({"n": [1]}),
            ...                 configuration={"delta.enableChangeDataFeed": "true"})
            >>> lake.data_root(str(tmp / "feed"), staging)  # doctest: +ELLIPSIS
            '.../_staging/r1/feed-...'
        """
        if commits_in_place(path):
            return table_uri(path)
        name = path.rstrip("/").rsplit("/", 1)[-1] or "table"
        return f"{staging.rstrip('/')}/{name}-{uuid.uuid4().hex[:8]}"

    def commit(self, spark: SparkSession, change: DataCommit) -> bool:
        """Commit written Parquet files; see :meth:`Lake.commit`. A table at protocol 1/2
        without features (every table snap-spark creates: :func:`commits_in_place`) gets
        the files in place, in one Delta commit written through delta-rs
        (:meth:`DeltaRsLake.commit <snap_spark.lake.delta_rs.DeltaRsLake.commit>`). Any
        other table gets the rows through Delta's own writer (delta-spark has no public API
        to adopt files): appended, or overwriting the table, with Delta's idempotent writes;
        an add with ``updates`` is one ``MERGE``, the staged rows inserted and the named
        rows updated (the search limited to the updates' partitions); replacing keys is one
        ``MERGE`` too (:func:`_replace_keys`).

        Examples:
            Files staged outside the table folder, appended by Delta's own writer:

            >>> import pyarrow as pa
            >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
            >>> from snap_spark.lake import PartitionedFileWriter, to_arrow
            >>> schema = StructType([StructField("id", StringType()),
            ...                      StructField("n", LongType())])
            >>> lake, path = DeltaSparkLake(spark), str(tmp / "counts")
            >>> root = str(tmp / "_staging" / "counts-1")
            >>> def write(ids, ns):  # a task's work
            ...     writer = PartitionedFileWriter(root, to_arrow(schema), [])
            ...     writer.write(pa.record_batch({"id": ids, "n": ns}))
            ...     return writer.close()
            >>> load = DataCommit(path=path, root=root, files=write(["a", "b", "c"], [1, 2, 3]),
            ...                   schema=schema, app_id="run1", version=1)
            >>> lake.commit(spark, load)
            True
            >>> lake.commit(spark, load)  # committed already: nothing added
            False
            >>> lake.read(spark, path).count()
            3

            The rows of some keys replaced by one Delta MERGE:

            >>> refresh = DataCommit(
            ...     path=path, root=root, files=write(["c", "d"], [30, 4]), schema=schema,
            ...     app_id="refresh", version=1,
            ...     keys=spark.createDataFrame([("b",), ("c",)], "id string"))
            >>> refresh.mode, lake.commit(spark, refresh)
            ('keys', True)
            >>> sorted(lake.read(spark, path).collect())  # c replaced, d added; b: gone
            [Row(id='a', n=1), Row(id='c', n=30), Row(id='d', n=4)]
            >>> lake.history(path)[0]["operation"]
            'MERGE'
        """
        if _in_place(change.path, change.root):
            return _in_place_lake().commit(spark, change)
        if change.keys is not None:
            return _replace_keys(spark, change, change.keys)
        if change.replace:
            return _write_staged(spark, change, mode="overwrite")
        return self._add(spark, change)

    def _add(self, spark: SparkSession, change: DataCommit) -> bool:
        """Append staged files' rows through Delta's own writer (:meth:`Lake.commit`, mode
        ``"add"``), checking ``read_version`` first; with ``updates`` one MERGE."""
        path, app_id, version = change.path, change.app_id, change.version
        read_version = change.read_version
        if read_version is not None:
            # Delta's own conflict checks let a blind append through whatever was committed
            # since: the version is checked here, exact under the lake's commit lease
            current = _latest_version(path)
            if current != read_version:
                if _txn_done(path, (app_id, version)):
                    return False
                raise VersionConflict(f"table at {path} is at version {current}, this commit "
                                      f"was decided against version {read_version}")
        updates = change.updates
        if updates is not None and len(updates) and self.exists(path):
            return _merge_files(spark, path, staged_frame(spark, change.root, change.files,
                                                          change.schema), updates,
                                app_id=app_id, version=version, commit_info=change.commit_info)
        # Delta checks the app transaction before it computes the frame: a re-run reads none
        # of the staged files
        return _write_staged(spark, change)


def _write_staged(spark: SparkSession, change: DataCommit, mode: str = "append") -> bool:
    """The staged files' rows written by :func:`_delta_write` (appended or overwriting)."""
    return _delta_write(staged_frame(spark, change.root, change.files, change.schema),
                        change.path, app_id=change.app_id, version=change.version,
                        partition_by=change.partition_by, commit_info=change.commit_info,
                        mode=mode)


def _replace_keys(spark: SparkSession, change: DataCommit, keys: DataFrame | pa.Table
                  ) -> bool:
    """Replace the rows of ``keys`` by the rows of staged Parquet files with one Delta MERGE
    (one commit; :meth:`Lake.commit`, mode ``"keys"``).

    The merge source is the distinct keys (:data:`DELETE_FLAG` true: a target row matching
    one is deleted) and the staged rows (flag false: inserted); the merge joins them with
    the table, so the keys are never collected. A new table is created by appending the
    staged rows.
    """
    from delta.tables import DeltaTable
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import functions as F

    path, app_id, version = change.path, change.app_id, change.version
    check_txn(app_id, version)
    key_columns = check_key_columns(key_schema(keys), change.schema)
    if not isinstance(keys, SparkDataFrame):  # gathered on the driver: a local relation
        keys = spark.createDataFrame(keys)
    if _txn_done(path, (app_id, version)):
        return False
    start_version = _latest_version(path)
    if start_version < 0:
        return _write_staged(spark, change)
    existing = _partition_columns(spark, path)
    if existing != list(change.partition_by):
        raise LakeSchemaError(f"table at {path} is partitioned by {existing}, the files by "
                              f"{list(change.partition_by)}")
    target = DeltaTable.forPath(spark, path)
    table_schema = target.toDF().schema
    rows = conform(staged_frame(spark, change.root, change.files, change.schema),
                   table_schema, path)
    key_rows = keys.select(*key_columns).distinct().select(
        *[F.col(f.name) if f.name in key_columns else F.lit(None).cast(f.dataType).alias(f.name)
          for f in table_schema.fields])
    source = (key_rows.withColumn(DELETE_FLAG, F.lit(True))
              .unionByName(rows.withColumn(DELETE_FLAG, F.lit(False))))
    on, insert, values = replace_keys_merge(key_columns, table_schema.fieldNames())
    write_id = uuid.uuid4().hex
    marker = write_marker(write_id, app_id, version, change.commit_info)
    builder = (
        target.alias("t")
        .merge(source.alias("s"), on)
        .whenMatchedDelete()
        .whenNotMatchedInsert(condition=insert, values=values)  # type: ignore[arg-type]
    )
    with _dml_transaction(spark, (app_id, version)), _session_conf(
            spark, {USER_METADATA_CONF: marker}):
        builder.execute()
    if _write_committed(spark, path, write_id, start_version):
        return True
    # a merge that changed nothing may write no commit: record the transaction anyway
    return _delta_write(spark.createDataFrame([], table_schema), path, app_id=app_id,
                        version=version, commit_info=change.commit_info)


def _delta_write(df: DataFrame, path: str, *, app_id: str, version: int,
                 partition_by: Sequence[str] = (), commit_info: Mapping[str, Any] | None = None,
                 mode: str = "append") -> bool:
    """Write ``df`` (staged rows) with Delta's own writer in one commit: appended, or with
    ``mode="overwrite"`` in place of every row; the table is created (partitioned by
    ``partition_by``) when absent. Delta's ``txnAppId``/``txnVersion`` make it idempotent:
    returns ``False``, writing nothing, when the table already holds ``(app_id, version)``
    or a later version of ``app_id``. An empty ``df`` still commits the transaction.

    Raises:
        LakeSchemaError: ``df`` does not fit plain Delta or the table (columns, types), or
            ``partition_by`` is not the existing table's partitioning.
    """
    from delta.tables import DeltaTable

    check_txn(app_id, version)
    check_delta_compatible(df.schema)
    columns = check_partition_columns(df.schema, partition_by)
    if _txn_done(path, (app_id, version)):
        return False  # what Delta's writer would find too, after planning the write
    spark = df.sparkSession
    start_version = _latest_version(path)
    if start_version >= 0:
        table = DeltaTable.forPath(spark, path)
        df = conform(df, table.toDF().schema, path)
        existing = _partition_columns(spark, path)
        if columns and columns != existing:
            raise LakeSchemaError(
                f"table at {path} is partitioned by {existing}, not {columns}"
            )
        columns = []  # Delta keeps the table's own partitioning
    write_id = uuid.uuid4().hex
    writer = (
        df.write.format("delta")
        .mode(mode)
        .option("txnAppId", app_id)
        .option("txnVersion", str(version))
        .option("userMetadata", write_marker(write_id, app_id, version, commit_info))
    )
    if columns:
        writer = writer.partitionBy(*columns)
    writer.save(path)
    return _write_committed(spark, path, write_id, start_version)


def _merge_files(spark: SparkSession, path: str, staged: DataFrame, updates: RowUpdates, *,
                 app_id: str, version: int, commit_info: Mapping[str, Any] | None) -> bool:
    """One MERGE inserting ``staged`` and setting ``updates``' columns on the rows they name
    (deleting those rows when ``updates.remove``)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    txn = (app_id, version)
    check_txn(app_id, version)
    if _txn_done(path, txn):
        return False
    target = DeltaTable.forPath(spark, path)
    table_schema = target.toDF().schema
    keys = list(updates.keys)
    columns = updates.columns
    partitions = [c for c in _partition_columns(spark, path) if c in updates.rows.column_names]
    flag = "__snap_update"
    changes = spark.createDataFrame(updates.rows)
    source = (
        conform(staged, table_schema, path).withColumn(flag, F.lit(False))
        .unionByName(
            changes.select(
                *[F.col(f.name).cast(f.dataType) if f.name in changes.columns
                  else F.lit(None).cast(f.dataType).alias(f.name) for f in table_schema],
                F.lit(True).alias(flag)))
    )
    # The rows to update, found before anything is written: each update must find one row
    # (a row to remove may be gone already).
    found = (target.toDF().join(changes.select(*keys), keys, "left_semi").count())
    if found > len(updates) or (found < len(updates) and not updates.remove):
        raise LakeError(f"{len(updates)} update(s) found {found} rows of {path}; nothing was "
                        "committed")
    condition = " AND ".join(
        [f"t.{quote_identifier(k)} = s.{quote_identifier(k)}" for k in keys]
        + [f"s.{flag}"]
        + [f"t.{quote_identifier(c)} IN ({', '.join(_sql_literal(v) for v in sorted(set(values)))})"
           for c in partitions
           for values in [updates.rows.column(c).to_pylist()]]
    )
    write_id = uuid.uuid4().hex
    start_version = _latest_version(path)
    merge = target.alias("t").merge(source.alias("s"), condition)
    builder = (
        (merge.whenMatchedDelete() if updates.remove else
         merge.whenMatchedUpdate(set={c: f"s.{quote_identifier(c)}" for c in columns
                                      if c not in partitions}))
        .whenNotMatchedInsert(condition=f"NOT s.{flag}",
                              values={f.name: f"s.{quote_identifier(f.name)}"
                                      for f in table_schema})
    )
    marker = write_marker(write_id, app_id, version, commit_info)
    with _dml_transaction(spark, txn), _session_conf(spark, {USER_METADATA_CONF: marker}):
        builder.execute()
    return _write_committed(spark, path, write_id, start_version)


def _sql_literal(value: Any) -> str:
    """A SQL literal for a partition value (dates, strings, numbers)."""
    import datetime as dt

    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(value)
def staged_frame(
    spark: SparkSession, root: str, files: Sequence[DataFile], schema: StructType
) -> DataFrame:
    """The rows of Parquet files written under ``root`` (Hive-style partition folders), as a
    DataFrame with ``schema``'s columns in order; empty when there are no files.

    Examples:
        >>> import datetime as dt
        >>> import pyarrow as pa
        >>> from pyspark.sql.types import DateType, LongType, StructField, StructType
        >>> from snap_spark.lake import PartitionedFileWriter, to_arrow
        >>> schema = StructType([StructField("n", LongType()), StructField("day", DateType())])
        >>> root = str(tmp / "_staging" / "counts-1")
        >>> writer = PartitionedFileWriter(root, to_arrow(schema), ["day"])
        >>> writer.write(pa.record_batch({"n": [1, 2], "day": [dt.date(2024, 5, 1)] * 2}))
        >>> sorted(staged_frame(spark, root, writer.close(), schema).collect())
        [Row(n=1, day=datetime.date(2024, 5, 1)), Row(n=2, day=datetime.date(2024, 5, 1))]
    """
    paths = [f"{root.rstrip('/')}/{f.path}" for f in files]
    if not paths:
        return spark.createDataFrame([], schema)
    return (spark.read.schema(schema).option("basePath", root).parquet(*paths)
            .select(*schema.fieldNames()))


def _partition_columns(spark: SparkSession, path: str) -> list[str]:
    """Partition columns of the Delta table at ``path``, from ``DESCRIBE TABLE``.

    ``DeltaTable.detail()`` would say the same, but it counts the table's files first (a
    rebuild of its state from the log, three Spark jobs); DESCRIBE reads only the metadata.
    """
    name = "delta.`" + path.replace("`", "``") + "`"
    columns: list[str] = []
    section = False
    for row in spark.sql(f"DESCRIBE TABLE {name}").collect():
        label = (row["col_name"] or "").strip()
        if label == "# Partition Information":
            section = True
        elif section and (not label or (label.startswith("#") and columns)):
            break  # the next section
        elif section and not label.startswith("#"):
            columns.append(label)
    return columns


def _txn_done(path: str, txn: tuple[str, int]) -> bool:
    """True when the table at ``path`` already holds app transaction ``txn`` or a later one."""
    done = read_txn_version(table_uri(path), txn[0])
    return done is not None and done >= txn[1]


def _latest_version(path: str) -> int:
    """Latest version of the Delta table at ``path``; -1 when there is none. Read from the
    log on the driver (:func:`snap_spark.lake.delta_log.table_version`): Delta's own
    ``isDeltaTable`` and ``history(1)`` load the table's log in the driver JVM and run a
    Spark job, before each write."""
    return table_version(table_uri(path))


def _write_committed(spark: SparkSession, path: str, write_id: str, start_version: int) -> bool:
    """True when a commit after ``start_version`` carries the marker of ``write_id``.

    Reads the latest :data:`_HISTORY_PAGE` commits in one go (one Spark job), and more only
    when other writers committed that many times meanwhile.
    """
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, path)
    limit = _HISTORY_PAGE
    while True:
        rows = table.history(limit).select("version", "userMetadata").collect()
        newer = [row for row in rows if int(row[0]) > start_version]
        if any(marker_write_id(row[1]) == write_id for row in newer):
            return True
        if len(newer) < len(rows) or len(rows) < limit:
            return False  # every commit since start_version was looked at
        limit *= 4


@contextmanager
def _dml_transaction(spark: SparkSession, txn: tuple[str, int] | None) -> Iterator[None]:
    """Set Delta's idempotent-DML session settings for one statement, then restore them.

    The settings are per session: do not run idempotent merges on one session from
    several threads at once.
    """
    if txn is None:
        yield
        return
    with _session_conf(spark, {TXN_APP_ID_CONF: txn[0], TXN_VERSION_CONF: str(txn[1])}):
        yield


@contextmanager
def _session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set session settings for one block, then restore what was there."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


#: Protocol a table must not exceed for :func:`commits_in_place` (what delta-spark gives
#: the lake's tables, and what delta-rs writes): reader 1, writer 2, no table features.
IN_PLACE_MAX_READER = 1
IN_PLACE_MAX_WRITER = 2


def commits_in_place(path: str) -> bool:
    """True when files written in the table folder of ``path`` may be committed where they
    are, through the Delta protocol (delta-rs writes the commit), instead of being copied
    by Delta's writer: the table is absent, or its protocol is at most reader 1 / writer 2
    without table features (every table of a snap-spark lake). A table with features only
    Delta's own writer keeps (deletion vectors, column mapping, ...) is written by Delta.

    Delta-spark has no public API to adopt files; a commit of ``add`` actions is the
    protocol's own way, and Delta reads such a table like any other (docs/storage.md,
    "Two Delta backends").

    Examples:
        >>> commits_in_place("/tmp/no-such-table")
        True
    """
    from snap_spark.lake.delta_log import open_table

    table = open_table(table_uri(path))
    if table is None:
        return True
    protocol = table.protocol()
    return (protocol.min_reader_version <= IN_PLACE_MAX_READER
            and protocol.min_writer_version <= IN_PLACE_MAX_WRITER
            and not protocol.writer_features and not protocol.reader_features)


def _in_place(path: str, root: str) -> bool:
    return table_uri(root) == table_uri(path)


def _in_place_lake() -> DeltaRsLake:
    from snap_spark.lake.delta_rs import DeltaRsLake

    return DeltaRsLake()
