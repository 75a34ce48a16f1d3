"""``snap-spark submit``: the split of its command line, the command it builds (``--dry-run``,
run as cron runs it: ``env -i`` with a bare PATH), the hand-over to spark-submit (exit status,
environment, same process). The cron recipe of docs/audit-job.md runs end to end in
``tests/operate/test_cron_recipe.py``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from snap_spark.runtime import submit
from snap_spark.runtime.jvm_archive import DRIVER_JVM_FLAGS, driver_jvm_flags
from snap_spark.runtime.maven_jars import submit_jars
from snap_spark.runtime.submit import SubmitError, split_arguments

ROOT = Path(__file__).resolve().parents[2]
#: The console script of this interpreter's environment (CI's is the checkout's .venv).
SNAP_SPARK = Path(sys.executable).parent / "snap-spark"
#: What cron gives a command: no virtualenv, a bare PATH.
BARE_PATH = "/usr/bin:/bin"
#: The JAR caches, when the tests were pointed at other ones, for the bare environments.
JAR_CACHES = {name: os.environ[name] for name in ("SNAP_SPARK_DELTA_JARS",
                                                  "SNAP_SPARK_KAFKA_JARS")
              if name in os.environ}


def bare(home: Path, *command: str, **extra: str) -> list[str]:
    """``command`` under ``env -i`` with cron's PATH, ``HOME`` and ``extra`` variables."""
    assignments = [f"{k}={v}" for k, v in {"PATH": BARE_PATH, "HOME": str(home),
                                           **JAR_CACHES, **extra}.items()]
    return ["env", "-i", *assignments, *command]


def dry_run(tmp_path: Path, *args: str, **extra: str) -> tuple[dict[str, str], list[str]]:
    """``snap-spark submit --dry-run ARGS`` under a bare environment: the variables it sets
    and the command, read back from its one line."""
    done = subprocess.run(bare(tmp_path, str(SNAP_SPARK), "submit", "--dry-run", *args,
                               **extra),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and done.stderr == ""
    words = shlex.split(done.stdout)
    names = {}
    while "=" in words[0] and not words[0].startswith("/"):
        name, _, value = words.pop(0).partition("=")
        names[name] = value
    return names, words


def spark_home() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


# -- the command line, without Spark -----------------------------------------------------

@pytest.mark.parametrize(("argv", "options", "job", "job_args"), [
    (["audit"], (), "audit", ()),
    (["audit.py", "--lake", "L"], (), "audit", ("--lake", "L")),
    # spark-submit's options before JOB, in every spelling it takes
    (["--master", "local[2]", "-c", "a=1", "--conf=b=2", "--jars", "x.jar", "--verbose",
      "--supervise", "--driver-memory", "2g", "--num-executors=3", "verify_messages"],
     (("--master", "local[2]"), ("--conf", "a=1"), ("--conf", "b=2"), ("--jars", "x.jar"),
      ("--verbose", None), ("--supervise", None), ("--driver-memory", "2g"),
      ("--num-executors", "3")), "verify_messages", ()),
    # everything after JOB is the job's, even what spark-submit would also take
    (["--master", "yarn", "audit", "--master", "local[1]", "--conf", "k=v", "--", "-x"],
     (("--master", "yarn"),), "audit", ("--master", "local[1]", "--conf", "k=v", "--", "-x")),
    # a value that looks like a word (or an option) is still the option's value
    (["--name", "audit", "--driver-java-options", "-Dx=1", "rebuild_tasks", "--help"],
     (("--name", "audit"), ("--driver-java-options", "-Dx=1")), "rebuild_tasks", ("--help",)),
])
def test_spark_submit_options_go_before_job_and_the_rest_to_the_job(
        argv: list[str], options: tuple[tuple[str, str | None], ...], job: str,
        job_args: tuple[str, ...]) -> None:
    request = split_arguments(argv)
    assert (request.spark_options, request.job, request.job_args) == (options, job, job_args)
    assert not request.dry_run and not request.help


def test_dry_run_and_help_are_snap_spark_options_before_job() -> None:
    assert split_arguments(["--master", "local", "--dry-run", "audit"]).dry_run
    assert split_arguments(["--master", "local", "-h", "audit"]).help
    after = split_arguments(["audit", "--dry-run", "--help"])
    assert not after.dry_run and not after.help
    assert after.job_args == ("--dry-run", "--help")


@pytest.mark.parametrize(("argv", "said"), [
    ([], "name a JOB (one of: audit, "),
    (["--master", "local[2]"], "name a JOB"),
    (["--master"], "--master needs a value"),
    (["--lake", "L", "audit"], "unknown spark-submit option --lake before JOB"),
    (["--verbose=yes", "audit"], "unknown spark-submit option --verbose=yes"),
])
def test_a_command_line_that_cannot_be_split_is_a_usage_error(argv: list[str],
                                                              said: str) -> None:
    with pytest.raises(SubmitError) as raised:
        split_arguments(argv)
    assert raised.value.status == 2 and said in str(raised.value)


def test_the_jobs_are_the_scripts_of_jobs() -> None:
    """The jobs are the packaged scripts, which ``jobs/`` of the checkout shows too."""
    scripts = sorted(p.stem for p in (ROOT / "jobs").glob("*.py") if not p.name.startswith("_"))
    assert submit.known_jobs() == scripts
    assert {"audit", "verify_messages", "stream_verify"} <= set(submit.known_jobs())
    assert submit.job_script("audit.py").samefile(ROOT / "jobs" / "audit.py")
    assert submit.job_script("audit.py").is_relative_to(ROOT / "snap_spark")


def test_dry_run_under_a_bare_environment(tmp_path: Path) -> None:
    """What cron runs: the venv's interpreter and Spark's home found with nothing on PATH,
    UTC, the cached Delta JARs merged with the given ones, the job's arguments after it."""
    delta = submit_jars(["delta"])
    mine = "/opt/extra/mine.jar"
    names, command = dry_run(tmp_path, "--master", "local[2]", "--jars",
                             f"{mine},{delta[0] if delta else mine}",
                             "--conf", "spark.ui.enabled=false", "audit", "--lake", "rel/lake",
                             "--out", "out dir", "--conf", "x=y")
    home = spark_home()
    assert names["SPARK_HOME"] == str(home)
    assert names["PYSPARK_PYTHON"] == names["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert names["PATH"] == f"{Path(sys.executable).parent}:{BARE_PATH}"
    assert names["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert command[0] == str(home / "bin" / "spark-submit")
    script = command.index(str(submit.JOBS_DIR / "audit.py"))
    assert command[script + 1:] == ["--lake", "rel/lake", "--out", "out dir", "--conf", "x=y"]
    options = command[1:script]
    pairs = list(zip(options[::2], options[1::2], strict=True))
    assert ("--conf", "spark.sql.session.timeZone=UTC") in pairs
    assert ("--master", "local[2]") in pairs and ("--conf", "spark.ui.enabled=false") in pairs
    # the short-job flags and the class archive `make setup` built (snap_spark.runtime.jvm_archive)
    flags = driver_jvm_flags()
    assert "-XX:SharedArchiveFile=" in flags
    assert ("--driver-java-options",
            f"-Dlog4j2.configurationFile={submit.LOG4J2_CONF} {flags}") in pairs
    jars = [value for option, value in pairs if option == "--jars"]
    assert jars == [",".join([mine, *delta])]  # one --jars, given first, nothing twice


def test_dry_run_jars_follow_the_backend_and_the_kafka_source(tmp_path: Path) -> None:
    _, rs = dry_run(tmp_path, "--conf", "spark.snap.lake.backend=delta-rs", "audit")
    assert "--jars" not in rs
    _, kafka = dry_run(tmp_path, "stream_verify", "--kafka-bootstrap", "k:9092",
                       "--topic", "t", "--checkpoint", "c")
    _, landing = dry_run(tmp_path, "stream_verify", "--landing", "in", "--checkpoint", "c")
    wanted = submit_jars(["delta", "kafka"])
    assert (kafka[kafka.index("--jars") + 1].split(",") if "--jars" in kafka else []) == wanted
    assert (landing[landing.index("--jars") + 1].split(",") if "--jars" in landing
            else []) == submit_jars(["delta"])


def test_dry_run_keeps_what_the_caller_set(tmp_path: Path) -> None:
    """A cluster master gets no loopback address; variables already set are kept."""
    names, command = dry_run(tmp_path, "--master", "yarn", "--driver-java-options", "-Dx=1",
                             "--conf", "spark.ui.showConsoleProgress=true", "rebuild_tasks",
                             PYSPARK_PYTHON="./environment/bin/python")
    assert "SPARK_LOCAL_IP" not in names and "PYSPARK_PYTHON" not in names
    assert names["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert command.count("--driver-java-options") == 1 and "-Dx=1" in command
    assert "spark.ui.showConsoleProgress=false" not in command
    # Java options given as a setting are the driver's own too: none are added
    _, conf = dry_run(tmp_path, "--conf", "spark.driver.extraJavaOptions=-Dy=2", "audit")
    assert "--driver-java-options" not in conf
    local, _ = dry_run(tmp_path, "audit", SPARK_LOCAL_IP="10.1.2.3")
    assert "SPARK_LOCAL_IP" not in local  # set already: not changed


def test_unknown_job_and_missing_spark_submit_say_so_in_one_line(tmp_path: Path) -> None:
    unknown = subprocess.run(bare(tmp_path, str(SNAP_SPARK), "submit", "audits", "--lake", "L"),
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.count("\n") == 1
    assert unknown.stderr.startswith("snap-spark submit: unknown job 'audits' (one of: audit, ")
    assert all(job in unknown.stderr for job in submit.known_jobs())
    missing = subprocess.run(
        bare(tmp_path, str(SNAP_SPARK), "submit", "audit", SPARK_HOME=str(tmp_path / "none")),
        capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and missing.stderr == (
        f"snap-spark submit: no spark-submit at {tmp_path / 'none' / 'bin' / 'spark-submit'} "
        "(Spark's home from SPARK_HOME)\n")


def test_the_process_becomes_spark_submit_with_the_jobs_exit_status(tmp_path: Path) -> None:
    """A stand-in spark-submit (``$SPARK_HOME`` honoured) records its pid, environment and
    arguments and exits 3: the command's pid, exit status and environment are its."""
    fake = tmp_path / "spark" / "bin" / "spark-submit"
    fake.parent.mkdir(parents=True)
    record = tmp_path / "record.json"
    recorder = tmp_path / "recorder.py"
    recorder.write_text(
        "import json, os, sys\n"
        "with open(sys.argv[1], 'w') as handle:\n"
        "    json.dump({'pid': os.getppid(), 'env': dict(os.environ), 'argv': sys.argv[2:]},"
        " handle)\n")
    fake.write_text("#!/usr/bin/env bash\n"
                    f"{shlex.quote(sys.executable)} {shlex.quote(str(recorder))} "
                    f"{shlex.quote(str(record))} \"$@\"\n"
                    "exit 3\n")
    fake.chmod(0o755)
    proc = subprocess.Popen(
        [str(SNAP_SPARK), "submit", "--master", "local[1]", "audit", "--lake", "L"],
        env={"PATH": BARE_PATH, "HOME": str(tmp_path), "SPARK_HOME": str(fake.parents[1])},
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3 and out == b"", err
    seen = json.loads(record.read_text())
    assert seen["pid"] == proc.pid  # exec'd, not a child: signals reach spark-submit
    assert seen["env"]["PYSPARK_PYTHON"] == sys.executable
    assert seen["env"]["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert seen["env"]["SPARK_HOME"] == str(fake.parents[1])
    assert seen["env"]["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert seen["argv"][-3:] == [str(submit.JOBS_DIR / "audit.py"), "--lake", "L"]


def test_short_job_flags_reach_local_drivers_only(tmp_path: Path) -> None:
    """Issue 44: the short-job JVM flags (C1 only, the parallel collector) go to a driver on
    a local master, whatever its job (a local stream's latency is lower with them:
    docs/settings.md); a cluster's driver keeps the JVM's own compiler and G1. Each keeps
    the class archive and the logging."""

    def java_options(*args: str) -> list[str]:
        _, command = dry_run(tmp_path, *args)
        return command[command.index("--driver-java-options") + 1].split()

    short = set(DRIVER_JVM_FLAGS.split())
    batch = java_options("--master", "local[2]", "verify_messages", "--input", "i", "--lake", "l")
    assert short <= set(batch)
    stream = java_options("stream_verify", "--landing", "in", "--checkpoint", "c")
    assert stream == batch, stream
    for master in ("yarn", "k8s://https://127.0.0.1:6443", "spark://127.0.0.1:7077"):
        options = java_options("--master", master, "audit", "--lake", "l")
        assert not short & set(options), (master, options)
        # the rest is what a local driver gets: the logging and the class archive
        assert options == [o for o in batch if o not in short], (master, options)
