"""The DataFrame API for notebooks: the same verdicts as the checker, fused or in steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from snap_spark.pipeline.read import read_lines
from snap_spark.pipeline.transforms import check, read_messages, resolve_replay
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import MissingReceiptTime, ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.schemas.tables import MESSAGES
from snap_spark.settings import SettingsError, VerifySettings

pytestmark = pytest.mark.spark


def _final(df: Any) -> list[tuple[int, int | None, str, str]]:
    rows = df.select("line_no", "error_code", "error_detail", "verdict").orderBy(
        "line_no").collect()
    return [(r.line_no, r.error_code, r.error_detail or "", r.verdict) for r in rows]


def test_fused_and_stepwise_equal_the_checker(spark: Any, tmp_path: Path) -> None:
    lines = [line for line, _ in generate(SampleConfig(agents=5, messages=3000, seed=3,
                                                       attack_share=0.3, bare_share=0.1))]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    settings = VerifySettings(bare_clock="message")
    fused = read_messages(spark, [str(path)], settings)
    assert fused.schema == MESSAGES
    source = fused.select("source_file").first()[0]  # type: ignore[index]
    names = [line_name(source, n) for n in range(1, len(lines) + 1)]
    reference = [(v.line_no, v.error_code, v.error_detail, v.verdict)
                 for v in check_lines(lines, ReceiptClock.parse("message"), names=names)]
    assert any(code == 2006 for _, code, _, _ in reference)

    assert _final(fused) == reference
    stepwise = (read_lines(spark, [str(path)], split_bytes=200_000)
                .transform(check(settings)).transform(resolve_replay(settings)))
    assert _final(stepwise) == reference


def test_check_refuses_bare_lines_without_a_clock(spark: Any, tmp_path: Path) -> None:
    lines = [line for line, _ in generate(SampleConfig(agents=3, messages=50, seed=4,
                                                       bare_share=1.0))]
    path = tmp_path / "bare.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(Exception, match="bare message lines") as caught:
        read_lines(spark, [str(path)]).transform(check(VerifySettings())).collect()
    assert "MissingReceiptTime" in str(caught.value) or isinstance(
        caught.value, MissingReceiptTime)


def test_bad_settings_are_refused_before_spark_runs() -> None:
    with pytest.raises(SettingsError, match="replay-window"):
        check(VerifySettings(replay_window=float("nan")))


def _worker_core(_: int) -> str:
    from snap_spark.udfs.verify import core_name

    return core_name()


def test_workers_check_with_the_core_the_environment_names(spark: Any) -> None:
    """``SNAP_SPARK_NATIVE=0`` (the lane of ``make test``) reaches Spark's Python
    workers; otherwise they use the native core, which ``make setup`` builds."""
    import os

    expected = "python" if os.environ.get("SNAP_SPARK_NATIVE", "").strip() == "0" else "native"
    names = spark.sparkContext.parallelize(range(4), 2).map(_worker_core).collect()
    assert names == [expected] * 4


def _worker_pyspark(_: int) -> str:
    import pyspark

    return pyspark.__file__ or ""


def test_workers_import_pyspark_from_its_folder_not_spark_s_zip(spark: Any) -> None:
    """The session's workers fork from ``snap_spark.runtime.worker_daemon``, which takes Spark's
    bundled ``pyspark.zip`` off their path: a zip holds no bytecode (PySpark compiled at each
    worker start) and its index is read again before every task."""
    from snap_spark.runtime.session import WORKER_DAEMON_CONF, WORKER_DAEMON_MODULE

    assert spark.sparkContext.getConf().get(WORKER_DAEMON_CONF) == WORKER_DAEMON_MODULE
    files = spark.sparkContext.parallelize(range(4), 2).map(_worker_pyspark).collect()
    assert len(files) == 4
    for pyspark_file in files:
        assert ".zip" not in pyspark_file and pyspark_file.endswith("pyspark/__init__.py")


def _worker_archives(_: int) -> list[str]:
    """The archives a worker's import system would re-read before its next task."""
    import sys
    import zipimport

    return sorted({*(p for p in sys.path if p.endswith((".jar", ".zip")) and
                     isinstance(sys.path_importer_cache.get(p), zipimport.zipimporter)),
                   *(k for k, v in sys.path_importer_cache.items()
                     if isinstance(v, zipimport.zipimporter))})


def test_workers_re_read_no_archive_index_before_a_task(spark: Any) -> None:
    """Spark puts ``spark-core_*.jar`` on its workers' path; the worker calls
    ``importlib.invalidate_caches()`` before each task, which made the JAR's importer read
    its 5,261-entry index again (0.13 s per task). The workers hold no archive importer."""
    archives = spark.sparkContext.parallelize(range(4), 2).map(_worker_archives).collect()
    assert archives == [[]] * 4


def _worker_heap(_: int) -> tuple[int, int, bool]:
    """A worker's frozen objects, the objects its next full collection walks, and whether
    it holds snap-spark's worker modules before importing anything itself."""
    import gc
    import sys

    from snap_spark.runtime.worker_daemon import WORKER_MODULES

    return (gc.get_freeze_count(), len(gc.get_objects()),
            all(name in sys.modules for name in WORKER_MODULES))


def test_workers_fork_with_their_modules_loaded_and_frozen(spark: Any) -> None:
    """PySpark's daemon runs a full ``gc.collect()`` in a reused worker after every task;
    the workers fork from a daemon that loaded their modules and froze those objects, so
    that collection walks what the worker made itself, not PyArrow's, pandas' and PySpark's
    objects (tens of thousands)."""
    heaps = spark.sparkContext.parallelize(range(4), 2).map(_worker_heap).collect()
    assert len(heaps) == 4
    for frozen, walked, preloaded in heaps:
        assert preloaded
        assert frozen > 20_000, frozen
        assert walked < frozen / 2, (walked, frozen)
