"""The stream job: the same tables and verdicts as the batch job, however the input arrives.

References are computed without the stream: the pure-Python checker over every line at
once (in input order), and the sample generator's own expected tasks.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.runtime.scope import RUNTIME_ENV
from snap_spark.runtime.streaming import (
    CHECKPOINT_MANAGER_CONF,
    FILE_SYSTEM_CHECKPOINTS,
    checkpoint_manager_class,
    configure_checkpoint_files,
)
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from snap_spark.stream.stream_job import StreamPlan, kafka_source_file, run_stream
from tests.driver_limits import set_limits
from tests.integration.test_task_refresh import check_expectation
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

AVAILABLE_NOW = {"availableNow": True}


def _plan(tmp_path: Path, **kwargs: Any) -> StreamPlan:
    return StreamPlan(lake_dir=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ckpt"),
                      settings=VerifySettings(), lateness=600.0, run_id=uuid.uuid4().hex,
                      **kwargs)


def _verdicts(lake: Path) -> dict[tuple[str, int], Any]:
    return {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
            for m in delta_rows(lake / "messages")}


def _reference(lines: list[bytes], where: list[tuple[str, int]]) -> dict[tuple[str, int], Any]:
    names = [line_name(src, n) for src, n in where]
    verdicts = check_lines(lines, ReceiptClock.refuse(), names=names)
    return {key: (v.error_code, v.error_detail or None)
            for key, v in zip(where, verdicts, strict=True)}


def with_conf(spark: Any, request: pytest.FixtureRequest, key: str, value: str | None
              ) -> None:
    """Set (or unset) a session setting for one test; the test's end restores it."""
    before = spark.conf.get(key, None)

    def restore() -> None:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)

    request.addfinalizer(restore)
    if value is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, value)


@pytest.fixture(scope="module")
def traffic() -> dict[str, Any]:
    """2,500 generated lines (30 % attacks or malformed) and the generator's own expected
    tasks: 342 tasks, enough for the checks of ``check_expectation`` (over 150 tasks,
    illegal transitions, foreign reports, at least four states)."""
    stream = generate(SampleConfig(agents=6, messages=2_500, seed=41, attack_share=0.3))
    lines = [line for line, _ in stream]
    return {"lines": lines, "tasks": [t.to_plain() for t in stream.expected_tasks()]}


@pytest.mark.parametrize("steps,checkpoint_files", [
    ("on the driver", "FileSystem"), ("in Spark stages", "FileContext")])
def test_drops_through_the_stream_equal_the_checker_and_the_tasks(
        spark: Any, tmp_path: Path, traffic: dict[str, Any], steps: str,
        checkpoint_files: str, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    # A micro-batch this small takes its small steps (messages files, the lake lookup, the
    # task fold) on the driver; the second case lowers the limits to take Spark stages.
    # The checkpoint's files: through Hadoop's FileSystem (what a local checkpoint gets),
    # or through Spark's default class, named by the session (which the stream keeps).
    manager = (None if checkpoint_files == "FileSystem" else
               checkpoint_manager_class("FileContextBasedCheckpointFileManager"))
    with_conf(spark, request, CHECKPOINT_MANAGER_CONF, manager)
    if steps == "in Spark stages":
        set_limits(monkeypatch, pass_lines="spark", fold_tasks="spark", fold_rows="spark")
    lines = traffic["lines"]
    drops = tmp_path / "drops"
    landing = tmp_path / "landing"
    drops.mkdir()
    landing.mkdir()
    size = -(-len(lines) // 6)
    parts = [lines[i:i + size] for i in range(0, len(lines), size)]
    paths = []
    for i, part in enumerate(parts):
        path = drops / f"drop-{i}.jsonl"
        path.write_bytes(b"\n".join(part) + b"\n")
        paths.append(landing / path.name)
    where = [(str(paths[i]), n) for i, part in enumerate(parts)
             for n in range(1, len(part) + 1)]
    reference = _reference(lines, where)
    plan = _plan(tmp_path, landing=str(landing), max_files_per_trigger=1)
    # Drops arrive out of order: the fourth before the first three, then the rest.
    order = [[3], [0, 1], [2, 5, 4]]
    total = 0
    for round_ in order:
        for i in round_:
            shutil.copy(drops / paths[i].name, paths[i])
        result = run_stream(spark, plan, AVAILABLE_NOW)
        total += result.lines_read
        assert result.batches == len(round_)  # one file per micro-batch
    assert total == len(lines)
    assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == (manager or FILE_SYSTEM_CHECKPOINTS)
    lake = tmp_path / "lake"
    assert _verdicts(lake) == reference
    raw = delta_rows(lake / "raw_messages")
    assert len(raw) == len(lines) and len({(r["source_file"], r["line_no"]) for r in raw}) \
        == len(lines)
    check_expectation(traffic["tasks"], lake)
    # Nothing new: a run on the same checkpoint adds nothing.
    again = run_stream(spark, plan, AVAILABLE_NOW)
    assert again.lines_read == 0 and len(delta_rows(lake / "messages")) == len(lines)


def test_kafka_records_equal_the_checker(spark: Any, kafka: Any, topic_name: str,
                                         tmp_path: Path, traffic: dict[str, Any]) -> None:
    """1,500 records in two runs on one checkpoint (the second reads only the records
    produced since): the verdicts are the checker's over all of them."""
    lines = traffic["lines"][:1_500]
    kafka.create_topic(topic_name, 1)
    plan = _plan(tmp_path, kafka_bootstrap=kafka.broker.bootstrap, topic=topic_name)
    kafka.produce(topic_name, lines[:900], partition=0)
    first = run_stream(spark, plan, AVAILABLE_NOW)
    kafka.produce(topic_name, lines[900:], partition=0)
    second = run_stream(spark, plan, AVAILABLE_NOW)
    assert (first.lines_read, second.lines_read) == (900, 600)
    source = kafka_source_file(topic_name, 0)
    reference = _reference(lines, [(source, n) for n in range(1, len(lines) + 1)])
    assert _verdicts(tmp_path / "lake") == reference


def test_a_local_checkpoint_gets_the_file_system_class_unless_the_session_names_one(
        spark: Any, request: pytest.FixtureRequest) -> None:
    with_conf(spark, request, CHECKPOINT_MANAGER_CONF, None)
    configure_checkpoint_files(spark, "s3://bucket/ckpt")
    assert spark.conf.get(CHECKPOINT_MANAGER_CONF, None) is None  # Spark's choice
    for local in ("ckpt", "/var/ckpt", "file:///var/ckpt"):
        spark.conf.unset(CHECKPOINT_MANAGER_CONF)
        configure_checkpoint_files(spark, local)
        assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == FILE_SYSTEM_CHECKPOINTS
    spark.conf.set(CHECKPOINT_MANAGER_CONF, "my.own.Manager")
    configure_checkpoint_files(spark, "ckpt")
    assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == "my.own.Manager"


def test_the_runtime_switched_off_leaves_the_checkpoint_class_and_the_workers_alone(
        spark: Any, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    from snap_spark.runtime.streaming import same_worker_environment

    with_conf(spark, request, CHECKPOINT_MANAGER_CONF, None)
    environment = dict(spark.sparkContext.environment)
    monkeypatch.setenv(RUNTIME_ENV, "off")
    configure_checkpoint_files(spark, "/var/ckpt")
    assert spark.conf.get(CHECKPOINT_MANAGER_CONF, None) is None
    assert same_worker_environment(spark) is False
    assert dict(spark.sparkContext.environment) == environment
    monkeypatch.setenv(RUNTIME_ENV, "on")  # the tests' session is snap-spark's own
    assert same_worker_environment(spark) is True
