"""The shared job runner: arguments, settings, session, progress, summary and exit codes.

Every ``jobs/*.py`` entry point is a few lines: it names a :class:`Job` and calls
:func:`main`. The runner gives all jobs the same conventions:

- options ``--config TOML`` (default ``conf/pipeline.toml`` of the checkout, when present),
  ``--conf KEY=VALUE`` (Spark settings, repeatable), ``--master``, ``--lake DIR``, and,
  for jobs that verify messages, ``--bare-clock``, ``--max-drift``, ``--replay-window``,
  ``--verify-threads``, ``--batch-rows`` (:func:`add_verify_arguments`); command-line
  values win over the config file;
- every setting validated before Spark starts (:class:`snap_spark.settings.SettingsError`:
  exit 2 with one line, nothing written);
- relative paths in a config file are relative to the folder holding that file, paths on
  the command line to the working directory; the lake is printed as an absolute location;
- progress lines on stderr (:func:`log`), the job's summary on stdout;
- exit codes :data:`EXIT_OK` 0, :data:`EXIT_FAILED` 1 (the lake refused a write, a task
  failed), :data:`EXIT_USAGE` 2 (bad options or inputs; nothing written), :data:`EXIT_ALERT`
  3 (reserved for jobs that report findings, e.g. audits crossing a threshold),
  :data:`EXIT_STORAGE` 4 (the storage refused the job's writes: a read-only or full disk,
  no write permission on the lake, a lake folder that went away; :func:`storage_fault`);
- an error the runner knows is one line on stderr saying what happened and what to do
  (``--debug``: the traceback, and Spark's own log lines of a failed task or query, which
  the one line replaces otherwise); an unexpected one prints its traceback.

Examples:
    A new job::

        class Hello(Job):
            name = "hello"
            description = "count the lines of the inputs"

            def add_arguments(self, parser):
                parser.add_argument("--input", action="append", required=True)

            def run(self, spark, context):
                return spark.read.text(context.args.input).count()

        if __name__ == "__main__":
            sys.exit(main(Hello()))
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import sys
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snap_spark.common.console import UsageError
from snap_spark.common.extras import MissingExtra, missing_extra
from snap_spark.settings import DEFAULT_BATCH_ROWS, SettingsError, VerifySettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ALERT = 3
#: The storage refused the job's writes, or the lake folder went away (:func:`storage_fault`):
#: what was committed stays committed; fix the storage and run the job again.
EXIT_STORAGE = 4

#: ``conf/pipeline.toml`` of this checkout (absent when installed as a wheel).
DEFAULT_PIPELINE_CONF = Path(__file__).resolve().parent.parent / "conf" / "pipeline.toml"

#: Where the lake goes when neither ``--lake`` nor the config names one: ``data/lake`` under
#: the working directory.
FALLBACK_LAKE = "data/lake"


#: Operating-system errors that mean the storage refused a write: each with what happened
#: (said of the path, or of the lake when the error names none) and what to do. EACCES
#: counts only for a path on the lake; ENOENT only for a lake folder that went away
#: (:func:`storage_fault`). Listed in order of precedence.
WRITE_ERRORS: dict[int, tuple[str, str]] = {
    errno.EROFS: ("read-only file system", "make it writable (remount it read-write)"),
    errno.ENOSPC: ("no space left on the device",
                   "free space on that disk (Spark's scratch folders count too)"),
    errno.EDQUOT: ("disk quota used up", "free space or raise the quota"),
    errno.EFBIG: ("file size limit reached (ulimit -f, or the largest file the file system "
                  "takes)", "raise the limit or free space"),
    errno.EACCES: ("permission denied", "give the job's user write access to the lake"),
}

#: How the errors of the storage layers spell an error number: Python's ``[Errno 30]``,
#: pyarrow's ``[errno 30]``, Rust's ``(os error 30)``.
_ERRNO_TEXT = re.compile(r"\[errno (\d+)\]|\(os error (\d+)\)", re.IGNORECASE)
#: Java's exceptions that name the condition by their class rather than by its C text.
_JAVA_ERRORS = {"ReadOnlyFileSystemException": errno.EROFS,
                "AccessDeniedException": errno.EACCES,
                "NoSuchFileException": errno.ENOENT}
#: Characters that end a path quoted in an error text.
_PATH_END = r"[^\s'\"(),;\]]*"


@dataclass(frozen=True)
class StorageFault:
    """A write the storage refused, or a lake folder that went away, found in an error by
    :func:`storage_fault`."""

    #: the operating system's error number (``errno.EROFS``, ...; ``errno.ENOENT``: the
    #: lake folder went away)
    code: int
    #: the file or folder the error names, when it names one
    path: str | None
    #: the lake the job writes
    lake: str

    def message(self) -> str:
        """One line: what happened and what to do.

        Examples:
            >>> print(StorageFault(errno.EROFS, "/data/lake/_snap_runs", "/data/lake").message())
            ... # doctest: +ELLIPSIS
            the lake cannot be written: /data/lake/_snap_runs: read-only file system; make ...
            >>> print(StorageFault(errno.ENOSPC, None, "/data/lake").message())
            ... # doctest: +ELLIPSIS
            a write of the job failed (lake /data/lake): no space left on the device; ...
        """
        if self.code == errno.ENOENT:
            return (f"the lake folder {self.lake} went away while the job ran (deleted, moved "
                    "or unmounted): put the lake back there (restore it from a backup, in "
                    "place of anything this run wrote there since) and run the job again")
        condition, todo = WRITE_ERRORS[self.code]
        if self.path is None:
            what = f"a write of the job failed (lake {self.lake})"
        elif _within(self.path, self.lake):
            what = f"the lake cannot be written: {self.path}"
        else:
            what = f"the job cannot write {self.path}"
        return (f"{what}: {condition}; {todo}, then run the job again: nothing committed is "
                "lost, and the new run completes what this one began")


def _within(path: str, folder: str) -> bool:
    """True when ``path`` is ``folder`` or inside it (locations compared as written).

    Examples:
        >>> _within("/data/lake/messages/x.parquet", "/data/lake")
        True
        >>> _within("/data/lake2", "/data/lake")
        False
    """
    folder = folder.rstrip("/")
    return path == folder or path.startswith(folder + "/")


class FolderWatch:
    """Tells whether a local folder (the lake a job starts with) went away: deleted, moved,
    or replaced by another folder of the same name. It holds the folder open, so the
    folder's inode is not given to a folder made again in its place while it is watched.

    Examples:
        >>> folder = tmp / "lake"
        >>> folder.mkdir()
        >>> with FolderWatch(str(folder)) as watch:
        ...     before = watch.went_away()
        ...     folder.rmdir()
        ...     folder.mkdir()
        ...     before, watch.went_away()
        (False, True)
        >>> FolderWatch("s3://bucket/lake").went_away()  # only local folders are watched
        False
    """

    def __init__(self, location: str) -> None:
        from snap_spark.files import storage

        self.path = storage.local_path(location) if location and storage.is_local(
            location) else None
        self.handle: int | None = None
        if self.path is not None:
            with contextlib.suppress(OSError):  # missing (a new lake) or not a folder
                self.handle = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)

    def went_away(self) -> bool:
        """True when the folder watched since the start is no longer at its path."""
        if self.handle is None or self.path is None:
            return False
        held = os.fstat(self.handle)
        try:
            now = os.stat(self.path)
        except OSError:
            return True
        return held.st_nlink == 0 or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino)

    def close(self) -> None:
        """Stop watching."""
        if self.handle is not None:
            os.close(self.handle)
            self.handle = None

    def __enter__(self) -> FolderWatch:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def error_chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every error it was raised from or while handling, once each, also those
    Py4J and PySpark keep as a ``cause``."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for linked in (current.__cause__, current.__context__,
                       getattr(current, "cause", None), getattr(current, "_cause", None)):
            if isinstance(linked, BaseException):
                todo.append(linked)


def _text(error: BaseException) -> str:
    """What an error says, the Java stack trace of a Py4J error included (empty when even
    that cannot be had, e.g. from a JVM that is gone)."""
    try:
        return str(error)
    except Exception:  # a Py4J error asks the JVM for its text
        return ""


def error_codes(error: BaseException) -> set[int]:
    """The operating-system error numbers an error and its chain carry: ``OSError.errno``,
    and in their texts (a Py4J error's Java stack trace, a Spark task's Python traceback,
    a Rust error of delta-rs) the number or the C library's text for it.

    Examples:
        >>> sorted(error_codes(RuntimeError("Generic error: No space left on device "
        ...                                 "(os error 28)")))
        [28]
        >>> sorted(error_codes(OSError(errno.EROFS, "Read-only file system")))
        [30]
    """
    found: set[int] = set()
    names = {code: os.strerror(code).lower() for code in (*WRITE_ERRORS, errno.ENOENT)}
    for current in error_chain(error):
        if isinstance(current, OSError) and current.errno is not None:
            found.add(current.errno)
        text = _text(current)
        for match in _ERRNO_TEXT.finditer(text):
            found.add(int(match.group(1) or match.group(2)))
        lowered = text.lower()
        found.update(code for code, name in names.items() if name in lowered)
        found.update(code for name, code in _JAVA_ERRORS.items() if name in text)
    return found


def _named_path(error: BaseException, lake: str) -> str | None:
    """The path an error names: one on the lake first, else an ``OSError``'s file name, else
    the first absolute path quoted in its texts."""
    texts = [_text(current) for current in error_chain(error)]
    if lake:
        on_lake = re.compile(re.escape(lake.rstrip("/")) + r"(?:/" + _PATH_END + ")?")
        for text in texts:
            if match := on_lake.search(text):
                return match.group(0).rstrip(".")
    for current in error_chain(error):
        if isinstance(current, OSError) and isinstance(current.filename, str):
            return current.filename
    quoted = re.compile(r"'(/[^']+)'")
    for text in texts:
        if match := quoted.search(text):
            return match.group(1)
    return None


def storage_fault(error: BaseException, lake: str,
                  watch: FolderWatch | None = None) -> StorageFault | None:
    """What storage fault ``error`` reports, if any (:data:`EXIT_STORAGE`), however deep it
    is wrapped (Py4J and Spark exceptions, a Spark task's Python error, pyarrow and
    delta-rs errors):

    - a read-only file system, no space left, a used-up quota, a file-size limit
      (``EROFS``, ``ENOSPC``, ``EDQUOT``, ``EFBIG``), wherever the job met it;
    - permission denied (``EACCES``) on a path of the lake;
    - the lake folder gone (``ENOENT``): the local lake folder the job started with went
      away (``watch``), whatever error that gave; or an error names a missing path of the
      lake, and the lake folder is missing.

    ``None`` for anything else: a missing input file stays a usage error.

    Examples:
        >>> fault = storage_fault(OSError(errno.EROFS, "Read-only file system",
        ...                               "/data/lake/_snap_runs"), "/data/lake")
        >>> fault.code == errno.EROFS, fault.path
        (True, '/data/lake/_snap_runs')
        >>> storage_fault(FileNotFoundError(errno.ENOENT, "No such file", "/in/a.jsonl"),
        ...               "/data/lake") is None
        True
    """
    from snap_spark.files import storage

    codes = error_codes(error)
    path = _named_path(error, lake)
    if watch is not None and watch.went_away():
        return StorageFault(errno.ENOENT, path, lake)
    on_lake = path is not None and bool(lake) and _within(path, lake)
    for code in WRITE_ERRORS:
        if code in codes and (code != errno.EACCES or on_lake):
            return StorageFault(code, path, lake)
    if (errno.ENOENT in codes and on_lake and storage.is_local(lake)
            and not os.path.isdir(storage.local_path(lake))):
        return StorageFault(errno.ENOENT, path, lake)
    return None


@dataclass
class Context:
    """What a job's :meth:`Job.run` gets besides the session."""

    args: argparse.Namespace
    #: the parsed ``--config`` file (empty when there is none)
    config: dict[str, Any] = field(default_factory=dict)
    #: the folder relative config paths are resolved against
    config_base: Path = field(default_factory=Path.cwd)
    #: validated verification settings (jobs that verify messages)
    verify: VerifySettings = field(default_factory=VerifySettings)
    #: the lake location: an absolute local path or a URI
    lake: str = ""


class Job:
    """One ``spark-submit`` job. Subclasses set :attr:`name`/:attr:`description` and
    implement :meth:`add_arguments`, :meth:`run` and :meth:`summary`."""

    name: str = "job"
    description: str = ""
    epilog: str = ""
    #: adds --bare-clock, --max-drift, ... and fills :attr:`Context.verify`
    verifies_messages: bool = False
    #: adds --lake and fills :attr:`Context.lake`
    uses_lake: bool = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the job's own options."""

    def check(self, context: Context) -> None:
        """Validate the job's own options before Spark starts; raise :class:`UsageError`."""

    def reads_kafka(self, context: Context) -> bool:
        """Whether this run reads a Kafka topic (its session then loads the Kafka
        connector's cached JARs: :func:`snap_spark.runtime.session.deferred_session`)."""
        return False

    def run(self, spark: SparkSession, context: Context) -> Any:
        """Do the work; return what :meth:`summary` prints."""
        raise NotImplementedError

    def summary(self, result: Any) -> str:
        """The end-of-run text printed on stdout."""
        return str(result)

    def exit_code(self, result: Any) -> int:
        """Exit status for a finished run (0 unless the job reports an alert)."""
        return EXIT_OK


def build_parser(job: Job) -> argparse.ArgumentParser:
    """The job's argument parser: the runner's common options plus the job's own."""
    parser = argparse.ArgumentParser(prog=f"{job.name}.py", description=job.description,
                                     epilog=job.epilog)
    job.add_arguments(parser)
    if job.uses_lake:
        parser.add_argument("--lake", default=None, metavar="DIR",
                            help="folder (or URI) of the Delta tables (default: [lake] path "
                            f"of --config, else ./{FALLBACK_LAKE})")
    if job.verifies_messages:
        add_verify_arguments(parser)
    common = parser.add_argument_group("settings and Spark")
    common.add_argument("--config", default=None, metavar="TOML",
                        help="pipeline settings file (default conf/pipeline.toml of the "
                        "checkout); relative paths in it are relative to its folder")
    common.add_argument("--master", default=None,
                        help="Spark master when not launched by spark-submit (default local[*])")
    common.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting (repeatable)")
    common.add_argument("--debug", action="store_true",
                        help="on an error, print the whole traceback (default: one line)")
    return parser


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """The verification options every job that checks messages shares."""
    group = parser.add_argument_group("verification")
    group.add_argument("--bare-clock", default=None, metavar="CLOCK",
                       help="receipt time for bare lines: 'now' (job start, same for all), "
                       "'message' (trust the message timestamp), or unix seconds; "
                       "without it a bare line stops the job before anything is written")
    group.add_argument("--max-drift", default=None, metavar="SECONDS",
                       help="allowed |received_at - timestamp| (default 60; 60 passes)")
    group.add_argument("--replay-window", default=None, metavar="SECONDS",
                       help="an accepted (from, id) makes repeats within this many seconds "
                       "of receipt time a 2006 (default 120)")
    group.add_argument("--verify-threads", default=None, metavar="N",
                       help="signature-verification threads per task (default 0 = one per "
                       "core a task owns: spark.task.cpus, or idle cores in local mode)")
    group.add_argument("--batch-rows", default=None, metavar="N",
                       help=f"lines per Arrow batch (default {DEFAULT_BATCH_ROWS})")


def load_config(path: str | None) -> tuple[dict[str, Any], Path]:
    """``(settings, base folder)`` of ``--config``, or of the default file when present.

    Raises:
        UsageError: the named file is missing or is not valid TOML.
    """
    chosen = Path(path) if path else DEFAULT_PIPELINE_CONF
    if not chosen.exists():
        if path:
            raise UsageError(f"config file not found: {path}")
        return {}, Path.cwd()
    try:
        with chosen.open("rb") as handle:
            return tomllib.load(handle), chosen.resolve().parent
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {chosen} is not valid TOML: {exc}") from None


def resolve_location(location: str, base: Path) -> str:
    """A local path made absolute against ``base`` (a URI is returned as given).

    Examples:
        >>> resolve_location("s3://bucket/lake", Path("/etc"))
        's3://bucket/lake'
        >>> resolve_location("../data/lake", Path("/repo/conf"))
        '/repo/data/lake'
    """
    from snap_spark.files import storage

    if not storage.is_local(location):
        return location
    if storage.split_scheme(location)[0] == "file":
        return storage.local_path(location)
    return os.path.normpath(os.path.join(base, os.path.expanduser(location)))


def verify_settings(args: argparse.Namespace, config: dict[str, Any]) -> VerifySettings:
    """Verification settings from the config's ``[verify]`` table and the command line
    (which wins), validated.

    Raises:
        SettingsError: a value is out of range or malformed.
    """
    section = config.get("verify", {})
    if not isinstance(section, dict):
        raise SettingsError("[verify] in the config file must be a table")

    def pick(option: str, key: str, default: Any) -> Any:
        given = getattr(args, option, None)
        return given if given is not None else section.get(key, default)

    defaults = VerifySettings()
    settings = VerifySettings(
        max_drift=pick("max_drift", "max_drift_seconds", defaults.max_drift),
        replay_window=pick("replay_window", "replay_window_seconds", defaults.replay_window),
        bare_clock=str(pick("bare_clock", "bare_clock", "")),
        verify_threads=pick("verify_threads", "verify_threads", 0),
        batch_rows=pick("batch_rows", "batch_rows", DEFAULT_BATCH_ROWS),
    )
    return settings.validated().with_clock_now()


def spark_conf(items: Sequence[str]) -> dict[str, str]:
    """``--conf KEY=VALUE`` options as a dict.

    Raises:
        UsageError: an item has no ``=``.
    """
    extra: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--conf wants KEY=VALUE, got {item!r}")
        extra[key.strip()] = value.strip()
    return extra


def prepare(job: Job, argv: Sequence[str] | None = None) -> Context:
    """Parse and validate everything a run needs before Spark starts.

    Raises:
        UsageError, SettingsError: exit 2.
    """
    args = build_parser(job).parse_args(argv)
    config, base = load_config(args.config)
    context = Context(args=args, config=config, config_base=base)
    if job.verifies_messages:
        context.verify = verify_settings(args, config)
    if job.uses_lake:
        if args.lake:
            context.lake = resolve_location(args.lake, Path.cwd())
        else:
            lake = config.get("lake", {}).get("path")
            context.lake = (resolve_location(str(lake), base) if lake
                            else resolve_location(FALLBACK_LAKE, Path.cwd()))
    job.check(context)
    from snap_spark.common.placement import limits
    from snap_spark.runtime.scope import RuntimeSettingError, check_setting

    limits()  # SNAP_SPARK_DRIVER_LIMITS, refused here when malformed
    try:
        check_setting()  # SNAP_SPARK_RUNTIME likewise
    except RuntimeSettingError as exc:
        raise SettingsError(str(exc)) from None
    return context


#: Spark's loggers that repeat a failed task's or streaming query's error as it happens
#: (stack traces and a Spark task's Python traceback, tens of lines each); the error reaches
#: the job all the same, and its one line replaces them (``--debug`` keeps them).
FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.StreamExecution",
    # the same two from Spark 4.1, which moved them
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.runtime.StreamExecution",
)


def quiet_failure_logs(spark: SparkSession) -> None:
    """Turn off :data:`FAILURE_LOGGERS` in the driver JVM (nothing changes where the driver
    does not log with log4j 2)."""
    with contextlib.suppress(Exception):
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in FAILURE_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)


def main(job: Job, argv: Sequence[str] | None = None) -> int:
    """Run ``job`` as a command: parse, validate, start Spark, run, print, exit code."""
    prefix = f"{job.name}:"
    try:
        context = prepare(job, argv)
        extra = spark_conf(context.args.conf)
    except (UsageError, SettingsError, MissingExtra) as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return EXIT_USAGE
    from snap_spark.lake import DamagedTable, LakeError, LakeLocationError
    from snap_spark.protocol.validate import MissingReceiptTime
    from snap_spark.runtime.session import deferred_session, when_started

    debug = bool(context.args.debug)
    # the lake folder the job starts with: if it goes away meanwhile, that is what the job
    # says, whatever error it gave
    with FolderWatch(context.lake) as watch:
        try:
            # Spark starts when the job first needs it: a small run on a local master
            # may never (snap_spark.runtime.session.deferred_session)
            spark = deferred_session(f"snap-spark {job.name}", master=context.args.master,
                                     extra_conf=extra, reads_kafka=job.reads_kafka(context))
        except Exception as exc:  # e.g. no space left for Spark's scratch files
            if debug or (fault := storage_fault(exc, context.lake)) is None:
                raise
            print(f"{prefix} {fault.message()}", file=sys.stderr)
            return EXIT_STORAGE
        spark.sparkContext.setLogLevel(os.environ.get("SNAP_SPARK_LOG_LEVEL", "WARN"))
        if not debug:
            when_started(spark, quiet_failure_logs)
        try:
            try:
                result = job.run(spark, context)
            except Exception as exc:
                if debug or (fault := storage_fault(exc, context.lake, watch)) is None:
                    raise
                print(f"{prefix} {fault.message()}", file=sys.stderr)
                return EXIT_STORAGE
        except (UsageError, SettingsError, FileNotFoundError, NotADirectoryError,
                MissingReceiptTime, LakeLocationError) as exc:
            print(f"{prefix} {exc}", file=sys.stderr)
            return EXIT_USAGE
        except DamagedTable as exc:
            if debug:
                raise
            print(f"{prefix} {exc}", file=sys.stderr)
            return EXIT_FAILED
        except LakeError as exc:
            print(f"{prefix} the Delta tables refused the write: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except ImportError as exc:
            if (missing := missing_extra(exc)) is None:
                raise
            print(f"{prefix} {missing}", file=sys.stderr)
            return EXIT_USAGE
        print(job.summary(result))
        if watch.went_away():  # the job ended well, but not in the lake it started with
            print(f"{prefix} {StorageFault(errno.ENOENT, None, context.lake).message()}",
                  file=sys.stderr)
            return EXIT_STORAGE
    return job.exit_code(result)
