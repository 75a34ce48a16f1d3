"""Run a job of ``jobs/`` as a separate process in its own process group, kill the whole
group with SIGKILL at a moment its stderr names, and look at what a killed run left in a
table folder: the kill tests of the batch job, the stream and the Nostr ingestion share
these.

Example::

    proc = start_job("verify_messages.py", ["--input", "a.jsonl", "--lake", "lake"])
    kill_when(proc, "stage 3/4")          # SIGKILL the group once that line is printed
    finish(start_job("verify_messages.py", [...]))   # run again to the end

To kill at an exact moment rather than soon after a line, the job is started under the
test-only hook :mod:`tests.hold`, which holds it still once the line is written::

    proc = start_job("stream_verify.py", [...], hold_at="batch 1 committed (")
    kill_when(proc, tests.hold.HOLDING)   # the job waits right after that line
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from deltalake import DeltaTable

from tests.hold import HOLD_AT_ENV, HOLD_NTH_ENV, HOLD_UNTIL_ENV

ROOT = Path(__file__).resolve().parents[1]

#: Settings every job process of the tests runs with: two cores, no UI, delta-rs.
LOCAL_ARGS = ("--master", "local[2]", "--conf", "spark.ui.enabled=false",
              "--conf", "spark.sql.shuffle.partitions=2",
              "--conf", "spark.snap.lake.backend=delta-rs")


def start_job(script: str, args: Sequence[str], env: Mapping[str, str | None] | None = None,
              *, hold_at: str | None = None, hold_nth: int = 1,
              hold_until: str | None = None) -> subprocess.Popen[bytes]:
    """Start ``jobs/<script>`` with this interpreter, :data:`LOCAL_ARGS` and ``args``, in a
    new session (so its Spark JVM and Python workers share its process group). ``env``
    adds variables (``None`` removes one). With ``hold_at``, the job runs under
    :mod:`tests.hold` and stops still once it has written a line containing that text for
    the ``hold_nth`` time, saying so with a line starting :data:`tests.hold.HOLDING`; with
    ``hold_until`` too, it goes on once that file exists."""
    hold = {HOLD_AT_ENV: hold_at, HOLD_NTH_ENV: str(hold_nth) if hold_at else None,
            HOLD_UNTIL_ENV: hold_until if hold_at else None}
    merged: dict[str, str | None] = {
        **os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT), **hold, **(env or {})}
    environment = {k: v for k, v in merged.items() if v is not None}
    hook = [sys.executable, "-m", "tests.hold"] if hold_at else [sys.executable]
    return subprocess.Popen([*hook, str(ROOT / "jobs" / script), *LOCAL_ARGS, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment,
                            start_new_session=True)


def kill_when(proc: subprocess.Popen[bytes], text: str, *, nth: int = 1, delay: float = 0.0,
              timeout: float = 300.0) -> str:
    """SIGKILL the job's process group ``delay`` seconds after ``text`` appeared on its
    stderr for the ``nth`` time; returns what it printed (fails if it never did)."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while seen.count(text.encode()) < nth:
        line = proc.stderr.readline()
        if not line or time.monotonic() > deadline:
            break
        seen += line
    if seen.count(text.encode()) >= nth:
        time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert seen.count(text.encode()) >= nth, seen.decode(errors="replace")[-3000:]
    return seen.decode(errors="replace")


def finish(proc: subprocess.Popen[bytes], timeout: float = 600.0) -> str:
    """Wait for the job to end; fail unless it exits 0. Returns its stdout."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    return out.decode()


def files_under(folder: Path) -> list[Path]:
    """The files under ``folder``, at any depth (none when it does not exist)."""
    return [p for p in folder.rglob("*") if p.is_file()]


def parquet_files(table: Path) -> set[str]:
    """Every Parquet file under a table folder (relative paths)."""
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet")}


def logged_files(table: Path) -> set[str]:
    """The files the table's Delta log holds (relative paths; none without a log)."""
    if not (table / "_delta_log").is_dir():
        return set()
    return {str(Path(uri).relative_to(table)) for uri in DeltaTable(str(table)).file_uris()}
