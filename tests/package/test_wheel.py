"""The wheel, installed as a Spark environment would install it: built from a copy of the
sources, installed with only its base dependencies, each at the bottom of its range, into a
fresh virtualenv outside the checkout; then ``snap-spark check`` and a ``spark-submit`` of
the packaged batch job run there, from a folder outside the checkout, on a labelled sample.

uv builds the wheel and installs it from its cache first (``--offline``): the bottom of a
range is a fixed version, and PySpark's is a source distribution that uv would otherwise
download again (430 MB) and build again on every run once its cached index response goes
stale. Only when the cache lacks something (a fresh machine) does it go to the index.

The checkout's ``.venv`` holds the top of the ranges (``uv.lock``); this file holds the
bottom. The installed environment never sees the checkout: its ``PATH``, ``PYTHONPATH``,
``SPARK_HOME`` and ``PYSPARK_PYTHON`` point into the virtualenv only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

import snap_spark
from snap_spark import jobs
from snap_spark.cluster.shipping import wheel_metadata, wheel_requirements
from snap_spark.samples.messages import SampleConfig, generate
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(snap_spark.__file__).resolve().parent
#: uv of the checkout's environment (the `dev` extra): it installs the wheel.
UV = Path(sys.executable).parent / "uv"
#: Environment variables of the checkout that must not reach the installed environment.
CHECKOUT_VARIABLES = ("PYTHONPATH", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                      "VIRTUAL_ENV", "SNAP_SPARK_DELTA_JARS", "SNAP_SPARK_KAFKA_JARS",
                      "SNAP_SPARK_CONFIG")


def base_requirements(wheel: Path) -> list[Requirement]:
    """The wheel's ``Requires-Dist`` entries that no extra adds."""
    return [Requirement(r) for r in wheel_requirements(wheel)]


def bottom(requirement: Requirement) -> str:
    """``name==X`` for a requirement ``name>=X,...``: the bottom of its range."""
    lower = [s.version for s in requirement.specifier if s.operator == ">="]
    assert len(lower) == 1, f"{requirement}: every base dependency needs one lower bound"
    return f"{requirement.name}=={lower[0]}"


def uv(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``uv COMMAND`` from uv's cache alone (``--offline``: nothing asked of the index, no
    source distribution downloaded or built again); again online only if that fails,
    e.g. on a machine whose cache lacks a version asked for."""
    done = None
    for network in (["--offline"], []):
        done = subprocess.run([str(UV), *command, "--no-config", *network], cwd=cwd,
                              capture_output=True, text=True, timeout=900)
        if done.returncode == 0:
            break
    assert done is not None
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel as a PEP 517 frontend builds it (``uv build``: an isolated build
    environment with the setuptools pyproject.toml asks for; ``--no-config``, so nothing of
    the checkout's ``[tool.uv]``) from a copy of the sources: the package folder, pyproject,
    README and licence."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "snap_spark", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__"))
    built = uv("build", "--wheel", "--quiet", "--python", sys.executable, "--out-dir",
               str(tmp / "dist"), str(source), cwd=tmp)
    assert built.returncode == 0, built.stderr[-3000:]
    (path,) = (tmp / "dist").glob("snap_spark-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A fresh virtualenv holding the wheel and its base dependencies, each at the bottom
    of its range (a constraints file), installed by uv from its cache (:func:`uv`), and the
    environment to run it with: none of the checkout's variables, and Python's compiled
    files kept in the virtualenv as its processes write them."""
    tmp = tmp_path_factory.mktemp("installed")
    constraints = tmp / "bottoms.txt"
    bottoms = sorted(bottom(r) for r in base_requirements(wheel))
    constraints.write_text("\n".join(bottoms) + "\n")
    prefix = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    # --no-config: not the checkout's [tool.uv] (its lock's constraints), only the bottoms
    done = uv("pip", "install", "--quiet", "--python", str(prefix / "bin" / "python"),
              "--constraint", str(constraints), str(wheel), cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    # PYTHONDONTWRITEBYTECODE, where this machine sets it, is not passed on either: as in
    # an environment pip installed (which compiles at install), compiled files are kept,
    # here written by the first process that imports a module, so that the other processes
    # (the drivers and Python workers of both spark-submit runs above all) do not compile
    # PySpark, pandas and the rest from source again
    env = {k: v for k, v in os.environ.items()
           if k not in (*CHECKOUT_VARIABLES, "PYTHONDONTWRITEBYTECODE")}
    env.update(PATH=f"{prefix / 'bin'}{os.pathsep}"
                    + os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                      if not p.startswith(str(ROOT))),
               PYSPARK_PYTHON=str(prefix / "bin" / "python"),
               PYSPARK_DRIVER_PYTHON=str(prefix / "bin" / "python"),
               SPARK_LOCAL_IP="127.0.0.1",
               # the packaged job lands in Spark tasks, whose Python workers import the
               # installed package (a small input would otherwise land on the driver)
               SNAP_SPARK_DRIVER_LIMITS="land_bytes=0")
    work = tmp / "work"  # every command runs here, outside the checkout
    work.mkdir()
    return {"prefix": prefix, "env": env, "work": work, "bottoms": bottoms}


def run_in(installed: Mapping[str, Any], *command: str, timeout: float = 300
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), cwd=installed["work"], env=installed["env"],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """600 labelled lines with every attack kind (the generator's expected codes), whole
    and split in two files of one folder (the second lands into a lake holding the first:
    the replay store and the task catch-up then read what is there)."""
    pairs = list(generate(SampleConfig(agents=6, messages=600, seed=5, attack_share=0.3)))
    lines = [line for line, _ in pairs]
    folder = tmp_path_factory.mktemp("sample")
    path = folder / "traffic.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    parts = folder / "parts"
    parts.mkdir()
    (parts / "a.jsonl").write_bytes(b"\n".join(lines[:350]) + b"\n")
    (parts / "b.jsonl").write_bytes(b"\n".join(lines[350:]) + b"\n")
    return {"path": path, "parts": parts, "codes": [label.expected_code for _, label in pairs]}


def test_the_wheel_holds_the_jobs_the_defaults_and_the_licence(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in jobs.names():
        assert f"snap_spark/jobs/{name}.py" in names
    assert {"snap_spark/jobs/__init__.py", "snap_spark/jobs/__main__.py",
            "snap_spark/conf/spark-defaults.conf", "snap_spark/conf/log4j2.properties",
            "snap_spark/py.typed"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)[-8:]
    # the stream's launcher script (snap_spark.runtime.preinit), executable as Spark runs it
    launcher = zipfile.ZipFile(wheel).getinfo("snap_spark/runtime/preinit_python")
    assert (launcher.external_attr >> 16) & 0o111, oct(launcher.external_attr >> 16)
    assert not any(n.startswith(("jobs/", "conf/", "tests/", "native/")) for n in names)


def test_every_base_dependency_is_a_range_and_the_optional_parts_are_extras(
        wheel: Path) -> None:
    metadata = wheel_metadata(wheel)
    base = {r.name: r for r in base_requirements(wheel)}
    assert {"pyspark", "delta-spark", "deltalake", "pyarrow", "coincurve"} <= set(base)
    assert not {"nostr-sdk", "matplotlib", "boto3", "jupyterlab", "pytest"} & set(base)
    for requirement in base.values():
        assert not any(s.operator == "==" for s in requirement.specifier), requirement
    extras = {line.split(":", 1)[1].strip() for line in metadata.splitlines()
              if line.startswith("Provides-Extra:")}
    assert {"nostr", "audit", "s3", "notebook", "dev"} <= extras


def test_the_environment_holds_the_bottom_of_every_range_and_no_extra(
        installed: dict[str, Any]) -> None:
    probe = ("import json, importlib.metadata as m, importlib.util as u\n"
             "names = [l.split('==')[0] for l in open('bottoms.txt').read().split()]\n"
             "print(json.dumps({'versions': {n: m.version(n) for n in names}, 'absent': "
             "[x for x in ('nostr_sdk', 'matplotlib', 'boto3') if u.find_spec(x) is None],"
             " 'package': __import__('snap_spark').__file__}))")
    shutil.copy(installed["prefix"].parent / "bottoms.txt", installed["work"] / "bottoms.txt")
    done = run_in(installed, "python", "-I", "-c", probe)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert [f"{n}=={v}" for n, v in sorted(found["versions"].items())] == sorted(
        installed["bottoms"], key=lambda b: b.split("==")[0])
    assert "pyspark==4.0.5" in installed["bottoms"]  # the newest patch of the bottom line
    assert found["absent"] == ["nostr_sdk", "matplotlib", "boto3"]
    assert Path(found["package"]).is_relative_to(installed["prefix"])


def test_the_installed_stream_launcher_is_executable(installed: dict[str, Any]) -> None:
    probe = ("import os; from snap_spark.runtime.preinit import LAUNCHER;"
             "print(LAUNCHER, os.access(LAUNCHER, os.X_OK))")
    done = run_in(installed, "python", "-I", "-c", probe)
    assert done.returncode == 0, done.stderr[-2000:]
    path, executable = done.stdout.split()
    assert Path(path).is_relative_to(installed["prefix"]) and executable == "True"


def test_snap_spark_check_runs_from_the_installed_package(
        installed: dict[str, Any], sample: dict[str, Any]) -> None:
    done = run_in(installed, "snap-spark", "check", str(sample["path"]))
    assert done.returncode in (0, 1), done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["line_no"] for r in rows] == list(range(1, len(sample["codes"]) + 1))
    assert [r["error_code"] for r in rows] == sample["codes"]


def test_spark_submit_runs_the_packaged_batch_job(
        installed: dict[str, Any], sample: dict[str, Any]) -> None:
    """Two runs: the first file into an empty lake by ``spark-submit``, landed in Spark
    tasks (their Python workers import the installed package); then its folder (the second
    file is new) by ``python <job>``, whose run this small lands on the driver (no JVM to
    start again: the Python workers were the first run's point). Every line's code is the
    generator's label."""
    where = run_in(installed, "python", "-m", "snap_spark.jobs", "path", "verify_messages")
    assert where.returncode == 0, where.stderr
    script = Path(where.stdout.strip())
    assert script.is_relative_to(installed["prefix"]) and script.is_file()
    lake = installed["work"] / "lake"
    log4j = script.parent.parent / "conf" / "log4j2.properties"  # the packaged defaults
    done = run_in(installed, "spark-submit", "--master", "local[2]",
                  "--driver-java-options", f"-Dlog4j2.configurationFile={log4j}",
                  "--conf", "spark.ui.showConsoleProgress=false",
                  "--conf", "spark.ui.enabled=false",
                  "--conf", "spark.sql.shuffle.partitions=2",
                  "--conf", "spark.snap.lake.backend=delta-rs", str(script),
                  "--input", str(sample["parts"] / "a.jsonl"), "--lake", str(lake),
                  timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "lines read: 350 " in done.stdout, done.stdout
    on_driver = {**installed, "env": {k: v for k, v in installed["env"].items()
                                      if k != "SNAP_SPARK_DRIVER_LIMITS"}}
    done = run_in(on_driver, "python", str(script), "--input", str(sample["parts"]),
                  "--lake", str(lake), timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "lines read: 250 " in done.stdout, done.stdout
    split = 350  # lines of a.jsonl; b.jsonl goes on from there
    messages = sorted(delta_rows(lake / "messages"),
                      key=lambda r: (r["source_file"].endswith("b.jsonl"), r["line_no"]))
    assert [m["line_no"] + (split if m["source_file"].endswith("b.jsonl") else 0)
            for m in messages] == list(range(1, len(sample["codes"]) + 1))
    assert [m["error_code"] for m in messages] == sample["codes"]
    assert len(delta_rows(lake / "raw_messages")) == len(sample["codes"])
    assert delta_rows(lake / "tasks"), "the task tables were refreshed"


@pytest.mark.parametrize(("command", "extra"), [
    (("snap-spark", "relay", "--port", "0"), "nostr"),
    (("snap-spark", "publish", "--relay", "ws://127.0.0.1:9", "events.jsonl"), "nostr"),
    (("JOB:audit", "--lake", ".", "--out", "report"), "audit"),
    (("JOB:ingest_nostr", "--relay", "ws://127.0.0.1:9", "--lake", "lake"), "nostr"),
], ids=["relay", "publish", "audit", "ingest_nostr"])
def test_a_command_that_needs_an_extra_names_it_and_starts_nothing(
        installed: dict[str, Any], command: tuple[str, ...], extra: str) -> None:
    if command[0].startswith("JOB:"):  # the job's own entry point: it stops before Spark
        where = run_in(installed, "python", "-m", "snap_spark.jobs", "path", command[0][4:])
        command = ("python", where.stdout.strip(), *command[1:])
    done = run_in(installed, *command, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert f"pip install 'snap-spark[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (installed["work"] / "report").exists()
