"""The JAR cache of snap-spark: JARs from Maven Central, resolved once by Spark's own resolver
into a cache, then loaded from it; one entry (a :class:`JarSet`) per package set, and the
check a job runs before it reads Kafka.

The pip PySpark ships neither Delta Lake nor Spark's Kafka connector. ``make setup`` runs
``python -m snap_spark.runtime.maven_jars fetch delta kafka``, which resolves each set once:
a child Python process starts Spark with ``spark.jars.packages`` (the set's Maven
coordinates) and ``spark.jars.ivy`` pointing into the set's cache folder, and a manifest
(``jars.json``) records the JARs it resolved. Afterwards :func:`available` lists those local
files, :func:`snap_spark.runtime.session.build_session` puts them on ``spark.jars``, and
:func:`submit_jars` (``python -m snap_spark.runtime.maven_jars jars delta kafka``) gives
them to ``spark-submit --jars``, so no run resolves anything over the network.

The sets (:data:`JAR_SETS`):

- :data:`DELTA` (``delta``): ``io.delta:delta-spark_2.13:<version of the installed
  delta-spark package>`` (the delta-spark backend of :mod:`snap_spark.lake`);
- :data:`KAFKA` (``kafka``): ``org.apache.spark:spark-sql-kafka-0-10_2.13:<installed
  PySpark version>`` with kafka-clients, commons-pool2 and spark-token-provider-kafka (the
  Kafka source of Structured Streaming). A job that reads Kafka calls
  :func:`require_kafka_connector` first, so a session without the connector stops with one
  clear line instead of Spark's ``DATA_SOURCE_NOT_FOUND``.

The command line is
``python -m snap_spark.runtime.maven_jars fetch [--force]|jars|status [SET ...]`` (:func:`main`).

A set's cache folder is, first match wins: its environment variable (e.g.
``$SNAP_SPARK_KAFKA_JARS``); ``.venv/<folder>`` of this source checkout;
``<sys.prefix>/<folder>`` (an installed wheel's environment). A :class:`JarSet` made
elsewhere (the tests' Kafka broker, for one) uses the same machinery.

Importing this module imports no Spark: ``make`` calls it to learn the JAR lists cheaply.

Examples:
    >>> sorted(JAR_SETS)
    ['delta', 'kafka']
    >>> KAFKA.coordinates(version="4.0.1")
    ('org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1',)

    After ``make setup`` (``None`` before):

    >>> DELTA.coordinate()  # for the lock's PySpark 4.2.0 and delta-spark 4.4.0
    'io.delta:delta-spark_4.2_2.13:4.4.0'
    >>> [Path(jar).name for jar in DELTA.available()][:2]
    ['io.delta_delta-spark_4.2_2.13-4.4.0.jar', 'io.delta_delta-storage-4.4.0.jar']
    >>> [Path(jar).name for jar in submit_jars()]  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    ['io.delta_delta-spark_4.2_2.13-4.4.0.jar', ...,
     'org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar', ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING
from xml.sax.saxutils import quoteattr

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Scala line of the PySpark 4.0 wheel's JARs, so of every Scala artifact that fits it.
SCALA_BINARY_VERSION = "2.13"
#: Manifest file of a cache folder: coordinates resolved and JARs (paths relative to it).
MANIFEST_NAME = "jars.json"
#: Longest a resolution may take; an unreachable repository must not hang ``make setup``.
FETCH_TIMEOUT_SECONDS = 600.0

_CHECKOUT = Path(__file__).resolve().parents[2]


class MavenJarsError(RuntimeError):
    """A set's JARs could not be fetched, or are needed and not in the cache."""


class DeltaJarsError(MavenJarsError):
    """Delta's JARs could not be fetched, or are needed and not in the cache."""


class KafkaJarsError(MavenJarsError):
    """The Kafka connector's JARs could not be fetched, or the connector is not loaded."""


class KafkaConnectorMissing(KafkaJarsError):
    """The session's JVM cannot load Spark's Kafka connector."""


@dataclass(frozen=True)
class Substitute:
    """A dependency a set may take at another version when the repository lacks its own.

    ``artifact`` is ``group:name``; ``version`` maps the set's version to the one to use
    instead. :func:`fetch` uses it only when resolution reports exactly that artifact at
    the set's version as not found, and the manifest records the substitution.

    Examples:
        >>> Substitute("org.example:helper", lambda v: v.rsplit(".", 1)[0] + ".0").version("4.0.1")
        '4.0.0'
    """

    artifact: str
    version: Callable[[str], str]

    def missing(self, set_version: str, output: str) -> bool:
        """True when Ivy's ``output`` says this artifact is not found at ``set_version``."""
        group, name = self.artifact.split(":")
        return f"{group}#{name};{set_version}: not found" in output


def same_line_first_release(version: str) -> str:
    """``<major>.<minor>.0`` of a version: the first release of its maintenance line.

    Examples:
        >>> same_line_first_release("4.0.1")
        '4.0.0'
    """
    major, minor, *_ = version.split(".")
    return f"{major}.{minor}.0"


@dataclass(frozen=True)
class JarSet:
    """One package set: what to resolve, where to cache it, and how to talk about it.

    ``versions`` returns the version the set must match (of an installed Python package,
    usually), and ``artifacts`` are Maven coordinates without their version, which they
    take from ``versions`` (or with one of their own: ``group:name:version``); a cache
    resolved for other coordinates is stale. ``marker`` is the start of a file name the
    resolved JARs must include (Ivy names them ``<group>_<artifact>-<version>.jar``).

    Examples:
        >>> s = JarSet("demo", "Demo JARs", ("org.example:demo_2.13",), lambda: "1.0",
        ...            "DEMO_JARS", "demo-jars", "org.example_demo_")
        >>> s.coordinates()
        ('org.example:demo_2.13:1.0',)
        >>> s.coordinate()
        'org.example:demo_2.13:1.0'

        The cache's variable, folder and file marker follow from the name and the first
        artifact unless given:

        >>> KAFKA.cache_env, KAFKA.folder, KAFKA.marker
        ('SNAP_SPARK_KAFKA_JARS', 'kafka-jars', 'org.apache.spark_spark-sql-kafka-0-10_')
        >>> DELTA.marker
        'io.delta_delta-spark_'
    """

    name: str
    label: str
    artifacts: tuple[str, ...]
    versions: Callable[[], str]
    #: the variable naming the cache folder (default ``SNAP_SPARK_<NAME>_JARS``)
    cache_env: str = ""
    #: the cache folder's name under the environment (default ``<name>-jars``)
    folder: str = ""
    #: default: the first artifact's, ``<group>_<name without its Scala suffix>_``
    marker: str = ""
    #: What fails without the set, for the one line ``make setup`` prints when offline.
    consequence: str = "the code that needs them fails"
    error: type[MavenJarsError] = MavenJarsError
    #: Dependencies that may come at another version (see :class:`Substitute`).
    substitutes: tuple[Substitute, ...] = ()
    #: Resolve from the remote repository only, not also from ``~/.m2`` and ``~/.ivy2``
    #: as Spark does by default: a local Maven repository holding a dependency's POM but
    #: not its JAR (left by Maven's own resolution) makes Spark's resolver fail.
    remote_only: bool = False
    #: Artifacts chosen when the coordinates are asked for (they may depend on installed
    #: packages), in place of :attr:`artifacts`, which then only name the cache's files.
    artifacts_now: Callable[[], tuple[str, ...]] | None = None
    #: The JARs go onto Spark's class path (``spark.jars``, ``--jars``): :func:`available`
    #: leaves out the dependencies Spark's own ``jars/`` holds (:func:`spark_artifacts`).
    #: ``False`` for a set run on its own class path (the tests' Kafka broker).
    for_spark: bool = True

    def __post_init__(self) -> None:
        group, artifact = self.artifacts[0].split(":")[:2]
        defaults = {"cache_env": f"SNAP_SPARK_{self.name.upper()}_JARS",
                    "folder": f"{self.name}-jars",
                    "marker": f"{group}_{artifact.rsplit('_', 1)[0]}_"}
        for name, value in defaults.items():
            if not getattr(self, name):
                object.__setattr__(self, name, value)

    def coordinates(self, version: str | None = None) -> tuple[str, ...]:
        """The set's Maven coordinates at ``version`` (default: the installed one)."""
        at = version or self.versions()
        return tuple(
            artifact if artifact.count(":") >= 2 else f"{artifact}:{at}"
            for artifact in (self.artifacts_now() if self.artifacts_now else self.artifacts)
        )

    def coordinate(self, version: str | None = None) -> str:
        """The coordinates as ``spark.jars.packages`` (and the manifest) write them."""
        return ",".join(self.coordinates(version))

    def cache_dir(self) -> Path:
        """:func:`cache_dir` of this set."""
        return cache_dir(self)

    def available(self, directory: Path | None = None) -> list[str] | None:
        """:func:`available` of this set."""
        return available(self, directory)

    def fetch(
        self,
        directory: Path | None = None,
        *,
        force: bool = False,
        timeout: float = FETCH_TIMEOUT_SECONDS,
    ) -> list[str]:
        """:func:`fetch` of this set."""
        return fetch(self, directory, force=force, timeout=timeout)


def package_version(distribution: str) -> Callable[[], str]:
    """A function returning the installed version of a Python distribution.

    Examples:
        >>> pyspark_version = package_version("pyspark")
        >>> pyspark_version()  # the pinned pyspark
        '4.2.0'
    """

    def version() -> str:
        return metadata.version(distribution)

    return version


def delta_artifact(delta_version: str, spark_version: str) -> str:
    """Delta's Maven artifact for a delta-spark release on a PySpark release, as
    delta-spark's own ``configure_spark_with_delta_pip`` names it: from Delta 4.1 on, one
    build per Spark line (``delta-spark_<spark major.minor>_2.13``); before, one name.

    The plain name still resolves for newer releases, but to the build for the newest Spark
    line that Delta release supports: Delta 4.4.0 on PySpark 4.1 then fails its first write
    with ``NoSuchMethodError``.

    Examples:
        >>> delta_artifact("4.0.1", "4.0.1")
        'io.delta:delta-spark_2.13'
        >>> delta_artifact("4.4.0", "4.2.0")
        'io.delta:delta-spark_4.2_2.13'
    """
    if tuple(int(part) for part in delta_version.split(".")[:2]) < (4, 1):
        return f"io.delta:delta-spark_{SCALA_BINARY_VERSION}"
    spark_line = ".".join(spark_version.split(".")[:2])
    return f"io.delta:delta-spark_{spark_line}_{SCALA_BINARY_VERSION}"


#: Delta Lake's JARs (``$SNAP_SPARK_DELTA_JARS``, else ``.venv/delta-jars``).
DELTA = JarSet(
    name="delta",
    label="Delta JARs",
    artifacts=(f"io.delta:delta-spark_{SCALA_BINARY_VERSION}",),
    artifacts_now=lambda: (delta_artifact(metadata.version("delta-spark"),
                                          metadata.version("pyspark")),),
    versions=package_version("delta-spark"),
    consequence="runs use the delta-rs backend and the delta-spark tests fail",
    error=DeltaJarsError,
)
#: Spark's Kafka connector (``$SNAP_SPARK_KAFKA_JARS``, else ``.venv/kafka-jars``).
KAFKA = JarSet(
    name="kafka",
    label="Kafka connector JARs",
    artifacts=(f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}",),
    versions=package_version("pyspark"),
    consequence="Kafka sources are not available and the Kafka tests fail",
    error=KafkaJarsError,
    # The connector needs spark-token-provider-kafka of its own version. Some Maven
    # mirrors lack it for a patch release (this project's build machines see
    # spark-sql-kafka 4.0.1 but no spark-token-provider-kafka 4.0.1): then the first
    # release of the same line is taken, and the manifest and `make setup` say so.
    substitutes=(
        Substitute(
            f"org.apache.spark:spark-token-provider-kafka-0-10_{SCALA_BINARY_VERSION}",
            same_line_first_release,
        ),
    ),
)
#: The package sets ``make setup`` fetches, by name.
JAR_SETS: dict[str, JarSet] = {"delta": DELTA, "kafka": KAFKA}


def job_jar_sets(backend: str | None, *, reads_kafka: bool) -> list[str]:
    """The sets of :data:`JAR_SETS` a job's driver loads: ``delta`` unless the lake's
    backend (``spark.snap.lake.backend``) is ``delta-rs``, and ``kafka`` when the job reads
    a Kafka topic. ``snap-spark submit`` gives spark-submit these
    (:func:`snap_spark.runtime.submit.jar_sets`), and a job run as ``python jobs/<job>.py``
    starts its session with these (:func:`snap_spark.runtime.session.deferred_session`).
    A set the job does not use only costs its driver JVM's start: Spark copies every JAR
    of ``spark.jars`` for its executors and opens them, and Delta's session extension
    loads with the session (docs/speed.md, *Figures behind the code*).

    Examples:
        >>> job_jar_sets(None, reads_kafka=False), job_jar_sets("delta-spark", reads_kafka=True)
        (['delta'], ['delta', 'kafka'])
        >>> job_jar_sets(" Delta-RS", reads_kafka=False), job_jar_sets("delta-rs", reads_kafka=True)
        ([], ['kafka'])
    """
    sets = [] if (backend or "").strip().lower() == "delta-rs" else ["delta"]
    return [*sets, "kafka"] if reads_kafka else sets


#: The class behind ``format("kafka")``: the connector is loaded when the JVM can load it.
KAFKA_SOURCE_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def cache_dir(jar_set: JarSet) -> Path:
    """The folder :func:`fetch` fills and :func:`available` reads (see the module docs).

    Examples:
        >>> cache_dir(JAR_SETS["kafka"]).relative_to(_CHECKOUT)  # no $SNAP_SPARK_KAFKA_JARS
        PosixPath('.venv/kafka-jars')
        >>> getfixture("monkeypatch").setenv("SNAP_SPARK_KAFKA_JARS", str(tmp))
        >>> cache_dir(JAR_SETS["kafka"]) == tmp.resolve()
        True
    """
    configured = os.environ.get(jar_set.cache_env)
    if configured:
        return Path(configured).expanduser().resolve()
    if (_CHECKOUT / "pyproject.toml").is_file():  # a source checkout: its own .venv
        return _CHECKOUT / ".venv" / jar_set.folder
    return Path(sys.prefix) / jar_set.folder


def available(jar_set: JarSet, directory: Path | None = None) -> list[str] | None:
    """Absolute paths of the set's cached JARs, or ``None`` when they are not (all) fetched
    for the version the set must match.

    Examples:
        >>> available(JAR_SETS["kafka"], Path("/nowhere")) is None
        True
    """
    folder = directory or cache_dir(jar_set)
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        wanted = jar_set.coordinate()
    except (OSError, ValueError, metadata.PackageNotFoundError):
        return None
    if not isinstance(manifest, dict) or manifest.get("coordinate") != wanted:
        return None  # fetched for another version: fetch again
    names = manifest.get("jars")
    if not isinstance(names, list) or not names:
        return None
    jars = [str(folder / name) for name in names if isinstance(name, str)]
    if len(jars) != len(names) or not all(os.path.isfile(jar) for jar in jars):
        return None
    if not jar_set.for_spark:
        return jars
    spark_has = spark_artifacts()
    return jars[:1] + [jar for jar in jars[1:]
                       if artifact_name(jar, ivy=True) not in spark_has]


def artifact_name(jar: str, *, ivy: bool = False) -> str:
    """The Maven artifact a JAR file holds, from its name: Ivy's ``group_artifact-version``
    (``ivy``; a group has no ``_``, an artifact may) or Spark's ``artifact-version``.

    Examples:
        >>> artifact_name("ivy/jars/commons-pool_commons-pool-1.6.jar", ivy=True)
        'commons-pool'
        >>> artifact_name("io.delta_delta-spark_4.2_2.13-4.4.0.jar", ivy=True)
        'delta-spark_4.2_2.13'
        >>> artifact_name("zstd-jni-1.5.7-6.jar"), artifact_name("spark-sql_2.13-4.2.0.jar")
        ('zstd-jni', 'spark-sql_2.13')
    """
    name = Path(jar).name
    if ivy:
        name = name.split("_", 1)[-1]
    return re.sub(r"-\d.*\.jar$", "", name)


def spark_artifacts() -> frozenset[str]:
    """The artifacts the installed Spark's own ``jars/`` folder holds (``$SPARK_HOME``'s, else
    PySpark's; none when neither is found).

    A set's dependency that Spark ships already is left off the class path
    (:func:`available`): Spark's own copy comes first there anyway, on every cluster that
    does not set ``spark.driver.userClassPathFirst``, so it was never the one loaded, and
    Spark copied it to each executor's folder at each start for nothing. Delta 4.4.0 brings
    22 such JARs (Hadoop's client among them: 86 MB in all); a cold delta-spark run started
    about 1 s sooner without them (docs/development.md, *Spark lines*).
    """
    from snap_spark.runtime.jvm_archive import spark_home

    home = spark_home()
    if home is None:
        return frozenset()
    folder = home / "jars"
    if not folder.is_dir():
        return frozenset()
    return frozenset(artifact_name(jar.name) for jar in folder.glob("*.jar"))


def fetch(
    jar_set: JarSet,
    directory: Path | None = None,
    *,
    force: bool = False,
    timeout: float = FETCH_TIMEOUT_SECONDS,
) -> list[str]:
    """Resolve the set's JARs into its cache once and return their paths (instant when
    cached).

    Resolution runs in a child Python process that starts Spark with
    ``spark.jars.packages``, so it never clashes with a session of the calling process, and
    its console noise is kept out of sight unless it fails.

    Raises:
        MavenJarsError: (the set's own subclass) resolution failed: no network, unknown
            version, timeout.

    Example (not run by the tests: with nothing cached it resolves from Maven Central,
    which needs the network and takes minutes; cached, it returns :func:`available`'s
    list at once)::

        jars = fetch(JAR_SETS["kafka"])
        # ['/repo/.venv/kafka-jars/ivy/jars/org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar',
        #  '/repo/.venv/kafka-jars/ivy/jars/org.apache.kafka_kafka-clients-3.9.1.jar', ...]
    """
    folder = directory or cache_dir(jar_set)
    if not force:
        cached = available(jar_set, folder)
        if cached is not None:
            return cached
    wanted = jar_set.coordinate()
    ivy = folder / "ivy"
    ivy.mkdir(parents=True, exist_ok=True)
    substituted: dict[str, str] = {}
    done, resolved = _resolve_in_child(wanted, "", ivy, timeout, jar_set)
    output = done.stdout + done.stderr
    if done.returncode != 0 or resolved is None:
        version = jar_set.versions()
        substituted = {
            sub.artifact: sub.version(version)
            for sub in jar_set.substitutes if sub.missing(version, output)
        }
        if substituted:
            done, resolved = _resolve_substituted(wanted, substituted, ivy, timeout, jar_set)
            output = done.stdout + done.stderr
    if done.returncode != 0 or resolved is None:
        raise jar_set.error(f"resolving {wanted} failed: {_reason(output)}")
    names = [os.path.relpath(path, folder) for path in resolved]
    if not any(Path(name).name.startswith(jar_set.marker) for name in names):
        raise jar_set.error(f"resolving {wanted} returned no {jar_set.marker}* JAR: {resolved}")
    manifest: dict[str, object] = {"coordinate": wanted, "jars": names}
    if substituted:
        manifest["substituted"] = substituted
    partial = folder / (MANIFEST_NAME + ".tmp")
    partial.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    partial.replace(folder / MANIFEST_NAME)  # readers never see half a manifest
    jars = available(jar_set, folder)
    if jars is None:
        raise jar_set.error(f"resolved {wanted} but its JARs are missing under {folder}")
    return jars


def substitutions(jar_set: JarSet, directory: Path | None = None) -> dict[str, str]:
    """Dependencies the cached set took at another version (``group:name`` → version).

    Examples:
        >>> substitutions(JAR_SETS["kafka"])  # after make setup: 4.2.0's are all served
        {}
        >>> substitutions(JAR_SETS["kafka"], tmp)  # nothing cached there
        {}
    """
    folder = directory or cache_dir(jar_set)
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = manifest.get("substituted") if isinstance(manifest, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items()}


def _resolve_substituted(
    wanted: str, substituted: dict[str, str], ivy: Path, timeout: float, jar_set: JarSet
) -> tuple[subprocess.CompletedProcess[str], list[str] | None]:
    """Resolve ``wanted`` without the ``substituted`` artifacts, then each of those alone
    at its stand-in version, keeping only its own JAR: its dependencies are the set's
    (Spark's ``spark.jars.excludes`` drops an excluded artifact even when it is asked for by
    name, so one resolution cannot do both)."""
    done, resolved = _resolve_in_child(wanted, ",".join(substituted), ivy, timeout, jar_set)
    for artifact, version in substituted.items():
        if done.returncode != 0 or resolved is None:
            break
        group, name = artifact.split(":")
        done, alone = _resolve_in_child(f"{artifact}:{version}", "", ivy, timeout, jar_set)
        own = [jar for jar in alone or [] if Path(jar).name == f"{group}_{name}-{version}.jar"]
        if done.returncode != 0 or len(own) != 1:
            return done, None
        resolved = [*resolved, *own]
    return done, resolved


def remote_repository() -> str:
    """The Maven repository Spark's resolver uses by default (Maven Central, unless
    ``$DEFAULT_ARTIFACT_REPOSITORY`` names a mirror, as Spark itself honours).

    Examples:
        >>> monkeypatch = getfixture("monkeypatch")
        >>> monkeypatch.delenv("DEFAULT_ARTIFACT_REPOSITORY", raising=False)
        >>> remote_repository()
        'https://repo1.maven.org/maven2/'
        >>> monkeypatch.setenv("DEFAULT_ARTIFACT_REPOSITORY", "https://maven.example/m2/")
        >>> remote_repository()
        'https://maven.example/m2/'
    """
    return os.environ.get("DEFAULT_ARTIFACT_REPOSITORY", "https://repo1.maven.org/maven2/")


def _remote_only_settings(ivy: Path) -> Path:
    """An Ivy settings file whose only resolver is :func:`remote_repository`."""
    root = remote_repository()
    settings = ivy / "ivysettings-remote-only.xml"
    settings.write_text(
        "<ivysettings>\n"
        '  <settings defaultResolver="central"/>\n'
        "  <resolvers>\n"
        f'    <ibiblio name="central" m2compatible="true" root={quoteattr(root)}/>\n'
        "  </resolvers>\n"
        "</ivysettings>\n",
        encoding="utf-8",
    )
    return settings


def _resolve_in_child(
    packages: str, excludes: str, ivy: Path, timeout: float, jar_set: JarSet
) -> tuple[subprocess.CompletedProcess[str], list[str] | None]:
    """Run the resolution child process; its result and the JARs it printed, if any."""
    settings = str(_remote_only_settings(ivy)) if jar_set.remote_only else ""
    command = [sys.executable, "-m", "snap_spark.runtime.maven_jars", "_resolve", packages,
               str(ivy), excludes, settings]
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise jar_set.error(f"resolving {packages} took over {timeout:.0f} s") from error
    return done, _last_json_line(done.stdout)


def submit_jars(names: Sequence[str] = ("delta", "kafka")) -> list[str]:
    """The cached JARs of the named sets, for ``spark-submit --jars`` (joined with commas).

    Sets not cached are left out (a job then says what it misses, or runs without it);
    a JAR two sets share is listed once.

    Examples:
        After ``make setup``:

        >>> submit_jars(["kafka"])  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
        ['/.../kafka-jars/ivy/jars/org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar',
         ...]
        >>> any("kafka-clients" in Path(jar).name for jar in submit_jars(["kafka"]))
        True
    """
    jars: list[str] = []
    seen: set[str] = set()
    for name in names:
        for jar in available(JAR_SETS[name]) or []:
            if Path(jar).name not in seen:  # same file name = same artifact and version
                seen.add(Path(jar).name)
                jars.append(jar)
    return jars


def _pythonpath() -> str:
    """PYTHONPATH for the child: this package's folder first, so it runs this very code."""
    rest = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([str(_CHECKOUT), rest]) if rest else str(_CHECKOUT)


def _last_json_line(output: str) -> list[str] | None:
    """The JAR list the child printed as its last line of JSON, if any."""
    for line in reversed(output.splitlines()):
        if line.startswith("["):
            try:
                parsed = json.loads(line)
            except ValueError:
                return None
            if isinstance(parsed, list) and all(isinstance(p, str) for p in parsed):
                return parsed
            return None
    return None


def _reason(output: str) -> str:
    """One short line saying why a resolution failed, picked from the JVM's output."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for marker in ("unresolved dependency", "UnknownHostException", "Exception", "Error"):
        for line in lines:
            if marker in line:
                start = line.index(marker) if marker == "unresolved dependency" else 0
                return line[start:].rstrip("]")[:240]
    return lines[-1][:240] if lines else "no output"


def _resolve_in_this_process(
    wanted: str, ivy: str, excludes: str = "", ivy_settings: str = ""
) -> list[str]:
    """Start Spark with ``spark.jars.packages`` and return the local JARs it resolved.

    spark-submit resolves the packages before the JVM's gateway starts, copies the JARs to
    ``<ivy>/jars`` and lists them in ``spark.jars``; that list is what the cache records.
    ``excludes`` (``group:name,...``) are left out of the resolution
    (``spark.jars.excludes``); ``ivy_settings`` replaces Spark's resolver chain
    (``spark.jars.ivySettings``).
    """
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .appName("snap-spark fetch JARs")
        .config("spark.jars.packages", wanted)
        .config("spark.jars.ivy", ivy)
        .config("spark.ui.enabled", "false")
    )
    if excludes:
        builder = builder.config("spark.jars.excludes", excludes)
    if ivy_settings:
        builder = builder.config("spark.jars.ivySettings", ivy_settings)
    spark = builder.getOrCreate()
    try:
        listed = spark.sparkContext.getConf().get("spark.jars", "") or ""
    finally:
        spark.stop()
    jars = []
    for entry in listed.split(","):
        path = entry.strip().removeprefix("file://").removeprefix("file:")
        if path.endswith(".jar") and os.path.isfile(path):
            jars.append(os.path.abspath(path))
    return jars


def set_main(jar_set: JarSet, argv: Sequence[str] | None = None, *, prog: str = "") -> int:
    """The command line of one set: ``fetch [--force]``, ``jars`` or ``status``.

    ``fetch`` is quiet when the JARs are cached, prints one line when it fetched them, and
    one line on stderr with exit status 1 when resolution fails; ``jars`` prints the cached
    JARs comma-separated (for ``spark-submit --jars``) or nothing; ``status`` says whether
    they are cached (exit 0) or not (exit 1).

    Examples:
        After ``make setup``:

        >>> set_main(JAR_SETS["kafka"], ["status"])  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
        Kafka connector JARs for org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0: ... cached
        in .../kafka-jars...
        0
    """
    parser = argparse.ArgumentParser(
        prog=prog or "python -m snap_spark.runtime.maven_jars",
        description=f"Fetch the {jar_set.label} once into a local cache, and list them.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_parser = sub.add_parser("fetch", help="resolve the JARs into the cache (once)")
    fetch_parser.add_argument("--force", action="store_true", help="resolve again")
    sub.add_parser("jars", help="print the cached JARs comma-separated, or nothing")
    sub.add_parser("status", help="say whether the JARs are cached")
    args = parser.parse_args(argv)

    if args.command == "jars":
        print(",".join(available(jar_set) or []))
        return 0
    wanted = jar_set.coordinate()
    folder = cache_dir(jar_set)
    if args.command == "status":
        jars = available(jar_set)
        if jars is None:
            print(f"{jar_set.label} for {wanted}: not cached in {folder} "
                  "(make setup fetches them)")
            return 1
        note = "".join(f"; {artifact} at {version}"
                       for artifact, version in substitutions(jar_set).items())
        print(f"{jar_set.label} for {wanted}: {len(jars)} cached in {folder}{note}")
        return 0
    if not args.force and available(jar_set) is not None:
        return 0  # already cached: stay quiet, `make setup` runs this every time
    try:
        jars = fetch(jar_set, force=args.force)
    except MavenJarsError as error:
        print(
            f"setup: {jar_set.label} not fetched ({error}); {jar_set.consequence} until "
            "`make setup` can reach Maven Central",
            file=sys.stderr,
        )
        return 1
    note = "".join(
        f"; {artifact} {version} stands in for {jar_set.versions()}, missing from the repository"
        for artifact, version in substitutions(jar_set).items()
    )
    print(f"setup: {jar_set.label} cached ({wanted}, {len(jars)} files in {folder}{note})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.runtime.maven_jars fetch [--force]|jars|status [SET ...]`` (default:
    every set: ``delta``, ``kafka``).

    ``fetch`` fetches each set not cached yet (one line per set fetched or failed; exit 1
    when any failed); ``jars`` prints the cached JARs of the sets comma-separated, the list
    ``spark-submit --jars`` takes (:func:`submit_jars`); ``status`` prints one line per set
    (exit 1 when any is not cached).

    Examples:
        After ``make setup``:

        >>> main(["jars", "kafka"])  # doctest: +ELLIPSIS
        /.../kafka-jars/ivy/jars/org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar,...
        0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_resolve"]:  # the child process of fetch
        print(json.dumps(_resolve_in_this_process(*argv[1:])))
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m snap_spark.runtime.maven_jars",
        description="Fetch the JARs of Spark packages once into local caches, and list them.",
    )
    parser.add_argument("command", choices=["fetch", "jars", "status"])
    parser.add_argument("sets", nargs="*", metavar="SET",
                        help=f"package sets (default: all of {', '.join(JAR_SETS)})")
    parser.add_argument("--force", action="store_true", help="fetch: resolve again")
    args = parser.parse_args(argv)
    unknown = [name for name in args.sets if name not in JAR_SETS]
    if unknown:
        parser.error(f"unknown set {unknown[0]!r} (choose from {', '.join(JAR_SETS)})")
    names = list(dict.fromkeys(args.sets)) or list(JAR_SETS)
    if args.command == "jars":
        print(",".join(submit_jars(names)))
        return 0
    if args.force and args.command != "fetch":
        parser.error("--force goes with fetch")
    failed = 0
    for name in names:
        command = [args.command, *(["--force"] if args.force else [])]
        failed |= set_main(JAR_SETS[name], command, prog=parser.prog)
    return failed


def jvm_has_class(name: str, spark: SparkSession | None = None) -> bool:
    """True when the driver JVM (``spark``'s, else this process's, connecting to
    spark-submit's) can load class ``name`` the way Spark loads data sources and extensions
    (its context class loader, which holds ``spark.jars``).

    Raises:
        py4j.protocol.Py4JJavaError: the lookup failed for another reason than the class
            being absent (a class that is there but broken must not pass for missing).

    Examples:
        >>> jvm_has_class("org.apache.spark.sql.SparkSession", spark)
        True
        >>> jvm_has_class("org.example.NotThere", spark)
        False
    """
    from pyspark import SparkContext

    if spark is not None:
        jvm = spark.sparkContext._jvm
    else:
        SparkContext._ensure_initialized()
        jvm = SparkContext._jvm
    if jvm is None:
        return False
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

    try:
        jvm.org.apache.spark.util.Utils.classForName(name, False, False)
    except Py4JJavaError as error:
        # only "not there" means absent; any other failure must not pass for it silently
        if error.java_exception.getClass().getName() != "java.lang.ClassNotFoundException":
            raise
        return False
    return True


def missing_connector_message(class_name: str = KAFKA_SOURCE_PROVIDER) -> str:
    """What :func:`require_kafka_connector` says when ``class_name`` cannot be loaded.

    Examples:
        >>> print(missing_connector_message())  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
        the Kafka connector is not loaded: run make setup, or pass --packages
        org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 (the driver's JVM cannot load
        org.apache.spark.sql.kafka010.KafkaSourceProvider; ...)
    """
    return (
        f"the Kafka connector is not loaded: run make setup, or pass --packages "
        f"{KAFKA.coordinate()} (the driver's JVM cannot load {class_name}; under spark-submit "
        "give it --jars $(python -m snap_spark.runtime.maven_jars jars kafka) after make setup)"
    )


def require_kafka_connector(
    spark: SparkSession, class_name: str = KAFKA_SOURCE_PROVIDER
) -> None:
    """Fail with one clear line unless ``spark``'s JVM can load the Kafka connector.

    A streaming job calls this before ``spark.readStream.format("kafka")``. ``class_name``
    is the class probed (the connector's data source provider; tests pass another name to
    see the failure).

    Raises:
        KafkaConnectorMissing: the class is not on the driver's classpath (a
            :class:`KafkaJarsError`; a job maps it to its usage exit status).

    Examples:
        >>> require_kafka_connector(spark)  # a session build_session made after make setup
        >>> require_kafka_connector(spark, "org.example.Missing")
        Traceback (most recent call last):
        ...
        snap_spark.runtime.maven_jars.KafkaConnectorMissing: the Kafka connector is not loaded: ...
    """
    if not jvm_has_class(class_name, spark):
        raise KafkaConnectorMissing(missing_connector_message(class_name))


if __name__ == "__main__":
    sys.exit(main())
