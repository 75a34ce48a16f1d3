"""The Delta table API every backend implements, and the errors it raises.

A :class:`Lake` commits Parquet files the job's tasks wrote (added, replacing the table, or
replacing the rows of some keys), each commit carrying an app transaction that makes it
idempotent; it reads a table at a version, and reports history and app transaction versions.
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
    :meth:`Lake.add_files` in the same commit as the new files.

    ``rows`` is an Arrow table of the ``keys`` columns, optionally the table's partition
    columns (the search is then limited to those partitions), and the columns to set. Each
    row of ``rows`` must find exactly one table row; the keys must be unique in ``rows``.

    Examples:
        >>> import pyarrow as pa
        >>> RowUpdates(pa.table({"id": [3], "state": ["done"]}), ("id",)).columns
        ['state']
    """

    rows: pa.Table
    keys: tuple[str, ...]

    @property
    def columns(self) -> list[str]:
        """The columns set (every column of ``rows`` but the keys and partition values)."""
        return [n for n in self.rows.column_names if n not in self.keys]

    def __len__(self) -> int:
        return int(self.rows.num_rows)


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
        """Folder where executors write Parquet files meant for :meth:`add_files` to table
        ``path``; ``staging`` is a scratch folder of the run, deleted afterwards."""
        ...

    def add_files(
        self,
        spark: SparkSession,
        path: str,
        root: str,
        files: Sequence[DataFile],
        *,
        schema: StructType,
        partition_by: Sequence[str],
        app_id: str,
        version: int,
        commit_info: Mapping[str, Any] | None = None,
        updates: RowUpdates | None = None,
        read_version: int | None = None,
    ) -> bool:
        """Add Parquet files written under ``root`` (:meth:`data_root`) to table ``path`` in
        one commit with the app transaction ``(app_id, version)`` and ``commit_info`` in its
        ``userMetadata`` (:func:`snap_spark.lake.common.marker_info` reads it back); the
        table is created (``schema``, partitioned by ``partition_by``) when absent. Returns
        ``False`` and adds nothing when the table already holds that transaction (the caller
        then deletes the files).

        With ``updates``, the same commit also rewrites the rows they name (the files that
        hold them are replaced by rewritten copies; earlier versions keep the old values).

        With ``read_version`` (the table version what is committed was decided against; -1:
        no table), the commit is valid only as the next version: if another writer
        committed since, nothing is committed and :class:`VersionConflict` is raised. On
        delta-rs the log entry itself is the arbiter (a create-if-absent of version
        ``read_version + 1``, no retry at a later version); delta-spark checks the version
        right before its commit, which is exact only under the lake's commit lease
        (:mod:`snap_spark.lake.lease`).

        Raises:
            LakeError: an update names a row the table does not hold (nothing committed).
            VersionConflict: the table moved past ``read_version``.
        """
        ...

    def replace_files(
        self,
        spark: SparkSession,
        path: str,
        root: str,
        files: Sequence[DataFile],
        *,
        schema: StructType,
        partition_by: Sequence[str],
        app_id: str,
        version: int,
        commit_info: Mapping[str, Any] | None = None,
    ) -> bool:
        """Like :meth:`add_files`, but the one commit also removes every file the table held
        (its rows are replaced; earlier versions stay readable by time travel)."""
        ...

    def replace_keys(
        self,
        spark: SparkSession,
        path: str,
        root: str,
        files: Sequence[DataFile],
        *,
        keys: DataFrame,
        schema: StructType,
        partition_by: Sequence[str],
        app_id: str,
        version: int,
        commit_info: Mapping[str, Any] | None = None,
    ) -> bool:
        """Like :meth:`add_files`, but the one commit also deletes every row of the table whose
        values in the columns of ``keys`` equal a row of ``keys``: the rows of those keys are
        replaced by the files' rows, the other rows stay as they are.

        ``keys`` is a DataFrame of key columns only (columns of ``schema``, of the same
        types; repeated rows are fine, a null never matches); it is joined, never collected
        into a predicate, so it may hold many keys. A key with no row in ``files`` loses its
        rows. Rows of ``files`` are added whatever their key: give them keys of ``keys``, or
        keys the table does not hold. Returns ``False`` and changes nothing when the table
        already holds the transaction (the caller then deletes the files); creates the table
        when absent. Files may be copied rather than adopted (by a merge); the backend then
        deletes them itself.
        """
        ...
