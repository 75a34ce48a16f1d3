"""The replay window in streaming state against the batch fold, on real Structured Streaming.

Each test writes candidate rows as JSON files ("drops"), reads them with the file source one
file per micro-batch (``maxFilesPerTrigger=1``, files ordered by modification time) under
``trigger(availableNow=True)``, and collects the verdicts with ``foreachBatch``. A stream's
final verdict of a row is its last output row (later batches win, as in an upserting sink).
"""

from __future__ import annotations

import base64
import json
import math
import os
import random
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from snap_spark.protocol.replay import (
    ReplayKeyState,
    duplicate_detail,
    fresh_state,
    replayed_rows,
)
from snap_spark.runtime import preinit as preinit_module
from snap_spark.stream.replay_state import (
    ARROW_MARK,
    BUCKET_COLUMN,
    BUCKETS_PER_PARTITION,
    CANDIDATE_SCHEMA,
    CHANGELOG_CONF,
    COMPRESSED_MARK,
    DEFAULT_BUCKETS,
    LAYOUT_FILE,
    STATE_NAME,
    VERDICT_SCHEMA,
    ReplayStateProcessor,
    _candidate,
    configure_state_store,
    decode_bucket,
    expiry_ms,
    replay_verdicts,
    spark_partition,
    state_buckets,
    state_keys,
    state_rows,
    step_key,
)

pytestmark = pytest.mark.spark

WINDOW = 120.0
T0 = 1_700_000_000.0  # receipt times are unix seconds
Row = dict[str, Any]
RowId = tuple[str, int]


class Drops:
    """A landing folder the test drops candidate files into, in arrival order."""

    def __init__(self, root: Path) -> None:
        self.src = root / "landing"
        self.src.mkdir(parents=True)
        self.staging = root / "staging"
        self.staging.mkdir()
        self.count = 0
        self.mtime = time.time()

    def write(self, rows: Sequence[Row]) -> None:
        name = f"drop-{self.count:03d}.json"
        staged = self.staging / name
        staged.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        self.mtime += 10  # the file source takes the oldest file first
        os.utime(staged, (self.mtime, self.mtime))
        staged.rename(self.src / name)  # a file appears whole
        self.count += 1


def run_stream(spark: Any, drops: Drops, checkpoint: Path, window: float, lateness: float,
               buckets: int | Sequence[int] = DEFAULT_BUCKETS, configure: bool = True
               ) -> tuple[list[tuple[int, list[Row]]], list[Any]]:
    """Run the replay query over what was dropped so far: ``(batch id, rows)`` per batch,
    and the query's progress reports (``configure``: the state store settings first)."""
    if configure:
        configure_state_store(spark)
    # The closing no-data batch (where the state's timers drop keys past their window) is
    # part of what these tests check; the stream job turns such batches off on its session.
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    batches: list[tuple[int, list[Row]]] = []
    known: dict[int, int] = {}
    keys_held: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in df.collect()]
        reports = [json.loads(r["passthrough"]) for r in rows if r["passthrough"]]
        known.update(state_keys(reports, known))
        keys_held.append(sum(known.values()))
        batches.append((batch_id, [r for r in rows if not r["passthrough"]]))

    candidates = (spark.readStream.schema(CANDIDATE_SCHEMA).option("maxFilesPerTrigger", 1)
                  .json(str(drops.src)))
    # as the stream job does: the query's start step in the warm server when it is on
    with preinit_module.warm_preinit(spark.sparkContext, (replay_verdicts.__module__,)):
        verdicts = replay_verdicts(candidates, window, lateness, buckets=buckets)
    query = (verdicts.writeStream
             .foreachBatch(collect)
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    progress = list(query.recentProgress)
    for report, held in zip(progress, keys_held, strict=False):
        report["stateKeys"] = held  # keys held after the batch (the state has one row a bucket)
    return batches, progress


def final_verdicts(batches: Sequence[tuple[int, list[Row]]], window: float
                   ) -> dict[RowId, tuple[int | None, str | None]]:
    """``(code, 2006 detail)`` per row: the last verdict the stream gave it."""
    final: dict[RowId, tuple[int | None, str | None]] = {}
    for _, rows in sorted(batches, key=lambda b: b[0]):
        for r in rows:
            detail = (None if r["duplicate_of"] is None else
                      duplicate_detail(r["duplicate_of"], r["received_at"], window))
            final[(r["file_key"], r["line_no"])] = (r["code"], detail)
    return final


def fold_verdicts(candidates: Sequence[Row], window: float
                  ) -> dict[RowId, tuple[int | None, str | None]]:
    """The batch fold over every candidate, in input order ``(source_file, line_no)``."""
    rows = sorted(candidates, key=lambda c: (c["source_file"], c["line_no"]))
    dups = dict(replayed_rows([c["sender"] for c in rows], [c["msg_id"] for c in rows],
                              [c["received_at"] for c in rows],
                              [c["auth_code"] for c in rows], window))
    return {(c["file_key"], c["line_no"]): (2006, dups[i]) if i in dups else
            (c["auth_code"], None) for i, c in enumerate(rows)}


def check_batches(batches: Sequence[tuple[int, list[Row]]], dropped: Sequence[Row]) -> None:
    """Every candidate has exactly one ``changed=false`` row, and ``changed=true`` rows name
    rows of earlier batches whose verdict really moved."""
    own = [(r["file_key"], r["line_no"]) for _, rows in batches for r in rows
           if not r["changed"]]
    assert sorted(own) == sorted((c["file_key"], c["line_no"]) for c in dropped)
    last: dict[RowId, tuple[Any, Any]] = {}
    for _, rows in sorted(batches, key=lambda b: b[0]):
        for r in rows:
            row_id = (r["file_key"], r["line_no"])
            verdict = (r["code"], r["duplicate_of"])
            if r["changed"]:
                assert row_id in last, f"changed row {row_id} was never decided before"
                assert last[row_id] != verdict, f"changed row {row_id} did not change"
            last[row_id] = verdict


class Candidates:
    """Candidate rows with unique ``(file_key, line_no)`` and varied input order."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.line = 0

    def row(self, sender: str, msg_id: str, at: float, code: int | None = None,
            source_file: str | None = None) -> Row:
        self.line += 1
        source_file = source_file or self.rng.choice(["in/a.jsonl", "in/b.jsonl", "in/c.jsonl"])
        return {"sender": sender, "msg_id": msg_id, "received_at": at, "auth_code": code,
                "source_file": source_file, "line_no": self.line,
                "file_key": "fk-" + source_file.rsplit("/", 1)[-1]}

    def generated(self, n_keys: int, span: float) -> list[Row]:
        """Keys with repeats within and beyond the window, forged copies before genuine
        ones, equal receipt times, copies exactly one window apart."""
        rows: list[Row] = []
        offsets = [0.0, 0.0, 1.0, 30.0, WINDOW, WINDOW + 0.5, 1.5 * WINDOW, 3 * WINDOW]
        for k in range(n_keys):
            sender, msg_id = f"agent{k % 5}", f"m{k}"
            t0 = T0 + self.rng.uniform(0, span)
            if self.rng.random() < 0.25:  # a forgery seen first
                rows.append(self.row(sender, msg_id, t0 - self.rng.choice([0.0, 2.0]), 2001))
            for _ in range(self.rng.randint(1, 4)):
                code = self.rng.choice([None, None, None, None, 2001, 2002])
                rows.append(self.row(sender, msg_id, t0 + self.rng.choice(offsets), code))
        return rows


def split_drops(rng: random.Random, rows: Sequence[Row], n: int, span: float,
                late_share: float) -> list[list[Row]]:
    """Rows into ``n`` drops by receipt time, a share of them moved to a later drop (a later
    drop then holds earlier-received copies); rows within a drop are shuffled."""
    drops: list[list[Row]] = [[] for _ in range(n)]
    for r in rows:
        d = min(n - 1, max(0, int((r["received_at"] - T0) / span * n)))
        if rng.random() < late_share:
            d = rng.randint(d, n - 1)
        drops[d].append(r)
    for d in drops:
        rng.shuffle(d)
    return drops


def late_original_cases(c: Candidates) -> tuple[list[Row], list[Row], dict[str, Row]]:
    """Hand-made keys whose earlier-received copies arrive one drop late."""
    first = {
        "accepted_then_dup": c.row("agentX", "late-a", T0 + 100.0, source_file="in/z.jsonl"),
        "dup_then_valid": c.row("agentX", "late-b", T0 + 215.0, source_file="in/z.jsonl"),
        "b_accepted": c.row("agentX", "late-b", T0 + 100.0, source_file="in/z.jsonl"),
        "forged_first": c.row("agentX", "forged", T0 + 10.0, 2001),
        "genuine": c.row("agentX", "forged", T0 + 20.0),
    }
    second = {
        "a_original": c.row("agentX", "late-a", T0 + 50.0),
        "b_original": c.row("agentX", "late-b", T0 + 90.0),
        "genuine_repeat": c.row("agentX", "forged", T0 + 140.0),  # exactly one window later
    }
    return list(first.values()), list(second.values()), {**first, **second}


def changed_rows(batches: Sequence[tuple[int, list[Row]]]) -> dict[RowId, Row]:
    return {(r["file_key"], r["line_no"]): r for _, rows in batches for r in rows
            if r["changed"]}


def row_id(r: Row) -> RowId:
    return (r["file_key"], r["line_no"])


@pytest.mark.parametrize("layout,preinit", [("32-buckets", "warm"),
                                            ("chosen-for-the-partitions", "warm"),
                                            ("chosen-for-the-partitions", "spark's own")])
def test_verdicts_over_drops_equal_the_batch_fold(spark: Any, tmp_path: Path, layout: str,
                                                  preinit: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # preinit: Spark's schema step at the query's start, in the warm server
    # (snap_spark.runtime.preinit) or in the interpreter Spark starts for it
    monkeypatch.setenv(preinit_module.SWITCH_ENV, "1" if preinit == "warm" else "0")
    served = preinit_module.served()
    # the layout of checkpoints before state_buckets, and the one it gives a new one
    buckets = (DEFAULT_BUCKETS if layout == "32-buckets"
               else state_buckets(str(tmp_path / "ckpt"), 2))
    c = Candidates(seed=11)
    span = 6 * WINDOW
    generated = c.generated(n_keys=60, span=span)
    drops = split_drops(c.rng, generated, 5, span, late_share=0.4)
    first, second, named = late_original_cases(c)
    drops[0] += first
    drops[1] += second
    landing = Drops(tmp_path)
    for rows in drops:
        landing.write(rows)
    everything = [r for rows in drops for r in rows]

    batches, _ = run_stream(spark, landing, tmp_path / "ckpt", WINDOW, lateness=10 * span,
                            buckets=buckets)

    check_batches(batches, everything)
    expected = fold_verdicts(everything, WINDOW)
    got = final_verdicts(batches, WINDOW)
    assert got == expected
    assert sum(code == 2006 for code, _ in expected.values()) > 20  # the set is not trivial
    assert preinit_module.served() == served + (preinit == "warm")  # one query start
    # The hand-made keys: the earlier rows' new verdicts come out as changed rows.
    changed = changed_rows(batches)
    a = changed[row_id(named["accepted_then_dup"])]
    assert (a["code"], a["duplicate_of"], a["exact"]) == (2006, T0 + 50.0, True)
    b = changed[row_id(named["dup_then_valid"])]  # 215 - 90 > 120: accepted after all
    assert (b["code"], b["duplicate_of"]) == (None, None)
    assert changed[row_id(named["b_accepted"])]["duplicate_of"] == T0 + 90.0
    assert expected[row_id(named["forged_first"])] == (2001, None)
    assert expected[row_id(named["genuine_repeat"])][0] == 2006
    hand_made = {row_id(r) for r in named.values()}
    assert len(set(changed) - hand_made) >= 5  # generated late copies changed rows too
    assert all(r["exact"] for _, rows in batches for r in rows)


@pytest.mark.parametrize("changelog", ["on", "turned-on-at-the-restart"])
def test_restart_on_the_same_checkpoint_keeps_the_state(spark: Any, tmp_path: Path,
                                                        changelog: str) -> None:
    # The second case: a checkpoint written with RocksDB snapshots (before the setting was
    # on) is picked up with changelog checkpointing on.
    c = Candidates(seed=23)
    span = 4 * WINDOW
    drops = split_drops(c.rng, c.generated(n_keys=40, span=span), 4, span, late_share=0.2)
    # Copies whose verdict depends on a copy the first query saw.
    kept = c.row("agentY", "across", T0 + span + 10.0)
    repeat = c.row("agentY", "across", T0 + span + 60.0)
    original = c.row("agentY", "late-across", T0 + span + 30.0)
    earlier = c.row("agentY", "late-across", T0 + span + 20.0)
    drops[1].append(kept)
    drops[1].append(original)
    drops[2].append(repeat)
    drops[3].append(earlier)
    landing, checkpoint = Drops(tmp_path), tmp_path / "ckpt"
    for rows in drops[:2]:
        landing.write(rows)
    configure_state_store(spark)
    if changelog != "on":
        spark.conf.set(CHANGELOG_CONF, "false")
    try:
        first, progress = run_stream(spark, landing, checkpoint, WINDOW, lateness=10 * span,
                                     configure=changelog == "on")
    finally:
        spark.conf.set(CHANGELOG_CONF, "true")
    assert state_rows(progress[-1])  # the first query stopped with keys in its state
    changelogs = list((checkpoint / "state").rglob("*.changelog"))
    assert bool(changelogs) == (changelog == "on")  # without: snapshots only
    for rows in drops[2:]:
        landing.write(rows)
    second, _ = run_stream(spark, landing, checkpoint, WINDOW, lateness=10 * span)

    assert min(b for b, _ in second) > max(b for b, _ in first)
    everything = [r for rows in drops for r in rows]
    batches = first + second
    check_batches(batches, everything)
    assert final_verdicts(batches, WINDOW) == fold_verdicts(everything, WINDOW)
    second_rows = {row_id(r): r for _, rows in second for r in rows}
    assert (second_rows[row_id(repeat)]["code"], second_rows[row_id(repeat)]["duplicate_of"]
            ) == (2006, T0 + span + 10.0)
    moved = second_rows[row_id(original)]  # decided by the first query, changed by the second
    assert (moved["changed"], moved["code"], moved["duplicate_of"]) == (True, 2006,
                                                                       T0 + span + 20.0)


def test_rows_behind_the_watermark_get_a_verdict_flagged_inexact(spark: Any,
                                                                tmp_path: Path) -> None:
    c = Candidates(seed=5)
    lateness = 10.0
    a1 = c.row("agentZ", "a", T0 + 1000.0)
    b1 = c.row("agentZ", "b", T0 + 1000.0)
    c1 = c.row("agentZ", "c", T0 + 2000.0)
    a2 = c.row("agentZ", "a", T0 + 1050.0)  # behind the watermark (T0 + 1990) of its batch
    d1 = c.row("agentZ", "d", T0 + 500.0, 2001)  # a key never seen, behind the watermark
    c2 = c.row("agentZ", "c", T0 + 2005.0)  # in time
    landing = Drops(tmp_path)
    for rows in ([a1, b1], [c1], [a2, d1, c2]):
        landing.write(rows)

    batches, progress = run_stream(spark, landing, tmp_path / "ckpt", WINDOW, lateness)

    check_batches(batches, [a1, b1, c1, a2, d1, c2])  # nothing dropped
    out = {row_id(r): r for _, rows in batches for r in rows}
    assert {k: out[row_id(r)]["exact"] for k, r in
            {"a1": a1, "b1": b1, "c1": c1, "a2": a2, "d1": d1, "c2": c2}.items()} == {
        "a1": True, "b1": True, "c1": True, "a2": False, "d1": False, "c2": True}
    # The inexact rows are decided against what the state still knows (nothing here): the
    # fold says a2 repeats a1, so the caller must re-decide the key against the lake.
    assert (out[row_id(a2)]["code"], out[row_id(d1)]["code"]) == (None, 2001)
    assert fold_verdicts([a1, a2], WINDOW)[row_id(a2)][0] == 2006
    assert (out[row_id(c2)]["code"], out[row_id(c2)]["duplicate_of"]) == (2006, T0 + 2000.0)
    assert all(op["numRowsDroppedByWatermark"] == 0
               for p in progress for op in p["stateOperators"])


def test_spark_drops_late_rows_when_the_watermark_column_reaches_the_operator(
        spark: Any, tmp_path: Path) -> None:
    """Why :func:`replay_verdicts` drops its watermark column before grouping: with the
    column left in, transformWithStateInPandas (EventTime) never sees late rows."""
    c = Candidates(seed=7)
    early, newer = c.row("agentW", "x", T0 + 1000.0), c.row("agentW", "y", T0 + 2000.0)
    # The third batch's watermark is T0 + 1990, but Spark filters late rows with the
    # previous batch's (T0 + 990): "between" still reaches the processor, "late" does not.
    between, late = c.row("agentW", "z", T0 + 1500.0), c.row("agentW", "w", T0 + 500.0)
    landing = Drops(tmp_path)
    for rows in ([early], [newer], [between, late]):
        landing.write(rows)
    configure_state_store(spark)
    batches: list[list[Row]] = []
    candidates = (spark.readStream.schema(CANDIDATE_SCHEMA).option("maxFilesPerTrigger", 1)
                  .json(str(landing.src))
                  .withColumn("t", F.timestamp_seconds("received_at"))
                  .withWatermark("t", "10 seconds"))
    verdicts = (candidates.withColumn(BUCKET_COLUMN, F.lit(0))
                .groupBy(BUCKET_COLUMN).transformWithStateInPandas(
                    ReplayStateProcessor(WINDOW), VERDICT_SCHEMA, "Append", "EventTime"))
    query = (verdicts.writeStream
             .foreachBatch(lambda df, _: batches.append([r.asDict() for r in df.collect()]))
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()

    seen = {r["msg_id"] for rows in batches for r in rows if not r["passthrough"]}
    assert seen == {"x", "y", "z"}  # "w" was dropped before the processor
    dropped = sum(op["numRowsDroppedByWatermark"] for p in query.recentProgress
                  for op in p["stateOperators"])
    assert dropped == 1


@pytest.mark.slow
def test_state_rows_stay_bounded_by_the_traffic_within_the_window(spark: Any,
                                                                  tmp_path: Path) -> None:
    c = Candidates(seed=31)
    n_drops, step, per_drop, lateness = 10, WINDOW, 30, 20.0  # 1200 s: ten windows
    drops: list[list[Row]] = []
    for d in range(n_drops):
        start = T0 + d * step
        rows = []
        for k in range(per_drop):
            at = start + c.rng.uniform(0, step - 30)
            for _ in range(c.rng.randint(1, 3)):
                rows.append(c.row(f"agent{k % 4}", f"d{d}-m{k}", at + c.rng.uniform(0, 30)))
        if drops:  # repeats of the previous drop's ids, within the window or beyond it
            for r in c.rng.sample(drops[-1], 10):
                rows.append(c.row(r["sender"], r["msg_id"], start + c.rng.uniform(0, step)))
        drops.append(rows)
    landing = Drops(tmp_path)
    for rows in drops:
        landing.write(rows)

    batches, progress = run_stream(spark, landing, tmp_path / "ckpt", WINDOW, lateness)

    everything = [r for rows in drops for r in rows]
    check_batches(batches, everything)
    assert final_verdicts(batches, WINDOW) == fold_verdicts(everything, WINDOW)
    counts = [p["stateKeys"] for p in progress]
    assert len(counts) == n_drops + 1  # one batch per drop, then the closing no-data batch
    # A key stays exactly until the watermark passes its newest receipt time + the window:
    # batch b runs at the watermark (newest receipt time of batches < b) - lateness.
    expected = []
    for b in range(n_drops + 1):
        seen = [r for rows in drops[:b + 1] for r in rows]
        before = [r["received_at"] for rows in drops[:b] for r in rows]
        watermark_ms = (int(max(before) * 1e6) // 1000 - int(lateness * 1000)) if before else 0
        newest: dict[tuple[str, str], float] = {}
        for r in seen:
            key = (r["sender"], r["msg_id"])
            newest[key] = max(newest.get(key, r["received_at"]), r["received_at"])
        expected.append(sum(math.ceil((at + WINDOW) * 1000) + 1 > watermark_ms
                            for at in newest.values()))
    print(f"state keys after each batch: {counts} (keys seen: {len(newest)}; state rows: "
          f"{[state_rows(p) for p in progress]})")
    assert counts == expected
    assert max(expected) <= 3 * per_drop  # bounded by the traffic within about one window
    assert len(newest) == 10 * per_drop


@settings(max_examples=300, deadline=None)
@given(received=st.floats(0, 2e9, allow_nan=False), behind=st.floats(0, 1e6, allow_nan=False),
       code=st.sampled_from([None, 2001, 2002, math.nan]),
       line=st.integers(1, 10**9), window=st.floats(0, 1e5, allow_nan=False),
       with_watermark=st.booleans())
def test_fresh_state_is_what_step_key_gives(received: float, behind: float, code: Any,
                                            line: int, window: float,
                                            with_watermark: bool) -> None:
    """The processor's path for a key seen once, on time (the driver's shortcut,
    fresh_state, called directly) equals the general fold: step_key from an empty state
    that is not EMPTY_STATE itself, so the driver takes no shortcut."""
    watermark = max(0.0, received - behind) if with_watermark else None
    record = ("bc1p-sender", "msg-1", received, "drop.jsonl", line, code, "key-1")
    state, rows = step_key(ReplayKeyState(), [record], watermark, window)
    candidate = _candidate(record)
    first = fresh_state(candidate, watermark)
    assert first == state
    entry = [expiry_ms(first, window), first.to_plain()]
    assert json.loads(json.dumps(entry)) == json.loads(json.dumps(
        [expiry_ms(state, window), state.to_plain()]))
    assert rows == [(candidate, None, False, True)]


def _float_or_none(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


class _FakeState:
    """In-memory ``ListState``/``ValueState``, enough for the processor."""

    def __init__(self) -> None:
        self.value: Any = None

    def get(self) -> Any:
        return iter(self.value) if isinstance(self.value, list) else self.value

    def put(self, rows: list[Any]) -> None:
        self.value = list(rows)

    def update(self, value: Any) -> None:
        self.value = value

    def exists(self) -> bool:
        return self.value is not None

    def clear(self) -> None:
        self.value = None


class _FakeHandle:
    """The processor's handle without Spark's state server (which only a running query
    starts): state held in memory, timers pending as a set."""

    def __init__(self) -> None:
        self.states: dict[str, _FakeState] = {}
        self.timers: set[int] = set()

    def getListState(self, name: str, _schema: str) -> _FakeState:
        return self.states.setdefault(name, _FakeState())

    def getValueState(self, name: str, _schema: str) -> _FakeState:
        return self.states.setdefault(name, _FakeState())

    def registerTimer(self, ms: int) -> None:
        self.timers.add(ms)

    def deleteTimer(self, ms: int) -> None:
        self.timers.discard(ms)


class _FakeTimer:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def getCurrentWatermarkInMs(self) -> int:
        return self.ms


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from(["m1", "m2", "m3", "m4"]),
                                           st.integers(0, 60).map(lambda k: k * 5.0),
                                           st.sampled_from([None, None, 2001])),
                                 min_size=1, max_size=8), min_size=1, max_size=4),
       lateness=st.sampled_from([0.0, 30.0, 1000.0]))
def test_processor_equals_step_key_per_key(batches: list[list[tuple[str, float, Any]]],
                                          lateness: float) -> None:
    """The processor (its path for keys seen once included) outputs and stores, batch after
    batch, what step_key gives each key from its state, with no shortcut taken."""
    processor = ReplayStateProcessor(WINDOW)
    processor.init(_FakeHandle())  # type: ignore[arg-type]
    states: dict[str, ReplayKeyState] = {}
    newest: float | None = None
    line = 0
    for batch in batches:
        records = []
        for msg_id, at, code in batch:
            line += 1
            records.append(("bc1p", msg_id, T0 + at, "drop.jsonl", line, code, "key"))
        watermark_ms = 0 if newest is None else int((newest - lateness) * 1000)
        frame = pd.DataFrame(
            [(*r, None) for r in records],
            columns=["sender", "msg_id", "received_at", "source_file", "line_no",
                     "auth_code", "file_key", "task_id"])
        frame["auth_code"] = frame["auth_code"].astype("float64")  # NaN for null, as Arrow
        out, _count = processor.handleInputRows((0,), iter([frame]), _FakeTimer(watermark_ms))
        want: list[tuple[Any, ...]] = []
        watermark = watermark_ms / 1000 if watermark_ms > 0 else None
        if watermark is not None:  # keys past their expiry are deleted, touched or not
            states = {k: v for k, v in states.items()
                      if expiry_ms(v, WINDOW) > watermark * 1000}
        records.sort(key=lambda r: r[:5])
        for msg_id in dict.fromkeys(r[1] for r in records):
            mine = [r for r in records if r[1] == msg_id]
            before = states.get(msg_id, ReplayKeyState())
            after, rows = step_key(before, mine, watermark, WINDOW)
            want.extend((msg_id, c.ref[1], dup, changed, exact)  # type: ignore[index]
                        for c, dup, changed, exact in rows)
            if after.is_empty:
                states.pop(msg_id, None)
            else:
                states[msg_id] = after
        verdicts = out.to_dict("records")
        assert [(r["msg_id"], r["line_no"], _float_or_none(r["duplicate_of"]), r["changed"],
                 r["exact"]) for r in verdicts] == want
        kept, _ = processor._load()
        assert kept == {f"bc1p\n{k}": [expiry_ms(v, WINDOW), json.loads(json.dumps(
            v.to_plain()))] for k, v in states.items()}
        latest = max(T0 + at for _, at, _ in batch)
        newest = latest if newest is None else max(newest, latest)


def _frame(rows: list[tuple[str, float, int]]) -> pd.DataFrame:
    """Candidate rows ``(msg_id, seconds after T0, line)`` as the processor gets them."""
    out = pd.DataFrame([("bc1p", m, T0 + at, "drop.jsonl", line, None, "key", None)
                        for m, at, line in rows],
                       columns=["sender", "msg_id", "received_at", "source_file",
                                "line_no", "auth_code", "file_key", "task_id"])
    out["auth_code"] = out["auth_code"].astype("float64")
    return out


def _comparable(row: dict[Any, Any]) -> dict[Any, Any]:
    """An output row with nulls as ``None`` and its ``passthrough`` JSON parsed, less where
    a candidates file was written (a new name each run)."""
    out = {k: None if not isinstance(v, str) and pd.isna(v) else v for k, v in row.items()}
    if out["passthrough"] is not None:
        report = json.loads(out["passthrough"])
        if report.get("kind") == "span":
            report.pop("info")
        out["passthrough"] = report
    return out


def _older_text(keys: dict[str, Any], form: str) -> str:
    """A bucket as checkpoints of earlier versions hold it: its keys' JSON object, plain
    or zlib-compressed in base64 after ``z1:``."""
    text = json.dumps(keys)
    if form == "plain":
        return text
    return COMPRESSED_MARK + base64.b64encode(zlib.compress(text.encode(), 1)).decode()


@pytest.mark.parametrize("form", ["plain", "compressed"])
@pytest.mark.parametrize("landing", [False, True])
def test_a_bucket_stored_by_an_earlier_version_is_read_and_then_stored_as_arrow(
        tmp_path: Path, landing: bool, form: str) -> None:
    """Checkpoints written before the state was held as Arrow hold each bucket as a JSON
    object (plain, or compressed): the processor reads it, decides the next batch as from
    the same state held as Arrow, and stores the bucket as Arrow from then on."""
    first = [("m1", 0.0, 1), ("m2", 5.0, 2), ("m2", 7.0, 3), ("m3", 9.0, 4)]
    second = [("m1", 30.0, 5), ("m2", 31.0, 6), ("m4", 32.0, 7), ("m4", 33.0, 8)]
    outputs, stored = [], []
    for older in (False, True):
        where = tmp_path / f"candidates-{older}"
        processor = ReplayStateProcessor(WINDOW, str(where) if landing else None)
        handle = _FakeHandle()
        processor.init(handle)  # type: ignore[arg-type]
        list(processor.handleInputRows((0,), iter([_frame(first)]), _FakeTimer(0)))
        state = handle.states[STATE_NAME]
        text = "".join(row[0] for row in state.value)
        assert text.startswith(ARROW_MARK)
        if older:  # what an older checkpoint holds: the same keys as a JSON object
            state.value = [(_older_text(decode_bucket(text), form),)]
            assert processor._load()[0] == decode_bucket(text)
        out = list(processor.handleInputRows((0,), iter([_frame(second)]), _FakeTimer(0)))
        outputs.append([_comparable(r) for frame in out for r in frame.to_dict("records")])
        after = "".join(row[0] for row in state.value)
        assert after.startswith(ARROW_MARK)
        stored.append(decode_bucket(after))
    assert outputs[0] == outputs[1]
    assert stored[0] == stored[1] and set(stored[0]) == {f"bc1p\n{m}" for m in
                                                          ("m1", "m2", "m3", "m4")}


@settings(max_examples=120, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from(["m1", "m2", "m3", "m4", "m5"]),
                                           st.integers(0, 90).map(lambda k: k * 4.0),
                                           st.sampled_from([None, None, 2001]),
                                           st.sampled_from(["bc1p", "bc1q"])),
                                 min_size=1, max_size=10), min_size=1, max_size=5),
       lateness=st.sampled_from([0.0, 20.0, 1000.0]))
def test_landing_mode_holds_and_reports_what_the_general_path_does(
        batches: list[list[tuple[str, float, Any, str]]], lateness: float) -> None:
    """Landing mode adds a new key seen once as a row of the bucket's table without
    stepping it, and carries untouched keys over as rows; the general path (checked
    against step_key key by key above) steps every key. Batch after batch both hold the
    same keys, with the same timer, and landing mode reports exactly the general path's
    2006 and inexact rows of the batch."""
    import tempfile

    general, landing = (ReplayStateProcessor(WINDOW),
                        ReplayStateProcessor(WINDOW, tempfile.mkdtemp(prefix="snap-cand-")))
    handles = _FakeHandle(), _FakeHandle()
    general.init(handles[0])  # type: ignore[arg-type]
    landing.init(handles[1])  # type: ignore[arg-type]
    newest: float | None = None
    line = 0
    for batch in batches:
        records = []
        for msg_id, at, code, sender in batch:
            line += 1
            records.append((sender, msg_id, T0 + at, "drop.jsonl", line, code, "key", None))
        frame = pd.DataFrame(records, columns=["sender", "msg_id", "received_at",
                                               "source_file", "line_no", "auth_code",
                                               "file_key", "task_id"])
        frame["auth_code"] = frame["auth_code"].astype("float64")
        watermark_ms = 0 if newest is None else int((newest - lateness) * 1000)
        got = general.handleInputRows((0,), iter([frame.copy()]), _FakeTimer(watermark_ms))
        mine = [r for f in got for r in f.to_dict("records")
                if not r["changed"] and not r["passthrough"]]
        got = landing.handleInputRows((0,), iter([frame.copy()]), _FakeTimer(watermark_ms))
        reports = [json.loads(r["passthrough"]) for f in got for r in f.to_dict("records")]
        held = landing._load()[0]
        assert held == general._load()[0]
        assert handles[0].timers == handles[1].timers
        assert handles[1].timers == ({min(e[0] for e in held.values())} if held else set())
        assert len(mine) == len(records)
        duplicates = sorted(int(r["line_no"]) for r in mine if not pd.isna(r["duplicate_of"]))
        inexact = sorted((r["sender"], r["msg_id"]) for r in mine if not r["exact"])
        assert sorted(r["line_no"] for r in reports if r["kind"] == "duplicate") == duplicates
        assert sorted((r["sender"], r["msg_id"]) for r in reports
                      if r["kind"] == "inexact") == inexact
        (span,) = [r for r in reports if r["kind"] == "span"]
        assert span["lines"] == len(records)
        latest = max(T0 + at for _, at, _, _ in batch)
        newest = latest if newest is None else max(newest, latest)


@pytest.mark.parametrize("partitions", [2, 3])
def test_a_new_checkpoint_gets_buckets_spread_evenly_and_keeps_them(spark: Any, tmp_path: Path,
                                                                  partitions: int) -> None:
    checkpoint = tmp_path / "ckpt"
    ids = state_buckets(str(checkpoint), partitions)
    assert len(ids) == len(set(ids)) == BUCKETS_PER_PARTITION * partitions
    # Spark places a grouping key by its Murmur3 hash modulo the partitions
    placed = (spark.createDataFrame([(i,) for i in ids], "b int")
              .select(F.pmod(F.hash("b"), F.lit(partitions)).alias("p"))
              .groupBy("p").count().collect())
    assert sorted(r["count"] for r in placed) == [BUCKETS_PER_PARTITION] * partitions
    assert ids != list(range(len(ids)))  # 0..n-1 would not be even here
    recorded = json.loads((checkpoint / LAYOUT_FILE).read_text())
    assert recorded["bucket_ids"] == ids
    # the same checkpoint later, whatever the partitions asked for then
    assert state_buckets(str(checkpoint), 64) == ids


def test_spark_partition_is_spark_s_own_placement(spark: Any) -> None:
    """The partition computed on the driver equals Spark's ``pmod(hash(b), n)`` (its shuffle
    places an ``int`` grouping key so) for every value tried: both signs, the 32-bit ends,
    and partition counts from 1 to 200."""
    values = [*range(-2000, 2000), 2 ** 31 - 1, -(2 ** 31), 12_345_678, -987_654_321]
    frame = spark.createDataFrame([(v,) for v in values], "b int")
    for partitions in (1, 2, 3, 7, 64, 200):
        placed = {r["b"]: r["p"] for r in frame.select(
            "b", F.pmod(F.hash("b"), F.lit(partitions)).alias("p")).collect()}
        assert {v: spark_partition(v, partitions) for v in values} == placed, partitions
    with pytest.raises(ValueError, match="32-bit"):
        spark_partition(2 ** 31, 2)


def test_a_checkpoint_started_before_the_record_keeps_its_32_buckets(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"a-query-of-an-earlier-version"}')
    assert state_buckets(str(checkpoint), 2) == list(range(DEFAULT_BUCKETS))
    assert not (checkpoint / LAYOUT_FILE).exists()


def test_bucket_ids_must_be_distinct_and_not_negative(spark: Any) -> None:
    frame = spark.createDataFrame([], CANDIDATE_SCHEMA)
    for wrong in (0, [], [1, 1], [-2, 3]):
        with pytest.raises(ValueError, match="buckets"):
            replay_verdicts(frame, WINDOW, 10.0, buckets=wrong)


def test_a_bucket_s_frames_typed_apart_land_in_the_candidates_types(tmp_path: Path) -> None:
    """PySpark 4.2 hands a processor one key group's rows in several frames; a frame whose
    integer column holds a null comes as float64. The bucket file still has the candidates'
    types, and every value comes through."""
    import numpy as np
    import pyarrow.parquet as pq

    from snap_spark.pipeline.land import CANDIDATE_SCHEMA
    from snap_spark.stream.replay_state import _batch_table, _write_bucket

    floats = pd.DataFrame({"sender": ["s"], "msg_id": ["m1"], "received_at": [1.0],
                           "auth_code": [np.nan], "source_file": ["a.jsonl"],
                           "line_no": [3.0], "file_key": ["k"], "task_id": [None]})
    ints = pd.DataFrame({"sender": ["s"], "msg_id": ["m2"], "received_at": [2.0],
                         "auth_code": [2001], "source_file": ["a.jsonl"],
                         "line_no": [np.int64(4)], "file_key": ["k"], "task_id": ["t"]})
    span = _write_bucket(str(tmp_path), _batch_table([floats, ints]))
    table = pq.read_table(span["info"])
    assert table.schema.equals(CANDIDATE_SCHEMA, check_metadata=False)
    assert [(r["msg_id"], r["code"], r["line_no"]) for r in table.to_pylist()] == [
        ("m1", None, 3), ("m2", 2001, 4)]
    assert span["lines"] == 2 and span["received_at"] == 1.0
