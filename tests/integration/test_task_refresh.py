"""Task tables against the sample's own expectation, and the incremental refresh against the
full rebuild, on real Spark and Delta.

``snap-spark sample`` writes the ``tasks`` table its traffic must give
(``<stem>.expected-tasks.txt``), from what the generator sent rather than from the
protocol's fold. A landed sample folded by :func:`rebuild_tasks` must equal it; so must
the tables kept by :func:`refresh_tasks` when the same sample lands over several runs
(reports arriving late included), row for row equal to a full rebuild of the same lake.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from snap_spark.lake import commit_rows, get_lake, to_arrow
from snap_spark.pipeline import task_tables as tasks
from snap_spark.pipeline.batch_job import run
from snap_spark.pipeline.task_tables import landed_task_ids, rebuild_tasks, refresh_tasks
from snap_spark.samples.messages import (
    Label,
    SampleConfig,
    expected_tasks_path,
    generate,
    read_expected_tasks,
    write_sample,
)
from snap_spark.schemas.tables import TASK_EVENTS, TASKS
from snap_spark.settings import VerifySettings
from tests.driver_limits import set_limits
from tests.lake.helpers import delta_rows, use_backend

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FIELDS = ("task_id", "context_id", "owner", "state", "state_timestamp", "last_message_id",
          "reports", "transitions", "illegal_transitions", "foreign_reports")


# ----------------------------------------------------------------------------- helpers


def tasks_as_expected(lake: Path) -> dict[str, dict[str, Any]]:
    """The ``tasks`` table in the expectation file's terms (``state_time`` checked here)."""
    rows = {}
    for row in delta_rows(lake / "tasks"):
        assert row["state_time"] == dt.datetime.fromtimestamp(row["state_timestamp"], dt.UTC)
        rows[row["task_id"]] = {name: row[name] for name in FIELDS}
    return rows


def check_expectation(expected: list[dict[str, Any]], lake: Path) -> None:
    """The tables equal the expectation, and it is no trivial one."""
    assert [list(row) for row in expected[:1]] == [list(FIELDS)]
    by_id = {row["task_id"]: row for row in expected}
    assert len(by_id) == len(expected) > 150
    assert sum(r["illegal_transitions"] for r in expected) >= 2
    assert sum(r["foreign_reports"] for r in expected) >= 2
    assert sum(r["transitions"] for r in expected) > len(expected) // 3
    assert sum(r["reports"] > 1 for r in expected) > len(expected) // 4
    assert len({r["state"] for r in expected}) >= 4
    got = tasks_as_expected(lake)
    wrong = [(got.get(t), by_id.get(t)) for t in sorted(set(got) | set(by_id))
             if got.get(t) != by_id.get(t)]
    assert not wrong, f"{len(wrong)} of {len(by_id)} tasks differ, e.g. {wrong[:2]}"
    events = delta_rows(lake / "task_events")
    assert len(events) == sum(r["reports"] for r in expected)


def table_content(lake: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of both task tables, every column, in key order."""
    return {
        "task_events": sorted(tuple(r[c] for c in TASK_EVENTS.fieldNames())
                              for r in delta_rows(lake / "task_events")),
        "tasks": sorted(tuple(r[c] for c in TASKS.fieldNames())
                        for r in delta_rows(lake / "tasks")),
    }


def ingest_ids(lake: Path) -> set[str]:
    if not (lake / "messages").exists():
        return set()
    return {r["ingest_id"] for r in delta_rows(lake / "messages",
                                               "select distinct ingest_id from t")}


def run_reports(lake: Path, ingest_id: str) -> set[str]:
    """Task ids of the valid state reports one run landed, read straight from ``messages``."""
    sql = ("select distinct task_id from t where verdict = 'valid' and task_state is not null "
           f"and ingest_id = '{ingest_id}'")
    return {r["task_id"] for r in delta_rows(lake / "messages", sql)}


def split(pairs: Sequence[tuple[bytes, Label]], parts: int) -> list[int]:
    """Cut points near equal parts where no replay in the 2006 window is cut from the line it
    copies (replay dedupe runs within one run: docs/batch-job.md, *Replay across runs*)."""
    first_seen: dict[bytes, int] = {}
    spans = []
    for index, (line, label) in enumerate(pairs):
        if label.kind == "replay_in_window":
            spans.append((first_seen[json.dumps(json.loads(line)["message"]).encode()], index))
        elif label.expected_code is None and line.startswith(b"{\"received_at\""):
            first_seen.setdefault(json.dumps(json.loads(line)["message"]).encode(), index)
    cuts = []
    for part in range(1, parts):
        cut = len(pairs) * part // parts
        while any(start < cut <= end for start, end in spans):
            cut -= 1
        cuts.append(cut)
    assert len(spans) > 5 and len(set(cuts)) == len(cuts)
    return cuts


def land_in_runs(spark: SparkSession, lake: Path, folder: Path, chunks: list[list[bytes]],
                 first: int = 1) -> list[int]:
    """Land each chunk in a run of its own (file ``part-<n>.jsonl``, ``n`` from ``first``),
    refreshing the tasks each run touched; returns how many tasks each refresh folded."""
    folded = []
    for number, chunk in enumerate(chunks, start=first):
        path = folder / f"part-{number}.jsonl"
        path.write_bytes(b"\n".join(chunk) + b"\n")
        before = ingest_ids(lake)
        result = run(spark, [str(path)], str(lake))
        assert result.lines_read == len(chunk)
        (new_run,) = ingest_ids(lake) - before
        touched = run_reports(lake, new_run)
        assert touched
        if number % 2:  # a DataFrame of ids one run, a Python set the next
            frame = landed_task_ids(spark, str(lake), [new_run])
            assert {r["task_id"] for r in frame.collect()} == touched
            refreshed = refresh_tasks(spark, str(lake), frame)
        else:
            refreshed = refresh_tasks(spark, str(lake), touched)
        assert refreshed.tasks == len(touched)
        folded.append(refreshed.tasks)
    return folded


# ----------------------------------------------------------------------------- the rebuild


@pytest.mark.parametrize("config", [
    SampleConfig(agents=6, messages=6000, seed=5),
    SampleConfig(agents=10, messages=9000, seed=23, attack_share=0.25),
    SampleConfig(agents=3, messages=4000, seed=2, attack_share=0.35, testnet_share=0.0),
    SampleConfig(agents=8, messages=5000, seed=31, bare_share=0.05),
], ids=["6000-seed5", "9000-seed23-attacks", "4000-3agents", "5000-bare"])
def test_rebuild_gives_the_expected_tasks(spark: SparkSession, tmp_path: Path,
                                          config: SampleConfig) -> None:
    """A landed sample folded by :func:`rebuild_tasks` equals the sample's own expectation
    (and the rebuild's counts its sums); the comparison is strict: one field of one task
    off in the expectation, and it fails."""
    folder = tmp_path / "sample"
    folder.mkdir()
    traffic = folder / "traffic.jsonl"
    write_sample(config, str(traffic))
    lake = tmp_path / "lake"
    # the folder as the input: the expectation beside the traffic is not read as traffic
    result = run(spark, [str(folder)], str(lake),
                 VerifySettings(bare_clock="message") if config.bare_share else None)
    assert result.lines_read == config.messages
    rebuilt = rebuild_tasks(spark, str(lake))
    expected = read_expected_tasks(expected_tasks_path(str(traffic)))
    check_expectation(expected, lake)
    assert rebuilt.tasks == len(expected)
    assert rebuilt.illegal == sum(r["illegal_transitions"] for r in expected)
    assert rebuilt.foreign == sum(r["foreign_reports"] for r in expected)
    for field, change in (("state", "working"), ("transitions", 7), ("owner", "bc1p...")):
        wrong = [dict(row) for row in expected]
        wrong[len(wrong) // 2][field] = change
        with pytest.raises(AssertionError):
            check_expectation(wrong, lake)


def test_rebuild_on_delta_spark_gives_the_expected_tasks(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    sample = generate(SampleConfig(agents=6, messages=5000, seed=41, attack_share=0.2))
    lines = [line for line, _ in sample]
    traffic, lake = tmp_path / "traffic.jsonl", tmp_path / "lake"
    traffic.write_bytes(b"\n".join(lines) + b"\n")
    with use_backend(spark, "delta-spark"):
        assert get_lake(spark).name == "delta-spark"
        run(spark, [str(traffic)], str(lake))
        rebuild_tasks(spark, str(lake))
        check_expectation([t.to_plain() for t in sample.expected_tasks()], lake)
        full = table_content(lake)
        # a refresh of every task on delta-spark changes no row
        every = {row[0] for row in full["tasks"]}
        assert refresh_tasks(spark, str(lake), every).tasks == len(every)
        assert table_content(lake) == full


# ----------------------------------------------------------------------------- the refresh


@pytest.mark.parametrize("config,parts,stage,ghost", [
    (SampleConfig(agents=6, messages=6000, seed=5), 3, False, True),
    (SampleConfig(agents=4, messages=5000, seed=13, attack_share=0.3), 4, False, False),
    (SampleConfig(agents=6, messages=6000, seed=5), 3, True, False),
], ids=["6000-in-3-runs", "5000-in-4-runs", "6000-in-3-runs-folded-in-a-spark-stage"])
def test_refresh_per_run_equals_the_full_rebuild(spark: SparkSession, tmp_path: Path,
                                                 config: SampleConfig, parts: int,
                                                 stage: bool, ghost: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample landed in several runs, each refreshing the tasks it touched (ids as a
    DataFrame one run, as a set the next), gives the expectation's tables; refreshing
    them again changes no row; the full rebuild gives the same rows. One case folds every
    refresh in Spark stages. In one case (``ghost``) a task the tables hold without any
    report goes when named: a refresh by a DataFrame of ids folds in a Spark stage
    whatever the limits, so the other cases would take the same path again."""
    # A refresh of a small table folds on the driver, of a large one in a Spark stage
    # (snap_spark.common.placement: fold_rows): these runs are small, so one case lowers the limits.
    if stage:
        set_limits(monkeypatch, fold_tasks="spark", fold_rows="spark")
    sample = generate(config)
    pairs = list(sample)
    cuts = [0, *split(pairs, parts), len(pairs)]
    chunks = [[line for line, _ in pairs[a:b]] for a, b in itertools.pairwise(cuts)]
    lake = tmp_path / "lake"
    folded = land_in_runs(spark, lake, tmp_path, chunks)
    expected = [t.to_plain() for t in sample.expected_tasks()]
    assert sum(folded) > len(expected)  # tasks spanning runs were folded again
    check_expectation(expected, lake)
    incremental = table_content(lake)

    # the same refresh again changes no row
    again = {row[0] for row in incremental["tasks"][:500]}
    refresh_tasks(spark, str(lake), again)
    assert table_content(lake) == incremental
    if ghost:
        add_a_ghost_then_refresh_it_away(spark, lake, tmp_path, incremental)

    rebuild_tasks(spark, str(lake))
    assert table_content(lake) == incremental


def add_a_ghost_then_refresh_it_away(spark: SparkSession, lake: Path, tmp_path: Path,
                                     incremental: dict[str, list[tuple[Any, ...]]]) -> None:
    """A task the tables hold without any report (left by an earlier verdict) goes when
    named, here by a DataFrame of ids: the tables are ``incremental`` again."""
    ghost_lake = get_lake(spark)
    ghost = dict(zip(TASKS.fieldNames(), incremental["tasks"][0], strict=True))
    ghost_event = dict(zip(TASK_EVENTS.fieldNames(), incremental["task_events"][0],
                           strict=True))
    ghost["task_id"] = ghost_event["task_id"] = "task-ghost"
    for name, row, schema in (("tasks", ghost, TASKS), ("task_events", ghost_event,
                                                         TASK_EVENTS)):
        table = str(lake / name)
        assert commit_rows(spark, ghost_lake, table,
                           ghost_lake.data_root(table, str(tmp_path / "ghost")),
                           pa.RecordBatch.from_pylist([row], schema=to_arrow(schema)),
                           schema=schema, file_prefix="part-ghost", app_id="ghost", version=1)
    assert table_content(lake) != incremental
    refresh_tasks(spark, str(lake), spark.createDataFrame([("task-ghost",)], "task_id string"))
    assert table_content(lake) == incremental


def test_a_late_report_refolds_its_task(spark: SparkSession, tmp_path: Path) -> None:
    """A task's first report lands two runs after its later reports: the refresh of the
    last run folds the task again from the start (new owner's first state, renumbered
    events), and the tables end as the full rebuild and the expectation say."""
    sample = generate(SampleConfig(agents=5, messages=4500, seed=17))
    pairs = list(sample)
    expected = {t.task_id: t.to_plain() for t in sample.expected_tasks()}
    cuts = split(pairs, 3)
    first_part = pairs[:cuts[0]]
    reports: dict[str, list[int]] = {}
    replayed: set[str] = set()
    for index, (line, label) in enumerate(first_part):
        readable = label.expected_code is None or label.kind == "replay_in_window"
        msg = json.loads(line)["message"] if readable and line.startswith(b"{") else None
        if isinstance(msg, dict) and label.kind == "replay_in_window":
            replayed.add(msg["id"])
        if isinstance(msg, dict) and label.expected_code is None and msg["type"] == "response":
            task = msg["payload"].get("task")
            if isinstance(task, dict):
                reports.setdefault(task["id"], []).append(index)
    late_task = next(
        task_id for task_id, indexes in reports.items()
        if len(indexes) >= 3 and expected[task_id]["reports"] == len(indexes)
        and expected[task_id]["transitions"] >= 2
        and expected[task_id]["foreign_reports"] == expected[task_id]["illegal_transitions"] == 0
        and json.loads(pairs[indexes[0]][0])["message"]["id"] not in replayed
    )
    late = reports[late_task][0]
    lines = [line for line, _ in pairs]
    chunks = [lines[:late] + lines[late + 1:cuts[0]], lines[cuts[0]:cuts[1]],
              [*lines[cuts[1]:], lines[late]]]
    lake = tmp_path / "lake"
    land_in_runs(spark, lake, tmp_path, chunks[:2])
    before = tasks_as_expected(lake)[late_task]
    assert before != expected[late_task]
    assert before["reports"] == expected[late_task]["reports"] - 1
    first_before = [e["message_id"] for e in delta_rows(lake / "task_events")
                    if e["task_id"] == late_task and e["seq"] == 0]
    land_in_runs(spark, lake, tmp_path, chunks[2:], first=3)
    assert tasks_as_expected(lake)[late_task] == expected[late_task]
    events = sorted((e["seq"], e["message_id"], e["received_at"])
                    for e in delta_rows(lake / "task_events") if e["task_id"] == late_task)
    assert [seq for seq, *_ in events] == list(range(expected[late_task]["reports"]))
    late_message = json.loads(lines[late])
    assert events[0][1:] == (late_message["message"]["id"], late_message["received_at"])
    assert events[1][1] == first_before[0]  # the report that came first before is second
    check_expectation(list(expected.values()), lake)
    incremental = table_content(lake)
    rebuild_tasks(spark, str(lake))
    assert table_content(lake) == incremental


# ----------------------------------------------------------------------------- the catch-up


class _Stopped(Exception):
    """A run stopped between its ``messages`` commit and its tasks step."""


def test_the_next_run_catches_up_the_tasks_a_stopped_run_left(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run 2 commits its messages and stops before its tasks step; run 3's catch-up folds
    run 2's tasks too (it takes them from the ``messages`` log), so the tables end as the
    expectation says, equal to a full rebuild."""
    sample = generate(SampleConfig(agents=6, messages=6000, seed=5))
    pairs = list(sample)
    cuts = [0, *split(pairs, 3), len(pairs)]
    chunks = [[line for line, _ in pairs[a:b]] for a, b in itertools.pairwise(cuts)]
    lake = tmp_path / "lake"
    paths = []
    for number, chunk in enumerate(chunks, start=1):
        paths.append(tmp_path / f"part-{number}.jsonl")
        paths[-1].write_bytes(b"\n".join(chunk) + b"\n")

    first = run(spark, [str(paths[0])], str(lake))
    assert first.tasks_refreshed and first.tasks_refreshed > 50
    through = tasks.tasks_through(str(lake))
    assert through is not None
    after_first = table_content(lake)

    def stop(*_args: Any) -> tasks.TasksResult:
        raise _Stopped("stopped before the tasks step")

    before = ingest_ids(lake)
    with monkeypatch.context() as patch:
        patch.setattr(tasks, "catch_up_tasks", stop)
        with pytest.raises(_Stopped):
            run(spark, [str(paths[1])], str(lake))
    (second,) = ingest_ids(lake) - before  # its messages were committed
    assert table_content(lake) == after_first  # run 2's reports are not folded yet
    assert tasks.tasks_through(str(lake)) == through

    before = ingest_ids(lake)
    third = run(spark, [str(paths[2])], str(lake))
    (third_run,) = ingest_ids(lake) - before
    left = run_reports(lake, second) - run_reports(lake, third_run)
    assert left  # tasks only run 2 reported on, folded by run 3's catch-up
    # (and the tasks of earlier rows whose files a re-decided verdict rewrote)
    assert third.tasks_refreshed is not None
    assert third.tasks_refreshed >= len(run_reports(lake, second) | run_reports(lake, third_run))
    check_expectation([t.to_plain() for t in sample.expected_tasks()], lake)
    caught_up = table_content(lake)
    assert tasks.catch_up_tasks(spark, str(lake)).tasks == 0  # nothing new since
    rebuild_tasks(spark, str(lake))
    assert table_content(lake) == caught_up


def test_the_follower_catches_up_on_its_thread_and_raises_what_failed(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs whose tasks step is off (as the stream's commits are) leave the tables behind;
    a :class:`TasksFollower` started afterwards folds them on its thread, and its close
    catches up once more. A catch-up that fails is raised by the next poke."""
    sample = generate(SampleConfig(agents=4, messages=3000, seed=13))
    pairs = list(sample)
    lines = [line for line, _ in pairs]
    half = split(pairs, 2)[0]
    lake = tmp_path / "lake"
    with monkeypatch.context() as patch:
        patch.setattr(tasks, "catch_up_tasks", lambda *_: tasks.TasksResult())
        for number, chunk in enumerate((lines[:half], lines[half:]), start=1):
            path = tmp_path / f"part-{number}.jsonl"
            path.write_bytes(b"\n".join(chunk) + b"\n")
            run(spark, [str(path)], str(lake))
    assert not (lake / "tasks").exists()

    follower = tasks.TasksFollower(spark, str(lake))
    follower.start()
    for _ in range(1200):  # the thread's first catch-up, within seconds
        if follower.catch_ups:
            break
        time.sleep(0.05)
    assert follower.catch_ups == 1
    check_expectation([t.to_plain() for t in sample.expected_tasks()], lake)
    caught_up = table_content(lake)
    assert follower.refreshed == len(caught_up["tasks"])
    follower.poke()
    follower.close()  # after the thread's: nothing new to fold
    assert follower.catch_ups in (2, 3) and follower.refreshed == len(caught_up["tasks"])
    assert table_content(lake) == caught_up

    broken = tasks.TasksFollower(spark, str(lake))
    (lake / "tasks").rename(tmp_path / "tasks-moved")
    (lake / "tasks").write_text("not a table")  # the catch-up refuses this location
    broken.start()
    with pytest.raises(Exception, match="tasks"):
        for _ in range(600):  # the first catch-up fails on the thread, within seconds
            broken.poke()
            time.sleep(0.05)
    with pytest.raises(Exception, match="tasks"):
        broken.close()
