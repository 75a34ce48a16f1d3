"""Stopping a running stream: SIGINT (Ctrl-C, which reaches the whole process group) and
SIGTERM (``kill PID``; under spark-submit that PID is the driver JVM's) each make the stream
say so in one line, end the micro-batch under way, do its stop-time work (land what grew in
the landing folder since its last micro-batch, catch the task tables up), print its summary
and exit 0. The tables then hold every line exactly once, with the verdicts the pure-Python
checker gives, and a run again on the same checkpoint adds nothing.

The stream runs with a 60 s trigger: after its first micro-batch nothing but the stop makes
it look at the landing folder again, so the lines appended meanwhile can only land by the
stop-time work. Between its first micro-batch and the stop, the Ctrl-C test also counts the
Python worker daemons the fresh job process started: one (the landing's functions and the
replay state's share it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.runtime.preinit import PYTHON_ENV
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from snap_spark.stream.stream_job import DEFAULT_LATENESS, StreamPlan, run_stream
from tests.jobs import LOCAL_ARGS, start_job
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: The console script of this interpreter's environment (`snap-spark submit`).
SNAP_SPARK = Path(sys.executable).parent / "snap-spark"
#: Words of an error report, none of which a clean stop may print.
NOISE = ("Traceback", "Py4J", "reentrant call", "Exception", " ERROR ", "\tat ")
#: What a stream's console no longer shows at the default log level (issue 47): the five
#: ``Streaming TransformWithStateInPandas Python worker ...`` paragraphs PySpark's
#: driver-side state step prints at each start (with its UDF's repr and schema), the state
#: server's ``No more data to read from the socket`` WARN, and the native-Hadoop and
#: adaptive-execution WARNs. ``tests/operate/test_quiet_console.py`` shows the first again
#: with ``SNAP_SPARK_LOG_LEVEL=INFO``.
NOTICES = ("TransformWithStateInPandas Python worker", "No more data to read from the socket",
           "NativeCodeLoader", "ResolveWriteToStream")


class Running:
    """A job process in its own session whose stdout and stderr are read as they come (by
    two threads, so no pipe fills), and waited on."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.out: list[str] = []
        self.err: list[str] = []
        self._cond = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                         for stream, lines in ((proc.stdout, self.out),
                                               (proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any, lines: list[str]) -> None:
        for raw in stream:
            with self._cond:
                lines.append(raw.decode(errors="replace"))
                self._cond.notify_all()

    def text(self) -> str:
        with self._cond:
            return "".join(self.out + self.err)

    def wait_for(self, text: str, timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(text in line for line in self.out + self.err):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise AssertionError(f"never saw {text!r}:\n{''.join(self.err)[-4000:]}")
                self._cond.wait(1.0)

    def wait(self, timeout: float = 240.0) -> int:
        code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(30)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)


@pytest.fixture
def sample() -> list[bytes]:
    return [line for line, _ in generate(SampleConfig(agents=5, messages=1_200, seed=29,
                                                      attack_share=0.3))]


def stream_args(root: Path, trigger: str = "processing-time=60s") -> list[str]:
    return ["--landing", str(root / "landing"), "--lake", str(root / "lake"),
            "--checkpoint", str(root / "ckpt"), "--trigger", trigger,
            "--progress-json", str(root / "progress.jsonl"),
            "--conf", "spark.ui.showConsoleProgress=false"]


def check_stopped(job: Running, root: Path, lines: list[bytes], name: str) -> None:
    """Exit 0, one stop line and no error report, the summary, the stop-time landing of
    the appended lines, and every line once with the checker's verdicts."""
    code = job.wait()
    said = job.text()
    assert code == 0, said[-4000:]
    stops = [line for line in said.splitlines() if "stopping the stream" in line]
    assert len(stops) == 1 and f"stopping the stream ({name})" in stops[0], said[-4000:]
    for noise in NOISE:
        assert noise not in said, (noise, said[-4000:])
    assert "micro-batches: 1\n" in said and "balance: OK" in said, said[-4000:]
    progress = [json.loads(x) for x in (root / "progress.jsonl").read_text().splitlines()]
    at_stop = [p for p in progress if p.get("landing_watch") == "stop"]
    assert len(at_stop) == 1 and at_stop[0]["files_grown"] == 1, progress
    check_tables(root / "lake", root / "landing" / "a.jsonl", lines)


def check_tables(lake: Path, path: Path, lines: list[bytes]) -> None:
    for table in ("raw_messages", "messages"):
        counted = Counter((r["source_file"], r["line_no"])
                          for r in delta_rows(lake / table, "select source_file, line_no from t"))
        assert set(counted) == {(str(path), n) for n in range(1, len(lines) + 1)}, table
        assert max(counted.values()) == 1, (table, counted.most_common(2))
    names = [line_name(str(path), n) for n in range(1, len(lines) + 1)]
    reference = {(str(path), n): (v.error_code, v.error_detail or None) for n, v in
                 enumerate(check_lines(lines, ReceiptClock.refuse(), names=names), start=1)}
    assert {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
            for m in delta_rows(lake / "messages")} == reference


def first_batch(job: Running) -> None:
    """Wait for the first micro-batch to be committed."""
    job.wait_for("batch 0 committed (")


def append_the_rest(root: Path, lines: list[bytes], first: int) -> None:
    """Append the lines after the first ``first`` to the landed file."""
    with (root / "landing" / "a.jsonl").open("ab") as out:
        out.write(b"\n".join(lines[first:]) + b"\n")


def worker_daemons(driver: int) -> dict[int, tuple[list[str], dict[str, str]]]:
    """Spark's Python worker daemons (``python -m snap_spark.runtime.worker_daemon``) among the
    processes the process ``driver`` started, directly or not, and not the workers they
    fork: each one's command line and environment."""
    family: dict[int, tuple[int, list[str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as line:
                command = line.read().decode(errors="replace").split("\0")
        except OSError:  # gone meanwhile
            continue
        family[int(entry)] = (parent, command)

    def descends(pid: int) -> bool:
        seen: set[int] = set()
        while pid in family and pid not in seen and pid != driver:
            seen.add(pid)
            pid = family[pid][0]
        return pid == driver

    def daemon(command: list[str]) -> bool:  # its forked workers keep its command line
        return command[1:3] == ["-m", "snap_spark.runtime.worker_daemon"]

    found: dict[int, tuple[list[str], dict[str, str]]] = {}
    for pid, (parent, command) in family.items():
        if daemon(command) and descends(pid) and not daemon(family.get(parent, (0, []))[1]):
            with open(f"/proc/{pid}/environ", "rb") as environ:
                pairs = [item.split(b"=", 1) for item in environ.read().split(b"\0") if item]
            found[pid] = (command, {k.decode(): v.decode(errors="replace") for k, v in pairs})
    return found


def test_ctrl_c_stops_the_stream_cleanly(tmp_path: Path, sample: list[bytes]) -> None:
    """SIGINT to the stream's whole process group, as Ctrl-C in its terminal sends it
    (``python jobs/stream_verify.py``: its driver JVM, Python workers and helpers too).

    Before the signal, after the first micro-batch: the landing's functions and the replay
    state's share one worker daemon (Spark keys daemons by interpreter and environment), so
    a stream's first micro-batch does not wait for a second daemon's imports. Counted among
    the processes the fresh driver started; the daemon runs the interpreter the session's
    launcher (:data:`snap_spark.runtime.preinit.LAUNCHER`) hands over to."""
    (tmp_path / "landing").mkdir()
    first = len(sample) // 2
    (tmp_path / "landing" / "a.jsonl").write_bytes(b"\n".join(sample[:first]) + b"\n")
    job = Running(start_job("stream_verify.py", stream_args(tmp_path)))
    try:
        first_batch(job)
        daemons = worker_daemons(job.proc.pid)
        assert len(daemons) == 1, daemons
        ((command, environment),) = daemons.values()
        # the session's functions run the launcher, which execs this interpreter
        assert environment.get(PYTHON_ENV) == sys.executable == command[0], environment
        append_the_rest(tmp_path, sample, first)
        os.killpg(job.proc.pid, signal.SIGINT)
        check_stopped(job, tmp_path, sample, "SIGINT")
    finally:
        job.kill()


def test_sigterm_stops_a_submitted_stream_cleanly(spark: Any, tmp_path: Path,
                                                  sample: list[bytes]) -> None:
    """SIGTERM to ``snap-spark submit stream_verify``'s process, which is spark-submit's
    driver JVM (the job's Python runs as its child, and Spark passes its output on through
    stdout), as ``kill PID`` or a service manager sends it. A run again on the same
    checkpoint finds nothing to do (that run is the job's
    :func:`~snap_spark.stream.stream_job.run_stream`, available-now, in the test session).
    The stream's console holds none of :data:`NOTICES`."""
    (tmp_path / "landing").mkdir()
    first = len(sample) // 2
    (tmp_path / "landing" / "a.jsonl").write_bytes(b"\n".join(sample[:first]) + b"\n")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen([str(SNAP_SPARK), "submit", *LOCAL_ARGS, "stream_verify",
                             *stream_args(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    job = Running(proc)
    try:
        first_batch(job)
        append_the_rest(tmp_path, sample, first)
        proc.send_signal(signal.SIGTERM)
        check_stopped(job, tmp_path, sample, "SIGTERM")
    finally:
        job.kill()
    # a stream run as people run it prints its own lines only, not Spark's notices
    console = job.text()
    assert [notice for notice in NOTICES if notice in console] == [], console[-3000:]
    again = run_stream(spark, StreamPlan(
        lake_dir=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ckpt"),
        settings=VerifySettings(), lateness=DEFAULT_LATENESS, run_id=uuid.uuid4().hex,
        landing=str(tmp_path / "landing"), progress_json=str(tmp_path / "progress.jsonl")),
        {"availableNow": True})
    assert (again.batches, again.lines_read, again.files_grown) == (0, 0, 0), again
    check_tables(tmp_path / "lake", tmp_path / "landing" / "a.jsonl", sample)
