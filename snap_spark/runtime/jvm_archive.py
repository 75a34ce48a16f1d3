"""A class-data-sharing archive for the Spark driver JVM: a short job starts in less time.

A Spark driver JVM loads, parses and verifies some 15,000 classes from Spark's JARs before
the first task runs; on two cores that is most of a short job's fixed cost. The JVM can
instead map those classes, already parsed and verified, from an archive written by an
earlier run (HotSpot's dynamic class-data sharing, ``-XX:ArchiveClassesAtExit`` then
``-XX:SharedArchiveFile``). A cold ``spark-submit`` of the batch job on a small input then
takes markedly less time (docs/speed.md, *Figures behind the code*).

- ``make setup`` builds the archive (:func:`build`: one ``spark-submit`` whose driver runs
  the batch job, then the stream job, on a generated 200-line sample (:func:`train`), about
  170 MB; how long that takes is in docs/speed.md, *Figures behind the code*). The stream
  brings the classes of Structured Streaming and its RocksDB state store, which a cold
  stream job would otherwise read from Spark's JARs.
- :func:`driver_jvm_flags` is what every driver JVM that snap-spark starts is given: the
  short-job flags (:data:`DRIVER_JVM_FLAGS`) and, when an archive for
  this exact Java and Spark exists, the flag that maps it. ``build_session``, ``snap-spark
  submit`` and the Makefile's jobs use it.
- An archive belongs to one Java build, one set of Spark JARs and those flags: its file name
  carries a fingerprint of them (:func:`fingerprint`), so a new Java or PySpark simply finds
  no archive (and runs as before) until ``make setup`` builds one again. Should the JVM
  still refuse an archive (a class path changed by ``--driver-class-path``), it starts
  without it, silently; an archive never changes what a job computes.
- ``SNAP_SPARK_JVM_ARCHIVE=0`` turns it off; another value names the archive's folder
  (default: ``.venv/jvm-archive`` of a checkout, else ``<sys.prefix>/jvm-archive``).

The command line: ``python -m snap_spark.runtime.jvm_archive build|flags [--master URL]|status``.

Examples:
    Without an archive, the flags are the short-job flags alone:

    >>> getfixture("monkeypatch").setenv(ARCHIVE_ENV, str(tmp))
    >>> driver_jvm_flags() == DRIVER_JVM_FLAGS
    True
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from snap_spark.runtime.scope import local_master, switched_off

#: JVM options for the driver of a short job (the embedded default, ``make run``,
#: ``snap-spark submit``): the C1 compiler only, and the parallel collector. Each job plans
#: new generated code, which C2 compiles again on every run, and G1 runs concurrent threads
#: beside the tasks; on 2 cores both take cores from the Python workers. With these flags a
#: cold ``spark-submit`` of a small input ends sooner, and the driver JVM spends much less
#: CPU on a large run (docs/speed.md, *Figures behind the code*). A driver given its own
#: ``--driver-java-options`` or ``spark.driver.extraJavaOptions`` keeps those instead.
DRIVER_JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"
#: ``0`` (or ``off``) disables the archive; another value is the folder that holds it.
ARCHIVE_ENV: Final = "SNAP_SPARK_JVM_ARCHIVE"
#: The archive's folder inside a checkout's ``.venv`` or an installed environment.
FOLDER: Final = "jvm-archive"
#: What the archive's training run covers (:func:`train`); part of :func:`fingerprint`, so a
#: wider training builds the archive again at the next ``make setup``.
TRAINING: Final = "verify_messages+stream_verify"
#: How many archives a folder keeps (the newest; each is 150-200 MB).
KEEP: Final = 2
#: Keep the JVM quiet when it cannot use an archive (it then starts without it).
QUIET: Final = "-Xlog:cds=off -Xlog:cds+dynamic=off"

_CHECKOUT = Path(__file__).resolve().parents[2]


def disabled() -> bool:
    """True when ``SNAP_SPARK_JVM_ARCHIVE`` says ``0``, ``off``, ``false`` or ``no``, or
    the whole runtime is off (:data:`snap_spark.runtime.scope.RUNTIME_ENV`)."""
    return switched_off(ARCHIVE_ENV)


def archive_dir() -> Path:
    """The folder of the archive: ``$SNAP_SPARK_JVM_ARCHIVE`` when it names one, a checkout's
    ``.venv/jvm-archive``, else ``<sys.prefix>/jvm-archive``."""
    configured = os.environ.get(ARCHIVE_ENV, "").strip()
    if configured and not disabled():
        return Path(configured).expanduser().resolve()
    if (_CHECKOUT / "pyproject.toml").is_file():
        return _CHECKOUT / ".venv" / FOLDER
    return Path(sys.prefix) / FOLDER


def spark_home() -> Path | None:
    """The Spark installation a driver JVM runs from: ``$SPARK_HOME``, else the installed
    PySpark's folder (found without importing it)."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"]).resolve()
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def fingerprint() -> str | None:
    """16 hex digits naming what an archive is only valid for: the Java binary (its real
    path, size and time), every JAR of Spark's ``jars`` folder (name, size, time) and the
    driver's JVM flags (and what the training run covers, :data:`TRAINING`); ``None``
    when Java or Spark is not found. The same installation reached through a link (a
    workspace's linked ``.venv``) has the same fingerprint."""
    java, home = java_binary(), spark_home()
    if java is None or home is None or not (home / "jars").is_dir():
        return None
    digest = hashlib.sha256(f"{DRIVER_JVM_FLAGS}\0{TRAINING}".encode())
    libjvm = sorted(java.parents[1].glob("lib/server/libjvm.so"))
    for path in [java, *libjvm]:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    for path in sorted((home / "jars").glob("*.jar")):
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def archive_path() -> Path | None:
    """Where this environment's archive is (or would be built); ``None`` without Java or
    Spark."""
    key = fingerprint()
    return None if key is None else archive_dir() / f"spark-driver-{key}.jsa"


def driver_jvm_flags(short_job: bool = True) -> str:
    """The driver JVM's flags: :data:`DRIVER_JVM_FLAGS` for a short job's driver, plus the
    archive when one exists for this environment and it is not turned off.

    ``short_job`` is :func:`snap_spark.runtime.scope.local_master` of the driver's master:
    there the driver JVM shares the machine's cores with the Python workers. A cluster's
    driver (``yarn``, ``k8s://``, ``spark://``, ...) schedules for as long as its
    application lives, on a machine of its own: it gets the archive alone and keeps the
    JVM's tiered compiler and G1 collector. Local streams keep the flags too, by
    measurement (docs/settings.md, "Driver JVM flags").

    Examples:
        >>> getfixture("monkeypatch").setenv(ARCHIVE_ENV, "0")
        >>> driver_jvm_flags(), driver_jvm_flags(short_job=False)
        ('-XX:TieredStopAtLevel=1 -XX:+UseParallelGC', '')
    """
    flags = DRIVER_JVM_FLAGS if short_job else ""
    if disabled():
        return flags
    path = archive_path()
    if path is None or not path.is_file():
        return flags
    return f"{flags} -XX:SharedArchiveFile={path} {QUIET}".strip()


def build(force: bool = False) -> Path:
    """Write this environment's archive (see the module docs); returns its path. A current
    archive is kept unless ``force``. The folder keeps the :data:`KEEP` newest archives (a
    folder shared by two Java or Spark installations serves both).

    Raises:
        RuntimeError: Java or Spark is not found, or the sample job failed.
    """
    target = archive_path()
    if target is None:
        raise RuntimeError("no java or no Spark installation found")
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    assert home is not None
    with tempfile.TemporaryDirectory(prefix="snap-jvm-archive-") as work:
        from snap_spark.samples.messages import SampleConfig, write_sample

        sample = Path(work) / "sample.jsonl"
        write_sample(SampleConfig(messages=200, seed=7), str(sample))
        (Path(work) / "landing").mkdir()
        shutil.copyfile(sample, Path(work) / "landing" / sample.name)
        partial = target.parent / f".{target.name}.{os.getpid()}.partial"
        command = [str(home / "bin" / "spark-submit"), "--master", "local[2]",
                   "--conf", "spark.ui.enabled=false",
                   "--conf", "spark.ui.showConsoleProgress=false",
                   "--driver-java-options",
                   f"{DRIVER_JVM_FLAGS} -XX:ArchiveClassesAtExit={partial} {QUIET}",
                   str(Path(__file__).resolve()), "train", work]
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
               "PYSPARK_DRIVER_PYTHON": sys.executable,
               # 200 lines would land on the driver: the archive should hold the classes
               # of the Spark tasks a larger run lands with
               "SNAP_SPARK_DRIVER_LIMITS": "land_bytes=0"}
        try:
            done = subprocess.run(command, env=env, capture_output=True, timeout=600,
                                  check=False)
            if done.returncode != 0 or not partial.is_file():
                tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
                raise RuntimeError(f"the training run exited {done.returncode}: "
                                   + " / ".join(tail))
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    prune(target)
    return target


def train(work: Path) -> None:
    """The archive's training run, in the driver ``spark-submit`` started for :func:`build`:
    the batch job over ``work/sample.jsonl``, then the stream job (``available-now``) over
    the folder ``work/landing``, each into a lake of its own under ``work``.

    Raises:
        RuntimeError: a job did not exit 0.
    """
    from snap_spark.runtime.spark_path import fix_paths

    fix_paths()  # PySpark from its installed folder, as the packaged jobs do
    from snap_spark.pipeline.batch_job import main as batch
    from snap_spark.stream.stream_job import main as stream

    runs = [("batch", batch, ["--input", str(work / "sample.jsonl"),
                              "--lake", str(work / "lake")]),
            ("stream", stream, ["--landing", str(work / "landing"),
                                "--checkpoint", str(work / "checkpoint"),
                                "--lake", str(work / "stream-lake"),
                                "--trigger", "available-now"])]
    for name, main_of, argv in runs:
        code = main_of(argv)
        if code != 0:
            raise RuntimeError(f"the {name} job of the training run exited {code}")


def prune(current: Path) -> list[Path]:
    """Remove the archives of ``current``'s folder but ``current`` and the newest others,
    :data:`KEEP` in all; the files removed."""
    others = sorted((p for p in current.parent.glob("spark-driver-*.jsa") if p != current),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in others[KEEP - 1:]:
        old.unlink(missing_ok=True)
    return others[KEEP - 1:]


def main(argv: list[str] | None = None) -> int:
    """``python -m snap_spark.runtime.jvm_archive build [--force] | flags | status``."""
    parser = argparse.ArgumentParser(
        prog="python -m snap_spark.runtime.jvm_archive",
        description="The Spark driver JVM's class-data-sharing archive (a shorter start).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{build,flags,status}")
    make = sub.add_parser("build", help="build this environment's archive (make setup runs it)")
    make.add_argument("--force", action="store_true", help="build again even if current")
    flags = sub.add_parser("flags", help="print the driver JVM flags snap-spark gives")
    flags.add_argument("--master", default=None,
                       help="the master (a cluster's driver gets no short-job flags)")
    sub.add_parser("status", help="say whether this environment has its archive")
    # what build() runs in its spark-submit driver: not for the command line
    training = sub.add_parser("train")
    training.add_argument("work", type=Path)
    args = parser.parse_args(argv)
    if args.command == "train":
        train(args.work)
        return 0
    if args.command == "flags":
        print(driver_jvm_flags(local_master(args.master)))
        return 0
    path = archive_path()
    if args.command == "status":
        if disabled():
            print(f"jvm archive: off ({ARCHIVE_ENV}=0)")
        elif path is None:
            print("jvm archive: no java or no Spark found")
        else:
            print(f"jvm archive: {'present' if path.is_file() else 'absent'}: {path}")
        return 0 if path is not None and path.is_file() else 1
    if disabled():
        print(f"setup: JVM class archive not built ({ARCHIVE_ENV}=0)")
        return 0
    current = path is not None and path.is_file() and not args.force
    started = time.monotonic()
    try:
        built = build(force=args.force)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"setup: JVM class archive not built ({exc}); jobs start without it")
        return 1
    if not current:  # a current archive goes without saying (make setup runs this each time)
        size = built.stat().st_size / 1e6
        print(f"setup: JVM class archive built ({size:.0f} MB in "
              f"{time.monotonic() - started:.0f} s): {built}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
