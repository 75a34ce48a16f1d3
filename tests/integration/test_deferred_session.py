"""A job's Spark session starts only when the job needs Spark
(:func:`snap_spark.runtime.session.deferred_session`): a small batch run on a local master does
all its work on the driver and never starts the JVM's SparkContext, a large one starts it,
and both land what a run with the session started at once lands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from snap_spark.runtime.scope import local_parallelism
from snap_spark.runtime.session import DEFER_ENV, DeferredSession, _plan
from snap_spark.samples.messages import SampleConfig, write_sample

ROOT = Path(__file__).resolve().parents[2]

#: Runs the batch job's ``main`` in a fresh interpreter, then says whether this process
#: ever started (or connected to) a Spark JVM, and which JARs and SQL extensions a
#: SparkContext it started was given.
PROBE = """
import json, sys
from snap_spark.pipeline.batch_job import main
code = main(sys.argv[1:])
from pyspark import SparkContext
context = SparkContext._active_spark_context
jars = [] if context is None else [
    jar.rsplit("/", 1)[-1] for jar in context._jsc.sc().listJars().mkString("\\n").split("\\n")
    if jar]
extensions = None if context is None else context.getConf().get("spark.sql.extensions")
print(json.dumps({"code": code, "jvm": SparkContext._gateway is not None, "jars": jars,
                  "extensions": extensions}))
"""


def run_job(sample: Path, lake: Path, **env: str) -> dict[str, Any]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    environment.update({"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                        "PYTHONPATH": str(ROOT), **env})
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--master", "local[2]",
         "--conf", "spark.snap.lake.backend=delta-rs", "--input", str(sample),
         "--lake", str(lake)],
        capture_output=True, text=True, env=environment, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, done.stderr[-3000:]
    return result


def verdicts(lake: Path) -> list[tuple[Any, ...]]:
    """Every ``messages`` row's line and verdict, sorted."""
    table = DeltaTable(str(lake / "messages")).to_pyarrow_table(
        columns=["line_no", "msg_id", "verdict", "error_code", "error_detail", "received_at"])
    return sorted(tuple(row.values()) for row in table.to_pylist())


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("deferred") / "sample.jsonl"
    write_sample(SampleConfig(messages=400, agents=6, seed=21), str(path), tasks_path=None)
    return path


@pytest.mark.slow
def test_a_small_run_starts_no_spark_and_lands_what_runs_with_spark_land(
        spark: Any, sample: Path, tmp_path: Path) -> None:
    """The small run never starts Spark; a run with the session started at once, and one
    whose landing is forced into Spark tasks (the session then starts at the first stage),
    both start it, and all three land the same rows."""
    deferred = run_job(sample, tmp_path / "deferred")
    started = run_job(sample, tmp_path / "started", **{DEFER_ENV: "0"})
    forced = run_job(sample, tmp_path / "forced", SNAP_SPARK_DRIVER_LIMITS="land_bytes=0")
    assert (deferred["jvm"], started["jvm"], forced["jvm"]) == (False, True, True)
    # the lake's backend is delta-rs and nothing reads Kafka: no JAR set was loaded
    # (snap_spark.runtime.maven_jars.job_jar_sets), so neither Delta nor its extension
    assert (started["jars"], started["extensions"]) == ([], None), started
    rows = verdicts(tmp_path / "deferred")
    assert len(rows) == 400
    assert {r[3] for r in rows} - {None}  # the sample's attacks are there
    assert rows == verdicts(tmp_path / "started") == verdicts(tmp_path / "forced")
    tasks = [DeltaTable(str(tmp_path / name / "tasks")).to_pyarrow_table().num_rows
             for name in ("deferred", "started", "forced")]
    assert tasks[0] == tasks[1] == tasks[2] > 0


def test_the_deferred_session_answers_what_the_started_one_holds(spark: Any) -> None:
    """Settings, master and parallelism before the start equal the real session's after it
    (the tests' session: getOrCreate returns it); a setting made before the start reaches
    the real session, and steps given to ``when_started`` run once, on it."""
    key = "spark.snap.test.deferred"
    plan = _plan("deferred-test", "local[2]", {"spark.sql.shuffle.partitions": "2"}, None,
                 delta=False, kafka=False)
    deferred = DeferredSession(plan)
    ran: list[Any] = []
    deferred.when_started(ran.append)
    before = (deferred.conf.get("spark.sql.shuffle.partitions"),
              deferred.conf.get("spark.sql.session.timeZone"),
              deferred.conf.get("spark.snap.unset", "fallback"),
              deferred.sparkContext.master, deferred.sparkContext.defaultParallelism)
    deferred.conf.set(key, "yes")
    assert not deferred.started and ran == [] and deferred.conf.get(key) == "yes"
    try:
        assert deferred.range(3).count() == 3  # anything else starts it
        assert deferred.started and ran == [spark]
        assert spark.conf.get(key) == "yes"
        after = (spark.conf.get("spark.sql.shuffle.partitions"),
                 spark.conf.get("spark.sql.session.timeZone"),
                 spark.conf.get("spark.snap.unset", "fallback"),
                 spark.sparkContext.master, spark.sparkContext.defaultParallelism)
        assert before == after
        deferred.when_started(ran.append)
        assert ran == [spark, spark]
    finally:
        spark.conf.unset(key)


#: Prints, as JSON, which cached JAR sets and whether Delta's extension a job's session
#: (``deferred_session``'s stand-in, which answers its settings unstarted) and
#: ``build_session``'s plan name, in a fresh interpreter (in this one, the tests' session
#: runs: a plan then adds no JAR, a running JVM takes none).
PLANS = """
import json
from snap_spark.lake import DELTA_EXTENSION, LAKE_BACKEND_CONF
from snap_spark.runtime.maven_jars import DELTA, KAFKA
from snap_spark.runtime.session import DeferredSession, _plan, deferred_session

def loaded(backend, reads_kafka, job):
    conf = {LAKE_BACKEND_CONF: backend} if backend else {}
    if job:
        session = deferred_session("jars", "local[2]", conf, reads_kafka=reads_kafka)
        assert isinstance(session, DeferredSession) and not session.started
        settings = {key: session.conf.get(key, "") for key in
                    ("spark.jars", "spark.sql.extensions")}
    else:
        settings = _plan("jars", "local[2]", conf, None, delta=None, kafka=None).settings
    jars = set(settings.get("spark.jars", "").split(","))
    return [DELTA_EXTENSION in settings.get("spark.sql.extensions", ""),
            bool(jars & set(DELTA.available())), bool(jars & set(KAFKA.available()))]

print(json.dumps([loaded(b, k, j) for b, k, j in [
    ("delta-rs", False, True), (" Delta-RS", True, True), (None, False, True),
    ("delta-spark", True, True), ("delta-rs", False, False)]]))
"""


def test_a_job_s_session_loads_the_jar_sets_the_job_needs_only() -> None:
    """A job's session plan names Delta (extension and JARs) unless the backend is
    delta-rs, and the Kafka connector's JARs only when the job reads Kafka (as
    ``snap-spark submit`` does); ``build_session``'s plan loads every cached set. The stream
    job reads Kafka when given ``--kafka-bootstrap``."""
    from snap_spark.runner import prepare
    from snap_spark.stream.stream_job import StreamVerify

    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run([sys.executable, "-c", PLANS], capture_output=True, text=True,
                          env={**environment, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    # (Delta's extension, Delta's JARs, Kafka's JARs) for: a delta-rs job, one that reads
    # Kafka, a job on the default backend, a delta-spark job reading Kafka, build_session
    assert json.loads(done.stdout) == [[False, False, False], [False, False, True],
                                       [True, True, False], [True, True, True],
                                       [True, True, True]]
    job = StreamVerify()
    kafka = prepare(job, ["--kafka-bootstrap", "k:9092", "--topic", "t", "--checkpoint", "c"])
    landing = prepare(job, ["--landing", "in", "--checkpoint", "c"])
    assert (job.reads_kafka(kafka), job.reads_kafka(landing)) == (True, False)


def test_only_a_local_master_is_deferred() -> None:
    assert [local_parallelism(m) for m in ("local", "local[4]", "local[2,3]")] == [1, 4, 2]
    assert local_parallelism("local[*]") == (os.cpu_count() or 1)
    for master in ("yarn", "spark://127.0.0.1:7077", "k8s://https://h:443",
                   "local-cluster[2,1,1024]", "localhost"):
        assert local_parallelism(master) is None
        assert not _plan("t", master, None, None, delta=False, kafka=False).deferrable()


def test_two_threads_that_need_spark_at_once_start_it_once(spark: Any) -> None:
    """The batch job's worker warm-up starts the session on its own thread while the main
    thread goes on: whichever asks second waits, and the start's steps run once."""
    import threading

    deferred = DeferredSession(_plan("deferred-threads", "local[2]", None, None,
                                     delta=False, kafka=False))
    started: list[Any] = []
    deferred.when_started(lambda session: (time.sleep(0.5), started.append(session)))
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(deferred.range(2).count()))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts == [2, 2, 2] and started == [spark]


def test_verify_threads_follow_the_local_master_s_slots() -> None:
    """The batch job's verify threads per task (the cores a slot owns) read from a session
    that has not started: local[1] verifies on every core, local[*] on one per task."""
    from snap_spark.pipeline.batch_job import auto_verify_threads

    cores = os.cpu_count() or 1

    def threads(master: str, **conf: str) -> int:
        plan = _plan("threads", master, dict(conf), None, delta=False, kafka=False)
        deferred: Any = DeferredSession(plan)
        got = auto_verify_threads(deferred)
        assert not deferred.started
        return got

    assert threads("local[1]") == cores
    assert threads("local[1, 3]") == cores
    assert threads("local[*]") == threads(f"local[{cores}]") == 1
    assert threads("local") == 1
    assert threads("local[1]", **{"spark.task.cpus": str(cores + 2)}) == cores + 2
