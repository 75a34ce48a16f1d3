"""Layering rules of docs/architecture.md, *Layers and packages*, that a refactor could
silently break."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import snap_spark
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


def test_no_shipped_module_reads_a_test_variable() -> None:
    """Fault injection lives in the tests (:mod:`tests.hold`), not in shipped code: no module
    under ``snap_spark/`` reads an environment variable whose name says ``HOLD`` or
    ``TEST``, nor names one in a module-level ``*_ENV`` constant."""
    root = Path(snap_spark.__file__).parent

    def suspect(name: str) -> bool:
        return "HOLD" in name.upper() or "TEST" in name.upper()

    found: list[str] = []
    sources = sorted(root.rglob("*.py"))
    for path in sources:
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(root.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):  # os.environ.get("X"), os.getenv("X"), ...
                name = ast.unparse(node.func)
                texts = [a.value for a in node.args if isinstance(a, ast.Constant)
                         and isinstance(a.value, str)]
                if ("environ" in name or "getenv" in name) and any(map(suspect, texts)):
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, ast.Subscript):  # os.environ["X"]
                key = node.slice
                if ("environ" in ast.unparse(node.value) and isinstance(key, ast.Constant)
                        and isinstance(key.value, str) and suspect(key.value)):
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        for statement in tree.body:  # HOLD_AFTER_ENV = "..."
            targets = (statement.targets if isinstance(statement, ast.Assign)
                       else [statement.target] if isinstance(statement, ast.AnnAssign)
                       else [])
            for target in targets:
                if (isinstance(target, ast.Name) and target.id.endswith("_ENV")
                        and suspect(target.id)):
                    found.append(f"{where}:{statement.lineno}: {target.id}")
    assert len(sources) > 20
    assert not found, "\n".join(found)
