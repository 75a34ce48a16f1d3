"""The batch verification pipeline: NDJSON archives → ``raw_messages`` and ``messages``.

Data flow (each step a DataFrame transform)::

    read_lines → check (mapInArrow over udfs.verify) → resolve_replay → to_messages
                                                                   ↘ to_raw_messages

Every input line becomes one row of each table; the verdict of each line equals
``snap-spark check`` on the same file (same protocol code, same replay fold).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from snap_spark.protocol.errors import ERROR_NAMES
from snap_spark.protocol.replay import resolve
from snap_spark.protocol.validate import Checked
from udfs.verify import CHECKED_SCHEMA, check_batches


@dataclass(frozen=True)
class VerifySettings:
    """Knobs of the verification (defaults follow the spec)."""

    max_drift: float = 60.0
    replay_window: float = 120.0
    bare_clock: str = ""  # "", "now", "message" or unix seconds
    clock_now: float = 0.0  # the driver's "now", used when bare_clock == "now"


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
    StructField("in_dup_group", BooleanType(), False),
])


def _fold_group(window: float, pdf: pd.DataFrame) -> pd.DataFrame:
    """Replay fold of one ``(from, id)`` group with the protocol's own :func:`resolve`."""
    pdf = pdf.sort_values(["received_at", "source_file", "line_no"], kind="stable")
    items = [
        Checked(
            sender=row.sender,
            msg_id=row.msg_id,
            received_at=float(row.received_at),
            auth_code=None if pd.isna(row.auth_code) else int(row.auth_code),
            auth_detail=row.auth_detail or "",
        )
        for row in pdf.itertuples(index=False)
    ]
    finals = resolve(items, window)
    return pd.DataFrame({
        "source_file": pdf["source_file"].to_numpy(),
        "line_no": pdf["line_no"].to_numpy(),
        "replay_code": pd.array([c for c, _ in finals], dtype="Int32"),
        "replay_detail": [d or None for _, d in finals],
        "in_dup_group": True,
    })


def resolve_replay(settings: VerifySettings) -> Any:
    """Transform: add ``error_code``/``error_detail`` with the replay step (check 6) applied.

    Only ``(from, id)`` keys seen more than once among messages that passed checks 1–5 need
    the sequential fold; every other line keeps its stateless verdict.
    """

    def step(checked: DataFrame) -> DataFrame:
        candidates = checked.filter(F.col("pre_code").isNull())
        repeated = (
            candidates.groupBy("sender", "msg_id").count().filter(F.col("count") > 1)
            .select("sender", "msg_id")
        )
        groups = candidates.join(repeated, ["sender", "msg_id"], "left_semi").select(
            "sender", "msg_id", "received_at", "source_file", "line_no", "auth_code",
            "auth_detail",
        )
        folded = groups.groupBy("sender", "msg_id").applyInPandas(
            functools.partial(_fold_group, settings.replay_window), _REPLAY_OUT
        )
        joined = checked.join(folded, ["source_file", "line_no"], "left")
        in_group = F.coalesce(F.col("in_dup_group"), F.lit(False))
        code = (
            F.when(F.col("pre_code").isNotNull(), F.col("pre_code"))
            .when(in_group, F.col("replay_code"))
            .otherwise(F.col("auth_code"))
        )
        detail = (
            F.when(F.col("pre_code").isNotNull(), F.col("pre_detail"))
            .when(in_group, F.col("replay_detail"))
            .otherwise(F.col("auth_detail"))
        )
        return joined.withColumn("error_code", code.cast("int")).withColumn(
            "error_detail", detail
        ).drop("replay_code", "replay_detail", "in_dup_group")

    return step


def _unix_to_ts(col: Column) -> Column:
    return F.timestamp_micros((col * F.lit(1_000_000)).cast("long"))


def _error_name(col: Column) -> Column:
    mapping = F.create_map(*[x for code, name in ERROR_NAMES.items()
                             for x in (F.lit(code), F.lit(name))])
    return mapping[col]


def to_messages(ingest_id: str, ingest_time_us: int) -> Any:
    """Transform: resolved checks → rows of the ``messages`` table (schemas.tables.MESSAGES)."""
    from schemas.tables import MESSAGES

    def step(resolved: DataFrame) -> DataFrame:
        ingest_time = F.timestamp_micros(F.lit(ingest_time_us))
        event_time = F.timestamp_seconds(F.col("timestamp"))
        received_time = _unix_to_ts(F.col("received_at"))
        out = resolved.select(
            F.lit(ingest_id).alias("ingest_id"),
            ingest_time.alias("ingest_time"),
            "source_file", "file_key", "line_no", "msg_id", "version", "sender", "recipient",
            "msg_type", "method", "timestamp",
            event_time.alias("event_time"),
            "received_at",
            received_time.alias("received_time"),
            F.coalesce(F.to_date(received_time), F.to_date(event_time), F.to_date(ingest_time))
            .alias("event_date"),
            "task_id", "context_id", "task_state", "has_sig", "canonical_payload",
            F.when(F.col("error_code").isNull(), F.lit("valid")).otherwise(F.lit("rejected"))
            .alias("verdict"),
            "error_code",
            _error_name(F.col("error_code")).alias("error_name"),
            "error_detail",
        )
        return _conform(out, MESSAGES)

    return step


def to_raw_messages(ingest_id: str, ingest_time_us: int) -> Any:
    """Transform: checks → rows of ``raw_messages`` (schemas.tables.RAW_MESSAGES)."""
    from schemas.tables import RAW_MESSAGES

    def step(checked: DataFrame) -> DataFrame:
        out = checked.select(
            F.lit(ingest_id).alias("ingest_id"),
            F.timestamp_micros(F.lit(ingest_time_us)).alias("ingest_time"),
            "source_file", "file_key", "line_no", "byte_len", "raw_text", "raw_bytes", "read_error",
            "is_envelope", "source",
            F.col("envelope_received_at").alias("received_at"),
            _unix_to_ts(F.col("envelope_received_at")).alias("received_time"),
        )
        return _conform(out, RAW_MESSAGES)

    return step


def _conform(df: DataFrame, schema: StructType) -> DataFrame:
    """Cast to the declared schema (names, order, types); nullability is the table's."""
    return df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def verdict_counts(messages: DataFrame) -> dict[int | None, int]:
    """``{error_code: count}`` (``None`` = valid) of a messages DataFrame."""
    rows = messages.groupBy("error_code").count().collect()
    return {row["error_code"]: int(row["count"]) for row in rows}


def iter_verdicts(messages: DataFrame) -> Iterator[tuple[str, int, str, int | None, str]]:
    """``(source_file, line_no, verdict, error_code, error_detail)`` sorted by file, line."""
    for row in messages.select(
        "source_file", "line_no", "verdict", "error_code", "error_detail"
    ).orderBy("source_file", "line_no").toLocalIterator():
        yield (row[0], row[1], row[2], row[3], row[4] or "")


