"""A filter written once (:mod:`snap_spark.lake.where`) keeps the same rows rendered for
Spark as for pyarrow, nulls included, and the filters the pipeline states with it keep the
rows an independent reading of their rule keeps."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from snap_spark.lake import Where, col
from snap_spark.pipeline.replay_store import stored_candidates_where
from snap_spark.pipeline.task_tables import state_reports_where

DAY = dt.date(2026, 2, 4)
#: Rows with every column null in some row, and values at each bound of the filters below.
TABLE = pa.table({
    "n": pa.array([None, 0, 1, 2, 3, 2, None, 5], pa.int32()),
    "x": pa.array([1.5, None, 2.0, 2.0, -1.0, 9.0, 2.5, 2.0], pa.float64()),
    "s": pa.array(["a", "b", None, "valid", "a", "valid", "c", None], pa.string()),
    "d": pa.array([DAY, DAY, None, DAY + dt.timedelta(1), DAY - dt.timedelta(1), DAY, DAY,
                   None], pa.date32()),
    "i": pa.array(range(8), pa.int64()),
})

FILTERS: list[Where] = [
    col("n") >= 2,
    col("x") > 2.0,
    col("x") <= 2.0,
    col("n") < 1,
    col("s") == "valid",
    col("d") >= DAY,
    col("n").is_null(),
    col("s").is_valid(),
    col("n").isin([0, 2, 7]),
    col("n").is_null() | col("n").isin([3, 5]),
    (col("x") >= 2.0) & col("s").is_valid() & (col("d") >= DAY),
    ((col("n") >= 2) | (col("x") < 0)) & col("d").is_valid(),
]


@pytest.mark.parametrize("rule", FILTERS, ids=repr)
def test_spark_and_arrow_keep_the_same_rows(spark: SparkSession, rule: Where) -> None:
    by_arrow = sorted(TABLE.filter(rule.arrow())["i"].to_pylist())
    by_spark = sorted(r["i"] for r in spark.createDataFrame(TABLE).filter(rule.spark())
                      .select("i").collect())
    assert by_arrow == by_spark


def _sql_true(row: dict[str, Any], rule: Where) -> bool | None:
    """SQL's three-valued reading of ``rule`` on one row, written out independently."""
    if rule.op == "&":
        a, b = (_sql_true(row, part) for part in rule.parts)
        return False if a is False or b is False else (None if None in (a, b) else True)
    if rule.op == "|":
        a, b = (_sql_true(row, part) for part in rule.parts)
        return True if a is True or b is True else (None if None in (a, b) else False)
    value = row[rule.name]
    if rule.op == "is null":
        return value is None
    if rule.op == "is not null":
        return value is not None
    if value is None:
        return None
    if rule.op == "in":
        return value in rule.value
    return {"==": value == rule.value, ">=": value >= rule.value, ">": value > rule.value,
            "<=": value <= rule.value, "<": value < rule.value}[rule.op]


LEAVES = st.one_of(
    st.builds(lambda v: col("n") >= v, st.integers(-1, 6)),
    st.builds(lambda v: col("x") < v, st.sampled_from([-1.0, 2.0, 2.5, 10.0])),
    st.builds(lambda v: col("s") == v, st.sampled_from(["a", "valid", "z"])),
    st.builds(lambda vs: col("n").isin(vs), st.lists(st.integers(0, 6), max_size=3)),
    st.sampled_from([col("s").is_null(), col("d").is_valid(), col("x").is_null()]),
)
RULES = st.recursive(LEAVES, lambda inner: st.one_of(
    st.builds(lambda a, b: a & b, inner, inner), st.builds(lambda a, b: a | b, inner, inner)),
    max_leaves=6)


@given(rule=RULES)
def test_arrow_keeps_the_rows_sql_says_are_true(rule: Where) -> None:
    expected = [row["i"] for row in TABLE.to_pylist() if _sql_true(row, rule) is True]
    assert TABLE.filter(rule.arrow())["i"].to_pylist() == expected


def test_the_pipeline_s_filters_keep_what_their_rules_say() -> None:
    """The stored replay candidates from a receipt time on (that day's partition or later,
    received then or later, no code or a candidate's code, a sender and an id), and the
    reports a task fold takes (valid, with a state)."""
    since = dt.datetime(2026, 2, 4, 12, tzinfo=dt.UTC).timestamp()
    rows = [
        {"event_date": DAY, "received_at": since, "error_code": None, "sender": "s",
         "msg_id": "m"},
        {"event_date": DAY, "received_at": since - 0.001, "error_code": None, "sender": "s",
         "msg_id": "m"},
        {"event_date": DAY, "received_at": since + 5, "error_code": 2006, "sender": "s",
         "msg_id": "m"},
        {"event_date": DAY, "received_at": since + 5, "error_code": 2004, "sender": "s",
         "msg_id": "m"},
        {"event_date": DAY, "received_at": since + 5, "error_code": 2001, "sender": None,
         "msg_id": "m"},
        {"event_date": DAY - dt.timedelta(1), "received_at": since + 5, "error_code": 2002,
         "sender": "s", "msg_id": "m"},
        {"event_date": DAY, "received_at": None, "error_code": None, "sender": "s",
         "msg_id": "m"},
    ]
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("event_date", pa.date32()), ("received_at", pa.float64()), ("error_code", pa.int32()),
        ("sender", pa.string()), ("msg_id", pa.string())]))
    kept = table.filter(stored_candidates_where(since).arrow()).to_pylist()
    assert kept == [rows[0], rows[2]]
    reports = pa.table({"verdict": ["valid", "rejected", "valid", None],
                        "task_state": ["working", "working", None, "completed"]})
    assert reports.filter(state_reports_where().arrow()).to_pylist() == [
        {"verdict": "valid", "task_state": "working"}]
