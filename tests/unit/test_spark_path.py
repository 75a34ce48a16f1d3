"""Spark's bundled PySpark zips taken off ``sys.path`` (``snap_spark.runtime.spark_path``), and the
worker daemon ``build_session`` chooses (``snap_spark.runtime.session``)."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from snap_spark.runtime.session import _local_workers_import_snap_spark
from snap_spark.runtime.spark_path import drop_bundled_zips, drop_python_free_jars


def _spark_home(root: Path, bundled_version: str, installed_version: str | None) -> list[str]:
    """A ``sys.path`` like spark-submit's: the two bundled zips first, then a site folder
    holding (or not) installed copies of both packages."""
    lib = root / "python" / "lib"
    lib.mkdir(parents=True)
    entries = []
    for zip_name, package in (("pyspark.zip", "pyspark"), ("py4j-0.10.9.9-src.zip", "py4j")):
        with zipfile.ZipFile(lib / zip_name, "w") as bundle:
            bundle.writestr(f"{package}/__init__.py", "")
            bundle.writestr(f"{package}/version.py", f'__version__ = "{bundled_version}"\n')
        entries.append(str(lib / zip_name))
    site = root / "site-packages"
    site.mkdir()
    if installed_version is not None:
        for package in ("pyspark", "py4j"):
            (site / package).mkdir()
            (site / package / "__init__.py").write_text("")
            (site / package / "version.py").write_text(f'__version__ = "{installed_version}"\n')
    return [*entries, "/usr/lib/python3.11", str(site)]


def test_the_zips_go_when_the_same_versions_are_installed(tmp_path: Path) -> None:
    path = _spark_home(tmp_path, "4.0.1", "4.0.1")
    zips = path[:2]
    assert drop_bundled_zips(path, imported=()) == zips
    assert path == ["/usr/lib/python3.11", str(tmp_path / "site-packages")]


@pytest.mark.parametrize("installed", ["4.0.0", None])
def test_the_zips_stay_without_an_equal_installed_copy(tmp_path: Path,
                                                       installed: str | None) -> None:
    path = _spark_home(tmp_path, "4.0.1", installed)
    before = list(path)
    assert drop_bundled_zips(path, imported=()) == []
    assert path == before


def test_a_package_already_imported_keeps_its_zip(tmp_path: Path) -> None:
    """Two copies of PySpark must never mix in one process."""
    path = _spark_home(tmp_path, "4.0.1", "4.0.1")
    removed = drop_bundled_zips(path, imported={"pyspark"})
    assert [Path(p).name for p in removed] == ["py4j-0.10.9.9-src.zip"]
    assert Path(path[0]).name == "pyspark.zip"


def test_the_installed_pyspark_s_own_zips_match_its_folder() -> None:
    """The real layout of a PyPI PySpark: ``$SPARK_HOME`` is the installed package, and its
    bundled zips hold the same versions as the folders beside them."""
    import py4j  # type: ignore[import-untyped]
    import pyspark

    site = str(Path(pyspark.__file__).parents[1])
    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(str(p) for p in lib.glob("*.zip"))
    assert {Path(z).name for z in zips} >= {"pyspark.zip"}
    assert Path(py4j.__file__).parents[1] == Path(site)
    path = [*zips, site]
    assert sorted(drop_bundled_zips(path, imported=())) == zips
    assert path == [site]


def _jar(path: Path, names: list[str]) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, b"\xca\xfe\xba\xbe")
    return str(path)


def test_spark_s_jar_goes_when_it_holds_no_python(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its cached importers (the archive's and its folders') are forgotten with it:
    ``importlib.invalidate_caches`` re-reads the index of every importer it finds cached."""
    classes = _jar(tmp_path / "spark-core_2.13-4.0.1.jar", ["org/apache/spark/A.class",
                                                            "META-INF/MANIFEST.MF"])
    other = _jar(tmp_path / "delta-spark_2.13-4.0.0.jar", ["io/delta/B.class"])
    cache = {classes: object(), classes + "/org": object(), other: object(),
             str(tmp_path): object()}
    monkeypatch.setattr(sys, "path_importer_cache", dict(cache))
    path = [classes, "/usr/lib/python3.11", other]
    assert drop_python_free_jars(path) == [classes]
    assert path == ["/usr/lib/python3.11", other]
    assert set(sys.path_importer_cache) == {other, str(tmp_path)}


@pytest.mark.parametrize("module", ["pyspark/__init__.py", "x/y.pyc", "native.so"])
def test_a_jar_holding_python_stays(tmp_path: Path, module: str) -> None:
    jar = _jar(tmp_path / "spark-core_2.13-4.0.1.jar", ["org/A.class", module])
    path = [jar]
    assert drop_python_free_jars(path) == []
    assert path == [jar]


def test_an_unreadable_jar_stays(tmp_path: Path) -> None:
    broken = tmp_path / "spark-core_2.13-4.0.1.jar"
    broken.write_bytes(b"not a zip")
    path = [str(broken), str(tmp_path / "spark-core_2.13-9.9.9.jar")]  # the second is absent
    assert drop_python_free_jars(path) == []
    assert len(path) == 2


def test_the_installed_spark_s_own_jar_holds_no_python() -> None:
    """The JAR Spark really puts on its workers' path (``SparkContext.jarOfObject``)."""
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
    assert len(jars) == 1
    path = [str(jars[0])]
    assert drop_python_free_jars(path) == [str(jars[0])]
    assert path == []


def _spark_worker_path() -> tuple[Path, list[str]]:
    """The installed PySpark's folder, and the entries Spark puts first on the
    ``PYTHONPATH`` of the Python processes it starts: its two zips and its JAR."""
    import pyspark

    home = Path(pyspark.__file__).parent
    entries = [*sorted(str(p) for p in (home / "python" / "lib").glob("*.zip")),
               *(str(p) for p in (home / "jars").glob("spark-core_*.jar"))]
    assert len(entries) == 3
    return home, entries


#: Prints where PySpark came from, and the zips and JARs still on the path.
_WHERE_FROM = ("import json, sys, pyspark, pyspark.sql.streaming.stateful_processor; "
               "print(pyspark.__file__); print(json.dumps(sorted(p for p in sys.path "
               "if p.endswith(('.zip', '.jar')) and 'pyspark' in p)))")


@pytest.mark.parametrize("runtime", ["on", "off"])
def test_the_launcher_s_path_fix_runs_a_module_with_pyspark_from_its_folder(
        tmp_path: Path, runtime: str) -> None:
    """How the launcher starts the process that runs a stream's state processor ``init``
    on the driver (``python -m snap_spark.runtime.spark_path -m MODULE``), with what Spark
    gives it: its zips and JAR first on ``PYTHONPATH``. With the runtime switched off, the
    module runs with Spark's path as it was."""
    import os
    import subprocess

    home, entries = _spark_worker_path()
    module = tmp_path / "where_from.py"
    module.write_text(_WHERE_FROM + "; print(sys.argv[1:])\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*entries, str(tmp_path)]),
           "SNAP_SPARK_RUNTIME": runtime}
    done = subprocess.run([sys.executable, "-m", "snap_spark.runtime.spark_path", "-m",
                           "where_from", "--flag"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    if runtime == "on":
        assert done.stdout.splitlines() == [str(home / "__init__.py"), "[]", "['--flag']"]
    else:
        origin, left, args = done.stdout.splitlines()
        assert "pyspark.zip" in origin
        assert json.loads(left) == sorted(entries) and args == "['--flag']"


def test_importing_snap_spark_leaves_the_path_as_it_was() -> None:
    """``import snap_spark`` changes nothing in the process: with Spark's zips and JAR on
    the path, PySpark still comes from the zip."""
    import os
    import subprocess

    _home, entries = _spark_worker_path()
    done = subprocess.run([sys.executable, "-c", "import snap_spark; " + _WHERE_FROM],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(entries)})
    assert done.returncode == 0, done.stderr
    origin, left = done.stdout.splitlines()
    assert "pyspark.zip" in origin
    assert json.loads(left) == sorted(entries)


def test_the_daemon_is_only_chosen_where_the_workers_can_import_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert _local_workers_import_snap_spark("local[2]")
    assert _local_workers_import_snap_spark(None)  # the local[*] default
    assert not _local_workers_import_snap_spark("spark://127.0.0.1:7077")
    assert not _local_workers_import_snap_spark("yarn")
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other/bin/python3")
    assert not _local_workers_import_snap_spark("local[2]")
