"""Delta Lake's JARs for the delta-spark backend: fetched once into a cache, then loaded from it.

``make setup`` runs ``python -m snap_spark.delta_jars fetch``: Spark's own dependency resolver
(``spark.jars.packages`` with ``spark.jars.ivy`` pointing into the cache folder) downloads
``io.delta:delta-spark_2.13:<version of the installed delta-spark package>`` and its
dependencies once, and a manifest (``jars.json``) records the resolved files. Afterwards
:func:`available` lists those local files, :func:`snap_spark.session.build_session` puts them
on ``spark.jars`` and ``make run`` hands them to ``spark-submit --jars``, so no run resolves
anything over the network.

The cache folder is, first match wins: ``$SNAP_SPARK_DELTA_JARS``; ``.venv/delta-jars`` of
this source checkout; ``<sys.prefix>/delta-jars`` (an installed wheel's environment).

Importing this module imports no Spark: ``make`` calls it to learn the JAR list cheaply.

Examples:
    >>> from snap_spark import delta_jars
    >>> delta_jars.coordinate()  # doctest: +SKIP
    'io.delta:delta-spark_2.13:4.0.1'
    >>> delta_jars.available()  # doctest: +SKIP
    ['/repo/.venv/delta-jars/ivy/jars/io.delta_delta-spark_2.13-4.0.1.jar', ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

#: Environment variable naming the cache folder (overrides the defaults above).
CACHE_ENV = "SNAP_SPARK_DELTA_JARS"
#: Scala line of the PySpark 4.0 wheel's JARs, so of the Delta artifact that fits it.
SCALA_BINARY_VERSION = "2.13"
#: Manifest file of the cache folder: coordinate resolved and JARs (paths relative to it).
MANIFEST_NAME = "jars.json"
#: Longest a resolution may take; an unreachable repository must not hang ``make setup``.
FETCH_TIMEOUT_SECONDS = 600.0

_CHECKOUT = Path(__file__).resolve().parent.parent


class DeltaJarsError(RuntimeError):
    """Delta's JARs could not be fetched, or are needed and not in the cache."""


def delta_version() -> str:
    """Version of the installed ``delta-spark`` Python package; the JARs must match it.

    Examples:
        >>> delta_version()  # doctest: +SKIP
        '4.0.1'
    """
    return metadata.version("delta-spark")


def coordinate(version: str | None = None) -> str:
    """Maven coordinate of the delta-spark JAR that fits the installed packages.

    Examples:
        >>> coordinate("4.0.1")
        'io.delta:delta-spark_2.13:4.0.1'
    """
    return f"io.delta:delta-spark_{SCALA_BINARY_VERSION}:{version or delta_version()}"


def cache_dir() -> Path:
    """The folder :func:`fetch` fills and :func:`available` reads (see the module docs).

    Examples:
        >>> cache_dir().name  # doctest: +SKIP
        'delta-jars'
    """
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    if (_CHECKOUT / "pyproject.toml").is_file():  # a source checkout: its own .venv
        return _CHECKOUT / ".venv" / "delta-jars"
    return Path(sys.prefix) / "delta-jars"


def available(directory: Path | None = None) -> list[str] | None:
    """Absolute paths of the cached JARs, or ``None`` when they are not (all) fetched for the
    installed delta-spark version.

    Examples:
        >>> available(Path("/nowhere")) is None
        True
    """
    folder = directory or cache_dir()
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        wanted = coordinate()
    except (OSError, ValueError, metadata.PackageNotFoundError):
        return None
    if not isinstance(manifest, dict) or manifest.get("coordinate") != wanted:
        return None  # fetched for another delta-spark version: fetch again
    names = manifest.get("jars")
    if not isinstance(names, list) or not names:
        return None
    jars = [str(folder / name) for name in names if isinstance(name, str)]
    if len(jars) != len(names) or not all(os.path.isfile(jar) for jar in jars):
        return None
    return jars


def fetch(
    directory: Path | None = None,
    *,
    force: bool = False,
    timeout: float = FETCH_TIMEOUT_SECONDS,
) -> list[str]:
    """Resolve Delta's JARs into the cache once and return their paths (instant when cached).

    Resolution runs in a child Python process that starts Spark with ``spark.jars.packages``,
    so it never clashes with a session of the calling process and its console noise is kept
    out of sight unless it fails.

    Raises:
        DeltaJarsError: resolution failed (no network, unknown version, timeout).

    Examples:
        >>> fetch()  # doctest: +SKIP
        ['/repo/.venv/delta-jars/ivy/jars/io.delta_delta-spark_2.13-4.0.1.jar', ...]
    """
    folder = directory or cache_dir()
    if not force:
        cached = available(folder)
        if cached is not None:
            return cached
    wanted = coordinate()
    ivy = folder / "ivy"
    ivy.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "snap_spark.delta_jars", "_resolve", wanted, str(ivy)]
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise DeltaJarsError(f"resolving {wanted} took over {timeout:.0f} s") from error
    resolved = _last_json_line(done.stdout)
    if done.returncode != 0 or resolved is None:
        raise DeltaJarsError(f"resolving {wanted} failed: {_reason(done.stdout + done.stderr)}")
    names = [os.path.relpath(path, folder) for path in resolved]
    if not any(Path(name).name.startswith("io.delta_delta-spark_") for name in names):
        raise DeltaJarsError(f"resolving {wanted} returned no delta-spark JAR: {resolved}")
    manifest = {"coordinate": wanted, "jars": names}
    partial = folder / (MANIFEST_NAME + ".tmp")
    partial.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    partial.replace(folder / MANIFEST_NAME)  # readers never see half a manifest
    jars = available(folder)
    if jars is None:
        raise DeltaJarsError(f"resolved {wanted} but its JARs are missing under {folder}")
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


def _resolve_in_this_process(wanted: str, ivy: str) -> list[str]:
    """Start Spark with ``spark.jars.packages`` and return the local JARs it resolved.

    spark-submit resolves the packages before the JVM's gateway starts, copies the JARs to
    ``<ivy>/jars`` and lists them in ``spark.jars``; that list is what the cache records.
    """
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("snap-spark fetch Delta JARs")
        .config("spark.jars.packages", wanted)
        .config("spark.jars.ivy", ivy)
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.delta_jars fetch|jars|status``.

    ``fetch`` prints one line and exits 1 when resolution fails; ``jars`` prints the cached
    JARs comma-separated (for ``spark-submit --jars``) or nothing; ``status`` says whether
    they are cached (exit 0) or not (exit 1).

    Examples:
        >>> main(["status"])  # doctest: +SKIP
        Delta JARs for io.delta:delta-spark_2.13:4.0.1: 3 cached in /repo/.venv/delta-jars
        0
    """
    parser = argparse.ArgumentParser(
        prog="python -m snap_spark.delta_jars",
        description="Fetch Delta Lake's JARs once into a local cache, and list them.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_parser = sub.add_parser("fetch", help="resolve the JARs into the cache (once)")
    fetch_parser.add_argument("--force", action="store_true", help="resolve again")
    sub.add_parser("jars", help="print the cached JARs comma-separated, or nothing")
    sub.add_parser("status", help="say whether the JARs are cached")
    resolve_parser = sub.add_parser("_resolve")  # the child process of fetch
    resolve_parser.add_argument("coordinate")
    resolve_parser.add_argument("ivy")
    args = parser.parse_args(argv)

    if args.command == "_resolve":
        print(json.dumps(_resolve_in_this_process(args.coordinate, args.ivy)))
        return 0
    if args.command == "jars":
        print(",".join(available() or []))
        return 0
    wanted = coordinate()
    if args.command == "status":
        jars = available()
        if jars is None:
            print(f"Delta JARs for {wanted}: not cached in {cache_dir()} (make setup fetches them)")
            return 1
        print(f"Delta JARs for {wanted}: {len(jars)} cached in {cache_dir()}")
        return 0
    if not args.force and available() is not None:
        return 0  # already cached: stay quiet, `make setup` runs this every time
    try:
        jars = fetch(force=args.force)
    except DeltaJarsError as error:
        print(
            f"setup: Delta JARs not fetched ({error}); runs use the delta-rs backend and the "
            "delta-spark tests fail until `make setup` can reach Maven Central",
            file=sys.stderr,
        )
        return 1
    print(f"setup: Delta JARs cached ({wanted}, {len(jars)} files in {cache_dir()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
