"""The lake as replay store: verdicts do not depend on how the input was cut into runs.

The reference is the pure-Python checker (``snap-spark check``'s code) over all lines at once,
in input order: it knows nothing of runs, files landed earlier or Delta.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from snap_spark.common.placement import DriverLimits
from snap_spark.pipeline.batch_job import run
from snap_spark.pipeline.task_tables import rebuild_tasks
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from tests.driver_limits import set_limits
from tests.integration.test_task_refresh import check_expectation, table_content
from tests.lake.helpers import delta_rows, use_backend
from tests.unit.helpers import PRIV_A, envelope, signed

PARTS = 5


def _messages(lake: Path) -> list[dict[str, Any]]:
    return delta_rows(lake / "messages")


def _reference(parts: list[list[bytes]], sources: list[str], max_drift: float = 60.0
               ) -> dict[tuple[str, int], Any]:
    """Checker verdicts of every line, all parts at once in input order, keyed by
    (source file, line number), with 2006 details naming lines as the job names them."""
    lines = [line for part in parts for line in part]
    names = [line_name(src, n) for src, part in zip(sources, parts, strict=True)
             for n in range(1, len(part) + 1)]
    where = [(src, n) for src, part in zip(sources, parts, strict=True)
             for n in range(1, len(part) + 1)]
    verdicts = check_lines(lines, ReceiptClock.refuse(), names=names, max_drift=max_drift)
    return {key: (v.error_code, v.error_detail or None) for key, v in
            zip(where, verdicts, strict=True)}


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An archive of 6k labelled lines cut into five files, named in receipt order."""
    folder = tmp_path_factory.mktemp("archive")
    stream = generate(SampleConfig(agents=6, messages=6_000, seed=23, attack_share=0.3))
    lines = [line for line, _ in stream]
    size = -(-len(lines) // PARTS)
    parts = [lines[i:i + size] for i in range(0, len(lines), size)]
    paths = []
    for i, part in enumerate(parts):
        path = folder / f"part-{i}.jsonl"
        path.write_bytes(b"\n".join(part) + b"\n")
        paths.append(path)
    return {"parts": parts, "paths": paths,
            "reference": _reference(parts, [str(p) for p in paths]),
            "tasks": [task.to_plain() for task in stream.expected_tasks()]}


def _verdicts(lake: Path) -> dict[tuple[str, int], Any]:
    return {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
            for m in _messages(lake)}


def test_one_run_equals_the_checker(spark: Any, archive: dict[str, Any], tmp_path: Path
                                    ) -> None:
    lake = tmp_path / "lake"
    run(spark, [str(p) for p in archive["paths"]], str(lake))
    assert _verdicts(lake) == archive["reference"]


@pytest.mark.slow
@pytest.mark.parametrize("steps", ["on the driver", "in Spark stages"])
def test_five_runs_in_shuffled_order_equal_one_run(spark: Any, archive: dict[str, Any],
                                                   tmp_path: Path, steps: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A small run decides its candidates against the lake on the driver, a large one in
    # Spark stages (snap_spark.common.placement: pass_lines): each part here is small, so the
    # second case lowers the limit to take the stages.
    assert len(archive["parts"][0]) <= DriverLimits().pass_lines
    if steps == "in Spark stages":
        set_limits(monkeypatch, pass_lines="spark")
    order = list(range(PARTS))
    random.Random(5).shuffle(order)
    assert order != sorted(order)
    lake = tmp_path / "lake"
    redecided = 0
    counted: Counter[int | None] = Counter()
    for i in order:
        result = run(spark, [str(archive["paths"][i])], str(lake))
        redecided += result.rows_redecided
        # each run's own lines, and what its re-decided rows did to the table's counts
        counted.update(result.counts)
        counted.update(result.redecided_codes)
    assert _verdicts(lake) == archive["reference"]
    assert +counted == +Counter(code for code, _ in archive["reference"].values())
    # The archive was cut so that copies of one message fall into different parts, and some
    # part landed before an earlier-received one: earlier rows were changed.
    cross = sum(1 for (src, _), (code, detail) in archive["reference"].items()
                if code == 2006 and not detail.endswith(f" of {src}"))
    assert cross > 0 and redecided > 0
    assert sum(1 for code, _ in _verdicts(lake).values() if code == 2006) == sum(
        1 for code, _ in archive["reference"].values() if code == 2006)
    # Each run refreshed the tasks it touched (and those of rows it re-decided): the task
    # tables are the generator's expectation, and what a full rebuild gives.
    check_expectation(archive["tasks"], lake)
    incremental = table_content(lake)
    rebuild_tasks(spark, str(lake))
    assert table_content(lake) == incremental


def _copy(at: float) -> bytes:
    """A copy of one signed message (the same (from, id)) received at ``T0 + at``."""
    from tests.unit.helpers import T0

    return envelope(signed(PRIV_A, id="dup-1", timestamp=T0 + 75), received_at=T0 + at)


#: Copies 0, 100 and 150 s after T0 all pass a 100 s drift check (timestamp T0 + 75 s).
WIDE = VerifySettings(max_drift=100)


@pytest.mark.parametrize("backend", ["delta-rs", "delta-spark"])
def test_a_late_earlier_copy_re_decides_earlier_rows_in_one_commit(
        spark: Any, tmp_path: Path, backend: str) -> None:
    # Receipt order: a (0 s) accepted; b (100 s): 2006 of a; c (150 s) would be 2006 of a
    # only if a were not there: 150 s after a, so it is accepted when b and c land first.
    late = tmp_path / "late.jsonl"  # received at 100 s and 150 s, landed first
    late.write_bytes(_copy(100) + b"\n" + _copy(150) + b"\n")
    early = tmp_path / "early.jsonl"  # received at 0 s, landed second
    early.write_bytes(_copy(0) + b"\n")
    lake = tmp_path / "lake"
    with use_backend(spark, backend):
        first = run(spark, [str(late)], str(lake), WIDE)
        assert first.counts == {None: 1, 2006: 1}  # 100 s accepted, 150 s its replay
        version_before = DeltaTable(str(lake / "messages")).version()
        second = run(spark, [str(early)], str(lake), WIDE)
    assert second.counts == {None: 1} and second.rows_redecided == 2
    # 100 s went from valid to 2006 and 150 s from 2006 to valid: no count moved
    assert second.redecided_codes == {}
    rows = {(Path(m["source_file"]).name, m["line_no"]): m for m in _messages(lake)}
    assert rows[("early.jsonl", 1)]["error_code"] is None
    # 100 s is now the replay of 0 s, and 150 s (150 s after 0 s) is accepted again.
    assert rows[("late.jsonl", 1)]["error_code"] == 2006
    assert rows[("late.jsonl", 1)]["error_detail"] == (
        f"same (from, id) accepted 100s earlier (receipt time {1_770_163_200}, window 120s) "
        f"as line 1 of {early}")
    assert rows[("late.jsonl", 2)]["error_code"] is None
    assert rows[("late.jsonl", 2)]["verdict"] == "valid"
    assert rows[("late.jsonl", 2)]["error_detail"] is None
    assert len(rows) == 3
    # One commit added the new row and changed the earlier ones; the old verdicts stay in
    # Delta history.
    table = DeltaTable(str(lake / "messages"))
    assert table.version() == version_before + 1
    old = {(Path(r["source_file"]).name, r["line_no"]): r["error_code"] for r in
           DeltaTable(str(lake / "messages"), version=version_before).to_pyarrow_table(
           ).to_pylist()}
    assert old == {("late.jsonl", 1): None, ("late.jsonl", 2): 2006}
    # And a reference that knows nothing of runs agrees.
    reference = _reference([[_copy(0)], [_copy(100), _copy(150)]], [str(early), str(late)],
                           max_drift=100)
    assert {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
            for m in _messages(lake)} == reference


def test_a_forged_late_copy_changes_nothing(spark: Any, tmp_path: Path) -> None:
    """Only accepted copies enter the replay store: a forged earlier copy arriving late is
    a 2001 and leaves the accepted row as it was."""
    from tests.unit.helpers import T0

    genuine = tmp_path / "genuine.jsonl"
    genuine.write_bytes(_copy(50) + b"\n")
    forged_msg = signed(PRIV_A, id="dup-1", timestamp=T0 + 75)
    forged_msg["payload"] = {"message": {"messageId": "x", "role": "user",
                                         "parts": [{"text": "tampered"}]}}
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(envelope(forged_msg, received_at=T0 + 10) + b"\n")
    lake = tmp_path / "lake"
    run(spark, [str(genuine)], str(lake), WIDE)
    result = run(spark, [str(forged)], str(lake), WIDE)
    assert result.counts == {2001: 1} and result.rows_redecided == 0
    codes = {Path(m["source_file"]).name: m["error_code"] for m in _messages(lake)}
    assert codes == {"genuine.jsonl": None, "forged.jsonl": 2001}


@pytest.mark.parametrize("local", [True, False], ids=["driver-side", "spark-stages"])
def test_ids_longer_than_delta_string_statistics_are_found(
        spark: Any, tmp_path: Path, local: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """delta-spark keeps only a 32-character prefix of a string column in a file's
    statistics. Message and task ids longer than that, alike in their first 32 characters,
    must still be found in the lake: copies landed by a later run are 2006, and every task
    report is folded, on the driver-side path and in Spark stages alike."""
    from tests.unit.helpers import T0

    if not local:
        set_limits(monkeypatch, pass_lines="spark", fold_tasks="spark", fold_rows="spark")
    prefix = "x" * 40  # longer than the statistics keep
    states = ["submitted", "working", "completed"]

    def lines(received: float) -> bytes:
        out = []
        for i in range(12):
            task = {"id": f"task-{prefix}-{i % 4}", "contextId": "c1",
                    "status": {"state": states[i // 4]}}
            msg = signed(PRIV_A, id=f"msg-{prefix}-{i:02d}", timestamp=T0 + i,
                         type="response", method="tasks/get", payload={"task": task})
            out.append(envelope(msg, received_at=T0 + i + received))
        return b"\n".join(out) + b"\n"

    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(lines(0.0))
    second.write_bytes(lines(1.0))  # the same messages, each received a second later
    lake = tmp_path / "lake"
    with use_backend(spark, "delta-spark"):
        assert run(spark, [str(first)], str(lake)).counts == {None: 12}
        assert run(spark, [str(second)], str(lake)).counts == {2006: 12}
        tasks_now = table_content(lake)
        assert [(t[0][-1], t[3]) for t in tasks_now["tasks"]] == [
            (str(i), "completed") for i in range(4)]
        assert len(tasks_now["task_events"]) == 12
        rebuild_tasks(spark, str(lake))
    assert table_content(lake) == tasks_now
