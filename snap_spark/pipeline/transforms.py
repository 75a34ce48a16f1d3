"""Verdicts as DataFrames, for notebooks and other jobs: typed ``DataFrame -> DataFrame`` steps.

They run the same code as the batch job (:mod:`snap_spark.pipeline.checked` for the checks
and rows, :func:`snap_spark.pipeline.land.fold_replays` for replay) and produce rows of the
``messages`` table's shape, without writing anything::

    read_lines(spark, paths)                       # one row per input line
        .transform(check(settings))                # messages rows, stateless verdicts
        .transform(resolve_replay(settings))       # messages rows, final verdicts

or, reading and checking in one pass per file range, ``read_messages(spark, paths,
settings)``. The verdict of each line equals ``snap-spark check`` on the same input.

Examples:
    >>> from snap_spark.samples.messages import SampleConfig, write_sample
    >>> from snap_spark.settings import VerifySettings
    >>> config = SampleConfig(agents=4, messages=60, seed=5, attack_share=0.3)
    >>> _ = write_sample(config, f"{tmp}/traffic.ndjson", tasks_path=None)
    >>> df = read_messages(spark, [str(tmp)], VerifySettings(bare_clock="message"))
    >>> df.count()
    60
    >>> rows = df.groupBy("error_name").count().collect()
    >>> sum(r["count"] for r in rows if r["error_name"] is not None) > 0
    True
"""

from __future__ import annotations

import dataclasses
import functools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F

from snap_spark.files.lines import LineRange
from snap_spark.pipeline.checked import (
    RowMeta,
    apply_duplicates,
    check_lines,
    message_rows,
    table_arrow_schema,
)
from snap_spark.pipeline.land import fold_replays
from snap_spark.pipeline.read import (
    MAX_BATCH_BYTES,
    iter_line_lists,
    list_input_files,
    over_ranges,
    plan_ranges,
)
from snap_spark.protocol.verdict import POST_REPLAY_CODES
from snap_spark.settings import VerifySettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

Transform = Callable[["DataFrame"], "DataFrame"]

#: ``file_key`` of rows made by these transforms (they belong to no ingest run).
NO_FILE_KEY = ""


def messages_struct() -> StructType:
    """The Spark schema of ``messages`` rows (:mod:`snap_spark.schemas.tables`)."""
    from snap_spark.schemas.tables import MESSAGES

    return MESSAGES


def _settings(settings: VerifySettings) -> VerifySettings:
    """Validated settings with the driver's "now" fixed (every task uses the same)."""
    return settings.validated().with_clock_now()


def _meta() -> RowMeta:
    return RowMeta(uuid.uuid4().hex, int(time.time() * 1_000_000), NO_FILE_KEY)


def _check_batches(settings: VerifySettings, meta: RowMeta,
                   batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: lines → ``messages`` rows, one source file at a time."""
    for batch in batches:
        columns = batch.to_pydict()
        files, line_nos, raws = columns["source_file"], columns["line_no"], columns["raw"]
        errors = columns.get("read_error") or [None] * batch.num_rows
        start = 0
        while start < batch.num_rows:  # rows of one file share a source_file value
            end = start
            while end < batch.num_rows and files[end] == files[start]:
                end += 1
            piece = errors[start:end]
            checked = check_lines(settings, files[start], line_nos[start:end],
                                  raws[start:end], piece if any(piece) else None)
            if checked.needs_clock:
                from snap_spark.protocol.validate import MissingReceiptTime

                raise MissingReceiptTime(
                    "input has bare message lines (no envelope received_at): choose their "
                    "receipt clock (VerifySettings.bare_clock: now, message or unix seconds)")
            yield message_rows(meta, checked)
            start = end


def check(settings: VerifySettings) -> Transform:
    """Transform: lines (``source_file, line_no, raw`` and optionally ``read_error``, as
    :func:`snap_spark.pipeline.read.read_lines` gives them) → ``messages`` rows with their
    stateless verdicts (checks 1-5 and 7-8; replay is :func:`resolve_replay`).

    ``raw`` may be binary or string (e.g. a Kafka ``value`` cast to string).
    """
    chosen = _settings(settings)

    def step(lines: DataFrame) -> DataFrame:
        if "read_error" not in lines.columns:
            lines = lines.withColumn("read_error", F.lit(None).cast("string"))
        selected = lines.select(F.col("source_file").cast("string"),
                                F.col("line_no").cast("long"),
                                F.col("raw").cast("binary"), "read_error")
        return selected.mapInArrow(functools.partial(_check_batches, chosen, _meta()),
                                   messages_struct())

    return step


def _check_range(settings: VerifySettings, meta: RowMeta, part: LineRange,
                 _index: int) -> Iterator[pa.RecordBatch]:
    for line_nos, raws, errors in iter_line_lists(part.path, settings.batch_rows,
                                                  MAX_BATCH_BYTES, start=part.start,
                                                  end=part.end, first_line=part.first_line):
        yield from _check_batches(settings, meta, [
            pa.RecordBatch.from_pydict({"source_file": [part.path] * len(raws),
                                        "line_no": line_nos, "raw": raws,
                                        "read_error": errors or [None] * len(raws)})])


def find_duplicates(messages: DataFrame, settings: VerifySettings) -> dict[str, dict[int, str]]:
    """The lines the replay step (check 6) turns into 2006: ``{source_file: {line_no:
    detail}}``, computed now (one Spark job over a narrow projection of the candidates,
    shuffled by ``(sender, msg_id)`` and folded by the protocol's own replay rule)."""
    window = _settings(settings).replay_window
    code = F.col("error_code")
    candidates = messages.filter(
        code.isNull() | code.isin(*sorted(POST_REPLAY_CODES))
    ).select(
        F.lit("candidate").alias("kind"), "source_file", "line_no", "sender", "msg_id",
        "received_at", code.alias("code"), F.lit(None).cast("int").alias("prior_code"),
        F.lit(None).cast("string").alias("file_key"), F.lit(None).cast("long").alias("lines"),
        F.lit(None).cast("string").alias("info"),
    )
    folded = (
        fold_replays(candidates, window)
        .filter("kind = 'duplicate'")
        .select("source_file", "line_no", "info")
    )
    found: dict[str, dict[int, str]] = {}
    for row in folded.toArrow().to_pylist():
        found.setdefault(row["source_file"], {})[row["line_no"]] = row["info"]
    return found


def _apply(duplicates: Mapping[str, Mapping[int, str]], batches: Iterable[pa.RecordBatch]
           ) -> Iterator[pa.RecordBatch]:
    schema = table_arrow_schema("messages")
    for batch in batches:
        table = pa.Table.from_batches([batch]).cast(schema)
        files = table.column("source_file").to_pylist()
        for name in dict.fromkeys(files):
            replayed = duplicates.get(name)
            mask = pa.array([f == name for f in files])
            part = table.filter(mask)
            yield from (apply_duplicates(part, replayed) if replayed else part).to_batches()


def resolve_replay(settings: VerifySettings) -> Transform:
    """Transform: ``messages`` rows with stateless verdicts → final verdicts (replay
    applied in receipt order across all rows of the DataFrame; see
    :func:`find_duplicates`, which runs when the transform is applied)."""

    def step(messages: DataFrame) -> DataFrame:
        duplicates = find_duplicates(messages, settings)
        if not duplicates:
            return messages
        return messages.mapInArrow(functools.partial(_apply, duplicates), messages_struct())

    return step


def read_messages(spark: SparkSession, paths: Sequence[str],
                  settings: VerifySettings | None = None) -> DataFrame:
    """Read input files and folders and give every line its final verdict, as ``messages``
    rows (nothing is written). Lines are read and checked in one pass per file range.

    Examples:
        >>> from snap_spark.samples.messages import SampleConfig, generate, write_sample
        >>> config = SampleConfig(agents=3, messages=40, seed=2, attack_share=0.25)
        >>> _ = write_sample(config, f"{tmp}/traffic.ndjson", tasks_path=None)
        >>> df = read_messages(spark, [f"{tmp}/traffic.ndjson"])
        >>> got = {r["line_no"]: r["error_code"] for r in df.collect()}
        >>> got == {label.line_no: label.expected_code for _, label in generate(config)}
        True
    """
    chosen = _settings(settings or VerifySettings())
    chosen = dataclasses.replace(chosen, verify_threads=chosen.verify_threads or 1)
    ranges = plan_ranges(spark, list_input_files(paths))
    checked = over_ranges(spark, ranges, functools.partial(_check_range, chosen, _meta()),
                          messages_struct())
    return checked.transform(resolve_replay(chosen))
