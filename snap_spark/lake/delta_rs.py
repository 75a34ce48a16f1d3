"""The embedded Delta backend: Spark writes Parquet, delta-rs (``deltalake``) commits.

Commits
    Spark tasks write the Parquet files straight into the table folder
    (:meth:`DeltaRsLake.data_root`, :class:`~snap_spark.lake.files.PartitionedFileWriter`);
    :meth:`DeltaRsLake.commit` (adding them, or replacing the table) commits them where
    they are in one Delta transaction with ``DeltaTable.create_write_transaction`` (or
    ``create_table_with_add_actions`` for a new table), passing
    ``CommitProperties(app_transactions=[Transaction(app_id, version)])`` and a
    ``userMetadata`` marker naming the write. delta-rs does not itself refuse an app
    transaction version it has seen, so :func:`commit_files` re-checks it on the fresh
    snapshot right before committing and retries on commit conflicts.

Reads
    The snapshot's add actions give the file list. When Spark's Hadoop layer opens the
    table's scheme (local paths; ``s3a://`` on clusters with the S3A connector), Spark reads
    those Parquet files with the table schema; partition values come from Spark's Hive
    partition discovery when every file sits in the ``col=value/`` folder its log entry names
    (files written here do), else each partition's files are read apart and the values added
    as literals. Otherwise (``s3://`` without an ``fs.s3`` implementation, ``gs://``, ...)
    Python tasks read the files through :mod:`snap_spark.files.storage` and add the partition
    values from the log (:func:`snap_spark.lake.files.read_data_file`).

Replacing keys
    :meth:`DeltaRsLake.commit` of keys copies, on the driver, each data file that holds a
    row of a key without those rows, and commits the copies and the new files in place of
    the old files: meant for small, dimension-like tables (``tasks``, ``agent_cards``); the
    keys (collected as Arrow) must fit in driver memory. Every file such a commit writes
    carries the caller's name prefix, none is named by Delta (a run killed mid-commit leaves
    only files its sweep recognises).

Paths are local paths, ``file:`` URIs or object store URIs (see :mod:`snap_spark.files.storage`);
delta-rs gets :func:`snap_spark.files.storage.delta_storage_options` with every call
(:mod:`snap_spark.lake.delta_log`), credentials come from the environment.
"""

from __future__ import annotations

import dataclasses
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote, urlparse

from snap_spark.common.remote import is_connect, parallelism
from snap_spark.files import storage
from snap_spark.lake.api import DataCommit, LakeError, RowUpdates
from snap_spark.lake.common import (
    check_key_columns,
    check_txn,
    key_schema,
    table_uri,
)

# Re-exported: callers and tests import these from here (delta_spark: read_txn_version).
from snap_spark.lake.delta_log import (
    MAX_COMMIT_ATTEMPTS,
    RemovedFile,
    check_same_table,
    commit_files,
    files_added_since,
    latest_table,
    open_table,
    read_txn_version,
    table_exists,
    table_schema,
    write_committed,
)
from snap_spark.lake.files import (
    NULL_PARTITION,
    DataFile,
    PartitionedFileWriter,
    delete_data_files,
    partition_string,
    read_data_file,
    unescape_path_name,
)
from snap_spark.lake.schema import to_arrow

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "MAX_COMMIT_ATTEMPTS",
    "DeltaRsLake",
    "commit_files",
    "open_table",
    "read_table",
    "read_txn_version",
    "table_schema",
    "write_committed",
]


# -- reads (Spark) --------------------------------------------------------------------------


class ListedFiles(NamedTuple):
    """Data files to read as one table: its schema and partition columns, each file's
    location and its partition values (in the order of ``partition_columns``)."""

    schema: StructType
    partition_columns: Sequence[str]
    files: Sequence[str]
    partitions: Sequence[tuple[Any, ...]]


def read_table(spark: SparkSession, uri: str, version: int | None = None) -> DataFrame:
    """Read a Delta table snapshot with Spark from the files delta-rs lists.

    Examples:
        >>> import pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = str(tmp / "counts")
        >>> write_deltalake(path, pa.table({"id": ["a", "b"], "n": [1, 2]}))
        >>> write_deltalake(path, pa.table({"id": ["c"], "n": [3]}), mode="append")
        >>> read_table(spark, path).count(), read_table(spark, path, version=0).count()
        (3, 2)
    """
    import pyarrow as pa

    table = open_table(uri, version)
    if table is None:
        raise LakeError(f"no Delta table at {uri}")
    schema = table_schema(table)
    partition_columns = list(table.metadata().partition_columns)
    actions = pa.table(table.get_add_actions(flatten=False))
    if actions.num_rows == 0:
        return spark.createDataFrame([], schema)
    log_paths: list[str] = actions.column("path").to_pylist()
    files = [_absolute(uri, p) for p in log_paths]
    columns = [f.name for f in schema.fields]
    if not _spark_opens(spark, uri):
        partitions = _partition_values(actions, partition_columns)
        return _read_through_storage(spark, ListedFiles(schema, partition_columns, files,
                                                          partitions))
    if not partition_columns:
        return spark.read.schema(schema).parquet(*files).select(*columns)
    partitions = _partition_values(actions, partition_columns)
    if _hive_layout(log_paths, partitions, partition_columns):
        return spark.read.schema(schema).option("basePath", uri).parquet(*files).select(*columns)
    return _read_by_partition(spark, ListedFiles(schema, partition_columns, files, partitions))


def _absolute(uri: str, log_path: str) -> str:
    """Location of a data file for Spark, from its URI-encoded log path.

    Examples:
        >>> _absolute("/lake/t", "day=2024-05-01/part-0.parquet")
        '/lake/t/day=2024-05-01/part-0.parquet'
        >>> _absolute("/lake/t", "file:///elsewhere/a%20b.parquet")
        '/elsewhere/a b.parquet'
    """
    if _is_absolute(log_path):
        parsed = urlparse(log_path)
        if parsed.scheme in ("", "file"):
            return unquote(parsed.path)
        return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"
    return f"{uri.rstrip('/')}/{unquote(log_path)}"


def rows_added_since(path: str, version: int, columns: Sequence[str]) -> tuple[int, pa.Table]:
    """The table's latest version, and ``columns`` (data columns, not partition columns)
    of every row in files added since ``version`` (:func:`files_added_since`), read on the
    driver: what other writers committed after a decision was taken against ``version``.

    Examples:
        >>> rows_added_since("/nowhere/at/all", -1, ["id"])[0]
        -1
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    uri = table_uri(path)
    latest, added = files_added_since(uri, version)
    parts = []
    for log_path in added:
        filesystem, inner = storage.resolve(_absolute(uri, log_path))
        with filesystem.open_input_file(inner) as handle:
            parts.append(pq.ParquetFile(handle).read(columns=list(columns), use_threads=False))
    if not parts:
        return latest, pa.table({name: pa.array([], pa.null()) for name in columns})
    return latest, pa.concat_tables(parts, promote_options="permissive")


def distinct_rows(path: str, columns: Sequence[str]) -> set[tuple[Any, ...]]:
    """The distinct value tuples of ``columns`` in the table's latest version, read by
    delta-rs's own engine on the driver; an empty set when there is no table.

    Examples:
        >>> distinct_rows("/nowhere/at/all", ["file_key", "ingest_id"])
        set()
    """
    import pyarrow as pa
    from deltalake import QueryBuilder

    table = open_table(table_uri(path))
    if table is None:
        return set()
    names = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    result = pa.table(QueryBuilder().register("t", table)
                      .execute(f"select distinct {names} from t").read_all())
    return set(zip(*[result.column(c).to_pylist() for c in columns], strict=True))


def _is_absolute(log_path: str) -> bool:
    return "://" in log_path or log_path.startswith(("/", "file:"))


#: Per session: URI scheme -> whether Spark's Hadoop layer has a filesystem for it.
_HADOOP_SCHEMES: weakref.WeakKeyDictionary[SparkSession, dict[str, bool]] = (
    weakref.WeakKeyDictionary()
)


def _spark_opens(spark: SparkSession, uri: str) -> bool:
    """True when Spark's own (Hadoop) filesystem layer can read files at ``uri``.

    Local paths always; a remote scheme when Hadoop has an implementation for it in this
    session (``s3a`` with the S3A connector, ``abfss`` on Azure clusters, ...).
    """
    if storage.is_local(uri):
        return True
    scheme = storage.split_scheme(uri)[0]
    known = _HADOOP_SCHEMES.setdefault(spark, {})
    if scheme not in known and is_connect(spark):
        known[scheme] = False  # the server's Hadoop layer is out of a remote client's sight
    if scheme not in known:
        try:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(
                scheme, spark.sparkContext._jsc.hadoopConfiguration()
            )
            known[scheme] = True
        except Exception:  # UnsupportedFileSystemException, or no JVM (Spark Connect)
            known[scheme] = False
    return known[scheme]


def read_data_files(spark: SparkSession, files: Sequence[str], schema: StructType) -> DataFrame:
    """Plain Parquet files (no partition folders) as one DataFrame of ``schema``, read in
    Python tasks through :mod:`snap_spark.files.storage`, so any location the job writes to works
    (Spark's Hadoop layer may have no filesystem for ``s3://``).

    Examples:
        >>> import pyarrow as pa
        >>> import pyarrow.parquet as pq
        >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
        >>> schema = StructType([StructField("id", StringType()), StructField("n", LongType())])
        >>> pq.write_table(pa.table({"id": ["a", "b"], "n": [1, 2]}), str(tmp / "c-0.parquet"))
        >>> pq.write_table(pa.table({"n": [3], "id": ["c"]}), str(tmp / "c-1.parquet"))
        >>> df = read_data_files(spark, [str(tmp / "c-0.parquet"), str(tmp / "c-1.parquet")],
        ...                      schema)
        >>> sorted(df.collect())  # the columns in the schema's order, whatever the file's
        [Row(id='a', n=1), Row(id='b', n=2), Row(id='c', n=3)]
    """
    return _read_through_storage(spark, ListedFiles(schema, [], files, [()] * len(files)))


def _read_through_storage(spark: SparkSession, listed: ListedFiles) -> DataFrame:
    """Read data files in Python tasks through :mod:`snap_spark.files.storage` (schemes Spark's
    Hadoop layer cannot open); each file's partition values come from the log."""
    schema, partition_columns, files, partitions = listed
    arrow_schema = to_arrow(schema)
    tasks = [
        (path, dict(zip(partition_columns, values, strict=True)))
        for path, values in zip(files, partitions, strict=True)
    ]
    slices = max(1, min(len(tasks), 4 * parallelism(spark)))

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                path, values = tasks[index]
                yield from read_data_file(path, arrow_schema, values)

    return spark.range(0, len(tasks), 1, slices).mapInArrow(read, schema)


def _partition_values(actions: pa.Table, partition_columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """Each file's partition values, typed (delta-rs parses the log's strings)."""
    if not partition_columns:  # delta-rs then has no "partition" column at all
        return [()] * actions.num_rows
    rows = actions.column("partition").to_pylist()
    return [tuple(row[c] for c in partition_columns) for row in rows]


def _hive_layout(
    log_paths: Sequence[str],
    partitions: Sequence[tuple[Any, ...]],
    partition_columns: Sequence[str],
) -> bool:
    """True when Spark's partition discovery yields exactly the log's partition values.

    That holds when every file is ``col1=v1/.../file`` under the table root with each folder
    value decoding (as Spark decodes) to the value in the log, and every partition column has
    a type this package partitions by (timestamps, for one, are read in the session zone).
    """
    for log_path, typed in zip(log_paths, partitions, strict=True):
        if _is_absolute(log_path):
            return False
        try:
            values = [partition_string(value) for value in typed]
        except TypeError:
            return False
        segments = unquote(log_path).split("/")
        if len(segments) != len(partition_columns) + 1:
            return False
        for segment, column, value in zip(segments, partition_columns, values, strict=False):
            name, sep, encoded = segment.partition("=")
            if not sep or unescape_path_name(name) != column:
                return False
            expected = NULL_PARTITION if value is None else value
            if unescape_path_name(encoded) != expected:
                return False
    return True


def _read_by_partition(spark: SparkSession, listed: ListedFiles) -> DataFrame:
    """Read each partition's files apart and add its (typed) values as literal columns."""
    schema, partition_columns, files, partitions = listed
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType as SparkStructType

    data_schema = SparkStructType([f for f in schema.fields if f.name not in partition_columns])
    groups: dict[tuple[Any, ...], list[str]] = {}
    for path, values in zip(files, partitions, strict=True):
        groups.setdefault(values, []).append(path)
    frames = []
    for values, paths in groups.items():
        literals = dict(zip(partition_columns, values, strict=True))
        frame = spark.read.schema(data_schema).parquet(*paths)
        frames.append(
            frame.select(
                *[
                    F.lit(literals[f.name]).cast(f.dataType).alias(f.name)
                    if f.name in literals
                    else F.col(f.name)
                    for f in schema.fields
                ]
            )
        )
    return reduce(lambda left, right: left.unionByName(right), frames)


# -- the backend ----------------------------------------------------------------------------


class DeltaRsLake:
    """:class:`~snap_spark.lake.Lake` backend on delta-rs, for sessions without Delta's JARs.

    Examples:
        >>> lake = DeltaRsLake()
        >>> lake.name
        'delta-rs'
        >>> lake.exists("/nowhere/at/all")
        False
    """

    name = "delta-rs"

    def read(self, spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
        """Read the table (at ``version``) with Spark; see :func:`read_table`.

        Examples:
            >>> import pyarrow as pa
            >>> from deltalake import write_deltalake
            >>> write_deltalake(str(tmp / "counts"), pa.table({"id": ["a", "b"], "n": [1, 2]}))
            >>> DeltaRsLake().read(spark, str(tmp / "counts")).orderBy("id").collect()
            [Row(id='a', n=1), Row(id='b', n=2)]
        """
        return read_table(spark, table_uri(path), version)

    def history(self, path: str) -> list[dict[str, Any]]:
        """Commit infos, newest first (delta-rs already uses the normalised keys).

        Examples:
            >>> import pyarrow as pa
            >>> from deltalake import DeltaTable, write_deltalake
            >>> path = str(tmp / "counts")
            >>> write_deltalake(path, pa.table({"id": ["a", "b"], "n": [1, 2]}))
            >>> _ = DeltaTable(path).delete("n = 1")
            >>> [(h["version"], h["operation"]) for h in DeltaRsLake().history(path)]
            [(1, 'DELETE'), (0, 'WRITE')]
        """
        table = open_table(table_uri(path))
        if table is None:
            raise LakeError(f"no Delta table at {path}")
        return [dict(entry) for entry in table.history()]

    def txn_version(self, path: str, app_id: str) -> int | None:
        """Latest transaction version of ``app_id`` (``None``: none yet, or no table).

        Examples:
            >>> import pyarrow as pa
            >>> from deltalake import CommitProperties, Transaction, write_deltalake
            >>> path = str(tmp / "messages")
            >>> write_deltalake(path, pa.table({"n": [1]}), commit_properties=CommitProperties(
            ...     app_transactions=[Transaction("ingest", 4)]))
            >>> lake = DeltaRsLake()
            >>> lake.txn_version(path, "ingest"), lake.txn_version(path, "other")
            (4, None)
        """
        return read_txn_version(table_uri(path), app_id)

    def exists(self, path: str) -> bool:
        """True when ``path`` holds a Delta table.

        Examples:
            >>> DeltaRsLake().exists("/nowhere/at/all")
            False
        """
        return table_exists(table_uri(path))

    def distinct_values(self, spark: SparkSession, path: str, column: str) -> set[Any]:
        """Distinct values of ``column`` read on the driver (one column, no Spark job); see
        :meth:`Lake.distinct_values`.

        Examples:
            >>> DeltaRsLake().distinct_values(None, "/nowhere/at/all", "file_key")
            set()
        """
        import pyarrow as pa
        from deltalake import QueryBuilder

        from snap_spark.lake import file_cache

        uri = table_uri(path)
        table = latest_table(uri)
        if table is None:
            return set()
        # each file's distinct values are kept (snap_spark.lake.file_cache): a job that asks
        # again after its commit reads only the new files, not the whole column again
        kept = file_cache.distinct_values(table, uri, column)
        if kept is not None:
            return kept
        name = '"' + column.replace('"', '""') + '"'
        result = QueryBuilder().register("t", table).execute(f"select distinct {name} from t")
        return set(pa.table(result.read_all()).column(0).to_pylist())

    def data_root(self, path: str, staging: str) -> str:
        """The table folder itself: :meth:`commit` commits the files where they are."""
        return table_uri(path)

    def commit(self, spark: SparkSession, change: DataCommit) -> bool:
        """Commit files written in the table folder; see :meth:`Lake.commit`. Added files
        (and, replacing, the removal of every file the table held) go in one
        ``create_write_transaction``; updated rows are rewritten on the driver: each file
        holding one is copied with the new values, and the commit removes the old file.
        Replacing keys copies the files holding their rows without them (:func:`_replace_keys`).

        Examples:
            >>> import pyarrow as pa
            >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
            >>> schema = StructType([StructField("id", StringType()),
            ...                      StructField("n", LongType())])
            >>> lake, path = DeltaRsLake(), str(tmp / "counts")
            >>> root = lake.data_root(path, str(tmp / "_staging"))  # the table folder
            >>> def write(ids, ns):  # Parquet files in the table folder, as tasks write them
            ...     writer = PartitionedFileWriter(root, to_arrow(schema), [])
            ...     writer.write(pa.record_batch({"id": ids, "n": ns}))
            ...     return writer.close()
            >>> files = write(["a", "b", "c"], [1, 2, 3])
            >>> load = DataCommit(path=path, root=root, files=files, schema=schema,
            ...                   app_id="load", version=1)
            >>> lake.commit(spark, load)
            True
            >>> lake.commit(spark, load)  # committed already: nothing added
            False
            >>> lake.txn_version(path, "load"), lake.read(spark, path).count()
            (1, 3)
            >>> keys = spark.createDataFrame([("a",), ("b",)], "id string")
            >>> lake.commit(spark, DataCommit(path=path, root=root, files=write(["b"], [20]),
            ...                               schema=schema, app_id="refresh", version=1,
            ...                               keys=keys))
            True
            >>> sorted(lake.read(spark, path).collect())  # b replaced; a has no new row: gone
            [Row(id='b', n=20), Row(id='c', n=3)]
        """
        if change.keys is not None:
            return _replace_keys(change, change.keys)
        return _commit_in_place(change)


def _replace_keys(change: DataCommit, keys: DataFrame | pa.Table) -> bool:
    """Replace the rows of ``keys`` by the rows of files written in the table folder: a
    commit (:meth:`Lake.commit`, mode ``"keys"``) made by snap-spark itself.

    A new table adopts the files in place. In an existing one, every data file holding a
    row of a key is copied without those rows (:func:`rewrite_updated`), and one
    commit removes those files and adds the copies and the new files. The copies are
    named after ``change.file_prefix`` (a run's :func:`snap_spark.pipeline.runs.file_prefix`),
    so what a run killed before its commit wrote is swept as that run's leftovers; no file
    is named by Delta. The keys are gathered on the driver (the rows of the keys replaced,
    not the table, must fit in its memory). A key matches rows whose key columns equal it
    (SQL ``=``: a null key column matches nothing).
    """
    import pyarrow as pa

    uri = table_uri(change.path)
    if table_uri(change.root) != uri:
        raise LakeError(f"delta-rs commits files in the table folder {uri}, not {change.root}")
    app_id, version = change.app_id, change.version
    check_txn(app_id, version)
    key_columns = check_key_columns(key_schema(keys), change.schema)
    adding = dataclasses.replace(change, keys=None)
    table = latest_table(uri)
    if table is None:  # nothing to delete: create the table with the files as they are
        return _commit_in_place(adding)
    done = table.transaction_version(app_id)
    if done is not None and done >= version:
        return False
    check_same_table(uri, table_schema(table), list(table.metadata().partition_columns),
                     change.schema, change.partition_by)
    key_rows = (keys.select(key_columns).group_by(key_columns).aggregate([])
                if isinstance(keys, pa.Table)
                else keys.select(*key_columns).distinct().toArrow())
    if key_rows.num_rows == 0:  # no keys: the files are added
        return _commit_in_place(adding)
    return _commit_in_place(dataclasses.replace(adding, updates=RowUpdates(
        key_rows, tuple(key_columns), change.file_prefix or "part-kept", remove=True,
        many=True)))


def _commit_in_place(change: DataCommit) -> bool:
    """Commit files the tasks wrote in the table folder (adding, or replacing all rows),
    with ``change.updates`` rewritten into copies of the files that hold their rows."""
    path, root, files, schema = change.path, change.root, change.files, change.schema
    partition_by, app_id, version = change.partition_by, change.app_id, change.version
    updates = change.updates
    uri = table_uri(path)
    if table_uri(root) != uri:
        raise LakeError(f"delta-rs commits files in the table folder {uri}, not {root}")
    check_txn(app_id, version)
    removed: list[RemovedFile] = []
    rewritten: list[DataFile] = []
    if updates is not None and len(updates):
        done_version = read_txn_version(uri, app_id)
        if done_version is not None and done_version >= version:
            return False  # committed before: rewrite nothing
        removed, rewritten = rewrite_updated(uri, updates, schema, partition_by)
    try:
        done = commit_files(uri, [*files, *rewritten], schema, partition_by, app_id=app_id,
                            version=version, write_id=uuid.uuid4().hex,
                            info=change.commit_info, replace=change.replace, removes=removed,
                            read_version=change.read_version)
    except BaseException:
        delete_data_files(uri, rewritten)
        raise
    if not done:
        delete_data_files(uri, rewritten)
    return done


def rewrite_updated(uri: str, updates: RowUpdates, schema: StructType,
                    partition_by: Sequence[str]) -> tuple[list[RemovedFile], list[DataFile]]:
    """Copy each data file of the table at ``uri`` that holds a row ``updates`` names, with
    the new values (without those rows when ``updates.remove``); return the files to remove
    and the copies to add (not committed). With ``updates.many`` (removing), a key may name
    any number of rows, matched column by column as SQL ``=`` does (a null matches nothing).

    Only files in the partitions ``updates`` names (when it has the partition columns), and
    whose statistics range over the first key column covers some key, are read.

    Raises:
        LakeError: an update finds no row, or several (nothing is left written then).
    """
    table = open_table(uri)
    if table is None:
        raise LakeError(f"no Delta table at {uri} to update rows of")
    arrow_schema = to_arrow(schema)
    keys = list(updates.keys)
    key_rows, lookup, new_values = _keyed_values(updates, keys, partition_by)
    files = _files_to_read(table, updates, partition_by, key_rows)
    matches = _key_matcher(keys, updates.rows, arrow_schema) if updates.many else None
    rewrite = _RowRewrite(updates, arrow_schema, keys, key_rows, lookup, new_values, matches,
                          found=[0] * len(key_rows))
    removed: list[RemovedFile] = []
    writer = PartitionedFileWriter(uri, arrow_schema, partition_by,
                                   file_prefix=f"{updates.file_prefix or 'part-updated'}-"
                                               f"{uuid.uuid4().hex[:12]}")
    try:
        for log_path, size, values in files:
            parts = dict(zip(partition_by, values, strict=True))
            batches = list(read_data_file(_absolute(uri, log_path), arrow_schema, parts))
            out = _rewrite_batches(rewrite, batches)
            if out is None:
                continue
            for batch in out:
                writer.write(batch)
            removed.append(RemovedFile(
                unquote(log_path), size, {c: partition_string(v) for c, v in parts.items()}))
        _check_found(rewrite)
        return removed, writer.close()
    except BaseException:
        writer.discard()
        raise


@dataclasses.dataclass
class _RowRewrite:
    """The rows one :func:`rewrite_updated` call looks for, prepared once, and how many
    table rows each key found so far."""

    updates: RowUpdates
    #: the table's Arrow schema
    schema: pa.Schema
    keys: list[str]
    #: the key of each row of ``updates.rows``
    key_rows: list[tuple[Any, ...]]
    #: the index in ``key_rows`` of each key (the last, for a key named more than once)
    lookup: dict[tuple[Any, ...], int]
    #: the new values of each column set (not partition columns), by index in ``key_rows``
    new_values: dict[str, list[Any]]
    #: with ``updates.many``: the mask of a batch's rows a key names (:func:`_key_matcher`)
    matches: Callable[[pa.RecordBatch], pa.Array] | None
    #: by index in ``key_rows``: the table rows that key found so far
    found: list[int]


def _keyed_values(updates: RowUpdates, keys: Sequence[str], partition_by: Sequence[str]
                  ) -> tuple[list[tuple[Any, ...]], dict[tuple[Any, ...], int],
                             dict[str, list[Any]]]:
    """The key of each row of ``updates.rows``, the index of each key among them, and the
    new values of each column set (partition columns are not), by row.

    Raises:
        LakeError: a key is named twice, and ``updates.many`` does not allow it.
    """
    rows = updates.rows
    columns = [c for c in updates.columns if c not in partition_by]
    key_rows = list(zip(*[rows.column(k).to_pylist() for k in keys], strict=True))
    lookup = {key: i for i, key in enumerate(key_rows)}
    if len(lookup) != len(key_rows) and not updates.many:
        raise LakeError(f"updates name the same key {list(keys)} more than once")
    new_values = {c: rows.column(c).to_pylist() for c in columns}
    return key_rows, lookup, new_values


def _files_to_read(table: DeltaTable, updates: RowUpdates, partition_by: Sequence[str],
                   key_rows: Sequence[tuple[Any, ...]]
                   ) -> Iterator[tuple[str, int | None, tuple[Any, ...]]]:
    """The log path, size and partition values of each data file of the snapshot ``table``
    that may hold a row of ``key_rows``: in a partition ``updates.rows`` names (when it has
    the partition columns), and whose statistics' range of the first key column (when
    recorded) holds the first column of some key. The log is read now, the files are picked
    as the result is iterated."""
    rows = updates.rows
    actions = table.get_add_actions(flatten=True)
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    typed = _partition_values(table.get_add_actions(flatten=False), partition_by)
    wanted_parts = (
        set(zip(*[rows.column(c).to_pylist() for c in partition_by], strict=True))
        if partition_by and all(c in rows.column_names for c in partition_by) else None
    )
    first = updates.keys[0]
    bounds = (actions.column(f"min.{first}").to_pylist(), actions.column(f"max.{first}").to_pylist()
              ) if f"min.{first}" in actions.column_names else None
    first_values = sorted({key[0] for key in key_rows
                           if key[0] is not None or not updates.many})
    return (
        (log_path, sizes[index], values)
        for index, (log_path, values) in enumerate(zip(paths, typed, strict=True))
        if (wanted_parts is None or values in wanted_parts)
        and (bounds is None or _any_within(first_values, bounds[0][index], bounds[1][index]))
    )


def _rewrite_batches(rewrite: _RowRewrite, batches: Iterable[pa.RecordBatch]
                     ) -> list[pa.RecordBatch] | None:
    """The batches of a copy of a data file (its ``batches``) with the rows ``rewrite``
    names removed or given their new values; ``None`` when the file holds none of them."""
    import pyarrow.compute as pc

    changed = False
    out: list[pa.RecordBatch] = []
    for batch in batches:
        if rewrite.matches is not None:  # every row of a key goes, whatever its count
            gone = rewrite.matches(batch)
            if gone.true_count:
                changed = True
                kept = batch.filter(pc.invert(gone))
                if kept.num_rows:
                    out.append(kept)
            else:
                out.append(batch)
            continue
        batch_keys = zip(*[batch.column(k).to_pylist() for k in rewrite.keys], strict=True)
        hits = [rewrite.lookup.get(key) for key in batch_keys]
        if not any(hit is not None for hit in hits):
            out.append(batch)
            continue
        changed = True
        copy = _apply_hits(rewrite, batch, hits)
        if copy is not None:
            out.append(copy)
    return out if changed else None


def _apply_hits(rewrite: _RowRewrite, batch: pa.RecordBatch, hits: Sequence[int | None]
                ) -> pa.RecordBatch | None:
    """The copy of ``batch`` without the rows a key names (``updates.remove``), or with
    their new values; ``hits`` holds each row's index in ``rewrite.key_rows`` (``None``:
    no key names it). Counts the rows in ``rewrite.found``; ``None`` when no row is left."""
    import pyarrow as pa

    if rewrite.updates.remove:  # the rows named are left out of the copy
        _count_hits(rewrite.found, hits)
        kept = batch.filter(pa.array([hit is None for hit in hits], pa.bool_()))
        return kept if kept.num_rows else None
    arrays = []
    for field in rewrite.schema:
        column = batch.column(field.name)
        if field.name in rewrite.new_values:
            values_now = column.to_pylist()
            for row, hit in enumerate(hits):
                if hit is not None:
                    values_now[row] = rewrite.new_values[field.name][hit]
            column = pa.array(values_now, field.type)
        arrays.append(column)
    _count_hits(rewrite.found, hits)
    return pa.RecordBatch.from_arrays(arrays, schema=rewrite.schema)


def _count_hits(found: list[int], hits: Sequence[int | None]) -> None:
    """Add one to ``found`` at each index in ``hits`` (``None``: a row no key names)."""
    for hit in hits:
        if hit is not None:
            found[hit] += 1


def _check_found(rewrite: _RowRewrite) -> None:
    """Refuse updates whose key found several rows, or none (unless removing); removals
    of any number of rows (``updates.many``) are not checked.

    Raises:
        LakeError: an update found no row, or several.
    """
    updates, found, key_rows = rewrite.updates, rewrite.found, rewrite.key_rows
    bad = [] if updates.many else [key_rows[i] for i, n in enumerate(found)
                                   if n > 1 or (n == 0 and not updates.remove)]
    if bad:
        raise LakeError(f"{len(bad)} update(s) found {found[key_rows.index(bad[0])]} rows "
                        f"instead of one (e.g. {dict(zip(rewrite.keys, bad[0], strict=True))}); "
                        "nothing was committed")


def _key_matcher(keys: Sequence[str], rows: pa.Table, schema: pa.Schema
                 ) -> Callable[[pa.RecordBatch], pa.Array]:
    """A function giving, for a batch of the table's Arrow ``schema``, the boolean mask of
    its rows whose ``keys`` columns equal those of a row of ``rows`` (never true where a key
    column is null); the keys are prepared once.

    Examples:
        >>> import pyarrow as pa
        >>> batch = pa.record_batch({"id": ["a", "b", None, "a"], "n": [1, 2, 3, 4]})
        >>> _key_matcher(["id"], pa.table({"id": ["a", None]}), batch.schema)(batch).to_pylist()
        [True, False, False, True]
        >>> match = _key_matcher(["id", "n"], pa.table({"id": ["a"], "n": [4]}), batch.schema)
        >>> match(batch).to_pylist()
        [False, False, False, True]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(keys) == 1:
        name = keys[0]
        wanted = rows.column(name).cast(schema.field(name).type).drop_null()
        return lambda batch: pc.fill_null(pc.is_in(batch.column(name), value_set=wanted),
                                          False)
    named = set(zip(*[rows.column(k).to_pylist() for k in keys], strict=True))
    return lambda batch: pa.array(
        [None not in key and key in named
         for key in zip(*[batch.column(k).to_pylist() for k in keys], strict=True)],
        pa.bool_())


def _any_within(sorted_values: Sequence[Any], low: Any, high: Any) -> bool:
    """True when a value of ``sorted_values`` lies in ``[low, high]`` (``None``: unknown)."""
    if low is None or high is None:
        return True
    from bisect import bisect_left

    at = bisect_left(sorted_values, low)
    return at < len(sorted_values) and sorted_values[at] <= high
