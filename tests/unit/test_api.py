"""The notebook API's surface: one module, offered from the package root too, Spark-free
until used. (It runs on a real Spark Connect server in tests/operate/test_notebooks.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

import snap_spark


def test_the_package_offers_every_name_of_the_api() -> None:
    from snap_spark import api

    assert set(api.__all__) == {*snap_spark.API_NAMES, "register_udfs"}
    for name in snap_spark.API_NAMES:
        assert getattr(snap_spark, name) is getattr(api, name), name
    assert snap_spark.api is api
    with pytest.raises(AttributeError, match="no attribute 'sesion'"):
        _ = snap_spark.sesion  # type: ignore[attr-defined]


def test_import_snap_spark_imports_no_spark_until_a_name_is_asked_for() -> None:
    code = ("import sys, snap_spark\n"
            "before = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')]\n"
            "snap_spark.sql\n"
            "after = 'pyspark' in sys.modules\n"
            "print(before, after)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "True"]
