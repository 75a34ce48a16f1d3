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

Two ways give the same result: :func:`reverify` over Spark DataFrames, and
:func:`reverify_rows` over Arrow tables in the driver's memory (a small lake's audit), which
draws the same sample with its own copy of Spark's ``xxhash64`` (:func:`spark_xxhash64`).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from snap_spark.protocol.errors import ERROR_NAMES, ErrorCode
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.protocol.verdict import (
    POST_REPLAY_CODES,
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


# -- the same on the driver, over Arrow tables ------------------------------------------------

_MASK = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(acc: int, lane: int) -> int:
    return _rotl((acc + lane * _P2) & _MASK, 31) * _P1 & _MASK


def xxh64(data: bytes, seed: int) -> int:
    """XXH64 of ``data`` with ``seed`` (unsigned 64-bit), the hash Spark's ``xxhash64``
    applies to each value's bytes.

    Examples:
        >>> hex(xxh64(b"", 0)), hex(xxh64(b"abc", 0))
        ('0xef46db3751d8e999', '0x44bc2cf5ad770999')
    """
    seed &= _MASK
    length, at = len(data), 0
    if length >= 32:
        v1, v2 = (seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK
        v3, v4 = seed, (seed - _P1) & _MASK
        while at + 32 <= length:
            a, b, c, d = struct.unpack_from("<4Q", data, at)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            at += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            h = ((h ^ _round(0, v)) * _P1 + _P4) & _MASK
    else:
        h = (seed + _P5) & _MASK
    h = (h + length) & _MASK
    while at + 8 <= length:
        (lane,) = struct.unpack_from("<Q", data, at)
        h = (_rotl(h ^ _round(0, lane), 27) * _P1 + _P4) & _MASK
        at += 8
    if at + 4 <= length:
        (lane,) = struct.unpack_from("<I", data, at)
        h = (_rotl(h ^ (lane * _P1 & _MASK), 23) * _P2 + _P3) & _MASK
        at += 4
    while at < length:
        h = _rotl(h ^ (data[at] * _P5 & _MASK), 11) * _P1 & _MASK
        at += 1
    h ^= h >> 33
    h = h * _P2 & _MASK
    h ^= h >> 29
    h = h * _P3 & _MASK
    return h ^ (h >> 32)


def spark_xxhash64(seed: int, file_key: str | None, line_no: int | None) -> int:
    """Spark's ``xxhash64(lit(seed), file_key, line_no)`` (signed 64-bit): each value
    hashed in turn, seeded with the hash so far (42 at first); a null value leaves it as it
    is; a seed that fits 32 bits is an ``int`` literal (4 bytes), a larger one a ``long``.

    Examples:
        >>> spark_xxhash64(7, None, None)  # spark.range(1).select(xxhash64(lit(7), ...))
        2786828215451145335
    """
    h = 42
    size = "<i" if -(1 << 31) <= seed < (1 << 31) else "<q"
    h = xxh64(struct.pack(size, seed), h)
    if file_key is not None:
        h = xxh64(file_key.encode("utf-8"), h)
    if line_no is not None:
        h = xxh64(struct.pack("<q", line_no), h)
    return h - (1 << 64) if h >= 1 << 63 else h


def sampled(seed: int, fraction: float | None, file_key: str | None,
            line_no: int | None) -> bool:
    """Whether the line ``(file_key, line_no)`` is in the sample of ``fraction`` drawn with
    ``seed`` (every line when ``fraction`` is ``None`` or 1), as :func:`_sampled_lines`
    decides it in Spark."""
    if fraction is None or fraction >= 1.0:
        return True
    bucket = spark_xxhash64(seed, file_key, line_no) % _HASH_RANGE
    return bucket < round(fraction * _HASH_RANGE)


def reverify_rows(raw: pa.Table, messages: pa.Table, settings: VerifySettings, *,
                  fraction: float | None, seed: int = 0) -> ReverifyResult:
    """:func:`reverify` over Arrow tables held on the driver: ``raw`` (``raw_messages``
    rows, at least ``file_key, source_file, line_no, raw_text, raw_bytes, read_error``)
    and ``messages`` (``file_key, source_file, line_no, sender, msg_id, received_at,
    error_code, error_detail, signature_code``). The same lines are sampled, checked by
    the same functions and folded by the same replay rule, so the result is the same."""
    checked_settings = settings.validated()
    result = ReverifyResult(mode="all" if fraction is None else "sample",
                            fraction=1.0 if fraction is None else fraction, seed=seed)
    stored_rows = messages.select(["file_key", "source_file", "line_no", "sender", "msg_id",
                                   "received_at", "error_code", "error_detail",
                                   "signature_code"]).to_pylist()
    # the joins of the Spark way, by (file_key, line_no): a null key matches nothing
    stored = {(row["file_key"], row["line_no"]): row for row in stored_rows
              if row["file_key"] is not None and row["line_no"] is not None}
    lines = [row for row in raw.select(["file_key", "source_file", "line_no", "raw_text",
                                        "raw_bytes", "read_error"]).to_pylist()
             if sampled(seed, fraction, row["file_key"], row["line_no"])]
    joined: dict[str, list[Any]] = {name: [] for name in (
        "file_key", "source_file", "line_no", "raw_text", "raw_bytes", "read_error",
        "has_row", "stored_msg_id", "stored_code", "stored_detail", "stored_received_at")}
    for line in lines:
        row = stored.get((line["file_key"], line["line_no"]))
        for name in ("file_key", "source_file", "line_no", "raw_text", "raw_bytes",
                     "read_error"):
            joined[name].append(line[name])
        joined["has_row"].append(True if row is not None else None)
        for name, column in (("stored_msg_id", "msg_id"), ("stored_code", "error_code"),
                             ("stored_detail", "error_detail"),
                             ("stored_received_at", "received_at")):
            joined[name].append(row[column] if row is not None else None)
    rechecked: list[dict[str, Any]] = []
    for batch in _recheck(checked_settings.max_drift, [pa.RecordBatch.from_pydict(joined)]):
        rechecked.extend(batch.to_pylist())
    result.checked = len(rechecked)
    duplicates = _local_duplicates(rechecked, stored_rows, checked_settings.replay_window)
    differing: list[dict[str, Any]] = []
    for row in rechecked:
        difference = _difference(row, duplicates)
        if not row["has_row"]:
            result.missing += 1
        if difference is not None:
            differing.append(difference)
    differing.sort(key=lambda d: (d["source_file"], d["line_no"]))
    result.difference_count = len(differing)
    result.differences = differing[:MAX_LISTED]
    return result


def _local_duplicates(rechecked: list[dict[str, Any]], stored_rows: list[dict[str, Any]],
                      window: float) -> dict[str, dict[int, str]]:
    """:func:`snap_spark.pipeline.transforms.find_duplicates` of :func:`_fold_input`'s
    rows, built and folded on the driver (the fold's own function, over one partition)."""
    from snap_spark.pipeline.land import LANDED_SCHEMA, fold_landed

    today = {(row["file_key"], row["line_no"]): row for row in rechecked
             if row["file_key"] is not None and row["line_no"] is not None}
    candidates: list[dict[str, Any]] = []
    for row in stored_rows:
        code = (row["signature_code"] if row["error_code"] == int(ErrorCode.DUPLICATE_MESSAGE)
                else row["error_code"])
        sender, msg_id, received_at = row["sender"], row["msg_id"], row["received_at"]
        new = today.get((row["file_key"], row["line_no"]))
        if new is not None:
            sender, msg_id, received_at, code = (new["sender"], new["msg_id"],
                                                 new["received_at"], new["code"])
        if code is not None and code not in POST_REPLAY_CODES:
            continue
        name = (None if row["source_file"] is None or row["file_key"] is None
                else f"{row['source_file']}\u0000{row['file_key']}")
        candidates.append({"kind": "candidate", "source_file": name, "line_no": row["line_no"],
                           "sender": sender, "msg_id": msg_id, "received_at": received_at,
                           "code": code})
    found: dict[str, dict[int, str]] = {}
    if not candidates:
        return found
    batch = pa.RecordBatch.from_pylist(candidates, schema=LANDED_SCHEMA)
    for out in fold_landed(window, [batch]):
        for row in out.to_pylist():
            if row["kind"] == "duplicate":
                found.setdefault(row["source_file"], {})[row["line_no"]] = row["info"]
    return found
