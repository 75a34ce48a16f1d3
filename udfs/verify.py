"""Arrow-batch verification: the per-line stateless checks of :mod:`snap_spark.protocol`.

Spark calls :func:`check_batches` through ``DataFrame.mapInArrow``: whole Arrow batches in,
whole Arrow batches out, no per-row JVM round trip. It adds no rule of its own: every
verdict comes from :func:`snap_spark.protocol.validate.check_record`.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from snap_spark.protocol.errors import ErrorCode
from snap_spark.protocol.records import parse_line
from snap_spark.protocol.validate import (
    Checked,
    MissingReceiptTime,
    ReceiptClock,
    check_record,
    finish_verification,
)

#: Output of :func:`check_batches` (Arrow), one row per input line.
CHECKED_FIELDS: list[pa.Field] = [
    pa.field("source_file", pa.string(), False),
    pa.field("line_no", pa.int64(), False),
    pa.field("byte_len", pa.int64(), False),
    pa.field("raw_text", pa.string()),
    pa.field("raw_bytes", pa.binary()),  # only when the line is not valid UTF-8
    pa.field("read_error", pa.string()),
    pa.field("is_envelope", pa.bool_(), False),
    pa.field("source", pa.string()),
    pa.field("envelope_received_at", pa.float64()),
    pa.field("received_at", pa.float64()),
    pa.field("msg_id", pa.string()),
    pa.field("version", pa.string()),
    pa.field("sender", pa.string()),
    pa.field("recipient", pa.string()),
    pa.field("msg_type", pa.string()),
    pa.field("method", pa.string()),
    pa.field("timestamp", pa.int64()),
    pa.field("has_sig", pa.bool_(), False),
    pa.field("canonical_payload", pa.string()),
    pa.field("task_id", pa.string()),
    pa.field("context_id", pa.string()),
    pa.field("task_state", pa.string()),
    pa.field("pre_code", pa.int32()),
    pa.field("pre_detail", pa.string()),
    pa.field("auth_code", pa.int32()),
    pa.field("auth_detail", pa.string()),
    pa.field("needs_clock", pa.bool_(), False),
]
CHECKED_SCHEMA = pa.schema(CHECKED_FIELDS)


def _task_fields(checked: Checked) -> tuple[str | None, str | None, str | None]:
    """``(task_id, context_id, state)`` named by a message's payload, for slicing tables."""
    payload = checked.payload
    if type(payload) is not dict:
        return None, None, None
    task = payload.get("task")
    if type(task) is dict:
        status = task.get("status")
        state = status.get("state") if type(status) is dict else None
        task_id, context = task.get("id"), task.get("contextId")
        return (
            task_id if type(task_id) is str else None,
            context if type(context) is str else None,
            state if type(state) is str else None,
        )
    task_id = payload.get("taskId")
    return (task_id if type(task_id) is str else None), None, None


def check_rows(
    files: list[str],
    line_nos: list[int],
    raws: list[bytes | None],
    read_errors: list[str | None],
    clock: ReceiptClock,
    max_drift: float,
    verify_threads: int = 1,
) -> dict[str, list[Any]]:
    """Check a batch of lines given as Python lists; return output columns.

    Signature verification (check 8) runs after the other checks of the batch, on
    ``verify_threads`` threads when more than one: libsecp256k1 releases the GIL, so a task
    that has more cores than Spark gives it slots can use them (see bench/README.md).
    """
    records = []
    checks: list[Checked] = []
    clock_missing: list[bool] = []
    for raw, read_error in zip(raws, read_errors, strict=True):
        record = parse_line(raw)
        needs_clock = False
        if read_error is not None:
            checked = Checked.unreadable(read_error)
        else:
            try:
                checked = check_record(record, clock, max_drift=max_drift, defer_verify=True)
            except MissingReceiptTime as exc:
                needs_clock = True
                checked = Checked(pre_code=int(ErrorCode.INVALID_MESSAGE), pre_detail=str(exc))
        records.append(record)
        checks.append(checked)
        clock_missing.append(needs_clock)
    _verify_all(checks, verify_threads)

    cols: dict[str, list[Any]] = {f.name: [] for f in CHECKED_FIELDS}
    for source_file, line_no, raw, read_error, record, checked, needs_clock in zip(
        files, line_nos, raws, read_errors, records, checks, clock_missing, strict=True
    ):
        if raw is None:
            text, raw_bytes = None, None
        else:
            try:
                text, raw_bytes = raw.decode("utf-8"), None
            except UnicodeDecodeError:
                text, raw_bytes = raw.decode("utf-8", "replace"), raw
        task_id, context_id, task_state = _task_fields(checked)
        cols["source_file"].append(source_file)
        cols["line_no"].append(line_no)
        cols["byte_len"].append(0 if raw is None else len(raw))
        cols["raw_text"].append(text)
        cols["raw_bytes"].append(raw_bytes)
        cols["read_error"].append(read_error)
        cols["is_envelope"].append(record.is_envelope)
        cols["source"].append(record.source)
        cols["envelope_received_at"].append(record.received_at)
        cols["received_at"].append(checked.received_at)
        cols["msg_id"].append(checked.msg_id)
        cols["version"].append(checked.version)
        cols["sender"].append(checked.sender)
        cols["recipient"].append(checked.recipient)
        cols["msg_type"].append(checked.msg_type)
        cols["method"].append(checked.method)
        cols["timestamp"].append(checked.timestamp)
        cols["has_sig"].append(checked.has_sig)
        cols["canonical_payload"].append(checked.canonical_payload)
        cols["task_id"].append(task_id)
        cols["context_id"].append(context_id)
        cols["task_state"].append(task_state)
        cols["pre_code"].append(checked.pre_code)
        cols["pre_detail"].append(checked.pre_detail or None)
        cols["auth_code"].append(checked.auth_code)
        cols["auth_detail"].append(checked.auth_detail or None)
        cols["needs_clock"].append(needs_clock)
    return cols


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _verify_all(checks: list[Checked], threads: int) -> None:
    """Finish every deferred verification of a batch, on ``threads`` threads."""
    pending = [c for c in checks if c.pending is not None]
    if threads <= 1 or len(pending) < 2 * threads:
        for checked in pending:
            finish_verification(checked)
        return
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="snap-verify")
    chunks = [pending[i::threads] for i in range(threads)]
    for _ in pool.map(_finish_chunk, chunks):
        pass


def _finish_chunk(chunk: list[Checked]) -> None:
    for checked in chunk:
        finish_verification(checked)


def check_batches(
    batches: Iterator[pa.RecordBatch],
    clock_spec: str,
    clock_now: float,
    max_drift: float,
    verify_threads: int = 1,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: lines (``source_file, line_no, raw, read_error``) → checks.

    ``clock_spec``/``clock_now`` rebuild the :class:`ReceiptClock` on the executor with the
    driver's notion of "now", so every task uses the same receipt time for bare lines.
    """
    clock = ReceiptClock.parse(clock_spec, now=clock_now)
    for batch in batches:
        data = batch.to_pydict()
        errors = data.get("read_error") or [None] * batch.num_rows
        cols = check_rows(data["source_file"], data["line_no"], data["raw"], errors, clock,
                          max_drift, verify_threads)
        yield pa.RecordBatch.from_pydict(cols, schema=CHECKED_SCHEMA)
