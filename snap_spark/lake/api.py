"""The Delta table API every backend implements, and the errors it raises.

A :class:`Lake` commits Parquet files the job's tasks wrote (:meth:`Lake.commit` of a
:class:`DataCommit`: added, replacing the table, or replacing the rows of some keys), each
commit carrying an app transaction that makes it idempotent; it reads a table at a version,
and reports history and app transaction versions.
:func:`snap_spark.lake.get_lake` picks the backend that fits the session: ``delta-spark`` on
clusters with Delta's JARs, ``delta-rs`` (the ``deltalake`` package) everywhere else.
:func:`snap_spark.lake.commit_data_files` is how jobs commit: it deletes what is not committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from snap_spark.lake.files import DataFile


class LakeError(RuntimeError):
    """A Delta table operation could not be carried out as asked."""


class LakeLocationError(LakeError, ValueError):
    """A table location holds something that is not this table (a file, plain Parquet, a
    Delta table of other columns): refused before anything is written."""


class LakeSchemaError(LakeError, ValueError):
    """A DataFrame does not fit a table (columns, types, partitioning) or plain Delta."""


class DamagedTable(LakeError):
    """A Delta table's log cannot be read (a truncated or corrupt ``_delta_log`` file): the
    message names the table, the damaged log file when one is found, and what to do."""


class VersionConflict(LakeError):
    """A commit was decided against one version of a table, and another writer committed
    since: nothing was committed; decide again against the new version and retry."""


@dataclass(frozen=True)
class RowUpdates:
    """New values for some columns of rows a table already holds, committed by
    :meth:`Lake.commit` (an add: :class:`DataCommit` ``updates``) in the same commit as the
    new files.

    ``rows`` is an Arrow table of the ``keys`` columns, optionally the table's partition
    columns (the search is then limited to those partitions), and the columns to set. Each
    row of ``rows`` must find exactly one table row; the keys must be unique in ``rows``.
    ``file_prefix`` starts the names of the rewritten files a backend writes itself (a
    run's :func:`snap_spark.pipeline.runs.file_prefix`, so that what a run killed before its
    commit wrote is swept as that run's leftovers); ``None``: ``part-updated``.

    Examples:
        >>> import pyarrow as pa
        >>> RowUpdates(pa.table({"id": [3], "state": ["done"]}), ("id",)).columns
        ['state']
        >>> RowUpdates(pa.table({"id": [3]}), ("id",), remove=True).columns
        []
    """

    rows: pa.Table
    keys: tuple[str, ...]
    file_prefix: str | None = None
    #: remove the rows ``rows`` names instead of setting columns (``rows`` then holds the
    #: keys, and optionally partition columns, only); a key that finds no row is fine: its
    #: row was removed before
    remove: bool = False
    #: with ``remove``: a key may name any number of rows, all removed (a commit replacing
    #: the rows of keys); null key columns match nothing
    many: bool = False

    @property
    def columns(self) -> list[str]:
        """The columns set (every column of ``rows`` but the keys and partition values)."""
        return [n for n in self.rows.column_names if n not in self.keys]

    def __len__(self) -> int:
        return int(self.rows.num_rows)


@dataclass(frozen=True, eq=False)
class DataCommit:
    """One commit of Parquet files written under ``root`` (:meth:`Lake.data_root`) to the
    table at ``path``, carried out by :meth:`Lake.commit`.

    The commit carries the app transaction ``(app_id, version)`` and ``commit_info``; the
    table, when absent, is created with ``schema``, partitioned by ``partition_by``. Its
    :attr:`mode`: the files are added (``"add"``, the default; optionally with ``updates``
    to rows the table holds and a ``read_version`` the commit must follow), replace every
    row of the table (``replace=True``: ``"replace"``), or replace the rows of ``keys``
    (``"keys"``). ``files`` and ``partition_by`` are kept as tuples. Instances compare by
    identity (``keys`` is a DataFrame).

    Raises:
        ValueError: ``replace`` with ``keys``, or ``updates``/``read_version`` with either.
        LakeSchemaError: ``partition_by`` is a string, not a sequence of column names.

    Examples:
        >>> from pyspark.sql.types import StringType, StructField, StructType
        >>> schema = StructType([StructField("id", StringType())])
        >>> change = DataCommit(path="/lake/t", root="/lake/t", files=[], schema=schema,
        ...                     app_id="run1", version=1)
        >>> change.mode, change.files, change.partition_by
        ('add', (), ())
        >>> DataCommit(path="/lake/t", root="/lake/t", files=[], schema=schema,
        ...            app_id="run1", version=1, replace=True, read_version=3)
        Traceback (most recent call last):
        ValueError: updates and read_version go with an add, not a replace
    """

    path: str
    root: str
    files: Sequence[DataFile]
    schema: StructType
    app_id: str
    version: int
    partition_by: Sequence[str] = ()
    commit_info: Mapping[str, Any] | None = None
    replace: bool = False
    #: a Spark DataFrame, or a ``pyarrow.Table`` of keys gathered on the driver (no Spark
    #: job to collect them)
    keys: DataFrame | pa.Table | None = None
    updates: RowUpdates | None = None
    read_version: int | None = None
    #: starts the names of the files a backend writes itself for this commit (copies of
    #: files that lose rows when keys are replaced): a run's
    #: :func:`snap_spark.pipeline.runs.file_prefix`, so that a run killed before its commit
    #: leaves only files its sweep recognises; ``None``: ``part-kept``
    file_prefix: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.partition_by, str):
            raise LakeSchemaError("partition_by must be a sequence of column names, not a "
                                  "string")
        if self.replace and self.keys is not None:
            raise ValueError("replace the whole table or the rows of keys, not both")
        if ((self.replace or self.keys is not None)
                and (self.updates is not None or self.read_version is not None)):
            raise ValueError("updates and read_version go with an add, not a replace")
        object.__setattr__(self, "files", tuple(self.files))
        object.__setattr__(self, "partition_by", tuple(self.partition_by))

    @property
    def mode(self) -> str:
        """``"add"``, ``"replace"`` (every row of the table) or ``"keys"`` (the rows of
        ``keys``)."""
        if self.keys is not None:
            return "keys"
        return "replace" if self.replace else "add"


@runtime_checkable
class Lake(Protocol):
    """One small API over Delta tables; see :mod:`snap_spark.lake` for the two backends.

    Every table it creates is plain Delta (reader/writer protocol 1/2, no deletion vectors,
    microsecond UTC timestamps) so Spark with Delta, delta-rs, DuckDB and Polars all open it.
    """

    #: ``"delta-rs"`` or ``"delta-spark"``.
    name: str

    def read(self, spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
        """Read the table, at ``version`` when given, else its latest version."""
        ...

    def history(self, path: str) -> list[dict[str, Any]]:
        """Commits of the table, newest first.

        Every entry has at least ``version`` (int), ``timestamp`` (int, ms since the epoch),
        ``operation`` (str) and ``operationParameters``; commits made through this API carry
        ``userMetadata`` naming the write.
        """
        ...

    def txn_version(self, path: str, app_id: str) -> int | None:
        """Latest app transaction version recorded for ``app_id``; ``None`` if none/no table."""
        ...

    def exists(self, path: str) -> bool:
        """True when ``path`` holds a Delta table."""
        ...

    def distinct_values(self, spark: SparkSession, path: str, column: str) -> set[Any]:
        """The distinct values of one column of the table's latest version (empty set when
        there is no table), e.g. the ingest keys a table already holds."""
        ...

    def data_root(self, path: str, staging: str) -> str:
        """Folder where executors write Parquet files meant for :meth:`commit` to table
        ``path``; ``staging`` is a scratch folder of the run, deleted afterwards."""
        ...

    def commit(self, spark: SparkSession, change: DataCommit) -> bool:
        """Commit Parquet files written under ``change.root`` (:meth:`data_root`) to the
        table at ``change.path`` in one commit with the app transaction ``(app_id,
        version)`` and ``commit_info`` in its ``userMetadata``
        (:func:`snap_spark.lake.common.marker_info` reads it back); the table is created
        (``schema``, partitioned by ``partition_by``) when absent. Returns ``False`` and
        changes nothing when the table already holds that transaction (the caller then
        deletes the files: :func:`snap_spark.lake.commit_data_files` does).

        What the commit does besides adding the files depends on ``change.mode``:

        ``"add"``
            Nothing more. With ``updates``, the same commit also rewrites the rows they
            name (the files that hold them are replaced by rewritten copies; earlier
            versions keep the old values). With ``read_version`` (the table version what
            is committed was decided against; -1: no table), the commit is valid only as
            the next version: if another writer committed since, nothing is committed and
            :class:`VersionConflict` is raised. On delta-rs the log entry itself is the
            arbiter (a create-if-absent of version ``read_version + 1``, no retry at a
            later version); delta-spark checks the version right before its commit, which
            is exact only under the lake's commit lease (:mod:`snap_spark.lake.lease`).
        ``"replace"``
            The commit also removes every file the table held: its rows are replaced
            (earlier versions stay readable by time travel).
        ``"keys"``
            The commit also deletes every row of the table whose values in the columns of
            ``keys`` equal a row of ``keys``: the rows of those keys are replaced by the
            files' rows, the other rows stay as they are. ``keys`` is a DataFrame of key
            columns only (columns of ``schema``, of the same types; repeated rows are
            fine, a null never matches); it is joined, never collected into a predicate,
            so it may hold many keys. A key with no row in the files loses its rows. Rows
            of the files are added whatever their key: give them keys of ``keys``, or keys
            the table does not hold. Files may be copied rather than adopted (by a merge);
            the backend then deletes them itself.

        Raises:
            VersionConflict: the table moved past ``read_version`` (nothing committed).
            LakeError: the commit was refused (other columns or partitioning, an update
                that names a row the table does not hold, ...): nothing committed.
        """
        ...
