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
    REJECTED,
    is_replay_candidate,
    stateless_verdict,
    verdict_name,
)
from snap_spark.settings import VerifySettings
from snap_spark.udfs.verify import check_columns, line_text

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
    bytes as Python objects; ``cols`` the :data:`snap_spark.udfs.verify.VERDICT_COLUMNS`.
    """

    lines: pa.RecordBatch
    raws: list[bytes | None]
    cols: dict[str, list[Any]]

    @property
    def num_rows(self) -> int:
        return int(self.lines.num_rows)

    @property
    def needs_clock(self) -> int:
        """How many lines are bare while no receipt clock is configured."""
        return int(sum(self.cols["needs_clock"]))

    def codes(self) -> list[int | None]:
        """The stateless code of each line (before replay)."""
        return [stateless_verdict(pre, "", auth, "")[0]
                for pre, auth in zip(self.cols["pre_code"], self.cols["auth_code"], strict=True)]


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
    cols = check_columns(raws, read_errors or [None] * len(raws), settings.clock(),
                         settings.max_drift, max(1, settings.verify_threads))
    return CheckedLines(lines, raws, cols)


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
    it is not valid UTF-8 (Arrow validates a whole batch at once; Python decodes per line
    only for a batch that has such a line)."""
    try:
        return raw.cast(pa.string()), pa.nulls(len(raw), pa.binary())
    except pa.ArrowInvalid:
        texts, exact = line_text(raws)
        return pa.array(texts, pa.string()), pa.array(exact, pa.binary())


def raw_rows(meta: RowMeta, checked: CheckedLines) -> pa.RecordBatch:
    """``raw_messages`` rows of one checked batch (see ``schemas.tables.RAW_MESSAGES``)."""
    lines, cols, n = checked.lines, checked.cols, checked.num_rows
    text, exact = _raw_text(lines.column("raw"), checked.raws)
    envelope_at = pa.array(cols["envelope_received_at"], pa.float64())
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
        pa.array(cols["is_envelope"], pa.bool_()),
        pa.array(cols["source"], pa.string()),
        envelope_at,
        seconds_to_timestamps(envelope_at),
    ], schema=table_arrow_schema("raw_messages"))


def message_rows(meta: RowMeta, checked: CheckedLines) -> pa.RecordBatch:
    """``messages`` rows of one checked batch with their stateless verdicts (the replay
    step may later turn a candidate into a 2006: :func:`apply_duplicates`)."""
    lines, cols, n = checked.lines, checked.cols, checked.num_rows
    finals = [stateless_verdict(pre, pre_d or "", auth, auth_d or "")
              for pre, pre_d, auth, auth_d in zip(cols["pre_code"], cols["pre_detail"],
                                                   cols["auth_code"], cols["auth_detail"],
                                                   strict=True)]
    codes = [code for code, _ in finals]
    timestamps = pa.array(cols["timestamp"], pa.int64())
    received = pa.array(cols["received_at"], pa.float64())
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
        pa.array(cols["msg_id"], pa.string()),
        pa.array(cols["version"], pa.string()),
        pa.array(cols["sender"], pa.string()),
        pa.array(cols["recipient"], pa.string()),
        pa.array(cols["msg_type"], pa.string()),
        pa.array(cols["method"], pa.string()),
        timestamps,
        event_time,
        received,
        received_time,
        event_date,
        pa.array(cols["task_id"], pa.string()),
        pa.array(cols["context_id"], pa.string()),
        pa.array(cols["task_state"], pa.string()),
        pa.array(cols["has_sig"], pa.bool_()),
        pa.array(cols["canonical_payload"], pa.string()),
        pa.array([verdict_name(code) for code in codes], pa.string()),
        pa.array(codes, pa.int32()),
        pa.array([None if c is None else ERROR_NAMES.get(c) for c in codes], pa.string()),
        pa.array([detail or None for _, detail in finals], pa.string()),
        pa.array(cols["auth_code"], pa.int32()),
        pa.array([d if c is not None else None
                  for c, d in zip(cols["auth_code"], cols["auth_detail"], strict=True)],
                 pa.string()),
    ], schema=table_arrow_schema("messages"))


def replay_candidates(checked: CheckedLines) -> list[int]:
    """Indexes of the lines that take part in the replay step (checks 1-5 passed)."""
    return [i for i, pre in enumerate(checked.cols["pre_code"]) if is_replay_candidate(pre)]


def apply_duplicates(rows: pa.Table, duplicates: Mapping[int, str]) -> pa.Table:
    """Turn the ``messages`` rows whose ``line_no`` is in ``duplicates`` (one source file)
    into 2006 rejections with the given detail; every other row is unchanged.

    Only replay candidates may be named (the replay step only decides those), so the 2006
    replaces a valid verdict or a check 7-8 code, as :func:`final_verdict` orders them.
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
