"""Build the SparkSession snap-spark runs on.

Delta Lake's JARs come from the cache ``make setup`` fills (:mod:`snap_spark.runtime.maven_jars`):
:func:`build_session` loads them with Delta's session extension and catalog when they are
there, and :data:`snap_spark.lake.LAKE_BACKEND_CONF` tells :func:`snap_spark.lake.get_lake`
which backend to use on that session. Spark's Kafka connector comes from the same cache
module and joins ``spark.jars`` likewise.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from snap_spark.runtime import jvm_archive
from snap_spark.runtime.scope import local_master, local_parallelism, runtime_on, switched_off

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

#: The Spark settings snap-spark's own sessions start from: package data
#: (``snap_spark/conf/spark-defaults.conf``; ``conf/`` of a checkout links to it).
DEFAULT_SPARK_CONF = Path(__file__).resolve().parents[1] / "conf" / "spark-defaults.conf"

#: JVM options for the driver of a short job (defined, and explained, in
#: :mod:`snap_spark.runtime.jvm_archive`, which adds the class archive to them).
DRIVER_JVM_FLAGS = jvm_archive.DRIVER_JVM_FLAGS
#: The Spark setting that carries them to a driver JVM about to start.
DRIVER_JAVA_OPTIONS_CONF = "spark.driver.extraJavaOptions"

#: The Spark setting naming the module Python workers are forked from (``pyspark.daemon``
#: by default), and snap-spark's: the same daemon, with PySpark imported from its installed
#: folder instead of Spark's bundled zips (:mod:`snap_spark.runtime.spark_path`): tiny jobs on
#: a warm session run markedly faster (docs/speed.md, *Figures behind the code*).
WORKER_DAEMON_CONF = "spark.python.daemon.module"
WORKER_DAEMON_MODULE = "snap_spark.runtime.worker_daemon"


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
    local master (not a cluster's: :func:`snap_spark.runtime.scope.local_master`),
    unless the settings name its Java options or the runtime is switched off
    (:data:`snap_spark.runtime.scope.RUNTIME_ENV`).

    A SparkContext that runs already and that this function did not start (a notebook's,
    a shared cluster's) is not changed: the result is a new session of it, holding these
    settings where a running context takes them (:func:`_guest_session`); none of the
    runtime's pieces reaches it. A context this function started is returned again, its
    run-time settings set from these.

    ``delta`` loads Delta Lake (its JARs, session extension and catalog): ``None`` (default)
    when the JARs are at hand, ``True`` always (an error when they are not), ``False``
    never. The JARs are at hand when ``make setup`` cached them
    (``snap_spark.runtime.maven_jars.DELTA.available()``), or, under spark-submit (whose
    driver JVM runs before this code), when they are on its classpath (``spark-submit
    --jars``, a cluster's own Delta). Settings that already name Delta's extension are left
    as they are. Which backend the session then uses is :func:`snap_spark.lake.get_lake`'s
    choice (``spark.snap.lake.backend``); it refuses delta-spark on a session without Delta.

    ``kafka`` puts the Kafka connector's cached JARs (``snap_spark.runtime.maven_jars.KAFKA``) on
    ``spark.jars`` the same way: ``None`` when cached, ``True`` always (an error when they
    are not), ``False`` never. A driver JVM that already runs (spark-submit's) gets nothing
    added: give it ``--jars``; :func:`snap_spark.runtime.maven_jars.require_kafka_connector` tells a
    job whether the connector is there.

    Raises:
        snap_spark.runtime.maven_jars.DeltaJarsError: ``delta`` is ``True`` and Delta's JARs are not
            available.
        snap_spark.runtime.maven_jars.KafkaJarsError: ``kafka`` is ``True`` and the connector's JARs
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
    return _plan(app_name, master, extra_conf, conf_file, delta=delta, kafka=kafka).start()


def deferred_session(
    app_name: str = "snap-spark",
    master: str | None = None,
    extra_conf: dict[str, str] | None = None,
    *,
    reads_kafka: bool = False,
) -> SparkSession:
    """The session of a job: :func:`build_session`'s, started only once the job needs Spark,
    with the JARs the job needs only.

    A job on a local master whose work all runs on the driver (a small input: every step
    has a driver path below its threshold) never needs Spark's scheduler, and starting it
    (the JVM's SparkContext and SQL session) costs more CPU and time than such a run's whole
    work (docs/speed.md, *Figures behind the code*). So a job gets a :class:`DeferredSession`,
    which answers the settings (``spark.conf.get``), the master and its parallelism from
    what the session is about to be built with, and starts the real session (exactly as
    :func:`build_session` would) the first time anything else is asked of it. Nothing a job
    computes depends on when that happens.

    The real session starts at once (this returns it) when the master is not local, when
    a Spark session already runs in this process, when settings may come from where this
    module does not read them (``PYSPARK_SUBMIT_ARGS``, a ``spark-defaults.conf`` in
    ``$SPARK_CONF_DIR``), or when :data:`DEFER_ENV` is ``0``.

    Of the cached JAR sets, the session loads those
    :func:`snap_spark.runtime.maven_jars.job_jar_sets` names, as ``snap-spark submit`` gives
    them: Delta unless the lake's backend is delta-rs, the Kafka connector only when
    ``reads_kafka`` (and then as ``build_session(kafka=None)`` does: when cached; the job's
    :func:`~snap_spark.runtime.maven_jars.require_kafka_connector` says so in one line
    otherwise).
    """
    plan = _plan(app_name, master, extra_conf, None, delta=None,
                 kafka=None if reads_kafka else False, delta_by_backend=True)
    if not plan.deferrable():
        return plan.start()
    # a stand-in with the session's interface: every attribute it does not answer itself
    # is the real session's (DeferredSession.__getattr__)
    return cast("SparkSession", DeferredSession(plan))


def _plan(app_name: str, master: str | None, extra_conf: dict[str, str] | None,
          conf_file: Path | None, *, delta: bool | None, kafka: bool | None,
          delta_by_backend: bool = False) -> _SessionPlan:
    """The settings and master :func:`build_session` starts a session with; with
    ``delta_by_backend`` (a job's session), no Delta (``delta`` ``None`` taken as ``False``)
    when the settings name the delta-rs backend."""
    prepare_environment()
    settings = read_spark_conf(conf_file)
    already = _submitted_settings()
    settings = {k: v for k, v in settings.items() if k not in already}  # spark-submit wins
    settings.update(extra_conf or {})
    settings["spark.sql.session.timeZone"] = "UTC"  # tables and verdicts assume UTC
    on = runtime_on()  # the runtime's speed-ups (snap_spark.runtime.scope)
    if on and DRIVER_JAVA_OPTIONS_CONF not in settings \
            and DRIVER_JAVA_OPTIONS_CONF not in already:
        flags = jvm_archive.driver_jvm_flags(local_master(
            master if master is not None else already.get("spark.master")))
        if flags:
            settings[DRIVER_JAVA_OPTIONS_CONF] = flags  # if it starts now
    if delta is None and delta_by_backend:
        from snap_spark.lake import LAKE_BACKEND_CONF
        from snap_spark.runtime.maven_jars import job_jar_sets

        backend = settings.get(LAKE_BACKEND_CONF, already.get(LAKE_BACKEND_CONF))
        if "delta" not in job_jar_sets(backend, reads_kafka=False):
            delta = False
    settings.update(_delta_settings(settings, already, delta))
    settings.update(_kafka_settings(settings, kafka))
    local_workers = on and _local_workers_import_snap_spark(master or already.get("spark.master"))
    if WORKER_DAEMON_CONF not in settings and WORKER_DAEMON_CONF not in already \
            and local_workers:
        settings[WORKER_DAEMON_CONF] = WORKER_DAEMON_MODULE
    if master is None and "spark.master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", "") \
            and not _submitted():
        master = "local[*]"
    return _SessionPlan(app_name, settings, already, master, local_workers)


@dataclass(frozen=True)
class _SessionPlan:
    """What a session is built with: ``settings`` given to the builder, ``submitted`` those
    spark-submit already gave the driver, ``master`` (``None``: spark-submit's)."""

    app_name: str
    settings: dict[str, str]
    submitted: dict[str, str]
    master: str | None
    local_workers: bool

    def start(self) -> SparkSession:
        """Get or create the session (see :func:`build_session`): the running one when
        snap-spark built it, a new session of a context someone else started
        (:func:`_guest_session`), or a new one."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        running = SparkContext._active_spark_context
        if running is not None and running not in _BUILT:
            return _guest_session(running, self.settings)
        builder = SparkSession.builder.appName(self.app_name)
        for key, value in self.settings.items():
            builder = builder.config(key, value)
        if self.master is not None:
            builder = builder.master(self.master)
        spark = builder.getOrCreate()
        _BUILT.add(spark.sparkContext)
        if self.local_workers:
            # the launcher of snap_spark.runtime.preinit as the Python Spark starts (a
            # stream's start)
            from snap_spark.runtime import preinit

            preinit.adopt(spark.sparkContext)
        return spark

    def effective_master(self) -> str:
        """The master the session will have."""
        return self.master or self.submitted.get("spark.master", "")

    def deferrable(self) -> bool:
        """Whether :func:`deferred_session` may wait (its docstring says when not)."""
        from pyspark import SparkContext

        if switched_off(DEFER_ENV):
            return False
        if local_parallelism(self.effective_master()) is None:
            return False
        if SparkContext._active_spark_context is not None:
            return False
        if os.environ.get("PYSPARK_SUBMIT_ARGS"):
            return False
        conf_dir = os.environ.get("SPARK_CONF_DIR") or (
            os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME")
            else None)
        return not (conf_dir and not _submitted()
                    and os.path.exists(os.path.join(conf_dir, "spark-defaults.conf")))

    def view(self) -> dict[str, str]:
        """The settings the session will hold, as ``spark.conf.get`` gives them."""
        view = {**self.submitted, **self.settings, "spark.app.name": self.app_name}
        if self.master is not None:
            view["spark.master"] = self.master
        return view


#: ``0`` (or ``off``) makes :func:`deferred_session` start the session at once.
DEFER_ENV: Final = "SNAP_SPARK_DEFER_SESSION"
_UNSET: Final = object()

#: The SparkContexts :meth:`_SessionPlan.start` created in this process: the only ones
#: whose settings it changes, and the only ones the runtime acts on.
_BUILT: weakref.WeakSet[SparkContext] = weakref.WeakSet()


def built_here(spark: SparkSession) -> bool:
    """Whether snap-spark's session builder started ``spark``'s SparkContext (a
    :class:`DeferredSession` is started by asking)."""
    real = spark.session() if isinstance(spark, DeferredSession) else spark
    return real.sparkContext in _BUILT


def _guest_session(running: SparkContext, settings: dict[str, str]) -> SparkSession:
    """A session of its own on a SparkContext snap-spark did not start (a notebook's, a
    shared cluster's): a new session of it (``newSession``: its own SQL settings, the same
    context, JARs and extensions), given those of ``settings`` that a running context takes
    at run time (UTC, the lake's backend, ...). The context and its other sessions are left
    as they are: no JVM flag, worker daemon or launcher of the runtime reaches them, and
    settings a running context cannot take (JARs, extensions) stay what they are."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession() or SparkSession(running)
    session = active.newSession()
    for key, value in settings.items():
        try:
            session.conf.set(key, value)
        except Exception:
            continue
    return session


class DeferredSession:
    """A job's session before Spark starts (:func:`deferred_session`).

    ``conf.get`` answers from the settings the session will be built with, ``conf.set``
    is kept and applied once it starts, ``sparkContext`` answers ``master``,
    ``defaultParallelism`` and ``setLogLevel``; anything else starts the session and is
    the real session's (or context's). :meth:`when_started` adds a step to run on the real
    session as it starts; :meth:`stop` stops it if it ever started.

    Examples:
        A deferred session of the tests' own master answers without starting Spark:

        >>> deferred = DeferredSession(_plan("doc", "local[2]", {"spark.x": "1"}, None,
        ...                                  delta=False, kafka=False))
        >>> deferred.conf.get("spark.x"), deferred.conf.get("spark.y", "none")
        ('1', 'none')
        >>> deferred.sparkContext.defaultParallelism, deferred.started
        (2, False)
    """

    def __init__(self, plan: _SessionPlan) -> None:
        self._plan = plan
        self._view = plan.view()
        self._session: SparkSession | None = None
        self._sets: list[tuple[str, str]] = []
        self._steps: list[Callable[[SparkSession], None]] = []
        self._starting = threading.RLock()
        self.conf = _DeferredConf(self)
        self.sparkContext = _DeferredContext(self)

    @property
    def started(self) -> bool:
        """Whether the real session runs."""
        return self._session is not None

    def session(self) -> SparkSession:
        """The real session, started now if it was not yet (by one thread: another that
        asks meanwhile, such as the batch job's worker warm-up, waits for it)."""
        with self._starting:
            if self._session is None:
                session = self._plan.start()
                for key, value in self._sets:
                    session.conf.set(key, value)
                for step in self._steps:
                    step(session)
                self._session = session
            return self._session

    def when_started(self, step: Callable[[SparkSession], None]) -> None:
        """Run ``step`` on the real session when it starts (now, if it runs)."""
        with self._starting:
            session = self._session
            if session is None:
                self._steps.append(step)
                return
        step(session)

    def stop(self) -> None:
        """Stop the real session, if it started."""
        if self._session is not None:
            self._session.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session(), name)


def when_started(spark: SparkSession, step: Callable[[SparkSession], None]) -> None:
    """Run ``step`` on ``spark`` now, or, for a :class:`DeferredSession`, once it starts."""
    if isinstance(spark, DeferredSession):
        spark.when_started(step)
    else:
        step(spark)


class _DeferredConf:
    """``spark.conf`` of a :class:`DeferredSession`."""

    def __init__(self, owner: DeferredSession) -> None:
        self._owner = owner

    def get(self, key: str, default: Any = _UNSET) -> Any:
        owner = self._owner
        if owner._session is None:
            if key in owner._view:
                return owner._view[key]
            if default is not _UNSET:
                return default
        real = owner.session().conf
        return real.get(key) if default is _UNSET else real.get(key, default)

    def set(self, key: str, value: Any) -> None:
        owner = self._owner
        with owner._starting:
            session = owner._session
            if session is None:
                owner._view[key] = str(value)
                owner._sets.append((key, str(value)))
                return
        session.conf.set(key, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner.session().conf, name)


class _DeferredContext:
    """``spark.sparkContext`` of a :class:`DeferredSession`."""

    def __init__(self, owner: DeferredSession) -> None:
        self._owner = owner

    @property
    def master(self) -> str:
        if self._owner._session is not None:
            return str(self._owner._session.sparkContext.master)
        return self._owner._plan.effective_master()

    @property
    def defaultParallelism(self) -> int:
        owner = self._owner
        if owner._session is not None:
            return int(owner._session.sparkContext.defaultParallelism)
        configured = owner._view.get("spark.default.parallelism")
        if configured is not None:
            return int(configured)
        return local_parallelism(owner._plan.effective_master()) or 1

    def setLogLevel(self, level: str) -> None:
        self._owner.when_started(lambda session: session.sparkContext.setLogLevel(level))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner.session().sparkContext, name)


def _local_workers_import_snap_spark(master: str | None) -> bool:
    """True when the session's Python workers can start :data:`WORKER_DAEMON_MODULE`: a
    local master (``None``: the ``local[*]`` default), workers running this interpreter,
    and ``snap_spark`` importable by it from the same files (links followed), without this
    process's first path entry (the script's folder). On a cluster the executors'
    environment is unknown here, and Spark's own daemon stays.

    Examples:
        >>> _local_workers_import_snap_spark("spark://127.0.0.1:7077")
        False
    """
    import importlib.machinery
    import importlib.util

    if local_parallelism(master) is None:
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
            # the same file, whichever of its paths each finds: in a folder that links a
            # checkout's files, the driver imports from the checkout (Python resolves a
            # linked script's folder) and the workers through the link
            return spec.origin is not None and (os.path.realpath(spec.origin)
                                                == os.path.realpath(here.origin))
    return False


def _delta_settings(
    settings: dict[str, str], submitted: dict[str, str], delta: bool | None
) -> dict[str, str]:
    """The settings that load Delta Lake into the session about to start (none to skip it).

    ``submitted`` holds what spark-submit already set for its driver JVM. Once the driver JVM
    runs (spark-submit's, or an earlier session's in this process), JARs can no longer join
    its classpath, so Delta is loaded only when its classes are already on it.
    """
    from snap_spark.lake import DELTA_CATALOG, DELTA_EXTENSION, LAKE_BACKEND_CONF
    from snap_spark.runtime.maven_jars import DELTA, DeltaJarsError

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
            "--jars $(python -m snap_spark.runtime.maven_jars jars delta)"
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
                "(or python -m snap_spark.runtime.maven_jars fetch delta) with access to "
                "Maven Central"
            )
        return {}
    return {**loaded, "spark.jars": _merged(settings.get("spark.jars"), *jars)}


def _kafka_settings(settings: dict[str, str], kafka: bool | None) -> dict[str, str]:
    """``spark.jars`` with the Kafka connector's cached JARs added (none to skip them)."""
    from snap_spark.runtime.maven_jars import KAFKA, KafkaJarsError

    if kafka is False or _driver_running():  # a running JVM takes no more JARs
        return {}
    jars = KAFKA.available()
    if jars is None:
        if kafka:
            raise KafkaJarsError(
                f"the Kafka connector's JARs are not cached in {KAFKA.cache_dir()}: run "
                "`make setup` (or python -m snap_spark.runtime.maven_jars fetch kafka) with access "
                "to Maven Central"
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
    from snap_spark.runtime.maven_jars import jvm_has_class

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


def jvm_has_class(name: str, spark: SparkSession | None = None) -> bool:
    """:func:`snap_spark.runtime.maven_jars.jvm_has_class` (kept here for callers of this
    module)."""
    from snap_spark.runtime.maven_jars import jvm_has_class as has_class

    return has_class(name, spark)
