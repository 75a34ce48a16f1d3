"""Differential tests of the task fold: the native core's (``snap_spark._native.fold_tasks``,
through :func:`snap_spark.pipeline.task_tables.fold_reports`) equals the Python reference
(:func:`~snap_spark.pipeline.task_tables.fold_reports_reference`, the protocol's ``task_step``)
on every column of every ``task_events`` and ``tasks`` row: Hypothesis-made reports (ties,
late reports, foreign senders, illegal steps, null and odd receipt times), a seeded corpus
of 60,000 reports, and the written files of ``fold_partition`` cut into any chunk size.
"""

from __future__ import annotations

import json
import math
import random
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snap_spark.common.pyarrow_compat import sort_nulls_first
from snap_spark.pipeline import task_tables as tasks
from snap_spark.protocol.tasks import STATES
from snap_spark.udfs.verify import native_core

COLUMNS = {"task_id": pa.string(), "context_id": pa.string(), "task_state": pa.string(),
           "sender": pa.string(), "msg_id": pa.string(), "timestamp": pa.int64(),
           "received_at": pa.float64(), "source_file": pa.string(), "line_no": pa.int64()}
SCHEMA = pa.schema(list(COLUMNS.items()))


def native_fold() -> Any:
    core = native_core()
    assert core is not None, "the native core is not built (make native)"
    return core.fold_tasks


def fold_natively(reports: pa.Table) -> tuple[pa.Table, pa.Table] | None:
    """The native fold alone (``None`` where it hands the reports back)."""
    return tasks._fold_natively(native_fold(), reports)


def exact(table: pa.Table) -> list[dict[str, Any]]:
    """The rows, each float as its bits (NaN equal to itself, -0.0 apart from 0.0)."""
    return [{k: ("float", struct.pack("<d", v)) if isinstance(v, float) else v
             for k, v in row.items()} for row in table.to_pylist()]


def assert_same(reports: pa.Table) -> bool:
    """Both folds give equal tables (every column, nulls and float bits); returns whether
    the native core took the reports itself."""
    expected = tasks.fold_reports_reference(reports)
    native = fold_natively(reports)
    got = tasks.fold_reports(reports)
    for want, have in zip(expected, got, strict=True):
        assert have.schema.equals(want.schema)
        assert exact(have) == exact(want)
    if native is not None:
        for want, have in zip(expected, native, strict=True):
            assert exact(have) == exact(want)
    return native is not None


def sorted_reports(rows: list[dict[str, Any]]) -> pa.Table:
    return sort_nulls_first(pa.Table.from_pylist(rows, schema=SCHEMA), tasks._FOLD_ORDER)


def test_native_core_has_the_fold() -> None:
    assert callable(native_fold())


def test_the_comparison_sees_a_difference() -> None:
    reports = sorted_reports([
        {"task_id": "t1", "context_id": "c", "task_state": "submitted", "sender": "A",
         "msg_id": "m1", "timestamp": 1, "received_at": 1.0, "source_file": "f", "line_no": 1},
        {"task_id": "t1", "context_id": None, "task_state": "working", "sender": "A",
         "msg_id": "m2", "timestamp": 2, "received_at": 2.0, "source_file": "f", "line_no": 2}])
    events, rows = tasks.fold_reports(reports)
    assert rows.column("state").to_pylist() == ["working"]
    assert rows.column("transitions").to_pylist() == [1]
    assert events.column("context_id").to_pylist() == ["c", "c"]
    changed = reports.set_column(2, "task_state", pa.array(["submitted", "completed"]))
    assert tasks.fold_reports(changed)[1].to_pylist() != rows.to_pylist()


# ---------------------------------------------------------------- Hypothesis-made reports

#: Receipt times with ties, zeros (of both signs), negatives and nulls: a null and a zero
#: both fold as 0.0, and a negative one sorts before them in the fold but after a null in
#: the input order, which makes the reference fold it as a late report.
RECEIPTS = st.sampled_from([None, 0.0, -0.0, -5.0, 1.0, 2.5, 2.5, 1e9, 1770163200.25])
STATE = st.sampled_from(STATES)


@st.composite
def report_rows(draw: st.DrawFn, odd_states: bool = False) -> list[dict[str, Any]]:
    rows = []
    for t in range(draw(st.integers(1, 5))):
        for n in range(draw(st.integers(1, 7))):
            state = draw(STATE | st.just("paused")) if odd_states else draw(STATE)
            rows.append({
                "task_id": f"t{t}", "context_id": draw(st.sampled_from([None, "c1", "c2"])),
                "task_state": state, "sender": draw(st.sampled_from(["A", "A", "A", "B"])),
                "msg_id": f"m{t}-{n}",
                "timestamp": draw(st.sampled_from([-1, 0, 10, 10, 20, 253_402_300_800])),
                "received_at": draw(RECEIPTS), "source_file": draw(st.sampled_from("fg")),
                "line_no": draw(st.integers(0, 3))})
    return rows


FOLD_SETTINGS = settings(max_examples=200, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow])


@FOLD_SETTINGS
@given(report_rows())
def test_generated_reports_in_fold_order(rows: list[dict[str, Any]]) -> None:
    assert assert_same(sorted_reports(rows))


@FOLD_SETTINGS
@given(report_rows(), st.randoms(use_true_random=False))
def test_generated_reports_in_any_order_within_a_task(rows: list[dict[str, Any]],
                                                      rng: random.Random) -> None:
    # grouped by task, but in any order within one: every report may be a late one
    by_task: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row)
    shuffled = []
    for group in by_task.values():
        rng.shuffle(group)
        shuffled.extend(group)
    assert assert_same(pa.Table.from_pylist(shuffled, schema=SCHEMA))


@FOLD_SETTINGS
@given(report_rows(odd_states=True))
def test_a_state_outside_the_six_is_left_to_the_reference(rows: list[dict[str, Any]]) -> None:
    reports = sorted_reports(rows)
    try:
        expected = tasks.fold_reports_reference(reports)
    except KeyError:  # the reference's own failure on a state it has no transitions for
        with pytest.raises(KeyError):
            tasks.fold_reports(reports)
        return
    got = tasks.fold_reports(reports)
    assert [t.to_pylist() for t in got] == [t.to_pylist() for t in expected]
    odd = any(row["task_state"] == "paused" for row in rows)
    assert (fold_natively(reports) is None) == odd


def test_nan_receipt_and_split_tasks_are_left_to_the_reference() -> None:
    base = {"context_id": None, "task_state": "working", "sender": "A", "timestamp": 5,
            "source_file": "f", "line_no": 0}
    nan = pa.Table.from_pylist([
        {**base, "task_id": "t1", "msg_id": "m1", "received_at": 1.0},
        {**base, "task_id": "t1", "msg_id": "m2", "received_at": math.nan}], schema=SCHEMA)
    split = pa.Table.from_pylist([
        {**base, "task_id": "t1", "msg_id": "m1", "received_at": 1.0},
        {**base, "task_id": "t2", "msg_id": "m2", "received_at": 1.0},
        {**base, "task_id": "t1", "msg_id": "m3", "received_at": 1.0}], schema=SCHEMA)
    for reports in (nan, split):
        assert fold_natively(reports) is None
        assert not assert_same(reports)
    # the reference folds a task's two runs of rows as two tasks, and so does fold_reports
    assert tasks.fold_reports(split)[1].column("task_id").to_pylist() == ["t1", "t2", "t1"]


# ---------------------------------------------------------------- a seeded corpus

def seeded_rows(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        task = rng.randrange(count // 2)
        rows.append({"task_id": f"task-{task:06d}", "context_id": rng.choice([None, "ctx"]),
                     "task_state": rng.choice(STATES),
                     "sender": rng.choice(["owner"] * 9 + ["other"]), "msg_id": f"m{i}",
                     "timestamp": 1_770_163_200 + rng.randrange(100),
                     "received_at": rng.choice([None, 1_770_163_200.0 + rng.random() * 200]),
                     "source_file": "s.jsonl", "line_no": i})
    return rows


def test_a_seeded_corpus_of_60000_reports() -> None:
    assert assert_same(sorted_reports(seeded_rows(60_000, 7)))


# ---------------------------------------------------------------- fold_partition's files

def written_rows(root: Path, partition_output: list[pa.RecordBatch]
                 ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    rows: dict[str, list[dict[str, Any]]] = {"task_events": [], "tasks": []}
    counts: dict[str, int] = {}
    for batch in partition_output:
        for row in batch.to_pylist():
            info = json.loads(row["info"])
            if row["table"] == tasks.COUNTS:
                counts = info
            else:
                rows[row["table"]].extend(
                    pq.read_table(root / row["table"] / info["path"]).to_pylist())
    return rows, counts


@pytest.mark.parametrize("chunk", [1, 5, 8192])
def test_fold_partition_writes_the_same_rows_whatever_the_chunk(
        tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    reports = sorted_reports(seeded_rows(3_000, 11))
    batches = reports.to_batches(max_chunksize=7)  # a task's rows cross batch borders

    def run(folder: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
        roots = {name: str(tmp_path / folder / name) for name in ("task_events", "tasks")}
        out = list(tasks.fold_partition(roots, "0f" * 16, iter(batches)))
        return written_rows(tmp_path / folder, out)

    monkeypatch.setattr(tasks, "fold_reports", tasks.fold_reports_reference)
    monkeypatch.setattr(tasks, "FOLD_CHUNK_ROWS", 8192)
    expected = run("reference")
    monkeypatch.undo()
    monkeypatch.setattr(tasks, "FOLD_CHUNK_ROWS", chunk)
    got = run(f"native-{chunk}")
    assert got == expected
    assert expected[1]["reports"] == reports.num_rows
    assert expected[1]["tasks"] == len(set(reports.column("task_id").to_pylist()))


def test_whole_tasks_never_split_a_task(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "FOLD_CHUNK_ROWS", 10)
    reports = sorted_reports(seeded_rows(500, 3))
    chunks = list(tasks._whole_tasks(reports.to_batches(max_chunksize=3)))
    assert len(chunks) > 10
    assert pa.concat_tables(chunks).equals(reports)
    seen: set[str] = set()
    for chunk in chunks:
        ids = set(chunk.column("task_id").to_pylist())
        assert not ids & seen
        seen |= ids
