"""The Delta set of the JAR cache (:data:`snap_spark.runtime.maven_jars.DELTA`): its manifest, the
command ``make`` calls, and a fetch without network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from snap_spark.runtime.maven_jars import DELTA, MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[2]


def run_module(*args: str, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snap_spark.runtime.maven_jars", *args, "delta"],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, **(env or {})}, check=False)


def write_cache(folder: Path, coordinate: str, names: list[str]) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"PK")
    (folder / MANIFEST_NAME).write_text(
        json.dumps({"coordinate": coordinate, "jars": names}), encoding="utf-8")


def test_coordinate_follows_the_installed_delta_spark_package() -> None:
    from importlib.metadata import version

    spark_line = ".".join(version("pyspark").split(".")[:2])
    delta_line = tuple(int(part) for part in version("delta-spark").split(".")[:2])
    # from Delta 4.1 one build per Spark line (Delta's own configure_spark_with_delta_pip)
    artifact = ("io.delta:delta-spark_2.13" if delta_line < (4, 1)
                else f"io.delta:delta-spark_{spark_line}_2.13")
    assert DELTA.coordinate() == f"{artifact}:{version('delta-spark')}"


def test_available_reads_the_manifest_of_this_version_only(tmp_path: Path) -> None:
    names = ["ivy/jars/io.delta_delta-spark_2.13-x.jar", "ivy/jars/io.delta_delta-storage-x.jar"]
    assert DELTA.available(tmp_path) is None  # nothing fetched
    write_cache(tmp_path, DELTA.coordinate(), names)
    assert DELTA.available(tmp_path) == [str(tmp_path / n) for n in names]
    assert DELTA.fetch(tmp_path) == DELTA.available(tmp_path)  # cached: no JVM

    (tmp_path / names[1]).unlink()  # a JAR gone: fetch again
    assert DELTA.available(tmp_path) is None
    write_cache(tmp_path, DELTA.coordinate("0.0.1"), names)  # another Delta version
    assert DELTA.available(tmp_path) is None
    (tmp_path / MANIFEST_NAME).write_text("{not json", encoding="utf-8")
    assert DELTA.available(tmp_path) is None


def test_make_gets_the_cached_jars_from_the_command_line() -> None:
    """What ``make run`` hands to ``spark-submit --jars`` (fails until ``make setup``)."""
    jars = DELTA.available()
    assert jars is not None, f"Delta's JARs are not cached in {DELTA.cache_dir()}: " \
                             "run `make setup`"
    listed = run_module("jars")
    assert listed.returncode == 0 and listed.stdout.strip() == ",".join(jars)
    status = run_module("status")
    assert status.returncode == 0 and f"{len(jars)} cached" in status.stdout
    empty = {DELTA.cache_env: "/nonexistent/delta-jars"}
    assert run_module("jars", env=empty).stdout.strip() == ""
    missing = run_module("status", env=empty)
    assert missing.returncode == 1 and "make setup" in missing.stdout


@pytest.mark.spark
def test_fetch_without_network_says_so_in_one_line(tmp_path: Path) -> None:
    """``make setup`` offline: resolution fails fast with one clear line, no manifest."""
    offline = {
        DELTA.cache_env: str(tmp_path / "cache"),
        # a JVM whose repositories are unreachable: every request goes to a closed port,
        # and no ~/.m2 of this machine can answer either
        "SPARK_SUBMIT_OPTS": f"-Duser.home={tmp_path} -Dhttps.proxyHost=127.0.0.1 "
                             "-Dhttps.proxyPort=9 -Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=9",
    }
    done = run_module("fetch", env=offline, timeout=300)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("setup: Delta JARs not fetched")
    assert "unresolved dependency" in lines[0] and "delta-rs" in lines[0]
    assert DELTA.available(tmp_path / "cache") is None
