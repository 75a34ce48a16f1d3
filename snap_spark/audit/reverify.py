"""Re-verification of archived lines: ``raw_messages`` checked again by the current core and
compared, line by line, with the verdicts ``messages`` holds.

A difference means the stored verdict is not what the protocol core decides today: a rule
changed since the line was landed, or a table was corrupted. Nothing here decides anything
itself: the stateless checks are :func:`snap_spark.udfs.verify.check_columns` (the job's own
batch checker) and replay is :func:`snap_spark.pipeline.transforms.find_duplicates` (the
job's own fold).

How one line is checked again, exactly as it was landed:

- its receipt clock is the ``received_at`` its ``messages`` row records (the envelope's, or
  the clock a bare line was given), so a run that used ``--bare-clock now`` is not decided
  against today's clock;
- replay needs the other lines of the same ``(from, id)``: every ``messages`` row takes part
  in the fold with its pre-replay outcome (its code, or for a 2006 the ``signature_code`` it
  keeps for that purpose), the sampled lines with their re-checked outcome instead.

Only the sampled lines are compared. A sample is drawn by a hash of ``(file_key, line_no)``
and a seed the report records, so a run can be repeated exactly.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from snap_spark.protocol.errors import ERROR_NAMES, ErrorCode
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.protocol.verdict import (
    VALID,
    candidate_verdict,
    is_replay_candidate,
    stateless_verdict,
)
from snap_spark.settings import VerifySettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: What one sampled line gives back: its stored verdict next to today's stateless one.
RECHECKED = pa.schema([
    pa.field("file_key", pa.string()), pa.field("source_file", pa.string()),
    pa.field("line_no", pa.int64()), pa.field("has_row", pa.bool_()),
    pa.field("stored_msg_id", pa.string()),
    pa.field("stored_code", pa.int32()), pa.field("stored_detail", pa.string()),
    pa.field("sender", pa.string()), pa.field("msg_id", pa.string()),
    pa.field("received_at", pa.float64()), pa.field("code", pa.int32()),
    pa.field("detail", pa.string()),
])

#: Differences listed in full in the report; the count is always exact.
MAX_LISTED = 500

_HASH_RANGE = 1_000_000


@dataclass
class ReverifyResult:
    """What re-verification found.

    Attributes:
        mode: ``off``, ``sample`` or ``all``.
        fraction: share of ``raw_messages`` rows sampled (1.0 for ``all``).
        seed: the sample's seed (repeat a run with it).
        checked: lines checked again.
        missing: sampled ``raw_messages`` rows that have no ``messages`` row at all.
        differences: lines whose verdict differs (the first :data:`MAX_LISTED`, in file
            and line order), each ``{source_file, line_no, msg_id, stored_code,
            stored_name, code, name, detail}``.
        difference_count: all differing lines.
    """

    mode: str = "off"
    fraction: float = 0.0
    seed: int = 0
    checked: int = 0
    missing: int = 0
    differences: list[dict[str, Any]] = field(default_factory=list)
    difference_count: int = 0


def code_name(code: int | None) -> str:
    """``valid``, or the SNAP error name of ``code``.

    Examples:
        >>> code_name(None), code_name(2006)
        ('valid', 'DuplicateMessageError')
    """
    return VALID if code is None else ERROR_NAMES.get(code, str(code))


def _pre_replay(code: Any) -> Any:
    """The stored outcome of a row before replay: a 2006 keeps its checks 7-8 in
    ``signature_code``."""
    from pyspark.sql import functions as F

    return F.when(F.col("error_code") == int(ErrorCode.DUPLICATE_MESSAGE),
                  F.col("signature_code")).otherwise(code)


def _recheck(max_drift: float, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: sampled raw lines (with their stored verdicts) → :data:`RECHECKED`."""
    from snap_spark.udfs.verify import check_columns

    for batch in batches:
        cols = batch.to_pydict()
        raws: list[bytes | None] = [
            exact if exact is not None else (text.encode("utf-8") if text is not None else None)
            for exact, text in zip(cols["raw_bytes"], cols["raw_text"], strict=True)]
        clocks = [ReceiptClock("fixed", float(at)) if at is not None else ReceiptClock.refuse()
                  for at in cols["stored_received_at"]]
        checked = check_columns(raws, list(cols["read_error"]), clocks, max_drift)
        codes, details = [], []
        for i in range(batch.num_rows):
            code, detail = stateless_verdict(
                checked["pre_code"][i], checked["pre_detail"][i] or "",
                checked["auth_code"][i], checked["auth_detail"][i] or "")
            codes.append(code)
            details.append(detail or None)
        yield pa.RecordBatch.from_pydict({
            "file_key": cols["file_key"], "source_file": cols["source_file"],
            "line_no": cols["line_no"], "has_row": [bool(h) for h in cols["has_row"]],
            "stored_msg_id": cols["stored_msg_id"],
            "stored_code": cols["stored_code"], "stored_detail": cols["stored_detail"],
            "sender": checked["sender"], "msg_id": checked["msg_id"],
            "received_at": checked["received_at"], "code": codes, "detail": details,
        }, schema=RECHECKED)


def _fold_key(source_file: Any, file_key: Any) -> Any:
    """A file name for the replay fold that keeps two landed versions of one file apart
    while sorting like the file name (the fold's tie rule)."""
    from pyspark.sql import functions as F

    return F.concat(source_file, F.lit("\u0000"), file_key)


def reverify(raw: DataFrame, messages: DataFrame, settings: VerifySettings, *,
             fraction: float | None, seed: int = 0) -> ReverifyResult:
    """Check ``raw`` (``raw_messages`` rows) again and compare with ``messages``.

    ``fraction`` ``None`` checks every line, else about that share of them (``0 < fraction
    <= 1``), chosen by ``seed``. ``settings`` gives the drift and replay windows (the
    receipt clocks come from the stored rows).

    Example::

        found = reverify(raw_df, messages_df, VerifySettings(), fraction=0.05, seed=7)
        found.checked, found.difference_count, found.differences[:3]
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    from snap_spark.pipeline.transforms import find_duplicates

    checked_settings = settings.validated()
    result = ReverifyResult(mode="all" if fraction is None else "sample",
                            fraction=1.0 if fraction is None else fraction, seed=seed)
    joined = _with_stored(_sampled_lines(raw, fraction, seed), messages)
    rechecked = joined.mapInArrow(
        functools.partial(_recheck, checked_settings.max_drift),
        from_arrow_schema(RECHECKED)).cache()
    try:
        result.checked = rechecked.count()
        duplicates = find_duplicates(_fold_input(rechecked, messages), checked_settings)
        differing: list[dict[str, Any]] = []
        for row in rechecked.toLocalIterator():
            difference = _difference(row, duplicates)
            if not row["has_row"]:
                result.missing += 1
            if difference is not None:
                differing.append(difference)
    finally:
        rechecked.unpersist()
    differing.sort(key=lambda d: (d["source_file"], d["line_no"]))
    result.difference_count = len(differing)
    result.differences = differing[:MAX_LISTED]
    return result


def _sampled_lines(raw: DataFrame, fraction: float | None, seed: int) -> DataFrame:
    """The lines of ``raw`` to check again: all of them, or (``fraction`` below 1) those
    whose hash of ``(seed, file_key, line_no)`` falls in that share of the hash range."""
    from pyspark.sql import functions as F

    lines = raw.select("file_key", "source_file", "line_no", "raw_text", "raw_bytes",
                       "read_error")
    if fraction is not None and fraction < 1.0:
        bucket = F.pmod(F.xxhash64(F.lit(seed), "file_key", "line_no"), F.lit(_HASH_RANGE))
        lines = lines.filter(bucket < round(fraction * _HASH_RANGE))
    return lines


def _with_stored(lines: DataFrame, messages: DataFrame) -> DataFrame:
    """``lines`` with the verdict, message id and receipt time their ``messages`` row
    holds (``has_row`` null for a line without one)."""
    from pyspark.sql import functions as F

    stored = messages.select(
        "file_key", "line_no", F.lit(True).alias("has_row"),
        F.col("msg_id").alias("stored_msg_id"),
        F.col("error_code").alias("stored_code"),
        F.col("error_detail").alias("stored_detail"),
        F.col("received_at").alias("stored_received_at"))
    return lines.join(stored, ["file_key", "line_no"], "left")


def _fold_input(rechecked: DataFrame, messages: DataFrame) -> DataFrame:
    """The replay fold's input over every ``messages`` row, each file version named apart
    (:func:`_fold_key`)."""
    from pyspark.sql import functions as F

    # The fold over every row: the sampled lines with today's outcome, the others
    # with their stored pre-replay outcome.
    today = rechecked.select(
        "file_key", "line_no", F.col("sender").alias("n_sender"),
        F.col("msg_id").alias("n_msg_id"), F.col("received_at").alias("n_received_at"),
        F.col("code").alias("n_code"), F.lit(True).alias("sampled"))
    return messages.select(
        "file_key", "source_file", "line_no", "sender", "msg_id", "received_at",
        _pre_replay(F.col("error_code")).alias("error_code"),
    ).join(today, ["file_key", "line_no"], "left").select(
        _fold_key(F.col("source_file"), F.col("file_key")).alias("source_file"),
        "line_no",
        F.when(F.col("sampled"), F.col("n_sender")).otherwise(F.col("sender")).alias("sender"),
        F.when(F.col("sampled"), F.col("n_msg_id")).otherwise(F.col("msg_id")).alias("msg_id"),
        F.when(F.col("sampled"), F.col("n_received_at"))
        .otherwise(F.col("received_at")).alias("received_at"),
        F.when(F.col("sampled"), F.col("n_code"))
        .otherwise(F.col("error_code")).alias("error_code"))


def _difference(row: Any, duplicates: Mapping[str, Mapping[int, str]]
                ) -> dict[str, Any] | None:
    """How a re-checked line's verdict today (replay decided by ``duplicates``, the fold's
    result) differs from the stored one, or ``None`` when they agree; a line without a
    ``messages`` row always differs."""
    code, detail = row["code"], row["detail"]
    replayed = duplicates.get(f"{row['source_file']}\u0000{row['file_key']}", {})
    if is_replay_candidate(code) and row["line_no"] in replayed:
        code, detail = candidate_verdict(code, detail, replayed[row["line_no"]])
    if code != row["stored_code"] or not row["has_row"]:
        return {
            "source_file": row["source_file"], "line_no": row["line_no"],
            "msg_id": row["msg_id"] if row["msg_id"] is not None
            else row["stored_msg_id"],
            "stored_code": row["stored_code"],
            "stored_name": code_name(row["stored_code"]) if row["has_row"]
            else "no messages row",
            "code": code, "name": code_name(code), "detail": detail,
        }
    return None
