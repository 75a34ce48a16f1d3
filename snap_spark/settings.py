"""Verification settings: one validated value shared by every job, transform and task.

A setting that would silently change verdicts (a NaN window, a negative drift) is refused
before anything runs: :meth:`VerifySettings.validated` raises :class:`SettingsError`, which
the job runner turns into exit status 2 and a one-line reason.

Examples:
    >>> VerifySettings().max_drift, VerifySettings().replay_window
    (60.0, 120.0)
    >>> VerifySettings(max_drift=float("nan")).validated()
    Traceback (most recent call last):
    ...
    snap_spark.settings.SettingsError: --max-drift must be finite seconds >= 0, got nan
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

from snap_spark.protocol.validate import ReceiptClock
from snap_spark.protocol.verdict import DEFAULT_MAX_DRIFT, DEFAULT_REPLAY_WINDOW

#: Lines per Arrow batch when reading and checking.
DEFAULT_BATCH_ROWS = 8192


class SettingsError(ValueError):
    """A setting is out of range or malformed (the message names the option and value)."""


def check_seconds(name: str, value: Any, *, allow_zero: bool = True) -> float:
    """``value`` as float seconds, refusing NaN, infinities, negatives (and 0 if not allowed).

    Examples:
        >>> check_seconds("--replay-window", "90")
        90.0
        >>> check_seconds("--replay-window", -1)
        Traceback (most recent call last):
        ...
        snap_spark.settings.SettingsError: --replay-window must be finite seconds >= 0, got -1
    """
    bound = ">= 0" if allow_zero else "> 0"
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise SettingsError(f"{name} must be finite seconds {bound}, got {value}")
    return seconds


def check_count(name: str, value: Any, *, minimum: int = 1) -> int:
    """``value`` as an int of at least ``minimum`` (booleans and fractions refused).

    Examples:
        >>> check_count("--batch-rows", 0)
        Traceback (most recent call last):
        ...
        snap_spark.settings.SettingsError: --batch-rows must be a whole number >= 1, got 0
    """
    if isinstance(value, bool):
        raise SettingsError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a whole number >= {minimum}, got {value!r}") from None
    if number != value and str(number) != str(value).strip():
        raise SettingsError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    if number < minimum:
        raise SettingsError(f"{name} must be a whole number >= {minimum}, got {value}")
    return number


@dataclass(frozen=True)
class VerifySettings:
    """How lines are verified. Defaults follow the spec (±60 s drift, 120 s replay window).

    Attributes:
        max_drift: allowed ``|received_at - timestamp|`` in seconds (exactly this passes).
        replay_window: an accepted ``(from, id)`` makes copies received within this many
            seconds after it a 2006.
        bare_clock: receipt clock for bare lines: ``""`` (refuse), ``"now"``, ``"message"``
            or unix seconds (see :class:`snap_spark.protocol.validate.ReceiptClock`).
        clock_now: the driver's "now" for ``bare_clock="now"`` (the same for every task).
        verify_threads: signature-verification threads per task (0 = decided per session).
        batch_rows: lines per Arrow batch.
    """

    max_drift: float = DEFAULT_MAX_DRIFT
    replay_window: float = DEFAULT_REPLAY_WINDOW
    bare_clock: str = ""
    clock_now: float = 0.0
    verify_threads: int = 0
    batch_rows: int = DEFAULT_BATCH_ROWS

    def validated(self) -> VerifySettings:
        """The same settings with numbers normalised; raises :class:`SettingsError`."""
        try:
            ReceiptClock.parse(self.bare_clock, now=self.clock_now or None)
        except ValueError as exc:
            raise SettingsError(f"--bare-clock: {exc}") from None
        return dataclasses.replace(
            self,
            max_drift=check_seconds("--max-drift", self.max_drift),
            replay_window=check_seconds("--replay-window", self.replay_window),
            verify_threads=check_count("--verify-threads", self.verify_threads, minimum=0),
            batch_rows=check_count("--batch-rows", self.batch_rows),
        )

    def with_clock_now(self, now: float | None = None) -> VerifySettings:
        """These settings with the driver's "now" fixed to whole seconds (``now``, else the
        wall clock), unless one is fixed already: every task of a run then resolves
        ``--bare-clock now`` to the same time.

        Examples:
            >>> VerifySettings().with_clock_now(12.7).clock_now
            12.0
            >>> VerifySettings(clock_now=5.0).with_clock_now(12.7).clock_now
            5.0
        """
        if self.clock_now:
            return self
        return dataclasses.replace(self, clock_now=float(int(time.time() if now is None
                                                              else now)))

    def clock(self) -> ReceiptClock:
        """The receipt clock of bare lines, with ``clock_now`` as "now"."""
        return ReceiptClock.parse(self.bare_clock, now=self.clock_now)

    def as_record(self) -> dict[str, Any]:
        """The settings that decide verdicts, for commit metadata and reports."""
        return {"max_drift": self.max_drift, "replay_window": self.replay_window,
                "bare_clock": self.bare_clock,
                "clock_now": self.clock_now if self.bare_clock == "now" else None}
