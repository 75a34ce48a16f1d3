"""Build the SparkSession snap-spark runs on, and detect which Delta backend it has.

Delta Lake's JARs come from the cache ``make setup`` fills (:mod:`snap_spark.maven_jars`):
:func:`build_session` loads them with Delta's session extension and catalog when they are
there, and :data:`LAKE_BACKEND_CONF` tells :func:`snap_spark.lake.get_lake` which backend to
use on that session. Spark's Kafka connector comes from the same cache module and joins
``spark.jars`` likewise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from snap_spark import jvm_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The Spark settings snap-spark's own sessions start from: package data
#: (``snap_spark/conf/spark-defaults.conf``; ``conf/`` of a checkout links to it).
DEFAULT_SPARK_CONF = Path(__file__).resolve().parent / "conf" / "spark-defaults.conf"

#: Spark setting choosing the Delta backend :func:`snap_spark.lake.get_lake` returns:
#: ``auto`` (default: delta-spark when its extension is loaded, else delta-rs), ``delta-rs``
#: or ``delta-spark`` (an error when the session has no Delta extension).
LAKE_BACKEND_CONF = "spark.snap.lake.backend"
#: Values :data:`LAKE_BACKEND_CONF` accepts.
LAKE_BACKENDS = ("auto", "delta-rs", "delta-spark")

#: Delta Lake's session extension and catalog (what ``configure_spark_with_delta_pip`` and
#: Delta's docs set), loaded together with its JARs.
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


#: JVM options for the driver of a short job (defined, and explained, in
#: :mod:`snap_spark.jvm_archive`, which adds the class archive to them).
DRIVER_JVM_FLAGS = jvm_archive.DRIVER_JVM_FLAGS
#: The Spark setting that carries them to a driver JVM about to start.
DRIVER_JAVA_OPTIONS_CONF = "spark.driver.extraJavaOptions"

#: The Spark setting naming the module Python workers are forked from (``pyspark.daemon``
#: by default), and snap-spark's: the same daemon, with PySpark imported from its installed
#: folder instead of Spark's bundled zips (:mod:`snap_spark.spark_path`). Measured on
#: 2 cores: five tiny jobs on a warm session 3.7 s -> 2.0 s (bench/README.md, session 16).
WORKER_DAEMON_CONF = "spark.python.daemon.module"
WORKER_DAEMON_MODULE = "snap_spark.worker_daemon"


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
    *,
    delta: bool | None = None,
    kafka: bool | None = None,
) -> SparkSession:
    """Get or create the SparkSession with snap-spark's defaults.

    ``master`` defaults to ``local[*]`` unless spark-submit already set one. Settings come
    from ``conf/spark-defaults.conf`` then ``extra_conf`` (later wins). A driver JVM started
    here gets the class archive ``make setup`` built, with :data:`DRIVER_JVM_FLAGS` on a
    local master (not a cluster's: :func:`snap_spark.jvm_archive.short_job_driver`),
    unless the settings name its Java options.

    ``delta`` loads Delta Lake (its JARs, session extension and catalog): ``None`` (default)
    when the JARs are at hand, ``True`` always (an error when they are not), ``False``
    never. The JARs are at hand when ``make setup`` cached them
    (``snap_spark.maven_jars.DELTA.available()``), or, under spark-submit (whose driver JVM runs
    before this code), when they are on its classpath (``spark-submit --jars``, a cluster's
    own Delta). Settings that already name Delta's extension are left as they are. Which
    backend the session then uses is :func:`snap_spark.lake.get_lake`'s choice
    (``spark.snap.lake.backend``); it refuses delta-spark on a session without Delta.

    ``kafka`` puts the Kafka connector's cached JARs (``snap_spark.maven_jars.KAFKA``) on
    ``spark.jars`` the same way: ``None`` when cached, ``True`` always (an error when they
    are not), ``False`` never. A driver JVM that already runs (spark-submit's) gets nothing
    added: give it ``--jars``; :func:`snap_spark.maven_jars.require_kafka_connector` tells a
    job whether the connector is there.

    Raises:
        snap_spark.maven_jars.DeltaJarsError: ``delta`` is ``True`` and Delta's JARs are not
            available.
        snap_spark.maven_jars.KafkaJarsError: ``kafka`` is ``True`` and the connector's JARs
            are not cached (and no driver JVM runs yet).

    Examples:
        A process has one session: a later call returns the running one, its runtime
        settings set again from these. So the examples look at the session the tests
        built (``spark``, built like this) rather than build one::

            spark = build_session(master="local[2]")

        It runs in UTC, and loads Delta Lake from the JARs ``make setup`` cached:

        >>> spark.conf.get("spark.sql.session.timeZone")
        'UTC'
        >>> spark.conf.get("spark.sql.extensions")
        'io.delta.sql.DeltaSparkSessionExtension'

        Its driver JVM started with the short-job flags (:data:`DRIVER_JVM_FLAGS`):

        >>> runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        >>> set(DRIVER_JVM_FLAGS.split()) <= set(runtime.getInputArguments())
        True
    """
    prepare_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    settings = read_spark_conf(conf_file)
    already = _submitted_settings()
    settings = {k: v for k, v in settings.items() if k not in already}  # spark-submit wins
    settings.update(extra_conf or {})
    settings["spark.sql.session.timeZone"] = "UTC"  # tables and verdicts assume UTC
    if DRIVER_JAVA_OPTIONS_CONF not in settings and DRIVER_JAVA_OPTIONS_CONF not in already:
        flags = jvm_archive.driver_jvm_flags(jvm_archive.short_job_driver(
            master if master is not None else already.get("spark.master")))
        if flags:
            settings[DRIVER_JAVA_OPTIONS_CONF] = flags  # if it starts now
    settings.update(_delta_settings(settings, already, delta))
    settings.update(_kafka_settings(settings, kafka))
    local_workers = _local_workers_import_snap_spark(master or already.get("spark.master"))
    if WORKER_DAEMON_CONF not in settings and WORKER_DAEMON_CONF not in already \
            and local_workers:
        settings[WORKER_DAEMON_CONF] = WORKER_DAEMON_MODULE
    for key, value in settings.items():
        builder = builder.config(key, value)
    if master is not None:
        builder = builder.master(master)
    elif "spark.master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", "") and not _submitted():
        builder = builder.master("local[*]")
    spark = builder.getOrCreate()
    if local_workers:
        # the launcher of snap_spark.preinit as the Python Spark starts (a stream's start)
        from snap_spark import preinit

        preinit.adopt(spark.sparkContext)
    return spark


def _local_workers_import_snap_spark(master: str | None) -> bool:
    """True when the session's Python workers can start :data:`WORKER_DAEMON_MODULE`: a
    local master (``None``: the ``local[*]`` default), workers running this interpreter,
    and ``snap_spark`` importable by it, from the same folder, without this process's
    first path entry (the script's folder). On a cluster the executors' environment is
    unknown here, and Spark's own daemon stays.

    Examples:
        >>> _local_workers_import_snap_spark("spark://127.0.0.1:7077")
        False
    """
    import importlib.machinery
    import importlib.util

    if master is not None and not (master == "local" or master.startswith("local[")):
        return False
    worker_python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    if os.path.abspath(worker_python) != os.path.abspath(sys.executable):
        return False
    here = importlib.util.find_spec("snap_spark")
    if here is None or here.origin is None:
        return False
    worker_path = [os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep),
                   *sys.path[1:]]
    for finder in sys.meta_path:  # an editable install's finder, then the path's
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        path_finder = finder is importlib.machinery.PathFinder
        spec = find("snap_spark", worker_path if path_finder else None)
        if spec is not None:
            return bool(spec.origin == here.origin)
    return False


def _delta_settings(
    settings: dict[str, str], submitted: dict[str, str], delta: bool | None
) -> dict[str, str]:
    """The settings that load Delta Lake into the session about to start (none to skip it).

    ``submitted`` holds what spark-submit already set for its driver JVM. Once the driver JVM
    runs (spark-submit's, or an earlier session's in this process), JARs can no longer join
    its classpath, so Delta is loaded only when its classes are already on it.
    """
    from snap_spark.maven_jars import DELTA, DeltaJarsError

    if delta is False:
        return {}
    required = delta is True
    key = "spark.sql.extensions"
    extensions = _merged(submitted.get(key), settings.get(key))
    if DELTA_EXTENSION in _split(extensions):
        return {}  # the caller or the cluster loads Delta its own way
    loaded = {
        "spark.sql.extensions": _merged(extensions, DELTA_EXTENSION),
        "spark.sql.catalog.spark_catalog": settings.get(
            "spark.sql.catalog.spark_catalog",
            submitted.get("spark.sql.catalog.spark_catalog", DELTA_CATALOG),
        ),
    }
    if _driver_running():
        if _driver_has_class(DELTA_EXTENSION):
            return loaded
        hint = (
            "Delta's classes are not on the running driver's classpath: give spark-submit "
            "--jars $(python -m snap_spark.maven_jars jars delta)"
        )
        if required:
            raise DeltaJarsError(hint + " (after make setup)")
        backend = settings.get(LAKE_BACKEND_CONF, submitted.get(LAKE_BACKEND_CONF))
        # cached, so probably meant to be used; unless the lake's backend is delta-rs,
        # which `snap-spark submit` gives no Delta JARs on purpose
        if DELTA.available() is not None and backend != "delta-rs":
            print(f"snap-spark: {hint}; this session has no Delta", file=sys.stderr)
        return {}
    jars = DELTA.available()
    if jars is None:
        if required:
            raise DeltaJarsError(
                f"Delta's JARs are not cached in {DELTA.cache_dir()}: run `make setup` "
                "(or python -m snap_spark.maven_jars fetch delta) with access to Maven Central"
            )
        return {}
    return {**loaded, "spark.jars": _merged(settings.get("spark.jars"), *jars)}


def _kafka_settings(settings: dict[str, str], kafka: bool | None) -> dict[str, str]:
    """``spark.jars`` with the Kafka connector's cached JARs added (none to skip them)."""
    from snap_spark.maven_jars import KAFKA, KafkaJarsError

    if kafka is False or _driver_running():  # a running JVM takes no more JARs
        return {}
    jars = KAFKA.available()
    if jars is None:
        if kafka:
            raise KafkaJarsError(
                f"the Kafka connector's JARs are not cached in {KAFKA.cache_dir()}: run "
                "`make setup` (or python -m snap_spark.maven_jars fetch kafka) with access to "
                "Maven Central"
            )
        return {}
    return {"spark.jars": _merged(settings.get("spark.jars"), *jars)}


def _split(value: str | None) -> list[str]:
    """Items of a comma-separated Spark setting."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _merged(*values: str | None) -> str:
    """Comma-separated union of Spark list settings, first occurrence order.

    Examples:
        >>> _merged("a,b", None, "b", "c")
        'a,b,c'
    """
    items: list[str] = []
    for value in values:
        items.extend(item for item in _split(value) if item not in items)
    return ",".join(items)


def _driver_running() -> bool:
    """True when the driver JVM already runs: spark-submit's, or one this process started."""
    from pyspark import SparkContext

    return _submitted() or SparkContext._gateway is not None


def _driver_has_class(name: str) -> bool:
    """True when the running driver JVM (spark-submit's) can load class ``name``."""
    from snap_spark.maven_jars import jvm_has_class

    return jvm_has_class(name)


def _submitted_settings() -> dict[str, str]:
    """Settings spark-submit (or a cluster's defaults) already set for this driver."""
    if not _submitted():
        return {}
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, starts nothing
    jvm = SparkContext._jvm
    if jvm is None:
        return {}
    return {entry._1(): entry._2() for entry in jvm.org.apache.spark.SparkConf(True).getAll()}


def _submitted() -> bool:
    """True when running under spark-submit (it sets ``spark.master`` for the JVM)."""
    return "SPARK_SUBMIT" in os.environ or "PYSPARK_GATEWAY_PORT" in os.environ


def has_delta_spark(spark: SparkSession) -> bool:
    """True when Delta Lake's session extension is loaded (its JARs from the cache, or a
    cluster's).

    Examples:
        >>> has_delta_spark(spark)  # built by build_session after make setup
        True
    """
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    return DELTA_EXTENSION in _split(extensions)


def jvm_has_class(name: str, spark: SparkSession | None = None) -> bool:
    """:func:`snap_spark.maven_jars.jvm_has_class` (kept here for callers of this module)."""
    from snap_spark.maven_jars import jvm_has_class as has_class

    return has_class(name, spark)
