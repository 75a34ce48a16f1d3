"""A stream run as people run it (``snap-spark submit stream_verify``) prints its own
progress and summary, not the notices every run used to show (issue 47): the five
``Streaming TransformWithStateInPandas Python worker ...`` paragraphs PySpark's driver-side
state step prints at each start (with its UDF's repr and schema), the state server's
``No more data to read from the socket`` WARN, and the native-Hadoop and adaptive-execution
WARNs (:data:`tests.stream.test_stream_stop.NOTICES`). That default is checked on the
console of the submitted stream ``tests/stream/test_stream_stop.py`` stops with SIGTERM
(until 2026-12-02 a stream of its own here, a cold JVM only for that). Here: with
``SNAP_SPARK_LOG_LEVEL=INFO`` the state step's paragraphs are shown again."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from snap_spark.samples.messages import SampleConfig, generate
from tests.stream.test_stream_stop import NOTICES, SNAP_SPARK

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def run_stream(tmp_path: Path, name: str, **env: str) -> str:
    lines = [line for line, _ in generate(SampleConfig(agents=3, messages=200, seed=8))]
    landing = tmp_path / name / "landing"
    landing.mkdir(parents=True)
    (landing / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    done = subprocess.run(
        [str(SNAP_SPARK), "submit", "--conf", "spark.snap.lake.backend=delta-rs",
         "stream_verify", "--landing", str(landing), "--lake", str(tmp_path / name / "lake"),
         "--checkpoint", str(tmp_path / name / "ckpt"), "--trigger", "available-now",
         "--bare-clock", "message"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **env})
    console = done.stdout + done.stderr
    assert done.returncode == 0, console[-3000:]
    assert "lines read: 200" in console
    return console


def test_a_verbose_log_level_shows_the_state_step_s_lines(tmp_path: Path) -> None:
    console = run_stream(tmp_path, "verbose", SNAP_SPARK_LOG_LEVEL="INFO")
    assert NOTICES[0] in console
