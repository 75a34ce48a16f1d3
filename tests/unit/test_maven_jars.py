"""The shared Maven JAR cache: coordinates, stand-in versions, the JAR list spark-submit
gets, and the command lines ``make`` calls (no network: caches are written by hand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from snap_spark.runtime import maven_jars

ROOT = Path(__file__).resolve().parents[2]


def run_module(module: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**os.environ, **env},
                          check=False)


def write_cache(folder: Path, jar_set: maven_jars.JarSet, names: list[str],
                substituted: dict[str, str] | None = None) -> list[str]:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"PK")
    manifest: dict[str, object] = {"coordinate": jar_set.coordinate(), "jars": names}
    if substituted:
        manifest["substituted"] = substituted
    (folder / maven_jars.MANIFEST_NAME).write_text(json.dumps(manifest), encoding="utf-8")
    return [str(folder / name) for name in names]


def test_each_set_follows_its_installed_package() -> None:
    from importlib.metadata import version

    assert maven_jars.KAFKA.coordinate() == (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version('pyspark')}")
    artifact = maven_jars.delta_artifact(version("delta-spark"), version("pyspark"))
    assert maven_jars.JAR_SETS["delta"].coordinate() == f"{artifact}:{version('delta-spark')}"
    pinned = maven_jars.JarSet("x", "X", ("g:a", "g:b:1.2"), lambda: "9.0", "X_ENV", "x", "g_a-")
    assert pinned.coordinate() == "g:a:9.0,g:b:1.2"  # an artifact with its own version keeps it


def test_a_stand_in_is_taken_only_for_its_own_missing_version() -> None:
    (token,) = maven_jars.JAR_SETS["kafka"].substitutes
    missing = ("unresolved dependency: "
               "org.apache.spark#spark-token-provider-kafka-0-10_2.13;4.0.1: not found")
    assert token.version("4.0.1") == "4.0.0"
    assert token.missing("4.0.1", missing)
    assert not token.missing("4.0.2", missing)
    assert not token.missing("4.0.1", missing.replace("token-provider", "sql"))
    assert not token.missing("4.0.1", "UnknownHostException: repo1.maven.org")


def test_submit_jars_lists_cached_sets_once_each(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    delta, kafka = maven_jars.JAR_SETS["delta"], maven_jars.JAR_SETS["kafka"]
    monkeypatch.setenv(delta.cache_env, str(tmp_path / "d"))
    monkeypatch.setenv(kafka.cache_env, str(tmp_path / "k"))
    assert maven_jars.submit_jars() == []  # nothing cached: nothing to give
    kafka_list = write_cache(tmp_path / "k", kafka, ["ivy/jars/org.apache.spark_spark-sql-kafka"
                                                     "-0-10_2.13-x.jar", "ivy/jars/shared.jar"],
                             {"org.apache.spark:spark-token-provider-kafka-0-10_2.13": "4.0.0"})
    assert maven_jars.submit_jars() == kafka_list
    delta_list = write_cache(tmp_path / "d", delta, ["ivy/jars/io.delta_delta-spark_2.13-x.jar",
                                                     "ivy/jars/shared.jar"])
    assert maven_jars.submit_jars() == [*delta_list, kafka_list[0]]  # shared.jar once
    assert maven_jars.submit_jars(["kafka"]) == kafka_list
    assert maven_jars.KAFKA.available() == kafka_list
    assert maven_jars.substitutions(kafka) == {
        "org.apache.spark:spark-token-provider-kafka-0-10_2.13": "4.0.0"}

    env = {delta.cache_env: str(tmp_path / "d"), kafka.cache_env: str(tmp_path / "k")}
    listed = run_module("snap_spark.runtime.maven_jars", "jars", "delta", "kafka", env=env)
    assert listed.returncode == 0
    assert listed.stdout.strip() == ",".join([*delta_list, kafka_list[0]])
    status = run_module("snap_spark.runtime.maven_jars", "status", "kafka", env=env)
    assert status.returncode == 0 and "2 cached" in status.stdout
    assert "spark-token-provider-kafka-0-10_2.13 at 4.0.0" in status.stdout
    assert run_module("snap_spark.runtime.maven_jars", "jars", "kafka", env=env).stdout.strip() == \
        ",".join(kafka_list)
    assert run_module("snap_spark.runtime.maven_jars", "jars", "nope", env=env).returncode == 2

    (tmp_path / "k" / "ivy/jars/shared.jar").unlink()  # a JAR gone: the set is not cached
    assert maven_jars.submit_jars() == delta_list
    missing = run_module("snap_spark.runtime.maven_jars", "status", env=env)
    assert missing.returncode == 1 and "not cached" in missing.stdout


def test_the_kafka_connector_is_cached_for_make() -> None:
    """What ``make setup`` fetched (fails until it ran with access to Maven Central)."""
    jars = maven_jars.KAFKA.available()
    assert jars is not None, f"not cached in {maven_jars.KAFKA.cache_dir()}: run `make setup`"
    names = [Path(jar).name for jar in jars]
    assert any(n.startswith("org.apache.spark_spark-sql-kafka-0-10_2.13-") for n in names)
    assert any(n.startswith("org.apache.kafka_kafka-clients-") for n in names)
    assert any(n.startswith("org.apache.commons_commons-pool2-") for n in names)
    assert any(n.startswith("org.apache.spark_spark-token-provider-kafka-0-10_2.13-")
               for n in names)


def test_make_can_ask_without_starting_spark() -> None:
    """``make`` lists JARs through this module: importing it imports no Spark."""
    code = ("import sys, snap_spark.runtime.maven_jars\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
            "print(bad); sys.exit(1 if bad else 0)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
