"""Arrow-batch verification: the per-line stateless checks of :mod:`snap_spark.protocol`.

:func:`check_arrow` checks an Arrow array of raw lines and returns their verdict columns
(:data:`VERDICT_COLUMNS`) as one Arrow batch; :func:`check_columns` returns them as Python
lists. :mod:`snap_spark.pipeline.checked` turns them into table rows inside Spark's Arrow
tasks (whole batches in and out, no per-row JVM round trip).

Two cores compute the same columns:

- the **native core** ``snap_spark._native`` (Rust, built by ``make setup``), used when it
  is built, unless ``SNAP_SPARK_NATIVE=0`` is set in the environment;
- the **Python core**, :func:`check_columns_reference`, the reference: every verdict comes
  from :func:`snap_spark.protocol.validate.check_record`. The differential tests prove the
  native core equal to it on every column of every line.

The native core hands back the rare lines whose reason needs Python's own Unicode tables
(a non-ASCII character where JSON reading stopped, or a line over 10 MiB inside an
envelope); the Python core decides those.

Examples:
    >>> from snap_spark.protocol.validate import ReceiptClock
    >>> batch = check_arrow(pa.array([b"not json", None]), None, ReceiptClock.refuse(), 60.0)
    >>> batch.column("pre_code").to_pylist()
    [1003, 1003]
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from snap_spark.common.memory import gc_paused
from snap_spark.protocol.errors import ErrorCode
from snap_spark.protocol.records import parse_line
from snap_spark.protocol.tasks import task_fields
from snap_spark.protocol.validate import (
    Checked,
    MissingReceiptTime,
    ReceiptClock,
    check_record,
    finish_verification,
)

#: The columns :func:`check_columns` returns, one value per line.
VERDICT_COLUMNS = (
    "is_envelope", "source", "envelope_received_at", "received_at", "msg_id", "version",
    "sender", "recipient", "msg_type", "method", "timestamp", "has_sig",
    "canonical_payload", "task_id", "context_id", "task_state", "pre_code", "pre_detail",
    "auth_code", "auth_detail", "needs_clock",
)

#: The Arrow types of :data:`VERDICT_COLUMNS` (what :func:`check_arrow` returns).
VERDICT_SCHEMA = pa.schema([
    ("is_envelope", pa.bool_()), ("source", pa.string()),
    ("envelope_received_at", pa.float64()), ("received_at", pa.float64()),
    ("msg_id", pa.string()), ("version", pa.string()), ("sender", pa.string()),
    ("recipient", pa.string()), ("msg_type", pa.string()), ("method", pa.string()),
    ("timestamp", pa.int64()), ("has_sig", pa.bool_()), ("canonical_payload", pa.string()),
    ("task_id", pa.string()), ("context_id", pa.string()), ("task_state", pa.string()),
    ("pre_code", pa.int32()), ("pre_detail", pa.string()), ("auth_code", pa.int32()),
    ("auth_detail", pa.string()), ("needs_clock", pa.bool_()),
])

#: ``SNAP_SPARK_NATIVE=0`` in the environment makes every check use the Python core.
NATIVE_ENV = "SNAP_SPARK_NATIVE"

_CLOCK_MODES = {"refuse": 0, "fixed": 1, "message": 2}
_native_module: Any = None
_native_tried = False
_log = logging.getLogger("snap_spark.native")


def native_core() -> Any | None:
    """The native checking core module, or ``None`` when it is switched off
    (``SNAP_SPARK_NATIVE=0``) or not built; a missing build is said once per process."""
    global _native_module, _native_tried
    if os.environ.get(NATIVE_ENV, "").strip() == "0":
        return None
    if not _native_tried:
        _native_tried = True
        try:
            _native_module = importlib.import_module("snap_spark._native")
        except ImportError as exc:
            _log.warning("snap-spark: the native checking core is not built (%s); checking "
                         "with the Python core (build it with `make native`)", exc)
    return _native_module


def core_name() -> str:
    """``"native"`` or ``"python"``: the core :func:`check_arrow` uses in this process."""
    return "native" if native_core() is not None else "python"


class _Capsules:
    """An Arrow array handed over through the PyCapsule interface."""

    def __init__(self, schema: object, array: object) -> None:
        self._capsules = (schema, array)

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return self._capsules


def arrow_capsules(schema: object, array: object) -> Any:
    """An object ``pa.array`` takes, from the ``(schema, array)`` capsules the native core
    returns (the Arrow PyCapsule interface)."""
    return _Capsules(schema, array)


def check_arrow(
    lines: pa.Array,
    read_errors: pa.Array | None,
    clock: ReceiptClock | Sequence[ReceiptClock],
    max_drift: float,
    verify_threads: int = 1,
) -> pa.RecordBatch:
    """Check an Arrow array of raw lines (binary or string; null for an unreadable line);
    return the :data:`VERDICT_COLUMNS` as a batch of :data:`VERDICT_SCHEMA`.

    ``read_errors`` (strings, or ``None``) says why a line could not be read; ``clock`` is
    one receipt clock for the batch or one per line. The native core is used when it is
    built and not switched off; its output equals the Python core's.
    """
    core = native_core()
    if core is None:
        raws = lines.cast(pa.binary()).to_pylist() if len(lines) else []
        errors = read_errors.to_pylist() if read_errors is not None else [None] * len(raws)
        cols = check_columns_reference(raws, errors, clock, max_drift, verify_threads)
        return pa.RecordBatch.from_pydict(cols, schema=VERDICT_SCHEMA)
    if isinstance(clock, ReceiptClock):
        modes = values = None
        mode, value = _CLOCK_MODES[clock.mode], _clock_value(clock)
    else:
        mode, value = 0, 0.0
        modes = [_CLOCK_MODES[c.mode] for c in clock]
        values = [_clock_value(c) for c in clock]
    schema, array, deferred = core.check_batch(
        lines, read_errors, mode, value, float(max_drift), max(1, verify_threads),
        modes, values)
    batch = pa.RecordBatch.from_struct_array(pa.array(arrow_capsules(schema, array)))
    if deferred:
        batch = _decide_deferred(batch, deferred, lines, read_errors, clock, max_drift)
    return batch


def _clock_value(clock: ReceiptClock) -> float:
    return 0.0 if clock.value is None else float(clock.value)  # -0.0 stays -0.0


def _decide_deferred(
    batch: pa.RecordBatch,
    deferred: list[int],
    lines: pa.Array,
    read_errors: pa.Array | None,
    clock: ReceiptClock | Sequence[ReceiptClock],
    max_drift: float,
) -> pa.RecordBatch:
    """Replace the rows the native core handed back with the Python core's."""
    take = pa.array(deferred, pa.int64())
    raws = lines.take(take).cast(pa.binary()).to_pylist()
    errors = (read_errors.take(take).to_pylist() if read_errors is not None
              else [None] * len(raws))
    clocks = clock if isinstance(clock, ReceiptClock) else [clock[i] for i in deferred]
    decided = check_columns_reference(raws, errors, clocks, max_drift)
    cols = batch.to_pydict()
    for name in VERDICT_COLUMNS:
        column = cols[name]
        for k, i in enumerate(deferred):
            column[i] = decided[name][k]
    return pa.RecordBatch.from_pydict(cols, schema=VERDICT_SCHEMA)


def check_columns(
    raws: list[bytes | None],
    read_errors: list[str | None],
    clock: ReceiptClock | Sequence[ReceiptClock],
    max_drift: float,
    verify_threads: int = 1,
) -> dict[str, list[Any]]:
    """Check a batch of lines; return the :data:`VERDICT_COLUMNS` as Python lists.

    The same switch as :func:`check_arrow`: the native core when built and not switched
    off, else :func:`check_columns_reference`.
    """
    if native_core() is None:
        return check_columns_reference(raws, read_errors, clock, max_drift, verify_threads)
    errors = (None if all(e is None for e in read_errors)
              else pa.array(read_errors, pa.string()))
    batch = check_arrow(pa.array(raws, pa.binary()), errors, clock, max_drift, verify_threads)
    return {name: batch.column(name).to_pylist() for name in VERDICT_COLUMNS}


def check_items(
    raws: list[bytes | None],
    read_errors: list[str | None],
    clock: ReceiptClock,
    max_drift: float,
) -> list[Checked]:
    """The stateless checks of each line as :class:`~snap_spark.protocol.validate.Checked`
    (what the replay step needs), on the core :func:`check_columns` chooses; for
    :func:`snap_spark.protocol.checker.final_verdicts`.

    Raises:
        MissingReceiptTime: a bare line needs a receipt clock and ``clock`` refuses.
    """
    cols = check_columns(raws, read_errors, clock, max_drift)
    for needs, detail in zip(cols["needs_clock"], cols["pre_detail"], strict=True):
        if needs:
            raise MissingReceiptTime(detail)
    return [Checked(pre_code=pre, pre_detail=pre_d or "", auth_code=auth,
                    auth_detail=auth_d or "", sender=sender, msg_id=msg_id, received_at=at)
            for pre, pre_d, auth, auth_d, sender, msg_id, at in zip(
                cols["pre_code"], cols["pre_detail"], cols["auth_code"], cols["auth_detail"],
                cols["sender"], cols["msg_id"], cols["received_at"], strict=True)]


def check_columns_reference(
    raws: list[bytes | None],
    read_errors: list[str | None],
    clock: ReceiptClock | Sequence[ReceiptClock],
    max_drift: float,
    verify_threads: int = 1,
) -> dict[str, list[Any]]:
    """The Python core: check a batch of lines; return the :data:`VERDICT_COLUMNS` as
    Python lists. The reference every other path is proven equal to.

    ``clock`` gives the receipt time of bare lines: one clock for the batch, or one per
    line (SQL callers pass each row's own ``received_at``).

    Signature verification (check 8) runs after the other checks of the batch, on
    ``verify_threads`` threads when more than one: libsecp256k1 releases the GIL, so a task
    that has more cores than Spark gives it slots can use them (see bench/README.md).
    """
    with gc_paused():
        # The batch's parsed lines die when _check_batch returns, before the collector is
        # back on; only the output lists (of untracked scalars) outlive it.
        return _check_batch(raws, read_errors, clock, max_drift, verify_threads)


def _check_batch(
    raws: list[bytes | None],
    read_errors: list[str | None],
    clock: ReceiptClock | Sequence[ReceiptClock],
    max_drift: float,
    verify_threads: int,
) -> dict[str, list[Any]]:
    records = []
    checks: list[Checked] = []
    clock_missing: list[bool] = []
    clocks = [clock] * len(raws) if isinstance(clock, ReceiptClock) else clock
    for raw, read_error, line_clock in zip(raws, read_errors, clocks, strict=True):
        record = parse_line(raw)
        needs_clock = False
        if read_error is not None:
            checked = Checked.unreadable(read_error)
        else:
            try:
                checked = check_record(record, line_clock, max_drift=max_drift,
                                       defer_verify=True)
            except MissingReceiptTime as exc:
                needs_clock = True
                checked = Checked(pre_code=int(ErrorCode.INVALID_MESSAGE),
                                  pre_detail=str(exc))
        records.append(record)
        checks.append(checked)
        clock_missing.append(needs_clock)
    _verify_all(checks, verify_threads)
    tasks = [task_fields(c.msg_type, c.payload) for c in checks]
    return {
        "is_envelope": [r.is_envelope for r in records],
        "source": [text_value(r.source) for r in records],
        "envelope_received_at": [r.received_at for r in records],
        "received_at": [c.received_at for c in checks],
        "msg_id": [text_value(c.msg_id) for c in checks],
        "version": [text_value(c.version) for c in checks],
        "sender": [text_value(c.sender) for c in checks],
        "recipient": [text_value(c.recipient) for c in checks],
        "msg_type": [text_value(c.msg_type) for c in checks],
        "method": [text_value(c.method) for c in checks],
        "timestamp": [c.timestamp for c in checks],
        "has_sig": [c.has_sig for c in checks],
        "canonical_payload": [c.canonical_payload for c in checks],
        "task_id": [t[0] for t in tasks],
        "context_id": [t[1] for t in tasks],
        "task_state": [t[2] for t in tasks],
        "pre_code": [c.pre_code for c in checks],
        "pre_detail": [c.pre_detail or None for c in checks],
        "auth_code": [c.auth_code for c in checks],
        "auth_detail": [c.auth_detail or None for c in checks],
        "needs_clock": clock_missing,
    }


def text_value(value: str | None) -> str | None:
    """A string field as a table holds it: a lone surrogate (an escaped ``\\ud800`` with no
    pair, which has no UTF-8 form) becomes U+FFFD. Such a field has already failed its check
    (ids, versions, addresses, types and methods are ASCII); ``source`` is free text.

    Examples:
        >>> text_value("m1"), text_value("a\\ud800b") == "a\\ufffdb"
        ('m1', True)
    """
    if value is None or value.isascii():
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def line_text(raws: list[bytes | None]) -> tuple[list[str | None], list[bytes | None]]:
    """``(raw_text, raw_bytes)`` columns: the UTF-8 text of each line, and the exact bytes
    only for lines that are not valid UTF-8 (their text has U+FFFD replacements)."""
    texts: list[str | None] = []
    exact: list[bytes | None] = []
    for raw in raws:
        if raw is None:
            texts.append(None)
            exact.append(None)
            continue
        try:
            texts.append(raw.decode("utf-8"))
            exact.append(None)
        except UnicodeDecodeError:
            texts.append(raw.decode("utf-8", "replace"))
            exact.append(raw)
    return texts, exact


def line_text_arrow(raw: pa.Array, raws: list[bytes | None]) -> tuple[pa.Array, pa.Array]:
    """:func:`line_text` as Arrow columns, for the Arrow array ``raw`` of the lines ``raws``:
    by the native core when it is built (one pass in Rust, the same values), else by
    :func:`line_text`.

    Examples:
        >>> import pyarrow as pa
        >>> raws = [b"ok", b"bad \\xff", None]
        >>> text, exact = line_text_arrow(pa.array(raws, pa.binary()), raws)
        >>> text.to_pylist() == ["ok", "bad \\ufffd", None], exact.to_pylist()
        (True, [None, b'bad \\xff', None])
    """
    core = native_core()
    if core is None:
        texts, exact = line_text(raws)
        return pa.array(texts, pa.string()), pa.array(exact, pa.binary())
    columns = pa.array(arrow_capsules(*core.line_text(raw)))
    return columns.field("raw_text"), columns.field("raw_bytes")


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
