"""``snap-spark submit``: run a job of ``jobs/`` under spark-submit with no activated
virtualenv, from cron, Airflow or any shell.

pip's ``spark-submit`` script (``.venv/bin/spark-submit``) finds Spark's home by running
``find_spark_home.py`` with the ``python3`` on ``PATH``; outside the activated virtualenv
that interpreter has no pyspark, so the script fails (exit 127) before the job starts.
``snap-spark submit`` needs none of that:

- the interpreter is the one running it (:data:`sys.executable`: the virtualenv's, since
  ``.venv/bin/snap-spark`` names it in its first line): ``PYSPARK_PYTHON`` and
  ``PYSPARK_DRIVER_PYTHON`` (unless already set) and the first entry of ``PATH``;
- Spark's home is ``$SPARK_HOME`` when set (as pyspark's own scripts do), else the
  installed pyspark package's folder, and ``<home>/bin/spark-submit`` runs the job;
- the cached JARs go to ``--jars`` the way ``make run`` and ``make stream`` pass them:
  Delta's (:mod:`snap_spark.runtime.maven_jars`) unless ``--conf spark.snap.lake.backend=delta-rs``,
  and Kafka's for ``stream_verify --kafka-bootstrap``,
  merged with the ``--jars`` given;
- ``--conf spark.sql.session.timeZone=UTC`` (tables and verdicts assume UTC),
  ``--conf spark.ui.showConsoleProgress=false``, and the driver's Java options: the
  package's quieter ``conf/log4j2.properties`` (package data) and the class archive ``make
  setup`` built, with the short-job JVM flags
  (:data:`snap_spark.runtime.jvm_archive.DRIVER_JVM_FLAGS`) on a local master, not for a
  cluster's driver (:func:`snap_spark.runtime.scope.local_master`), unless
  ``--driver-java-options`` or ``--conf spark.driver.extraJavaOptions`` is given, or the
  runtime is switched off
  (``SNAP_SPARK_RUNTIME=off``); as the Makefile passes them;
  ``SPARK_LOCAL_IP=127.0.0.1`` when unset and the master is local (on a cluster the driver
  must stay reachable by executors).

The command line is ``snap-spark submit [--dry-run] [SPARK-SUBMIT OPTIONS] JOB [JOB ARGS]``:
everything before JOB is spark-submit's (or ``--dry-run``), everything after JOB goes to the
job unchanged. The process becomes spark-submit (:func:`os.execve`), so the job's exit
status (0 clean, 1 failed, 2 usage, 3 alert, 4 storage fault: docs/cli.md, "Exit statuses")
is the command's, and signals reach Spark: a stream's driver JVM passes SIGTERM and SIGINT
on to the job, which stops cleanly (:func:`snap_spark.pipeline.queries.stop_on_signals`).

Importing this module imports no Spark.

Examples:
    >>> request = split_arguments(["--master", "local[2]", "audit", "--lake", "data/lake"])
    >>> request.job, request.spark_options, request.job_args
    ('audit', (('--master', 'local[2]'),), ('--lake', 'data/lake'))
    >>> known_jobs()  # the jobs/ folder of this checkout  # doctest: +ELLIPSIS
    ['audit', ..., 'verify_messages']
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from snap_spark import jobs
from snap_spark.runtime.jvm_archive import driver_jvm_flags
from snap_spark.runtime.scope import local_master, runtime_on
from snap_spark.runtime.session import DRIVER_JAVA_OPTIONS_CONF

EXIT_FAILED = 1
EXIT_USAGE = 2

#: The checkout this package sits in (the jobs and settings are found relative to it, as
#: :data:`snap_spark.runner.DEFAULT_PIPELINE_CONF` is).
CHECKOUT = Path(__file__).resolve().parents[2]
#: The jobs shipped in the package (``snap_spark/jobs``; ``jobs/`` of a checkout links to
#: it): one ``<name>.py`` per job.
JOBS_DIR = jobs.JOBS_DIR
#: The quieter Spark logging ``make run`` passes (package data, ``snap_spark/conf``).
LOG4J2_CONF = Path(__file__).resolve().parents[1] / "conf" / "log4j2.properties"

#: spark-submit options that take a value (Spark 4.0's ``SparkSubmitOptionParser``), by
#: the name given on the command line; ``-c`` is ``--conf``.
VALUE_OPTIONS: frozenset[str] = frozenset({
    "--archives", "--class", "--conf", "--deploy-mode", "--driver-class-path",
    "--driver-cores", "--driver-java-options", "--driver-library-path", "--driver-memory",
    "--exclude-packages", "--executor-cores", "--executor-memory", "--files", "--jars",
    "--keytab", "--master", "--name", "--num-executors", "--packages", "--principal",
    "--properties-file", "--proxy-user", "--py-files", "--queue", "--remote",
    "--repositories", "--total-executor-cores",
})
#: spark-submit options without a value.
FLAG_OPTIONS: frozenset[str] = frozenset({"--verbose", "--supervise", "--load-spark-defaults"})
#: Short spellings of spark-submit's options.
SHORT_OPTIONS: dict[str, str] = {"-c": "--conf", "-v": "--verbose"}

#: Settings always passed (before the user's own ``--conf``, which win in spark-submit).
UTC_CONF = "spark.sql.session.timeZone=UTC"
#: Spark setting naming the Delta backend (:data:`snap_spark.lake.LAKE_BACKEND_CONF`).
LAKE_BACKEND_CONF = "spark.snap.lake.backend"


class SubmitError(Exception):
    """The command cannot run as given; :attr:`status` is the exit status to return."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Request:
    """A ``snap-spark submit`` command line, split: spark-submit's options (as
    ``(option, value)`` pairs, ``value`` ``None`` for a flag), the job, the job's arguments."""

    job: str
    spark_options: tuple[tuple[str, str | None], ...] = ()
    job_args: tuple[str, ...] = ()
    dry_run: bool = False
    #: ``-h``/``--help`` came before JOB: show snap-spark submit's help
    help: bool = False

    def confs(self) -> dict[str, str]:
        """The ``--conf KEY=VALUE`` settings given (the last one of a key wins, as in
        spark-submit).

        Examples:
            >>> split_arguments(["--conf", "a=1", "-c", "a=2", "--conf=b=3", "x"]).confs()
            {'a': '2', 'b': '3'}
        """
        found: dict[str, str] = {}
        for option, value in self.spark_options:
            if option == "--conf" and value is not None:
                key, _, setting = value.partition("=")
                found[key.strip()] = setting.strip()
        return found

    def last(self, option: str) -> str | None:
        """The value of the last ``option`` given, or ``None``.

        Examples:
            >>> split_arguments(["--master", "yarn", "audit"]).last("--master")
            'yarn'
        """
        values = [value for name, value in self.spark_options if name == option]
        return values[-1] if values else None

    def master(self) -> str | None:
        """The master asked for (``--master``, else ``--conf spark.master=``), or ``None``
        (spark-submit's default, ``local[*]``)."""
        return self.last("--master") or self.confs().get("spark.master")

    def is_local(self) -> bool:
        """True when the job runs in this machine's driver JVM with local executors.

        Examples:
            >>> split_arguments(["audit"]).is_local()
            True
            >>> split_arguments(["--master", "yarn", "audit"]).is_local()
            False
        """
        return local_master(self.master())


def split_arguments(argv: Sequence[str]) -> Request:
    """Split ``[--dry-run] [SPARK-SUBMIT OPTIONS] JOB [JOB ARGS]``: the first word that is
    neither an option nor an option's value is JOB; everything after it is the job's.

    Raises:
        SubmitError: an unknown option before JOB, an option without its value, no JOB.

    Examples:
        >>> r = split_arguments(["--dry-run", "--conf", "a=b", "--jars=x.jar", "-v",
        ...                      "audit.py", "--conf", "c=d", "--help"])
        >>> r.dry_run, r.job, r.spark_options, r.job_args
        (True, 'audit', (('--conf', 'a=b'), ('--jars', 'x.jar'), ('--verbose', None)), \
('--conf', 'c=d', '--help'))
        >>> split_arguments(["--lake", "L", "audit"])
        Traceback (most recent call last):
        ...
        snap_spark.runtime.submit.SubmitError: unknown spark-submit option --lake before JOB \
(spark-submit's options go before JOB, the job's own after it)
    """
    options: list[tuple[str, str | None]] = []
    dry_run = False
    position = 0
    while position < len(argv):
        word = argv[position]
        if word in ("-h", "--help"):
            return Request(job="", help=True)
        if word == "--dry-run":
            dry_run = True
            position += 1
            continue
        if not word.startswith("-"):
            job = word.removesuffix(".py")
            return Request(job=job, spark_options=tuple(options),
                           job_args=tuple(argv[position + 1:]), dry_run=dry_run)
        name, equals, attached = word.partition("=") if word.startswith("--") else (
            word, "", "")
        name = SHORT_OPTIONS.get(name, name)
        if name in FLAG_OPTIONS and not equals:
            options.append((name, None))
            position += 1
        elif name in VALUE_OPTIONS and equals:
            options.append((name, attached))
            position += 1
        elif name in VALUE_OPTIONS:
            if position + 1 >= len(argv):
                raise SubmitError(f"{word} needs a value")
            options.append((name, argv[position + 1]))
            position += 2
        else:
            raise SubmitError(f"unknown spark-submit option {word} before JOB (spark-submit's "
                              "options go before JOB, the job's own after it)")
    raise SubmitError("name a JOB" + jobs.choices())


def known_jobs(jobs_dir: Path = JOBS_DIR) -> list[str]:
    """The jobs of ``jobs_dir``: its ``*.py`` files not starting with ``_``, sorted.

    Examples:
        >>> for name in ("audit.py", "_common.py", "notes.txt"):
        ...     (tmp / name).touch()
        >>> known_jobs(tmp)
        ['audit']
        >>> known_jobs(Path("/nowhere"))
        []
    """
    return jobs.names(jobs_dir)


def job_script(job: str, jobs_dir: Path = JOBS_DIR) -> Path:
    """The script of ``job`` (a name, with or without ``.py``).

    Raises:
        SubmitError: no such job (exit 2; the message lists the known jobs).

    Examples:
        >>> job_script("audit.py").relative_to(JOBS_DIR.parent)
        PosixPath('jobs/audit.py')
        >>> job_script("nope", Path("/nowhere"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        snap_spark.runtime.submit.SubmitError: unknown job 'nope' (no jobs found: ...)
    """
    try:
        return jobs.job_path(job, jobs_dir)
    except jobs.UnknownJob as error:
        raise SubmitError(str(error)) from None


def spark_home(environ: Mapping[str, str]) -> tuple[Path, str]:
    """Spark's home and where it came from: ``$SPARK_HOME`` when set, else the installed
    pyspark package's folder (pip's pyspark is a whole Spark: ``bin/``, ``jars/``), found
    without importing it.

    Raises:
        SubmitError: neither (exit 1).

    Examples:
        >>> spark_home({"SPARK_HOME": "/opt/spark"})
        (PosixPath('/opt/spark'), 'SPARK_HOME')
        >>> home, found = spark_home({})
        >>> home.name, found, (home / "bin" / "spark-submit").is_file()
        ('pyspark', 'the installed pyspark', True)
    """
    configured = environ.get("SPARK_HOME")
    if configured:
        return Path(configured), "SPARK_HOME"
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SubmitError(f"no SPARK_HOME and no pyspark installed for {sys.executable}",
                          EXIT_FAILED)
    return Path(next(iter(spec.submodule_search_locations))), "the installed pyspark"


def submit_environment(environ: Mapping[str, str], home: Path, python: str,
                       local: bool) -> dict[str, str]:
    """The environment spark-submit runs with: ``environ`` plus ``SPARK_HOME``,
    ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` (``python`` unless already set), the
    interpreter's folder first on ``PATH``, and ``SPARK_LOCAL_IP=127.0.0.1`` when unset and
    ``local``.

    Examples:
        >>> env = submit_environment({"PATH": "/usr/bin:/bin"}, Path("/s"), "/v/bin/python",
        ...                          local=True)
        >>> env["PATH"], env["SPARK_HOME"], env["PYSPARK_PYTHON"], env["SPARK_LOCAL_IP"]
        ('/v/bin:/usr/bin:/bin', '/s', '/v/bin/python', '127.0.0.1')
        >>> "SPARK_LOCAL_IP" in submit_environment({}, Path("/s"), "/v/bin/python", False)
        False
    """
    env = dict(environ)
    env["SPARK_HOME"] = str(home)
    env.setdefault("PYSPARK_PYTHON", python)
    env.setdefault("PYSPARK_DRIVER_PYTHON", python)
    folder = os.path.dirname(python)
    rest = [entry for entry in (env.get("PATH") or os.defpath).split(os.pathsep)
            if entry and entry != folder]
    env["PATH"] = os.pathsep.join([folder, *rest])
    if local:
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def jar_sets(request: Request) -> list[str]:
    """The cached JAR sets (:data:`snap_spark.runtime.maven_jars.JAR_SETS`) the job gets: ``delta``
    unless the backend is delta-rs, and ``kafka`` for ``stream_verify --kafka-bootstrap``
    (:func:`snap_spark.runtime.maven_jars.job_jar_sets`, the rule of a job's own session too).

    Examples:
        >>> jar_sets(split_arguments(["audit"]))
        ['delta']
        >>> jar_sets(split_arguments(["--conf", "spark.snap.lake.backend=delta-rs", "audit"]))
        []
        >>> jar_sets(split_arguments(["stream_verify", "--kafka-bootstrap=k:9092"]))
        ['delta', 'kafka']
    """
    from snap_spark.runtime.maven_jars import job_jar_sets

    kafka = any(arg == "--kafka-bootstrap" or arg.startswith("--kafka-bootstrap=")
                for arg in request.job_args)
    return job_jar_sets(request.confs().get(LAKE_BACKEND_CONF),
                        reads_kafka=request.job == "stream_verify" and kafka)


def merge_jars(given: Sequence[str], cached: Sequence[str]) -> list[str]:
    """The ``--jars`` list: the JARs given first, then the cached ones not already there (a
    JAR of the same file name is the same artifact and version).

    Examples:
        >>> merge_jars(["/a/x.jar,/a/y.jar"], ["/c/y.jar", "/c/z.jar", "/c/z.jar"])
        ['/a/x.jar', '/a/y.jar', '/c/z.jar']
    """
    merged: list[str] = []
    names: set[str] = set()
    for jar in [item.strip() for value in given for item in value.split(",")] + list(cached):
        name = jar.rstrip("/").rsplit("/", 1)[-1]
        if jar and jar not in merged and name not in names:
            merged.append(jar)
            names.add(name)
    return merged


@dataclass(frozen=True)
class Plan:
    """What :func:`run` executes: ``argv`` (``argv[0]`` is spark-submit) with ``env``;
    ``changed`` holds the variables that differ from the calling environment."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    changed: Mapping[str, str]

    def command_line(self) -> str:
        """One shell line: the changed variables as assignments, then the command.

        Examples:
            >>> Plan(("/s/bin/spark-submit", "a b"), {}, {"X": "1 2"}).command_line()
            "X='1 2' /s/bin/spark-submit 'a b'"
        """
        assignments = [f"{name}={shlex.quote(value)}" for name, value in self.changed.items()]
        return " ".join([*assignments, shlex.join(self.argv)])


def build_plan(
    request: Request,
    environ: Mapping[str, str],
    python: str = sys.executable,
    jobs_dir: Path = JOBS_DIR,
    cached_jars: Callable[[Sequence[str]], list[str]] | None = None,
) -> Plan:
    """The spark-submit command and environment for ``request``.

    ``cached_jars`` returns the cached JARs of the named sets (default
    :func:`snap_spark.runtime.maven_jars.submit_jars`).

    Raises:
        SubmitError: unknown job (exit 2); no Spark home or no spark-submit in it (exit 1).

    Examples:
        >>> plan = build_plan(split_arguments(["--master", "local[2]", "audit", "--lake", "L"]),
        ...                   {"PATH": "/bin"}, cached_jars=lambda sets: ["/j/delta.jar"])
        >>> plan.argv[-6:]  # doctest: +ELLIPSIS
        ('local[2]', '--jars', '/j/delta.jar', '.../jobs/audit.py', '--lake', 'L')
    """
    script = job_script(request.job, jobs_dir)
    home, source = spark_home(environ)
    program = home / "bin" / "spark-submit"
    if not (program.is_file() and os.access(program, os.X_OK)):
        raise SubmitError(f"no spark-submit at {program} (Spark's home from {source})",
                          EXIT_FAILED)
    if cached_jars is None:
        from snap_spark.runtime.maven_jars import submit_jars

        cached_jars = submit_jars
    given = request.confs()
    argv = [str(program), "--conf", UTC_CONF]
    if "spark.ui.showConsoleProgress" not in given:
        argv += ["--conf", "spark.ui.showConsoleProgress=false"]
    if (request.last("--driver-java-options") is None
            and DRIVER_JAVA_OPTIONS_CONF not in given):
        logging = [f"-Dlog4j2.configurationFile={LOG4J2_CONF}"] if LOG4J2_CONF.is_file() else []
        flags = driver_jvm_flags(local_master(request.master())) if runtime_on() else ""
        argv += ["--driver-java-options", " ".join([*logging, *([flags] if flags else [])])]
    given_jars: list[str] = []
    for option, value in request.spark_options:
        if option == "--jars":
            given_jars.append(value or "")
        else:
            argv += [option] if value is None else [option, value]
    sets = jar_sets(request)
    jars = merge_jars(given_jars, cached_jars(sets) if sets else [])
    if jars:
        argv += ["--jars", ",".join(jars)]
    argv += [str(script), *request.job_args]
    env = submit_environment(environ, home, python, request.is_local())
    changed = {name: env[name] for name in sorted(env, key=lambda n: (n == "PATH", n))
               if environ.get(name) != env[name]}
    return Plan(argv=tuple(argv), env=env, changed=changed)


def run(request: Request, environ: Mapping[str, str] | None = None) -> int:
    """Run ``request``: print the command (``--dry-run``, exit 0), or become spark-submit
    (never returns). Returns the exit status of a command that cannot run (one line on
    stderr: 2 for an unknown job, 1 for no spark-submit)."""
    try:
        plan = build_plan(request, os.environ if environ is None else environ)
    except SubmitError as exc:
        print(f"snap-spark submit: {exc}", file=sys.stderr)
        return exc.status
    if request.dry_run:
        print(plan.command_line())
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(plan.argv[0], plan.argv, plan.env)
