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
    modules += ["snap_spark.lines", "snap_spark.samples.messages", "snap_spark.samples.nostr",
                "snap_spark.cli"]
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


def _imports() -> dict[str, list[tuple[str, str]]]:
    """For each module of ``snap_spark``: every ``(module, name)`` it imports from the
    package (``from snap_spark.x import y`` gives ``("snap_spark.x", "y")``; a plain
    ``import snap_spark.x`` gives ``("snap_spark.x", "")``)."""
    root = Path(snap_spark.__file__).parent
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        found[name] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("snap_spark"):
                found[name] += [(str(node.module), alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found[name] += [(alias.name, "") for alias in node.names
                                if alias.name.startswith("snap_spark")]
    return found


def _modules_imported(imports: dict[str, list[tuple[str, str]]]) -> dict[str, set[str]]:
    """Module -> the package modules it imports (a name that is a module counts as one)."""
    edges: dict[str, set[str]] = {}
    for name, pairs in imports.items():
        edges[name] = set()
        for module, item in pairs:
            if f"{module}.{item}" in imports:
                edges[name].add(f"{module}.{item}")
            elif module in imports:
                edges[name].add(module)
    return edges


def test_no_two_modules_import_each_other() -> None:
    imports = _imports()
    edges = _modules_imported(imports)
    assert len(edges) > 50
    mutual = sorted((a, b) for a in edges for b in edges[a] if a < b and a in edges[b])
    assert mutual == []


def test_no_module_imports_another_modules_private_name() -> None:
    private = sorted(
        (name, f"{module}.{item}") for name, pairs in _imports().items()
        for module, item in pairs
        if item.startswith("_") and not item.startswith("__") and module != name)
    assert private == []


def test_only_the_lake_package_imports_its_submodules() -> None:
    """The lake hides its files: every other module goes through ``snap_spark.lake``."""
    outside = sorted(
        (name, module) for name, pairs in _imports().items()
        if not (name == "snap_spark.lake" or name.startswith("snap_spark.lake."))
        for module, _item in pairs if module.startswith("snap_spark.lake."))
    assert outside == []
