"""Lines → checked batches → table rows: the one mapping every job uses.

A batch of input lines (from a file range, a Kafka micro-batch, or decrypted Nostr messages)
is checked once by :func:`check_lines` (every stateless check of
:mod:`snap_spark.protocol`, through :mod:`snap_spark.udfs.verify`), and the result is
turned into rows of the two line tables by :func:`raw_rows` and :func:`message_rows`. The
replay step (check 6) can later turn some ``messages`` rows into 2006 with
:func:`apply_duplicates`; which rows take part in it is :func:`replay_candidates`.

Nothing here imports Spark: Spark tasks, tests and services call it alike.

Examples:
    >>> from snap_spark.settings import VerifySettings
    >>> checked = check_lines(VerifySettings(), "a.jsonl", [1], [b"not json"], None)
    >>> rows = message_rows(RowMeta("run-1", 0, "key-a"), checked)
    >>> rows.column("verdict").to_pylist(), rows.column("error_code").to_pylist()
    (['rejected'], [1003])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from snap_spark.pipeline.read import lines_batch
from snap_spark.protocol.errors import ERROR_NAMES
from snap_spark.protocol.verdict import (
    DUPLICATE,
    POST_REPLAY_CODES,
    REJECTED,
    VALID,
)
from snap_spark.settings import VerifySettings
from snap_spark.udfs.verify import check_arrow, line_text_arrow

#: Latest instant a ``timestamp`` column holds (9999-12-31T23:59:59Z), in unix seconds.
MAX_TIMESTAMP_SECONDS = 253_402_300_799

_TS = pa.timestamp("us", tz="UTC")
_SCHEMAS: dict[str, pa.Schema] = {}


def table_arrow_schema(name: str) -> pa.Schema:
    """Arrow schema of a table declared in :mod:`snap_spark.schemas.tables`, cached."""
    schema = _SCHEMAS.get(name)
    if schema is None:
        from snap_spark.lake import to_arrow
        from snap_spark.schemas.tables import TABLES

        schema = _SCHEMAS[name] = to_arrow(TABLES[name])
    return schema


@dataclass(frozen=True)
class RowMeta:
    """Per-run values every row of a batch carries."""

    ingest_id: str
    ingest_time_us: int
    file_key: str


@dataclass
class CheckedLines:
    """One batch of lines of one source, with the stateless checks of each line.

    ``lines`` holds ``source_file, line_no, raw, byte_len, read_error``; ``raws`` the same
    bytes as Python objects; ``verdicts`` the :data:`snap_spark.udfs.verify.VERDICT_COLUMNS`
    (Arrow, one row per line).
    """

    lines: pa.RecordBatch
    raws: list[bytes | None]
    verdicts: pa.RecordBatch

    @property
    def num_rows(self) -> int:
        return int(self.lines.num_rows)

    def column(self, name: str) -> pa.Array:
        """One of the :data:`~snap_spark.udfs.verify.VERDICT_COLUMNS`."""
        return self.verdicts.column(name)

    @property
    def cols(self) -> dict[str, list[Any]]:
        """The verdict columns as Python lists (for callers that walk them row by row)."""
        cols: dict[str, list[Any]] = self.verdicts.to_pydict()
        return cols

    @property
    def needs_clock(self) -> int:
        """How many lines are bare while no receipt clock is configured."""
        return int(pc.sum(self.column("needs_clock").cast(pa.int64())).as_py() or 0)

    def codes(self) -> list[int | None]:
        """The stateless code of each line (before replay)."""
        codes: list[int | None] = stateless_codes(self.verdicts).to_pylist()
        return codes


def stateless_codes(verdicts: pa.RecordBatch) -> pa.Array:
    """The code of each line from the checks that need only the line: checks 1-5, else
    7-8 (:func:`snap_spark.protocol.verdict.stateless_verdict`, column-wise)."""
    return pc.coalesce(verdicts.column("pre_code"), verdicts.column("auth_code"))


def check_lines(
    settings: VerifySettings,
    source_file: str,
    line_nos: list[int],
    raws: list[bytes | None],
    read_errors: list[str | None] | None,
) -> CheckedLines:
    """Check one batch of lines of ``source_file`` (``read_errors=None``: no read errors).

    ``settings.verify_threads`` must already be decided (0 counts as 1).
    """
    lines = lines_batch(source_file, line_nos, raws, read_errors)
    verdicts = check_arrow(lines.column("raw"),
                           lines.column("read_error") if read_errors is not None else None,
                           settings.clock(), settings.max_drift,
                           max(1, settings.verify_threads))
    return CheckedLines(lines, raws, verdicts)


def seconds_to_timestamps(seconds: pa.Array) -> pa.Array:
    """Unix seconds (int or float) → ``timestamp[us, UTC]``, truncated to the microsecond;
    null outside years 1970-9999 (a rejected message may carry any number)."""
    values = pc.cast(seconds, pa.float64())
    inside = pc.and_(pc.greater_equal(values, 0.0),
                     pc.less_equal(values, float(MAX_TIMESTAMP_SECONDS)))
    kept = pc.if_else(inside, values, pa.scalar(None, pa.float64()))
    return pc.cast(pc.cast(pc.trunc(pc.multiply(kept, 1_000_000.0)), pa.int64()), _TS)


def _constant(value: Any, type_: pa.DataType, count: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type=type_), count)


def _raw_text(raw: pa.Array, raws: list[bytes | None]) -> tuple[pa.Array, pa.Array]:
    """``(raw_text, raw_bytes)`` columns: the text of each line, and its exact bytes only when
    it is not valid UTF-8 (Arrow validates a whole batch at once; a batch that has such a
    line is decoded line by line, by the native core when it is built)."""
    try:
        return raw.cast(pa.string()), pa.nulls(len(raw), pa.binary())
    except pa.ArrowInvalid:
        return line_text_arrow(raw, raws)


def raw_rows(meta: RowMeta, checked: CheckedLines) -> pa.RecordBatch:
    """``raw_messages`` rows of one checked batch (see ``schemas.tables.RAW_MESSAGES``)."""
    lines, n = checked.lines, checked.num_rows
    text, exact = _raw_text(lines.column("raw"), checked.raws)
    envelope_at = checked.column("envelope_received_at")
    return pa.RecordBatch.from_arrays([
        _constant(meta.ingest_id, pa.string(), n),
        _constant(meta.ingest_time_us, pa.int64(), n).cast(_TS),
        lines.column("source_file"),
        _constant(meta.file_key, pa.string(), n),
        lines.column("line_no"),
        pc.cast(pc.fill_null(lines.column("byte_len"), 0), pa.int64()),
        text,
        exact,
        lines.column("read_error"),
        checked.column("is_envelope"),
        checked.column("source"),
        envelope_at,
        seconds_to_timestamps(envelope_at),
    ], schema=table_arrow_schema("raw_messages"))


def message_rows(meta: RowMeta, checked: CheckedLines) -> pa.RecordBatch:
    """``messages`` rows of one checked batch with their stateless verdicts (the replay
    step may later turn a candidate into a 2006: :func:`apply_duplicates`)."""
    lines, n = checked.lines, checked.num_rows
    col = checked.column
    codes = stateless_codes(checked.verdicts)
    pre_failed = pc.is_valid(col("pre_code"))
    auth_failed = pc.is_valid(col("auth_code"))
    no_text = pa.scalar(None, pa.string())
    # the detail of the code that won (stateless_verdict); "" is stored as NULL
    details = pc.if_else(pre_failed, col("pre_detail"),
                         pc.if_else(auth_failed, col("auth_detail"), no_text))
    timestamps = col("timestamp")
    received = col("received_at")
    event_time = seconds_to_timestamps(timestamps)
    received_time = seconds_to_timestamps(received)
    ingest_time = _constant(meta.ingest_time_us, pa.int64(), n).cast(_TS)
    event_date = pc.coalesce(pc.cast(received_time, pa.date32()),
                             pc.cast(event_time, pa.date32()),
                             pc.cast(ingest_time, pa.date32()))
    return pa.RecordBatch.from_arrays([
        _constant(meta.ingest_id, pa.string(), n),
        ingest_time,
        lines.column("source_file"),
        _constant(meta.file_key, pa.string(), n),
        lines.column("line_no"),
        col("msg_id"),
        col("version"),
        col("sender"),
        col("recipient"),
        col("msg_type"),
        col("method"),
        timestamps,
        event_time,
        received,
        received_time,
        event_date,
        col("task_id"),
        col("context_id"),
        col("task_state"),
        col("has_sig"),
        col("canonical_payload"),
        pc.if_else(pc.is_null(codes), VALID, REJECTED),
        codes,
        error_names(codes),
        details,
        col("auth_code"),
        pc.if_else(auth_failed, col("auth_detail"), no_text),
    ], schema=table_arrow_schema("messages"))


_CODES = pa.array(sorted(ERROR_NAMES), pa.int32())
_NAMES = pa.array([ERROR_NAMES[c] for c in sorted(ERROR_NAMES)], pa.string())


def error_names(codes: pa.Array) -> pa.Array:
    """``error_name`` of each code (NULL for no code).

    Examples:
        >>> error_names(pa.array([None, 2001], pa.int32())).to_pylist()
        [None, 'SignatureInvalidError']
    """
    return _NAMES.take(pc.index_in(codes, value_set=_CODES))


def replay_candidates(checked: CheckedLines) -> list[int]:
    """Indexes of the lines that take part in the replay step (checks 1-5 passed)."""
    indexes: list[int] = pc.indices_nonzero(candidate_mask(checked)).to_pylist()
    return indexes


def candidate_mask(checked: CheckedLines) -> pa.Array:
    """True for each line that takes part in the replay step
    (:func:`snap_spark.protocol.verdict.is_replay_candidate` of its checks 1-5 code)."""
    pre = checked.column("pre_code")
    return pc.or_(pc.is_null(pre), pc.is_in(pre, value_set=_POST_REPLAY)).fill_null(False)


_POST_REPLAY = pa.array(sorted(POST_REPLAY_CODES), pa.int32())


def apply_duplicates(rows: pa.Table, duplicates: Mapping[int, str]) -> pa.Table:
    """Turn the ``messages`` rows whose ``line_no`` is in ``duplicates`` (one source file)
    into 2006 rejections with the given detail; every other row is unchanged.

    Only replay candidates may be named (the replay step only decides those), so the 2006
    replaces a valid verdict or a check 7-8 code, as
    :func:`~snap_spark.protocol.verdict.candidate_verdict` orders them.
    """
    if not duplicates:
        return rows
    line_nos = rows.column("line_no").to_pylist()
    hit = [n in duplicates for n in line_nos]
    if not any(hit):
        return rows
    mask = pa.array(hit, pa.bool_())
    details = rows.column("error_detail").to_pylist()
    for i, n in enumerate(line_nos):
        if hit[i]:
            details[i] = duplicates[n]
    replaced = {
        "verdict": pc.if_else(mask, REJECTED, rows.column("verdict")),
        "error_code": pc.if_else(mask, pa.scalar(DUPLICATE, pa.int32()),
                                 rows.column("error_code")),
        "error_name": pc.if_else(mask, ERROR_NAMES[DUPLICATE], rows.column("error_name")),
        "error_detail": pa.array(details, pa.string()),
    }
    for name, column in replaced.items():
        rows = rows.set_column(rows.schema.get_field_index(name), name, column)
    return rows
