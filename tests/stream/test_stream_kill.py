"""SIGKILL the stream (its whole process group) at several points of a micro-batch, restart
it on the same checkpoint: every table holds each line exactly once, verdicts unchanged.

Points: inside a micro-batch (after ``raw_messages`` is committed, before ``messages``),
right after a micro-batch's ``messages`` commit (before its ledger and Spark's checkpoint),
and between the Delta commits and Spark's checkpoint commit (right after the stream's
``batch N committed (...)`` line, which ``foreachBatch`` writes last). The stream is held
still at a point by the test-only hook :mod:`tests.hold` (run under it, the job stops once
it has written the line that marks the point), then killed. Sources: a landing folder and
Kafka. Each point is exercised once, on the source where it is hardest: a landing folder
killed inside a micro-batch (half of a batch's tables written), Kafka killed after the
Delta commits (the restart reads the same offsets again and must land nothing twice); the
other two pairings take the same code path after the source and were dropped to keep the
suite within its time budget. The reference is the checker over all lines, which knows
nothing of the stream.

The killed run is a job process (``python -m tests.hold jobs/stream_verify.py``); the
restart is :func:`~snap_spark.stream.stream_job.run_stream`, what that job runs, called in the test
session's process on the same lake and checkpoint (a cold job process costs a JVM start
and nothing that the restart's checks look at).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from snap_spark.stream.stream_job import (
    DEFAULT_LATENESS,
    StreamPlan,
    StreamResult,
    kafka_source_file,
    run_stream,
)
from tests.hold import HOLDING
from tests.jobs import kill_when, start_job
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PARTS = 3


@pytest.fixture(scope="module")
def lines() -> list[bytes]:
    """2,000 generated lines, a third of them attacks or malformed (the kill points are
    exact, held by :mod:`tests.hold`: the number of lines only has to fill the batches)."""
    return [line for line, _ in generate(SampleConfig(agents=5, messages=2_000, seed=19,
                                                      attack_share=0.3))]


def start_stream(args: list[str], hold: str, nth: int = 1) -> subprocess.Popen[bytes]:
    """The stream job, available-now, held still (:mod:`tests.hold`) once it has written a
    line containing ``hold`` for the ``nth`` time."""
    return start_job("stream_verify.py", ["--trigger", "available-now", *args],
                     hold_at=hold, hold_nth=nth)


def restart(spark: Any, lake: Path, ckpt: Path, **source: Any) -> StreamResult:
    """The stream run again to the end (available-now) on ``lake`` and ``ckpt``, as the job
    runs it (the job's defaults: its settings, lateness and state partitions), in this
    process; ``source``: the rest of the :class:`StreamPlan` (the source, its limits, the
    progress file)."""
    plan = StreamPlan(lake_dir=str(lake), checkpoint=str(ckpt), settings=VerifySettings(),
                      lateness=DEFAULT_LATENESS, run_id=uuid.uuid4().hex, **source)
    return run_stream(spark, plan, {"availableNow": True})


def check_lake(lake: Path, reference: dict[tuple[str, int], Any]) -> None:
    """Both tables hold each line of ``reference`` once, ``messages`` with its verdicts."""
    for table in ("raw_messages", "messages"):
        rows = delta_rows(lake / table, "select source_file, line_no from t")
        counted = Counter((r["source_file"], r["line_no"]) for r in rows)
        assert set(counted) == set(reference), table
        assert max(counted.values()) == 1, (table, counted.most_common(2))
    got = {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
           for m in delta_rows(lake / "messages")}
    assert got == reference


MOMENTS = [
    # raw_messages of batch 1 committed, its messages not yet: the second such line
    ("inside a micro-batch", "stage 3/4 raw_messages: +", 2),
    # every table of the first batch this process commits committed, Spark's checkpoint
    # not: the first "batch N committed (...)" line (a batch run again after a restart
    # says "was committed before a restart" instead)
    ("between the Delta commits and the checkpoint", "committed (", 1),
]


@pytest.mark.parametrize(("moment", "hold", "nth"), MOMENTS[:1], ids=[MOMENTS[0][0]])
def test_kill_a_landing_folder_stream_and_restart(
        spark: Any, tmp_path: Path, lines: list[bytes], moment: str, hold: str,
        nth: int) -> None:
    """Three files, one per micro-batch: the job is killed right after batch 1's
    ``raw_messages`` commit; the restart runs batch 1 again (its ``raw_messages`` commit
    skipped, the rest made) and batch 2, and every line is in each table once."""
    landing, lake, ckpt = tmp_path / "landing", tmp_path / "lake", tmp_path / "ckpt"
    landing.mkdir()
    size = -(-len(lines) // PARTS)
    where: list[tuple[str, int]] = []
    for i in range(PARTS):
        part = lines[i * size:(i + 1) * size]
        path = landing / f"part-{i}.jsonl"
        path.write_bytes(b"\n".join(part) + b"\n")
        where.extend((str(path), n) for n in range(1, len(part) + 1))
    reference = _reference(lines, where)
    args = ["--landing", str(landing), "--lake", str(lake), "--checkpoint", str(ckpt),
            "--max-files-per-trigger", "1"]
    # inside: right after batch 1's raw_messages commit (the second such line)
    said = kill_when(start_stream(args, hold, nth), HOLDING + hold)
    assert "batch 0 committed (" in said and "batch 1 committed" not in said, said[-3000:]
    again = restart(spark, lake, ckpt, landing=str(landing), max_files_per_trigger=1)
    assert (again.batches, again.lines_read) == (PARTS - 1, len(lines) - size), again
    check_lake(lake, reference)


def test_progress_after_a_restart_is_what_the_lake_holds(spark: Any, tmp_path: Path,
                                                          lines: list[bytes]) -> None:
    """Killed right after batch 1's ``messages`` commit, the restarted stream runs batch 1
    again: its progress line must give the figures that commit recorded (not the lines'
    own copies found in the lake, read as replays), say it was committed before, and the
    progress JSON of both runs must add up to the table."""
    landing, lake, ckpt = tmp_path / "landing", tmp_path / "lake", tmp_path / "ckpt"
    landing.mkdir()
    size = -(-len(lines) // 2)
    for i in range(2):
        (landing / f"part-{i}.jsonl").write_bytes(b"\n".join(lines[i * size:(i + 1) * size])
                                                  + b"\n")
    progress = tmp_path / "progress.jsonl"
    args = ["--landing", str(landing), "--lake", str(lake), "--checkpoint", str(ckpt),
            "--max-files-per-trigger", "1", "--progress-json", str(progress)]
    kill_when(start_stream(args, "stage 4/4 messages: +", 2), HOLDING)
    before = [json.loads(x) for x in progress.read_text().splitlines()]
    assert [p["batch_id"] for p in before] == [0]
    again = restart(spark, lake, ckpt, landing=str(landing), max_files_per_trigger=1,
                    progress_json=str(progress))
    assert (again.batches, again.batches_already_committed) == (1, 1), again
    reported = [json.loads(x) for x in progress.read_text().splitlines()]
    assert [p["batch_id"] for p in reported] == [0, 1]
    rerun = reported[1]
    assert rerun["already_committed"] is True and rerun["rows_written"] == 0
    assert not reported[0]["already_committed"]
    # what the lake holds, per code, equals the sum of the progress lines
    table = Counter(str(m["error_code"]) if m["error_code"] is not None else "valid"
                    for m in delta_rows(lake / "messages"))
    summed: Counter[str] = Counter()
    for fields in reported:
        summed["valid"] += fields["valid"]
        summed.update(fields["codes"])
        # rows an earlier line counted that a late, earlier-received copy re-decided (when
        # the second file's batch ran first: files of equal modification time come in
        # either order)
        summed.update(fields["redecided_codes"])
        assert fields["valid"] + fields["rejected"] == fields["lines"]
    assert +summed == +table
    assert sum(table.values()) == len(lines)
    # the re-run batch's figures are its file's rows (not replays of themselves)
    second = Counter(str(m["error_code"]) if m["error_code"] is not None else "valid"
                     for m in delta_rows(lake / "messages")
                     if m["source_file"].endswith("part-1.jsonl"))
    assert +Counter({"valid": rerun["valid"], **rerun["codes"]}) == +second


@pytest.mark.parametrize(("moment", "hold", "nth"), MOMENTS[1:], ids=[MOMENTS[1][0]])
def test_kill_a_kafka_stream_and_restart(
        tmp_path: Path, lines: list[bytes], kafka: Any, topic_name: str, moment: str,
        hold: str, nth: int) -> None:
    """Half the lines per micro-batch (``--max-offsets-per-trigger``): batch 0 commits
    whole, batch 1 is killed after its Delta commits, before Spark's checkpoint commit; the
    restart reads batch 1's offsets again, finds its commits made, and lands nothing twice."""
    lake, ckpt = tmp_path / "lake", tmp_path / "ckpt"
    kafka.create_topic(topic_name, 1)
    half = len(lines) // 2
    args = ["--kafka-bootstrap", kafka.broker.bootstrap, "--topic", topic_name,
            "--lake", str(lake), "--checkpoint", str(ckpt),
            "--max-offsets-per-trigger", str(half)]
    kafka.produce(topic_name, lines, partition=0)
    # the second batch this process commits holds the second half
    said = kill_when(start_stream(args, hold, nth + 1), HOLDING + hold)
    assert said.count(f"committed ({half} lines)") == 2, said[-3000:]
    again = restart(kafka.spark, lake, ckpt, kafka_bootstrap=kafka.broker.bootstrap,
                    topic=topic_name, max_offsets_per_trigger=half)
    assert (again.batches, again.batches_already_committed) == (1, 1), again
    source = kafka_source_file(topic_name, 0)
    check_lake(lake, _reference(lines, [(source, n) for n in range(1, len(lines) + 1)]))


def _reference(lines: list[bytes], where: list[tuple[str, int]]) -> dict[tuple[str, int], Any]:
    names = [line_name(src, n) for src, n in where]
    return {key: (v.error_code, v.error_detail or None) for key, v in
            zip(where, check_lines(lines, ReceiptClock.refuse(), names=names), strict=True)}
