"""The jobs ship inside the package (``snap_spark/jobs``), with the Spark and logging
defaults as package data (``snap_spark/conf``); ``python -m snap_spark.jobs`` says where
they are, and the checkout's ``jobs/`` and ``conf/`` show the same files."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import snap_spark
from snap_spark import jobs, session, submit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(snap_spark.__file__).resolve().parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snap_spark.jobs", *args],
                          capture_output=True, text=True, timeout=60)


def test_path_prints_a_packaged_file_for_every_job() -> None:
    listed = run("list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == ["audit", "ingest_nostr", "rebuild_tasks", "stream_verify",
                     "verify_messages"]
    for name in names:
        done = run("path", name)
        assert done.returncode == 0, done.stderr
        path = Path(done.stdout.strip())
        assert path.is_absolute() and path.is_file()
        assert path.is_relative_to(PACKAGE / "jobs") and path.name == f"{name}.py"


def test_an_unknown_job_is_a_usage_error_naming_the_known_ones() -> None:
    done = run("path", "verify_everything")
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown job 'verify_everything'" in done.stderr
    assert "verify_messages" in done.stderr


@pytest.mark.parametrize("name", jobs.names())
def test_each_job_calls_a_main_of_the_package_and_exits_with_its_status(name: str) -> None:
    """Every job file is a thin entry point: it imports one ``main`` from snap_spark and
    exits with what it returns (under ``if __name__ == "__main__"``)."""
    tree = ast.parse(jobs.job_path(name).read_text(encoding="utf-8"))
    imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert [(i.module or "").split(".")[0] for i in imports] == ["snap_spark"]
    assert [alias.name for i in imports for alias in i.names] == ["main"]
    guard = tree.body[-1]
    assert isinstance(guard, ast.If) and "sys.exit(main())" in ast.unparse(guard)
    assert jobs.summary(name), "the first docstring line says what it does"


@pytest.mark.parametrize("name", jobs.names())
def test_a_packaged_job_answers_help_without_a_checkout(name: str, tmp_path: Path) -> None:
    """Run from a folder outside the checkout with only the package importable: the job's
    ``--help`` works (the file needs nothing of the checkout beside it)."""
    done = subprocess.run([sys.executable, str(jobs.job_path(name)), "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:")


def test_the_checkout_shows_the_packaged_jobs_and_defaults() -> None:
    assert (ROOT / "jobs").resolve() == PACKAGE / "jobs"
    for name in ("spark-defaults.conf", "log4j2.properties"):
        assert (ROOT / "conf" / name).resolve() == PACKAGE / "conf" / name
    assert session.DEFAULT_SPARK_CONF.is_file() and submit.LOG4J2_CONF.is_file()
    assert session.read_spark_conf()["spark.sql.session.timeZone"] == "UTC"


@pytest.mark.slow
def test_the_wheel_holds_the_jobs_the_defaults_and_the_licence(tmp_path: Path) -> None:
    """Build the wheel as pip does (an isolated build with the setuptools pyproject.toml
    asks for, fetched from the package index) from a copy of the sources, and look inside:
    the jobs, the conf defaults, the licence; none of the checkout's own files."""
    import shutil
    import zipfile

    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "snap_spark", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                            "--wheel-dir", str(tmp_path / "dist"), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("snap_spark-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in jobs.names():
        assert f"snap_spark/jobs/{name}.py" in names
    assert {"snap_spark/jobs/__init__.py", "snap_spark/jobs/__main__.py",
            "snap_spark/conf/spark-defaults.conf", "snap_spark/conf/log4j2.properties",
            "snap_spark/py.typed"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)[-8:]
    assert not any(n.startswith(("jobs/", "conf/", "tests/", "native/")) for n in names)
