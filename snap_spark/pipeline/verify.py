"""The batch verification pipeline: NDJSON archives → ``raw_messages`` and ``messages``.

DataFrame transforms for notebooks and tests: verdicts of lines as a DataFrame, without
writing tables (the batch job itself lands files directly: :mod:`snap_spark.pipeline.land`)::

    read_lines → check (mapInArrow over udfs.verify) → resolve_replay

The verdict of each line equals ``snap-spark check`` on the same file (same protocol code,
same replay fold).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from snap_spark.protocol.errors import ErrorCode
from snap_spark.protocol.replay import replayed_rows
from snap_spark.udfs.verify import CHECKED_SCHEMA, check_batches


@dataclass(frozen=True)
class VerifySettings:
    """Knobs of the verification (defaults follow the spec)."""

    max_drift: float = 60.0
    replay_window: float = 120.0
    bare_clock: str = ""  # "", "now", "message" or unix seconds
    clock_now: float = 0.0  # the driver's "now", used when bare_clock == "now"
    verify_threads: int = 1  # threads per task for signature verification


def _checked_struct() -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(CHECKED_SCHEMA)


def check(settings: VerifySettings) -> Any:
    """Transform: lines (``source_file, line_no, raw, read_error``) → stateless checks."""
    fn = functools.partial(
        check_batches,
        clock_spec=settings.bare_clock,
        clock_now=settings.clock_now,
        max_drift=settings.max_drift,
        verify_threads=settings.verify_threads,
    )

    def step(lines: DataFrame) -> DataFrame:
        if "read_error" not in lines.columns:
            lines = lines.withColumn("read_error", F.lit(None).cast("string"))
        return lines.select("source_file", "line_no", "raw", "read_error").mapInArrow(
            fn, _checked_struct()
        )

    return step


_REPLAY_OUT = StructType([
    StructField("source_file", StringType(), False),
    StructField("line_no", LongType(), False),
    StructField("replay_code", IntegerType(), True),
    StructField("replay_detail", StringType(), True),
    StructField("prior_code", IntegerType(), True),  # the stateless verdict it replaces
])


_REPLAY_ARROW = pa.schema([
    pa.field("source_file", pa.string(), False),
    pa.field("line_no", pa.int64(), False),
    pa.field("replay_code", pa.int32()),
    pa.field("replay_detail", pa.string()),
    pa.field("prior_code", pa.int32()),
])


#: Schema of :func:`find_duplicates` (public, for building it from collected rows).
DUPLICATES_SCHEMA = _REPLAY_OUT


def _fold_partition(window: float, batches: Iterator[pa.RecordBatch]
                    ) -> Iterator[pa.RecordBatch]:
    """Replay fold with the protocol's own :func:`resolve`; emits only the 2006 rows.

    The partition holds every candidate of its ``(from, id)`` keys (hash-partitioned by
    key), sorted by receipt time, file and line: the order :func:`resolve` expects. Keys are
    independent, so one pass folds the whole partition. :func:`resolve` only ever turns a
    verdict into a 2006 (all others keep their stateless code), so only those rows leave.
    """
    received = list(batches)
    if not received:
        return
    table = pa.Table.from_batches(received)
    if table.num_rows == 0:
        return
    cols = table.to_pydict()
    out: dict[str, list[Any]] = {f.name: [] for f in _REPLAY_OUT.fields}
    for i, detail in replayed_rows(cols["sender"], cols["msg_id"], cols["received_at"],
                                   cols["auth_code"], window):
        out["source_file"].append(cols["source_file"][i])
        out["line_no"].append(cols["line_no"][i])
        out["replay_code"].append(int(ErrorCode.DUPLICATE_MESSAGE))
        out["replay_detail"].append(detail)
        out["prior_code"].append(cols["auth_code"][i])
    if out["line_no"]:
        yield pa.RecordBatch.from_pydict(out, schema=_REPLAY_ARROW)


def find_duplicates(settings: VerifySettings) -> Any:
    """Transform: checked lines → the lines the replay step (check 6) turns into 2006.

    Messages that passed checks 1–5 are shuffled by ``(from, id)`` (a narrow projection)
    and folded in receipt order by the protocol's :func:`resolve`. The result is small in
    practice (replays only): ``source_file, line_no, replay_code, replay_detail,
    prior_code``.
    """

    def step(checked: DataFrame) -> DataFrame:
        return (
            checked.filter(F.col("pre_code").isNull())
            .select("sender", "msg_id", "received_at", "source_file", "line_no", "auth_code")
            .repartition("sender", "msg_id")
            .sortWithinPartitions("received_at", "source_file", "line_no")
            .mapInArrow(functools.partial(_fold_partition, settings.replay_window),
                        _REPLAY_OUT)
        )

    return step


def apply_duplicates(duplicates: DataFrame) -> Any:
    """Transform: add final ``error_code``/``error_detail`` to checked lines, given the
    2006 rows of :func:`find_duplicates` (every other line keeps its stateless verdict)."""

    def step(checked: DataFrame) -> DataFrame:
        joined = checked.join(
            F.broadcast(duplicates.drop("prior_code")), ["source_file", "line_no"], "left"
        )
        code = F.coalesce(F.col("pre_code"), F.col("replay_code"), F.col("auth_code"))
        detail = (
            F.when(F.col("pre_code").isNotNull(), F.col("pre_detail"))
            .when(F.col("replay_code").isNotNull(), F.col("replay_detail"))
            .otherwise(F.col("auth_detail"))
        )
        return joined.withColumn("error_code", code.cast("int")).withColumn(
            "error_detail", detail
        ).drop("replay_code", "replay_detail")

    return step


def resolve_replay(settings: VerifySettings) -> Any:
    """Transform: checked lines → lines with their final verdict (replay applied)."""

    def step(checked: DataFrame) -> DataFrame:
        return checked.transform(apply_duplicates(checked.transform(find_duplicates(settings))))

    return step
