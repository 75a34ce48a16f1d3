"""Setting :mod:`snap_spark.common.placement`'s limits in a test: on top of the ones in force, so
that a lane run with ``SNAP_SPARK_DRIVER_LIMITS=spark`` keeps every other step in Spark."""

from __future__ import annotations

import os

import pytest

from snap_spark.common.placement import ENV, SPARK_ONLY, DriverLimits

#: A ``land_bytes`` for the tests whose input of a few MB must land in Spark tasks (the
#: kill tests of that landing, a file growing while it lands): the default, 16 MiB, would
#: land it on the driver.
SPARK_LANDING_BYTES = 1024 * 1024


def set_limits(monkeypatch: pytest.MonkeyPatch, **limits: int | str) -> None:
    """Set the named limits (a size, or ``"spark"``: never on the driver) for the rest of
    the test, the others as they are.

    Examples:
        >>> patched = getfixture("monkeypatch")
        >>> patched.setenv(ENV, "spark")
        >>> set_limits(patched, land_bytes=10, pass_lines="spark")
        >>> from snap_spark.common.placement import limits
        >>> limits().land_bytes, limits().fits("read_rows", 0)
        (10, False)
    """
    names = {field for field in DriverLimits.__dataclass_fields__}
    assert set(limits) <= names, sorted(set(limits) - names)
    assert all((isinstance(v, int) and v >= 0) or v == SPARK_ONLY for v in limits.values())
    parts = [os.environ.get(ENV, "").strip(), *(f"{k}={v}" for k, v in limits.items())]
    monkeypatch.setenv(ENV, ",".join(part for part in parts if part))
