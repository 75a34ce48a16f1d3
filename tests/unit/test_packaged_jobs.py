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
from snap_spark import jobs
from snap_spark.runtime import session, submit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(snap_spark.__file__).resolve().parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snap_spark.jobs", *args],
                          capture_output=True, text=True, timeout=60)


def test_path_prints_a_packaged_file_for_every_job() -> None:
    listed = run("list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == ["audit", "ingest_nostr", "rebuild_tasks", "stream_nostr",
                     "stream_verify", "verify_messages"]
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
    """Every job file is a thin entry point: it fixes its process's path before PySpark
    loads (``snap_spark.runtime.spark_path.fix_paths``), imports one ``main`` from
    snap_spark and exits with what it returns (under ``if __name__ == "__main__"``)."""
    tree = ast.parse(jobs.job_path(name).read_text(encoding="utf-8"))
    imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert [(i.module or "").split(".")[0] for i in imports] == ["snap_spark", "snap_spark"]
    assert imports[0].module == "snap_spark.runtime.spark_path"
    assert [alias.name for i in imports for alias in i.names] == ["fix_paths", "main"]
    calls = [ast.unparse(node) for node in tree.body if isinstance(node, ast.Expr)
             and isinstance(node.value, ast.Call)]
    assert calls == ["fix_paths()"]
    assert tree.body.index(imports[0]) < [ast.unparse(n) for n in tree.body].index(
        "fix_paths()") < tree.body.index(imports[1])
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


def test_the_makefile_gives_its_jobs_the_driver_flags_the_package_names() -> None:
    """``make run`` and the other spark-submit targets pass the same short-job JVM flags and
    class archive as ``snap-spark submit`` and the embedded session
    (:func:`snap_spark.runtime.jvm_archive.driver_jvm_flags`)."""
    import subprocess

    from snap_spark.runtime.jvm_archive import driver_jvm_flags

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    printed = subprocess.run(["make", "-s", "--no-print-directory", "print-driver-java-options"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
    flags = driver_jvm_flags()
    assert flags.startswith(session.DRIVER_JVM_FLAGS)
    assert printed.strip() == "-Dlog4j2.configurationFile=conf/log4j2.properties " + flags
    assert makefile.count("--driver-java-options '$(DRIVER_JAVA_OPTIONS)'") == 5
    assert "--driver-java-options '-D" not in makefile


def test_make_stream_gives_spark_submit_the_jar_sets_the_job_uses() -> None:
    """``make stream`` reads a landing folder: it passes the JAR sets
    :func:`snap_spark.runtime.maven_jars.job_jar_sets` names for it (Delta's on the default
    backend, no Kafka connector), as ``snap-spark submit`` would."""
    import shlex

    from snap_spark.runtime.maven_jars import DELTA, KAFKA, job_jar_sets

    assert job_jar_sets(None, reads_kafka=False) == ["delta"]
    planned = subprocess.run(["make", "-n", "-s", "--no-print-directory", "stream"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    words = shlex.split(planned.replace("\\\n", " "))
    assert "jobs/stream_verify.py" in words
    jars = set(words[words.index("--jars") + 1].split(","))
    assert DELTA.available() and KAFKA.available()  # make setup cached both
    assert jars == set(DELTA.available())
