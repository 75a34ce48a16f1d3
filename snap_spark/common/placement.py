"""Where a step runs: in the driver process, or as Spark stages.

Seven steps have two ways to run. Below a size they run in the driver process, on Arrow
tables and the native core, because a Spark job costs more than their work (each job's fixed
cost, and the first Python stage of a job process starts the worker daemon; docs/speed.md,
*Figures behind the code*). Above it they run as Spark stages, which scale out. Either way
they give the same rows: the steps share their functions, and the suite runs with the Spark
path forced as well (``make test`` does, for a subset it names).

Every size is counted from what is known before the step runs, never by reading data:
the input files' sizes, the lines a pass landed, or the record counts in a Delta log.

=================  ==========  ==============================  =============================
limit              default     counted as                      the step
=================  ==========  ==============================  =============================
``land_bytes``     16 MiB      plain (not gzip) input bytes    a batch run's or a Nostr
                                                               ingestion's landing
``pass_lines``     20,000      lines a pass landed             the ``messages`` write and
                                                               the replay candidates' check
``fold_rows``      2,000,000   ``messages`` rows (Delta log)   the task fold, with
``fold_tasks``     200,000     task ids to fold                ... at most this many tasks
``lookup_rows``    100,000     rows of the table (Delta log)   Nostr ingestion's lookups
``distinct_rows``  2,000,000   rows of the table (Delta log)   delta-spark's distinct values
``read_rows``      100,000     rows of the table (Delta log)   the audit (counted on the
                                                               driver when every table
                                                               fits) and reading a table
                                                               for the notebook views
=================  ==========  ==============================  =============================

A step runs on the driver when its size is at most its limit. The environment variable
:data:`ENV` (``SNAP_SPARK_DRIVER_LIMITS``) changes them for the process that reads it (the
driver):

- ``spark``: every step as Spark stages, whatever its size;
- ``land_bytes=0,pass_lines=500``: the limits named, the others at their defaults;
- ``lookup_rows=spark``: that step always in Spark;
- ``spark,read_rows=100000``: every step in Spark but the one named;
- unset or empty: the defaults.

A later part of the list wins over an earlier one.

Examples:
    >>> DriverLimits.parse("").pass_lines, DriverLimits.parse("pass_lines=5").pass_lines
    (20000, 5)
    >>> DriverLimits.parse("spark").fits("read_rows", 0)
    False
    >>> DriverLimits.parse("fold_rows=many")
    Traceback (most recent call last):
    ...
    snap_spark.settings.SettingsError: SNAP_SPARK_DRIVER_LIMITS: fold_rows='many' is not a \
whole number >= 0 nor spark
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Final, Literal

from snap_spark.settings import SettingsError

__all__ = ["ENV", "SPARK_ONLY", "DriverLimits", "Limit", "limits"]

#: The name of a limit (a field of :class:`DriverLimits`).
Limit = Literal["land_bytes", "pass_lines", "fold_rows", "fold_tasks", "lookup_rows",
                "distinct_rows", "read_rows"]

#: The environment variable that sets the limits (see the module's text).
ENV: Final = "SNAP_SPARK_DRIVER_LIMITS"
#: The value of :data:`ENV` that sends every step to Spark.
SPARK_ONLY: Final = "spark"
#: A limit no size is at most (a size is never negative): the step always runs in Spark.
_NEVER: Final = -1


@dataclass(frozen=True)
class DriverLimits:
    """The sizes up to which each two-way step runs in the driver process.

    Attributes:
        land_bytes: plain input bytes a batch run or Nostr ingestion lands on the driver.
        pass_lines: lines of a pass whose ``messages`` files are written, and whose replay
            candidates are checked against the lake, on the driver.
        fold_rows: ``messages`` rows up to which the task fold reads its reports on the
            driver (delta-rs) and folds them in-process.
        fold_tasks: task ids a driver fold takes at most; more go to a Spark fold.
        lookup_rows: rows of a table that Nostr ingestion looks up on the driver rather
            than through a Spark join.
        distinct_rows: rows of a table whose distinct values delta-spark reads on the
            driver (delta-rs) rather than in a Spark job.
        read_rows: rows of each table up to which the audit reads its tables on the
            driver and counts its figures and re-verifies there, without Spark; and rows of
            a table the notebook views read on the driver and hand to Spark as Arrow rather
            than a Spark read and cache.
    """

    land_bytes: int = 16 * 1024 * 1024
    pass_lines: int = 20_000
    fold_rows: int = 2_000_000
    fold_tasks: int = 200_000
    lookup_rows: int = 100_000
    distinct_rows: int = 2_000_000
    read_rows: int = 100_000

    @classmethod
    def spark_only(cls) -> DriverLimits:
        """Limits that no size fits: every step runs as Spark stages."""
        return cls(**{field.name: _NEVER for field in dataclasses.fields(cls)})

    @classmethod
    def parse(cls, text: str) -> DriverLimits:
        """The limits that ``text``, a value of :data:`ENV`, sets.

        Raises:
            SettingsError: an unknown name, a missing ``=``, or a value that is neither a
                whole number >= 0 nor ``spark`` (the message names the variable and the bad
                part).

        Examples:
            >>> DriverLimits.parse(" land_bytes = 0 , fold_tasks=7 ").land_bytes
            0
            >>> limits = DriverLimits.parse("spark,read_rows=10,fold_rows=spark")
            >>> limits.read_rows, limits.fits("land_bytes", 0), limits.fits("fold_rows", 0)
            (10, False, False)
            >>> DriverLimits.parse("land=0")
            Traceback (most recent call last):
            ...
            snap_spark.settings.SettingsError: SNAP_SPARK_DRIVER_LIMITS: unknown limit \
'land'; the limits are land_bytes, pass_lines, fold_rows, fold_tasks, lookup_rows, \
distinct_rows, read_rows, or the word spark
        """
        names = [field.name for field in dataclasses.fields(cls)]
        values: dict[str, int] = {}
        for part in filter(None, (piece.strip() for piece in text.split(","))):
            if part.lower() == SPARK_ONLY:
                values = dataclasses.asdict(cls.spark_only())
                continue
            name, equals, value = (piece.strip() for piece in part.partition("="))
            if name not in names or not equals:
                what = f"unknown limit {name!r}" if name not in names else f"{part!r} has no ="
                raise SettingsError(f"{ENV}: {what}; the limits are {', '.join(names)}, "
                                    f"or the word {SPARK_ONLY}")
            if value.lower() == SPARK_ONLY:
                values[name] = _NEVER
            elif value.isascii() and value.isdigit():
                values[name] = int(value)
            else:
                raise SettingsError(f"{ENV}: {name}={value!r} is not a whole number >= 0 "
                                    f"nor {SPARK_ONLY}")
        return cls(**values)

    def fits(self, limit: Limit, size: int) -> bool:
        """Whether a step of ``size`` runs on the driver under the limit named ``limit``.

        Examples:
            >>> DriverLimits().fits("pass_lines", 20_000), DriverLimits().fits("pass_lines",
            ...                                                                 20_001)
            (True, False)
        """
        bound: int = getattr(self, limit)
        return 0 <= size <= bound


def limits() -> DriverLimits:
    """The limits in force: :data:`ENV` when set, else the defaults (read at each call, so
    that a setting made after import counts).

    Raises:
        SettingsError: :data:`ENV` is malformed (see :meth:`DriverLimits.parse`).

    Examples:
        >>> getfixture("monkeypatch").setenv(ENV, "spark")
        >>> limits().land_bytes < 0
        True
    """
    return DriverLimits.parse(os.environ.get(ENV, ""))
