"""A PySpark Python Data Source that appends a DataFrame to a Delta table through delta-rs.

``df.write.format("snap_delta_rs")`` runs :meth:`DeltaRsWriter.write` in each Spark task
(on executors): the task's Arrow batches become Parquet files inside the table folder and the
task returns a :class:`DataFilesMessage` describing them. When every task succeeded, Spark
calls :meth:`DeltaRsWriter.commit` once on the driver (in a Python worker process there) with
all messages, and :func:`snap_spark.lake.delta_log.commit_files` commits all files as one Delta
transaction carrying the app transaction. On failure, or when the transaction turns out to be
committed already, the written files are deleted. Like delta-spark, tasks write straight into
the table folder (no staging and renames, which object stores make costly): files of a task
killed while Spark aborts a failed job can stay behind, unreferenced by the log and so never
read; ``VACUUM`` removes them.

Use :meth:`snap_spark.lake.delta_rs.DeltaRsLake.append` rather than this source directly: it
checks the schema first and tells whether the commit happened.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from snap_spark.lake.api import LakeError
from snap_spark.lake.delta_log import commit_files, write_committed
from snap_spark.lake.files import DataFile, PartitionedFileWriter, delete_data_files

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

#: Name the source is registered under (``df.write.format(SOURCE_NAME)``).
SOURCE_NAME = "snap_delta_rs"


@dataclass(frozen=True)
class WriteSpec:
    """What one append writes and commits; travels to executors as data source options."""

    table_uri: str
    app_id: str
    version: int
    partition_by: tuple[str, ...]
    #: Unique id of this write, recorded in the commit's ``userMetadata``.
    write_id: str
    #: Table version the driver saw before writing (-1: no table yet).
    start_version: int
    #: JSON text of the ``info`` the commit carries (empty: none).
    info: str = ""

    def to_options(self) -> dict[str, str]:
        """Data source options carrying this spec (keys are lower case: Spark folds them)."""
        return {
            "path": self.table_uri,
            "app_id": self.app_id,
            "txn_version": str(self.version),
            "partition_by": json.dumps(list(self.partition_by)),
            "write_id": self.write_id,
            "start_version": str(self.start_version),
            "commit_info": self.info,
        }

    @classmethod
    def from_options(cls, options: dict[str, str]) -> WriteSpec:
        """Rebuild the spec from data source options; raises :class:`LakeError` if incomplete."""
        try:
            return cls(
                table_uri=options["path"],
                app_id=options["app_id"],
                version=int(options["txn_version"]),
                partition_by=tuple(json.loads(options.get("partition_by", "[]"))),
                write_id=options["write_id"],
                start_version=int(options.get("start_version", "-1")),
                info=options.get("commit_info", ""),
            )
        except KeyError as missing:
            raise LakeError(
                f"{SOURCE_NAME} needs option {missing}; write through DeltaRsLake.append"
            ) from None


@dataclass
class DataFilesMessage(WriterCommitMessage):
    """Commit message of one Spark task: the data files it wrote."""

    files: list[DataFile] = field(default_factory=list)


class DeltaRsDataSource(DataSource):
    """Append-only Delta sink: executors write Parquet, the driver commits with delta-rs."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``snap_delta_rs``."""
        return SOURCE_NAME

    def writer(self, schema: StructType, overwrite: bool) -> DeltaRsWriter:
        """A writer for one append job (overwrite is not offered)."""
        if overwrite:
            raise LakeError(f"{SOURCE_NAME} only appends; mode('overwrite') is not supported")
        return DeltaRsWriter(WriteSpec.from_options(dict(self.options)), schema)


class DeltaRsWriter(DataSourceArrowWriter):
    """Writes Parquet files in tasks and commits them in one Delta transaction."""

    def __init__(self, spec: WriteSpec, schema: StructType) -> None:
        self.spec = spec
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DataFilesMessage:
        """Runs in each task: write its batches as Parquet data files, return their list."""
        from snap_spark.lake.schema import to_arrow

        file_writer = PartitionedFileWriter(
            self.spec.table_uri,
            to_arrow(self.schema),
            self.spec.partition_by,
            file_prefix=_task_file_prefix(),
        )
        try:
            for batch in iterator:
                file_writer.write(batch)
            return DataFilesMessage(files=file_writer.close())
        except BaseException:
            file_writer.discard()
            raise

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Runs once on the driver after every task succeeded: commit all files."""
        files = _files_of(messages)
        committed = commit_files(
            self.spec.table_uri,
            files,
            self.schema,
            self.spec.partition_by,
            app_id=self.spec.app_id,
            version=self.spec.version,
            write_id=self.spec.write_id,
            info=json.loads(self.spec.info) if self.spec.info else None,
        )
        if not committed:  # another writer committed this transaction first
            delete_data_files(self.spec.table_uri, files)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Runs on the driver when the job failed: delete the files unless they were committed."""
        if not write_committed(self.spec.table_uri, self.spec.write_id, self.spec.start_version):
            delete_data_files(self.spec.table_uri, _files_of(messages))


def _files_of(messages: Sequence[WriterCommitMessage | None]) -> list[DataFile]:
    return [
        data_file
        for message in messages
        if isinstance(message, DataFilesMessage)
        for data_file in message.files
    ]


def _task_file_prefix() -> str:
    """``part-<partition id>`` of the running Spark task (``part-00000`` outside Spark)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    return f"part-{partition:05d}"
