"""Build the SparkSession snap-spark runs on, and detect which Delta backend it has."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: ``conf/spark-defaults.conf`` of this checkout (absent when installed as a wheel).
DEFAULT_SPARK_CONF = Path(__file__).resolve().parent.parent / "conf" / "spark-defaults.conf"


def read_spark_conf(path: Path | None = None) -> dict[str, str]:
    """Parse a ``spark-defaults.conf`` style file: ``key  value`` lines, ``#`` comments."""
    conf_path = path or DEFAULT_SPARK_CONF
    settings: dict[str, str] = {}
    if not conf_path.exists():
        return settings
    for line in conf_path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        settings[key.strip()] = value.strip()
    return settings


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and bind to loopback by default."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def build_session(
    app_name: str = "snap-spark",
    master: str | None = None,
    extra_conf: dict[str, str] | None = None,
    conf_file: Path | None = None,
) -> SparkSession:
    """Get or create the SparkSession with snap-spark's defaults.

    ``master`` defaults to ``local[*]`` unless spark-submit already set one. Settings come
    from ``conf/spark-defaults.conf`` then ``extra_conf`` (later wins).

    Examples:
        >>> spark = build_session(master="local[2]")  # doctest: +SKIP
        >>> spark.conf.get("spark.sql.session.timeZone")  # doctest: +SKIP
        'UTC'
    """
    prepare_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    settings = read_spark_conf(conf_file)
    already = _submitted_settings()
    settings = {k: v for k, v in settings.items() if k not in already}  # spark-submit wins
    settings.update(extra_conf or {})
    settings["spark.sql.session.timeZone"] = "UTC"  # tables and verdicts assume UTC
    for key, value in settings.items():
        builder = builder.config(key, value)
    if master is not None:
        builder = builder.master(master)
    elif "spark.master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", "") and not _submitted():
        builder = builder.master("local[*]")
    return builder.getOrCreate()


def _submitted_settings() -> set[str]:
    """Keys spark-submit (or a cluster's defaults) already set for this driver."""
    if not _submitted():
        return set()
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, starts nothing
    jvm = SparkContext._jvm
    if jvm is None:
        return set()
    return {entry._1() for entry in jvm.org.apache.spark.SparkConf(True).getAll()}


def _submitted() -> bool:
    """True when running under spark-submit (it sets ``spark.master`` for the JVM)."""
    return "SPARK_SUBMIT" in os.environ or "PYSPARK_GATEWAY_PORT" in os.environ


def has_delta_spark(spark: SparkSession) -> bool:
    """True when Delta Lake's session extension is loaded (production clusters)."""
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    return "io.delta.sql.DeltaSparkSessionExtension" in extensions
