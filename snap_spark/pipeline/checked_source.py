"""``snap_checked_lines``: read input files and run the stateless checks in one pass.

The same as ``read_lines(...).transform(check(settings))`` row for row, but the lines never
travel to the JVM as raw bytes and back to Python for checking: each reader task splits its
file range into Arrow batches (:mod:`snap_spark.pipeline.source`) and hands them straight to
:func:`snap_spark.udfs.verify.check_batches`. It adds no rule of its own.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from snap_spark.pipeline.source import (
    DEFAULT_BATCH_ROWS,
    SnapLinesDataSource,
    SnapLinesReader,
    plan_input,
)
from snap_spark.udfs.verify import CHECKED_SCHEMA, check_batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from snap_spark.pipeline.verify import VerifySettings

DATA_SOURCE_NAME = "snap_checked_lines"


class SnapCheckedLinesReader(SnapLinesReader):
    """A :class:`SnapLinesReader` whose batches come out already checked."""

    def __init__(self, base: SnapLinesReader, clock_spec: str, clock_now: float,
                 max_drift: float, verify_threads: int = 1) -> None:
        super().__init__(base.paths, base.batch_rows, base.max_batch_bytes, base.split_bytes)
        self.clock_spec = clock_spec
        self.clock_now = clock_now
        self.max_drift = max_drift
        self.verify_threads = verify_threads

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Checked rows (:data:`snap_spark.udfs.verify.CHECKED_SCHEMA`) of one file range."""
        yield from check_batches(
            super().read(partition), self.clock_spec, self.clock_now, self.max_drift,
            self.verify_threads,
        )


class SnapCheckedLinesDataSource(SnapLinesDataSource):
    """Python Data Source ``snap_checked_lines``: ``snap_lines`` options plus ``clock_spec``,
    ``clock_now`` and ``max_drift``; rows are the stateless checks of each line."""

    @classmethod
    def name(cls) -> str:
        return DATA_SOURCE_NAME

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(CHECKED_SCHEMA)

    def reader(self, schema: StructType) -> SnapCheckedLinesReader:
        base = super().reader(schema)
        return SnapCheckedLinesReader(
            base,
            clock_spec=self.options.get("clock_spec", ""),
            clock_now=float(self.options.get("clock_now", "0")),
            max_drift=float(self.options.get("max_drift", "60")),
            verify_threads=int(self.options.get("verify_threads", "1")),
        )


_registered: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def read_checked(
    spark: SparkSession,
    paths: Sequence[str],
    settings: VerifySettings,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    split_bytes: int | None = None,
) -> DataFrame:
    """Read files and folders and check every line (one row per line, see
    :data:`snap_spark.udfs.verify.CHECKED_SCHEMA`), in one pass per file range.

    Examples:
        >>> from snap_spark.pipeline.verify import VerifySettings
        >>> df = read_checked(spark, ["data/sample"], VerifySettings())  # doctest: +SKIP
    """
    files, split_bytes = plan_input(spark, paths, split_bytes)
    if spark not in _registered:
        spark.dataSource.register(SnapCheckedLinesDataSource)
        _registered.add(spark)
    return (
        spark.read.format(DATA_SOURCE_NAME)
        .option("paths", json.dumps(files))
        .option("batch_rows", str(batch_rows))
        .option("split_bytes", str(split_bytes))
        .option("clock_spec", settings.bare_clock)
        .option("clock_now", repr(settings.clock_now))
        .option("max_drift", repr(settings.max_drift))
        .option("verify_threads", str(settings.verify_threads))
        .load()
    )
