"""Layering rules of docs/architecture.md, *Layers and packages*, that a refactor could
silently break."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import snap_spark.protocol


def test_protocol_imports_no_spark() -> None:
    modules = [f"snap_spark.protocol.{m.name}" for m in pkgutil.iter_modules(
        snap_spark.protocol.__path__)]
    modules += ["snap_spark.lines", "snap_spark.sample", "snap_spark.cli"]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert len(modules) > 10
    assert proc.returncode == 0, proc.stdout + proc.stderr
