"""Import PySpark from its installed folder rather than from the zips Spark bundles.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip`` first on the
``PYTHONPATH`` of a ``spark-submit`` driver and of every Python worker. With PySpark installed
from PyPI, ``$SPARK_HOME`` *is* the installed ``pyspark`` package, and those zips hold the
same code as the folders next to them. Importing from a zip costs twice on CPython 3.11
(docs/speed.md, *Figures behind the code*, has both costs):

- **every start compiles** the ~200 modules PySpark imports (a zip holds no bytecode and
  gets none written), in every driver and every worker daemon;
- **every task re-reads the zips' directories**: the worker calls
  ``importlib.invalidate_caches()`` before each task, and each ``zipimporter`` (one per
  package folder imported from a zip, 14 or more) then reads its whole archive's index
  again, CPU spent on every Python task of every stage.

Spark also puts its own ``spark-core_*.jar`` on every worker's ``PYTHONPATH`` (for builds
that once packed PySpark into it). The JAR of Spark 4.0 holds 5,261 entries and not one
Python file, yet its ``zipimporter`` re-read that index before every task: CPU spent on
every Python task, and a noticeable part of each micro-batch of the stream, whose three
Python stages run one after another (docs/speed.md, *Figures behind the code*).
:func:`drop_python_free_jars` takes such a JAR off ``sys.path``; an entry that holds any
Python stays.

:func:`fix_paths` runs both, in snap-spark's own processes only, and only while the runtime
is on (:mod:`snap_spark.runtime.scope`). Nothing does it at ``import snap_spark``; it is
called, before PySpark is imported, by:

- every spark-submit entry point (``jobs/*.py``), for the job's driver;
- :mod:`snap_spark.runtime.worker_daemon`, the daemon Spark's Python workers fork from in
  a local session snap-spark built;
- ``python -m snap_spark.runtime.spark_path -m MODULE ...``, the way the launcher of
  :mod:`snap_spark.runtime.preinit` starts the one Python process Spark starts that is
  neither: the one that runs a ``transformWithStateInPandas`` processor's ``init`` on the
  driver at the first micro-batch of every stream query (``python -m
  pyspark.sql.streaming.transform_with_state_driver_worker``, a fresh interpreter), when
  the warm server cannot serve it. With the zips first on its path its start took much
  longer than from the installed folder (docs/speed.md, *Figures behind the code*).

:func:`drop_bundled_zips` takes the zips off ``sys.path`` when, and only when, the same
PySpark and Py4J (byte-equal version files) are installed on another ``sys.path`` entry,
and nothing has been imported from them yet, so a process never runs another PySpark than
the one Spark's zips hold.

Examples:
    Nothing to do in a process whose ``sys.path`` holds no bundled zip (the tests' own):

    >>> drop_bundled_zips(["/usr/lib/python3.11", "/tmp/site-packages"])
    []
    >>> drop_python_free_jars(["/usr/lib/python3.11", "/tmp/site-packages"])
    []
"""

from __future__ import annotations

import re
import sys
from collections.abc import Container
from pathlib import Path
from typing import Final

#: The zips Spark puts on the path: ``(file name pattern, package, version module)``.
BUNDLED: Final = (
    (re.compile(r"pyspark\.zip"), "pyspark", "pyspark/version.py"),
    (re.compile(r"py4j-[0-9.]+-src\.zip"), "py4j", "py4j/version.py"),
)


def drop_bundled_zips(
    path: list[str] | None = None, imported: Container[str] | None = None
) -> list[str]:
    """Remove Spark's bundled ``pyspark.zip`` and ``py4j-*-src.zip`` from ``path``
    (default ``sys.path``, changed in place) where an installed copy of the same version is
    importable from another entry of ``path``; the entries removed.

    An entry stays when its package is already imported (named in ``imported``, default
    ``sys.modules``: two copies must not mix), when no installed copy is found, or when the
    versions differ (a ``$SPARK_HOME`` that is not the installed PySpark).
    """
    entries = sys.path if path is None else path
    loaded = sys.modules if imported is None else imported
    removed: list[str] = []
    for pattern, package, version_file in BUNDLED:
        for entry in list(entries):
            if not pattern.fullmatch(Path(entry).name) or package in loaded:
                continue
            others = [e for e in entries if e != entry and not e.endswith(".zip")]
            if _same_version(entry, version_file, _installed_copy(package, others)):
                entries.remove(entry)
                _forget_importers(entry)
                removed.append(entry)
    return removed


#: Spark's own JARs that Spark puts on the Python workers' path.
SPARK_JAR: Final = re.compile(r"spark-core_[0-9.]+-[0-9A-Za-z.-]+\.jar")

#: What makes an archive entry importable by Python.
_PYTHON_SUFFIXES: Final = (".py", ".pyc", ".pyd", ".so")


def drop_python_free_jars(path: list[str] | None = None) -> list[str]:
    """Remove Spark's ``spark-core_*.jar`` from ``path`` (default ``sys.path``, changed in
    place) when the archive holds no Python file, so that nothing could ever be imported
    from it; the entries removed. A JAR that cannot be read stays."""
    import zipfile

    entries = sys.path if path is None else path
    removed: list[str] = []
    for entry in list(entries):
        if not SPARK_JAR.fullmatch(Path(entry).name):
            continue
        try:
            with zipfile.ZipFile(entry) as archive:
                if any(n.endswith(_PYTHON_SUFFIXES) for n in archive.namelist()):
                    continue
        except (OSError, zipfile.BadZipFile):
            continue
        entries.remove(entry)
        _forget_importers(entry)
        removed.append(entry)
    return removed


def _forget_importers(entry: str) -> None:
    """Drop the import system's cached finders for ``entry`` and the folders inside it
    (``importlib.invalidate_caches`` would otherwise still re-read their indexes)."""
    for key in [k for k in sys.path_importer_cache
                if k == entry or k.startswith(entry.rstrip("/") + "/")]:
        sys.path_importer_cache.pop(key, None)


def _installed_copy(package: str, entries: list[str]) -> Path | None:
    """The folder of ``package`` on the first of ``entries`` that holds it."""
    for entry in entries:
        folder = Path(entry or ".") / package
        if (folder / "__init__.py").is_file():
            return folder
    return None


def _same_version(archive: str, version_file: str, folder: Path | None) -> bool:
    """True when ``folder``'s version module is byte-equal to the one in ``archive``."""
    if folder is None:
        return False
    import zipfile

    installed = folder.parent / version_file
    try:
        with zipfile.ZipFile(archive) as bundle:
            return bundle.read(version_file) == installed.read_bytes()
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def fix_paths() -> list[str]:
    """Take Spark's bundled zips (:func:`drop_bundled_zips`) and its Python-free JAR
    (:func:`drop_python_free_jars`) off ``sys.path`` when the runtime is on; the entries
    removed. Call it before anything imports PySpark.

    Example::

        from snap_spark.runtime.spark_path import fix_paths

        fix_paths()  # a spark-submit entry point's first step
        from snap_spark.pipeline.batch_job import main
    """
    from snap_spark.runtime.scope import runtime_on

    if not runtime_on():
        return []
    return [*drop_bundled_zips(), *drop_python_free_jars()]


def run_module(argv: list[str]) -> None:
    """``python -m snap_spark.runtime.spark_path -m MODULE ARGS...``: :func:`fix_paths`,
    then run ``MODULE`` as ``__main__`` with ``ARGS`` as ``python -m`` would.

    Raises:
        SystemExit: ``argv`` does not start with ``-m MODULE`` (status 2).
    """
    import runpy

    if len(argv) < 2 or argv[0] != "-m":
        raise SystemExit(f"usage: python -m {__spec__.name if __spec__ else __name__} "
                         "-m MODULE [ARGS...]")
    fix_paths()
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    run_module(sys.argv[1:])
