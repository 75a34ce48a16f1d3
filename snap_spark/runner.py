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
  3 (reserved for jobs that report findings, e.g. audits crossing a threshold).

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
import os
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snap_spark.extras import MissingExtra, missing_extra
from snap_spark.settings import DEFAULT_BATCH_ROWS, SettingsError, VerifySettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ALERT = 3

#: ``conf/pipeline.toml`` of this checkout (absent when installed as a wheel).
DEFAULT_PIPELINE_CONF = Path(__file__).resolve().parent.parent / "conf" / "pipeline.toml"

#: Where the lake goes when neither ``--lake`` nor the config names one: ``data/lake`` under
#: the working directory.
FALLBACK_LAKE = "data/lake"


class UsageError(ValueError):
    """The command line or an input cannot be used as given (exit 2, nothing written)."""


def log(message: str) -> None:
    """Progress line for people following a long run (stderr, flushed)."""
    print(f"[snap-spark {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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
    from snap_spark import storage

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
    return context


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
    from snap_spark.session import build_session

    spark = build_session(f"snap-spark {job.name}", master=context.args.master,
                          extra_conf=extra)
    spark.sparkContext.setLogLevel(os.environ.get("SNAP_SPARK_LOG_LEVEL", "WARN"))
    try:
        result = job.run(spark, context)
    except (UsageError, SettingsError, FileNotFoundError, NotADirectoryError,
            MissingReceiptTime, LakeLocationError) as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DamagedTable as exc:
        if context.args.debug:
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
    return job.exit_code(result)
