"""Shipping snap-spark to a cluster's executors, two ways, as on a real cluster.

- ``--py-files``: :func:`package_zip` zips the ``snap_spark`` package; the dependencies
  must be installed where the executors run beforehand. :func:`deps_env` makes such an
  environment here, one that has the dependencies and cannot import ``snap_spark`` by
  itself.
- ``--archives env.tar.gz#environment``: :func:`packed_env` builds a wheel of the project,
  installs it into a fresh virtualenv and packs that with venv-pack (reused while
  :func:`source_digest` is unchanged).

Examples:
    The zip, as the demo and the cluster test ship it::

        archive = package_zip(Path("data/cluster-demo/ship/snap_spark.zip"))
        # spark-submit --py-files data/cluster-demo/ship/snap_spark.zip ...
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import venv
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from snap_spark.cluster.common import CHECKOUT, PACKAGE_DIR, ClusterError

#: Packages the executors get from Spark itself (``$SPARK_HOME/python/lib/pyspark.zip``):
#: not installed into a packed environment.
PROVIDED_BY_SPARK = ("pyspark",)
#: Installed into a packed environment without their dependencies (only the driver imports
#: ``delta``, and only for the delta-spark backend; its dependency is PySpark).
WITHOUT_DEPS = ("delta-spark",)


def package_zip(dest: Path, package_dir: Path = PACKAGE_DIR) -> Path:
    """A zip of the ``snap_spark`` package (its ``.py`` files and ``py.typed``) for
    ``spark-submit --py-files``: executors put it first on their ``sys.path``. The
    dependencies must be installed where the executors' Python runs.

    Examples:
        >>> import tempfile
        >>> path = package_zip(Path(tempfile.mkdtemp()) / "snap_spark.zip")
        >>> "snap_spark/pipeline/batch_job.py" in zipfile.ZipFile(path).namelist()
        True
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in package_dir.rglob("*")
                   if p.is_file() and p.suffix in (".py", ".typed")
                   and "__pycache__" not in p.parts)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            name = f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}"
            archive.write(path, name)
    return dest


def env_python(prefix: Path) -> Path:
    """The interpreter of the virtualenv at ``prefix``."""
    return prefix / "bin" / "python"


def _site_packages(prefix: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return prefix / "lib" / version / "site-packages"


def deps_env(prefix: Path) -> Path:
    """A virtualenv with the dependencies of this interpreter's environment and NOT the
    project: a ``.pth`` file puts this environment's ``site-packages`` on its path (paths
    named in a ``.pth`` file are not scanned for ``.pth`` files themselves, so an editable
    install of snap-spark there stays invisible). It stands for what a cluster's image has
    installed beforehand; the project must come with the application (``--py-files``).
    Returns its interpreter.

    Raises:
        ClusterError: it can import ``snap_spark`` or cannot import the dependencies.

    Examples:
        >>> python = deps_env(tmp / "env")
        >>> def imports(module):  # -I: neither $PYTHONPATH nor the current folder
        ...     done = subprocess.run([python, "-I", "-c", f"import {module}"],
        ...                           capture_output=True)
        ...     return done.returncode == 0
        >>> imports("pyarrow"), imports("snap_spark")
        (True, False)
    """
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(prefix)
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (_site_packages(prefix) / "snap-spark-deps.pth").write_text("\n".join(paths) + "\n")
    python = env_python(prefix)
    probe = ("import importlib.util as u, coincurve, pyarrow, pandas, deltalake, orjson; "
             "print(u.find_spec('snap_spark') is None)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                          env=env, cwd=prefix, check=False)  # cwd: not a checkout
    if done.returncode != 0 or done.stdout.strip() != "True":
        raise ClusterError(f"{python} must import the dependencies and not snap_spark: "
                           f"{done.stdout.strip()} {done.stderr.strip()[-500:]}")
    return python


def source_digest(root: Path = CHECKOUT) -> str:
    """SHA-256 over the package's sources and ``pyproject.toml``: a packed environment
    built from other sources is stale.

    Examples:
        >>> len(source_digest())
        64
    """
    digest = hashlib.sha256()
    files = sorted((root / "snap_spark").rglob("*.py"))
    for path in [root / "pyproject.toml", *files]:
        if path.exists():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def wheel_metadata(wheel: Path) -> str:
    """The text of a wheel's ``.dist-info/METADATA``."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name).decode()


def wheel_requirements(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` entries of a wheel, extras left out.

    Example::

        wheel_requirements(Path("dist/snap_spark-0.1.0-py3-none-any.whl"))
        # ['pyspark<4.3,>=4.0.0', 'delta-spark<5,>=4.0.0', ...]
    """
    requirements = []
    for line in wheel_metadata(wheel).splitlines():
        if line.startswith("Requires-Dist:"):
            requirement = line.split(":", 1)[1].strip()
            if "extra ==" not in requirement:
                requirements.append(requirement)
    return requirements


def requirement_name(requirement: str) -> str:
    """The normalized project name of a requirement string.

    Examples:
        >>> requirement_name("Delta_Spark==4.0.1")
        'delta-spark'
        >>> requirement_name("protobuf<6,>=5.28.3")
        'protobuf'
    """
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group(0) if match else requirement).lower()


def as_installed_here(requirement: str) -> str:
    """``requirement`` pinned to the version this Python has installed (``name==X``), so
    that executors run what the driver runs; as given when it is not installed here.

    Examples:
        >>> from importlib.metadata import version
        >>> as_installed_here("orjson>=3.10.0,<4") == "orjson==" + version("orjson")
        True
        >>> as_installed_here("no-such-project>=1")
        'no-such-project>=1'
    """
    name = requirement_name(requirement)
    try:
        return f"{name}=={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return requirement


@dataclass
class PackedEnv:
    """A packed environment for ``--archives ARCHIVE#environment`` and what it cost."""

    archive: Path
    #: the unpacked environment it was packed from (the driver's Python in client mode)
    prefix: Path
    size_bytes: int
    #: seconds per step: wheel, venv, install, pack (as measured when it was built)
    seconds: dict[str, float]
    digest: str
    cached: bool = False

    @property
    def python(self) -> Path:
        return env_python(self.prefix)


def _run(cmd: Sequence[str], what: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(list(cmd), capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise ClusterError(f"{what} failed ({done.returncode}): {done.stderr.strip()[-1500:]}")


def packed_env(out_dir: Path, source: Path = CHECKOUT, *, rebuild: bool = False) -> PackedEnv:
    """Build a wheel of the project at ``source``, install it (not editable) with its
    dependencies into a fresh virtualenv, and pack that with venv-pack into
    ``out_dir/snap-spark-env.tar.gz``. PySpark is left out (:data:`PROVIDED_BY_SPARK`:
    executors import Spark's own ``pyspark.zip``, and it would add ~460 MB);
    delta-spark goes in without its dependencies; every dependency at the version installed
    here (:func:`as_installed_here`). Pip fetches them from its index (network, or its
    cache). Reused while :func:`source_digest` is unchanged, unless ``rebuild``.

    The archive holds no interpreter: its ``bin/python`` links to the base Python this one
    was made from, which must exist at the same path on every executor (same OS, same
    Python build: coincurve, pyarrow and others are native wheels).

    Raises:
        ClusterError: the wheel, an install or venv-pack failed.

    Example (a minute or more: builds and packs a venv)::

        env = packed_env(Path("data/cluster-demo/env"))
        env.archive.name, env.size_bytes // 2**20      # ('snap-spark-env.tar.gz', 199)
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    archive, prefix = out_dir / "snap-spark-env.tar.gz", out_dir / "venv"
    stamp = out_dir / "stamp.json"
    digest = source_digest(source)
    if not rebuild and archive.exists() and stamp.exists():
        recorded = json.loads(stamp.read_text())
        if recorded.get("digest") == digest and env_python(prefix).exists():
            return PackedEnv(archive, prefix, archive.stat().st_size, recorded["seconds"],
                             digest, cached=True)
    import venv_pack  # type: ignore[import-untyped]  # no type information shipped

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    wheels = out_dir / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
          str(wheels), str(source)], "building the project's wheel")
    wheel = next(wheels.glob("*.whl"))
    seconds["wheel"] = time.perf_counter() - started
    started = time.perf_counter()
    venv.EnvBuilder(with_pip=True, symlinks=True, clear=True).create(prefix)
    seconds["venv"] = time.perf_counter() - started
    started = time.perf_counter()
    pip = [str(env_python(prefix)), "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    requirements = [as_installed_here(r) for r in wheel_requirements(wheel)]
    wanted = [r for r in requirements
              if requirement_name(r) not in (*PROVIDED_BY_SPARK, *WITHOUT_DEPS)]
    alone = [r for r in requirements if requirement_name(r) in WITHOUT_DEPS]
    _run([*pip, *wanted], "installing the dependencies", env)
    _run([*pip, "--no-deps", str(wheel), *alone], "installing the project's wheel", env)
    seconds["install"] = time.perf_counter() - started
    started = time.perf_counter()
    archive.unlink(missing_ok=True)
    venv_pack.pack(prefix=str(prefix), output=str(archive), force=True)
    seconds["pack"] = time.perf_counter() - started
    stamp.write_text(json.dumps({"digest": digest, "seconds": seconds}) + "\n")
    return PackedEnv(archive, prefix, archive.stat().st_size, seconds, digest)

