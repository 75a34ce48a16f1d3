"""The driver JVM's class-data-sharing archive (``snap_spark.runtime.jvm_archive``): which flags a
driver gets, what an archive is tied to, and that the archive ``make setup`` built is one
Spark's own JVM maps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from snap_spark.runtime import jvm_archive
from snap_spark.runtime.session import DRIVER_JVM_FLAGS


@pytest.fixture
def fake_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Spark home of two JARs, and the archive's folder in ``tmp_path/archive``."""
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name in ("spark-core_2.13-4.0.1.jar", "scala-library-2.13.16.jar"):
        (home / "jars" / name).write_bytes(b"PK" + name.encode())
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(tmp_path / "archive"))
    return home


def test_flags_name_the_archive_only_when_it_exists(fake_spark: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert jvm_archive.driver_jvm_flags() == DRIVER_JVM_FLAGS
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == fake_spark.parent / "archive"
    path.parent.mkdir()
    path.write_bytes(b"an archive")
    flags = jvm_archive.driver_jvm_flags()
    assert flags.startswith(DRIVER_JVM_FLAGS + " ")
    assert f"-XX:SharedArchiveFile={path}" in flags.split()
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, "0")  # turned off: the short-job flags alone
    assert jvm_archive.driver_jvm_flags() == DRIVER_JVM_FLAGS


def test_an_archive_is_tied_to_spark_s_jars(fake_spark: Path) -> None:
    """A changed, added or removed JAR names another archive (the old one is not used)."""
    first = jvm_archive.fingerprint()
    assert first is not None and len(first) == 16
    assert jvm_archive.fingerprint() == first
    jar = fake_spark / "jars" / "spark-core_2.13-4.0.1.jar"
    jar.write_bytes(b"PK another build")
    second = jvm_archive.fingerprint()
    assert second not in (None, first)
    (fake_spark / "jars" / "delta-spark_2.13-4.0.1.jar").write_bytes(b"PK")
    assert jvm_archive.fingerprint() not in (None, first, second)


def test_no_java_or_no_spark_means_no_archive(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "nowhere"))
    assert jvm_archive.fingerprint() is None and jvm_archive.archive_path() is None
    assert jvm_archive.driver_jvm_flags() == DRIVER_JVM_FLAGS


def test_status_says_what_is_there(fake_spark: Path, capsys: pytest.CaptureFixture[str]
                                   ) -> None:
    assert jvm_archive.main(["status"]) == 1
    assert "absent" in capsys.readouterr().out
    assert jvm_archive.main(["flags"]) == 0
    assert capsys.readouterr().out.strip() == DRIVER_JVM_FLAGS


def _setup_archive() -> Path:
    """The archive ``make setup`` built for this environment (the test fails without it)."""
    path = jvm_archive.archive_path()
    assert path is not None and path.is_file(), (
        f"no JVM class archive at {path}: `make setup` builds it "
        "(python -m snap_spark.runtime.jvm_archive build)")
    return path


@pytest.mark.slow
def test_spark_s_jvm_maps_the_archive_make_setup_built() -> None:
    """``-Xshare:on`` makes a JVM that cannot map the archive (another Java, other JARs, a
    damaged file) fail; with it, Spark's launcher JVM loads its classes from the archive,
    Structured Streaming's too (the training run's stream: here the RocksDB state store's
    provider, which spark-submit is asked to run as a main class and refuses for want of a
    ``main``, after loading it)."""
    path = _setup_archive()
    home = jvm_archive.spark_home()
    assert home is not None
    provider = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_SUBMIT_OPTS": f"-Xshare:on -XX:SharedArchiveFile={path} "
                                f"{DRIVER_JVM_FLAGS} -Xlog:class+load=info"}
    done = subprocess.run([str(home / "bin" / "spark-submit"), "--class", provider,
                           "spark-internal"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    output = done.stdout + done.stderr
    assert f"NoSuchMethodException: {provider}.main" in output, output[-2000:]
    shared = output.count("source: shared objects file (top)")
    assert shared > 1000, output[-2000:]
    assert f"{provider} source: shared objects file (top)" in output, output[-2000:]


def test_the_session_s_driver_jvm_started_with_the_archive(spark: Any) -> None:
    path = _setup_archive()
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert f"-XX:SharedArchiveFile={path}" in set(runtime.getInputArguments())


def test_the_same_spark_through_a_link_has_the_same_archive(fake_spark: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The docs test's workspaces link the checkout's ``.venv``: they must find the same
    archive, not build (and keep) one of their own."""
    direct = jvm_archive.archive_path()
    link = fake_spark.parent / "linked-spark"
    link.symlink_to(fake_spark)
    monkeypatch.setenv("SPARK_HOME", str(link))
    assert jvm_archive.archive_path() == direct


def test_a_shared_folder_keeps_the_newest_archives(tmp_path: Path) -> None:
    """After a build, a folder shared by several Java or Spark installations keeps the new
    archive and the newest other one (each is 100-150 MB)."""
    names = ("spark-driver-new.jsa", "spark-driver-old.jsa", "spark-driver-older.jsa")
    for age, name in enumerate(names):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (1_000_000 - age, 1_000_000 - age))
    (tmp_path / "notes.txt").write_text("not an archive")
    removed = jvm_archive.prune(tmp_path / "spark-driver-older.jsa")  # just built
    assert [p.name for p in removed] == ["spark-driver-old.jsa"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt", "spark-driver-new.jsa", "spark-driver-older.jsa"]
