"""What a job says to the person running it: progress lines on stderr (:func:`log`), and
the error of an input or option that cannot be used as given (:class:`UsageError`, which
the job runner, :mod:`snap_spark.runner`, turns into exit status 2 and one line).

Every layer may use these; they import nothing of the package, so a step of the pipeline
that logs or refuses an input does not import the job runner above it.

Examples:
    >>> log("stage 1/4 inputs: 2 files")  # doctest: +SKIP
    [snap-spark 12:00:00] stage 1/4 inputs: 2 files
    >>> issubclass(UsageError, ValueError)
    True
"""

from __future__ import annotations

import sys
import time

__all__ = ["UsageError", "log"]


class UsageError(ValueError):
    """The command line or an input cannot be used as given (exit 2, nothing written)."""


def log(message: str) -> None:
    """Progress line for people following a long run (stderr, flushed)."""
    print(f"[snap-spark {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
