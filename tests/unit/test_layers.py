"""Layering rules of docs/architecture.md, *Layers and packages*, that a refactor could
silently break."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import snap_spark
import snap_spark.common
import snap_spark.files
import snap_spark.protocol


def test_protocol_imports_no_spark() -> None:
    modules = [f"snap_spark.protocol.{m.name}" for m in pkgutil.iter_modules(
        snap_spark.protocol.__path__)]
    # and what every layer may import: the file layer and the small helpers
    modules += [f"{package.__name__}.{m.name}" for package in (snap_spark.files,
                                                               snap_spark.common)
                for m in pkgutil.iter_modules(package.__path__)]
    modules += ["snap_spark.samples.messages", "snap_spark.samples.nostr", "snap_spark.cli"]
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


def test_the_package_root_holds_only_the_public_entry_points() -> None:
    """Everything else lives in a package whose name says what it holds (docs/development.md,
    *Layout*): a new module goes there, not beside these."""
    root = Path(snap_spark.__file__).parent
    modules = {m.name for m in pkgutil.iter_modules([str(root)]) if not m.ispkg}
    assert modules == {"api", "cli", "runner", "settings", "views", "_native"} - (
        set() if (root / "_native.abi3.so").exists() else {"_native"})
    packages = {m.name for m in pkgutil.iter_modules([str(root)]) if m.ispkg}
    assert packages == {"audit", "cluster", "common", "files", "jobs", "lake", "nostr",
                        "pipeline", "protocol", "runtime", "samples", "schemas", "stream",
                        "udfs"}


def test_the_replay_processor_s_module_imports_no_pandas_or_arrow() -> None:
    """Spark unpickles the replay state processor on the driver, in a fresh interpreter
    started at each stream query's first micro-batch, only to learn its state's schemas:
    that interpreter imports PySpark's own driver worker and this module, and pandas and
    pyarrow (0.7 s of imports, measured) would be paid there for nothing."""
    code = (
        "import sys\n"
        "import pyspark.sql.streaming.transform_with_state_driver_worker\n"
        "import snap_spark.stream.replay_state as m\n"
        "m.ReplayStateProcessor(120.0)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('pandas', 'pyarrow'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
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


def _imports_of(path: Path) -> list[tuple[str, str]]:
    """Every ``(module, name)`` the file at ``path`` imports from the package
    (``from snap_spark.x import y`` gives ``("snap_spark.x", "y")``; a plain
    ``import snap_spark.x`` gives ``("snap_spark.x", "")``)."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("snap_spark"):
            found += [(str(node.module), alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names
                      if alias.name.startswith("snap_spark")]
    return found


def _imports() -> dict[str, list[tuple[str, str]]]:
    """For each module of ``snap_spark``: every ``(module, name)`` it imports from the
    package (:func:`_imports_of`)."""
    root = Path(snap_spark.__file__).parent
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = _imports_of(path)
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


def _lake_submodule_imports(imports: dict[str, list[tuple[str, str]]],
                            submodules: set[str]) -> list[tuple[str, str]]:
    """``(importer, lake submodule)`` for every import of a submodule of ``snap_spark.lake``
    by a module outside the lake: named in the import (``from snap_spark.lake.files import
    x``, ``import snap_spark.lake.files``) or imported by name (``from snap_spark.lake
    import files``)."""
    return sorted(
        (name, module if module.startswith("snap_spark.lake.") else f"{module}.{item}")
        for name, pairs in imports.items()
        if not (name == "snap_spark.lake" or name.startswith("snap_spark.lake."))
        for module, item in pairs
        if module.startswith("snap_spark.lake.") or f"{module}.{item}" in submodules)


def test_only_the_lake_package_imports_its_submodules() -> None:
    """The lake hides its files: every other module of the package, and every job and
    benchmark script, goes through ``snap_spark.lake`` (its ``__all__``)."""
    imports = _imports()
    submodules = {name for name in imports if name.startswith("snap_spark.lake.")}
    assert {"snap_spark.lake.api", "snap_spark.lake.delta_rs", "snap_spark.lake.files"} <= (
        submodules)
    project = Path(snap_spark.__file__).parent.parent
    scripts = {str(path.relative_to(project)): _imports_of(path)
               for folder in ("jobs", "bench") for path in sorted((project / folder).glob("*.py"))}
    assert "jobs/verify_messages.py" in scripts
    # the check finds each way in
    assert _lake_submodule_imports({"snap_spark.x": [("snap_spark.lake.files", "DataFile"),
                                                     ("snap_spark.lake", "delta_rs"),
                                                     ("snap_spark.lake", "get_lake")],
                                    "bench/b.py": [("snap_spark.lake.lease", "")]},
                                   submodules) == [
        ("bench/b.py", "snap_spark.lake.lease"), ("snap_spark.x", "snap_spark.lake.delta_rs"),
        ("snap_spark.x", "snap_spark.lake.files")]
    assert _lake_submodule_imports({**imports, **scripts}, submodules) == []


def test_only_the_jobs_import_the_job_runner() -> None:
    """The job runner (:mod:`snap_spark.runner`) is the top of the package: the modules that
    import it define a job (a subclass of its ``Job``) and take only the runner's own
    names from it. Progress lines and usage errors come from :mod:`snap_spark.common.console`,
    so that a step of the pipeline does not import upward."""
    runner_names = {"Context", "Job", "main", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE",
                    "EXIT_ALERT", "EXIT_STORAGE"}
    importers: dict[str, set[str]] = {}
    for name, pairs in _imports().items():
        taken = {item for module, item in pairs if module == "snap_spark.runner"}
        if taken or ("snap_spark.runner", "") in pairs:
            importers[name] = taken
    assert {"snap_spark.pipeline.batch_job", "snap_spark.stream.stream_job"} <= set(importers)
    wrong = {name: sorted(taken - runner_names) for name, taken in importers.items()
             if taken - runner_names}
    assert wrong == {}
    assert [name for name in importers if not _defines_a_job(name)] == []


def _defines_a_job(module: str) -> bool:
    """Whether ``module`` (a ``snap_spark`` module's name) defines a subclass of ``Job``."""
    root = Path(snap_spark.__file__).parent
    parts = module.split(".")[1:]
    path = root.joinpath(*parts).with_suffix(".py")
    if not path.exists():
        path = root.joinpath(*parts, "__init__.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.ClassDef)
               and any(ast.unparse(base) == "Job" for base in node.bases)
               for node in ast.walk(tree))


def test_the_runtime_package_is_imported_by_the_jobs_and_entry_points_only() -> None:
    """:mod:`snap_spark.runtime` (the session builder and the local speed machinery) is
    imported by the job runner, the modules that define a job, the spark-submit entry
    points (``snap_spark.jobs.*``), the ``snap-spark`` command, the notebook API's session
    and the cluster demo, and
    by nothing a step of the pipeline, the lake or the protocol is made of; ``import
    snap_spark`` imports none of it."""
    entry_points = {"snap_spark.runner", "snap_spark.cli", "snap_spark.api", "snap_spark.cluster",
                    "snap_spark.cluster.compare", "snap_spark.cluster.demo"}
    edges = _modules_imported(_imports())
    importers = {name: {m for m in targets if m.startswith("snap_spark.runtime")}
                 for name, targets in edges.items()
                 if not name.startswith("snap_spark.runtime")}
    importers = {name: found for name, found in importers.items() if found}
    assert {"snap_spark.runner", "snap_spark.jobs.verify_messages",
            "snap_spark.stream.stream_job"} <= set(importers)
    unexpected = {name: sorted(found) for name, found in importers.items()
                  if name not in entry_points and not name.startswith("snap_spark.jobs.")
                  and not _defines_a_job(name)}
    assert unexpected == {}
