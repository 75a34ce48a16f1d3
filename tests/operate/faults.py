"""Operator faults made real for the tests of ``tests/operate/test_lake_faults.py``: a lake
the job cannot write, a full disk, a lake folder deleted while a job runs; the job run as a
separate process, and what it said checked to be one line.

A job is held still at the moment a log line names by the test-only hook in this module
(``python -m tests.operate.faults JOB_SCRIPT ARGS``, with :data:`PAUSE_AT_ENV` and
:data:`RELEASE_ENV` set), and goes on once the test creates the release file: unlike
:mod:`tests.hold` (held for a kill), the job then runs to its end, meeting whatever the
test did meanwhile. Nothing under ``snap_spark/`` knows of it.

Example::

    done = run_job("verify_messages.py", ["--input", "a.jsonl", "--lake", "lake"])
    line = one_error_line(done, "verify_messages")
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests.hold import run_script
from tests.jobs import LOCAL_ARGS, ROOT

#: The text of the log line the job is held at.
PAUSE_AT_ENV = "SNAP_SPARK_TEST_PAUSE_AT"
#: The file whose creation lets the held job go on.
RELEASE_ENV = "SNAP_SPARK_TEST_RELEASE"
#: What the job writes to stderr once it is held.
PAUSED = "paused (test hook): "

#: Every job of these tests runs with these besides :data:`tests.jobs.LOCAL_ARGS`: no
#: console progress bar, whose redrawn line is not a line of the job's.
QUIET_ARGS = ("--conf", "spark.ui.showConsoleProgress=false")


def job_command(script: str, args: Sequence[str], *, pause_at: str | None = None
                ) -> list[str]:
    """``python jobs/<script> LOCAL_ARGS QUIET_ARGS args`` (under this module's hook when
    ``pause_at`` is given)."""
    hook = [sys.executable, "-m", "tests.operate.faults"] if pause_at else [sys.executable]
    return [*hook, str(ROOT / "jobs" / script), *LOCAL_ARGS, *QUIET_ARGS, *args]


def job_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a job process: this interpreter for Spark's Python, the loopback
    address, the checkout on ``PYTHONPATH`` (for the hook), and ``extra``."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONPATH": str(ROOT), **(extra or {})}


def run_job(script: str, args: Sequence[str], *, prefix: Sequence[str] = (),
            env: Mapping[str, str] | None = None,
            preexec_fn: Callable[[], None] | None = None,
            timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run a job to its end in its own session (``prefix``: a command the job runs under,
    e.g. ``unshare``); its exit status, stdout and stderr."""
    return subprocess.run([*prefix, *job_command(script, args)], capture_output=True,
                          text=True, env=job_env(env), preexec_fn=preexec_fn,
                          start_new_session=True, timeout=timeout, check=False)


def finished(done: subprocess.CompletedProcess[str]) -> str:
    """Fail unless the job exited 0; its stdout."""
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def one_error_line(done: subprocess.CompletedProcess[str], job: str) -> str:
    """The job's error: exactly one line of its stderr starts with ``<job>:``, it is the
    last line, and nothing else it wrote is an error report (no traceback, no Py4J or Java
    exception, no ERROR line of Spark's log). Returns that line."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith(f"{job}:")]
    assert len(ours) == 1, done.stderr[-4000:]
    assert lines[-1] == ours[0], done.stderr[-4000:]
    for noise in ("Traceback", "Py4J", "Exception", " ERROR ", "\tat "):
        assert noise not in done.stderr, (noise, done.stderr[-4000:])
    return ours[0]


def limit_file_size(size: int) -> Callable[[], None]:
    """A ``preexec_fn`` that makes every file the job's processes write stop at ``size``
    bytes, as a full disk does: ``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored so that a write
    past it fails with ``EFBIG`` instead of killing the process (both pass to the JVM and
    the Python workers the job starts)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def read_only_mount(lake: Path) -> list[str] | None:
    """A command prefix that runs the job in a mount namespace of its own where ``lake`` is
    a read-only bind mount of itself: writes there fail with ``EROFS``, as on a disk
    remounted read-only, and nothing changes outside that process tree. ``None`` where
    this process may not make one (no CAP_SYS_ADMIN, no user namespaces)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    prefix = [unshare, *user, "--mount", "--propagation", "private", "sh", "-c",
              'mount --bind -o ro "$0" "$0" && exec "$@"', str(lake)]
    probe = subprocess.run([*prefix, "sh", "-c", f'! touch "{lake}/.probe" 2>/dev/null'],
                           capture_output=True, timeout=30, check=False)
    (lake / ".probe").unlink(missing_ok=True)
    return prefix if probe.returncode == 0 else None


def without_write_permission(lake: Path) -> list[str]:
    """Take write permission on every folder and file of ``lake`` away (``chmod a-w``), and
    the command prefix that makes the job's processes bound by it: none for a user that is
    not root; for root, which permissions do not bind, ``setpriv`` running the job without
    the capabilities that pass over them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
    CAP_FOWNER), so that its writes there fail with ``EACCES`` as another user's would."""
    for folder, dirs, files in os.walk(lake):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            path.chmod(path.stat().st_mode & ~0o222)
    lake.chmod(lake.stat().st_mode & ~0o222)
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "root needs setpriv (util-linux) to drop its DAC capabilities"
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner",
            "--inh-caps", "-all", "--"]


def give_write_permission(lake: Path) -> None:
    """Undo :func:`without_write_permission`."""
    lake.chmod(lake.stat().st_mode | 0o200)
    for folder, dirs, files in os.walk(lake):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            path.chmod(path.stat().st_mode | 0o200)


def start_paused(script: str, args: Sequence[str], at: str, release: Path
                 ) -> subprocess.Popen[str]:
    """Start a job in its own session that holds still once it has written a line
    containing ``at``, until the file ``release`` exists."""
    env = job_env({PAUSE_AT_ENV: at, RELEASE_ENV: str(release)})
    return subprocess.Popen(job_command(script, args, pause_at=at), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def wait_paused(proc: subprocess.Popen[str], timeout: float = 300.0) -> str:
    """Read the job's stderr until it says it is held; what it wrote until then."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith(PAUSED):
            return "".join(seen)
    kill_group(proc)
    raise AssertionError("the job was never held:\n" + "".join(seen)[-3000:])


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL a job started in its own session, with its JVM and Python workers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


# -- the hook: python -m tests.operate.faults JOB_SCRIPT [ARGS] ----------------------------

class _Pausing:
    """``sys.stderr`` for the job: passes everything on; once a line containing the text is
    complete, writes :data:`PAUSED` and waits for the release file (in the thread that
    wrote the line: the job's next step waits)."""

    def __init__(self, stream: object, text: str, release: str) -> None:
        self._stream, self._text, self._release = stream, text, release
        self._seen = self._done = False

    def write(self, data: str) -> int:
        written: int = self._stream.write(data)  # type: ignore[attr-defined]
        self._seen = self._seen or self._text in data
        if self._seen and not self._done and "\n" in data:
            self._done = True
            self._stream.write(f"{PAUSED}{self._text}\n")  # type: ignore[attr-defined]
            self._stream.flush()  # type: ignore[attr-defined]
            while not os.path.exists(self._release):
                time.sleep(0.05)
        return written

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def main(argv: list[str]) -> None:
    """Run ``argv`` (a job script and its arguments) as ``python <script>`` would, with
    stderr under :class:`_Pausing` when :data:`PAUSE_AT_ENV` is set."""
    text = os.environ.get(PAUSE_AT_ENV)
    if text:
        sys.stderr = _Pausing(sys.stderr, text, os.environ[RELEASE_ENV])  # type: ignore[assignment]
    run_script(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
