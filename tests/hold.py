"""Test-only hook: run a job of ``jobs/`` and hold it still at the moment a log line names,
so a kill test can SIGKILL its process group exactly there. Nothing under ``snap_spark/``
knows of it.

    SNAP_SPARK_TEST_HOLD_AT="batch 1 committed (" SNAP_SPARK_TEST_HOLD_NTH=1 \\
        python -m tests.hold jobs/stream_verify.py --lake ... --checkpoint ...

Before the job (and any ``snap_spark`` module) is imported, ``sys.stderr`` and
``sys.stdout`` are wrapped: once the process has written a line containing
:data:`HOLD_AT_ENV`'s text for the :data:`HOLD_NTH_ENV`-th time (default 1), the thread
that wrote it flushes, writes ``holding (test hook): <text>`` to stderr and sleeps
:data:`HOLD_SECONDS`, or until the file :data:`HOLD_UNTIL_ENV` names exists (the job then
goes on). A job's log lines (:func:`snap_spark.common.console.log`) are written by the
thread doing the work, through ``sys.stderr`` looked up at each call, so the hold happens
right after the line, before the job's next step; the stream's ``foreachBatch`` and the
Nostr commits run in the driver's Python process, where the hook is. The job then runs as
``python <script> <args>`` would (``runpy``, ``__main__``, ``sys.argv``, its folder first on
``sys.path``), and its exit status is kept.

Used through :func:`tests.jobs.start_job` (``hold_at=``).
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
from typing import Any, TextIO, cast

#: The text a line must contain to count.
HOLD_AT_ENV = "SNAP_SPARK_TEST_HOLD_AT"
#: Which occurrence holds (1: the first; default 1).
HOLD_NTH_ENV = "SNAP_SPARK_TEST_HOLD_NTH"
#: The line written when the hold starts; a test waits for it, then kills.
HOLDING = "holding (test hook): "
#: A file whose appearance ends the hold: the job then goes on (unset: the hold lasts
#: :data:`HOLD_SECONDS`).
HOLD_UNTIL_ENV = "SNAP_SPARK_TEST_HOLD_UNTIL"
#: How long a hold lasts at most (the test kills the process long before, or lets it go on).
HOLD_SECONDS = 600.0


class Watch:
    """Counts the lines written to either wrapped stream that contain ``text``; the
    ``nth`` one holds the thread that wrote it."""

    def __init__(self, text: str, nth: int, stdout: TextIO, stderr: TextIO) -> None:
        self.text, self.nth, self.stdout, self.stderr = text, nth, stdout, stderr
        self.seen = 0
        self.lock = threading.Lock()

    def lines(self, lines: list[str]) -> None:
        """Count ``lines`` (complete, without their newline); hold if one is the nth."""
        with self.lock:
            before = self.seen
            self.seen += sum(1 for line in lines if self.text in line)
            hold = before < self.nth <= self.seen
        if hold:
            self.stdout.flush()
            self.stderr.write(f"{HOLDING}{self.text}\n")
            self.stderr.flush()
            until = os.environ.get(HOLD_UNTIL_ENV)
            if not until:
                time.sleep(HOLD_SECONDS)
                return
            deadline = time.monotonic() + HOLD_SECONDS
            while not os.path.exists(until) and time.monotonic() < deadline:
                time.sleep(0.01)


class Watched:
    """A text stream that passes everything to ``stream`` and tells ``watch`` of each
    complete line (per writing thread, so lines of two threads are not mixed)."""

    def __init__(self, stream: TextIO, watch: Watch) -> None:
        self._stream, self._watch = stream, watch
        self._partial = threading.local()

    def write(self, text: str) -> int:
        n = self._stream.write(text)
        if "\n" in text:
            pending: str = getattr(self._partial, "text", "") + text
            *done, rest = pending.split("\n")
            self._partial.text = rest
            self._stream.flush()
            self._watch.lines(done)
        else:
            self._partial.text = getattr(self._partial, "text", "") + text
        return n

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str]) -> None:
    """``argv``: the job script and its arguments."""
    if not argv:
        raise SystemExit(f"usage: {HOLD_AT_ENV}=TEXT python -m tests.hold JOB_SCRIPT [ARGS]")
    text = os.environ.get(HOLD_AT_ENV)
    if text:
        watch = Watch(text, int(os.environ.get(HOLD_NTH_ENV) or 1), sys.stdout, sys.stderr)
        sys.stdout = cast(TextIO, Watched(sys.stdout, watch))
        sys.stderr = cast(TextIO, Watched(sys.stderr, watch))
    run_script(argv)


def run_script(argv: list[str]) -> None:
    """Run ``argv`` (a job script and its arguments) as ``python <script>`` would."""
    script = os.path.abspath(argv[0])
    sys.argv = [script, *argv[1:]]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
