"""A Spark Connect server on this machine, from the installed PySpark, for notebooks to reach.

PySpark's wheel carries the Connect server (``jars/spark-connect_*.jar``) but not Spark's
``sbin/start-connect-server.sh``; this module starts the same server class with
``spark-submit``: Delta Lake's JARs, session extension and catalog when ``make setup``
cached them, this interpreter as the Python of its workers (which run the SNAP functions'
code, so they import snap-spark), snap-spark's session defaults (UTC, Arrow, Delta's
snapshot of a small log in few tasks), loopback by default. A notebook then connects with
``SPARK_REMOTE=sc://127.0.0.1:15002`` (:func:`snap_spark.api.session`).

    python -m snap_spark.runtime.connect_server --port 15002        # runs until Ctrl-C
    python -m snap_spark.runtime.connect_server --print             # the command only

Examples:
    >>> command = server_command(15002, conf={"spark.sql.shuffle.partitions": "4"})
    >>> command[command.index("--class") + 1]
    'org.apache.spark.sql.connect.service.SparkConnectServer'
    >>> "spark.connect.grpc.binding.port=15002" in command, command[-1]
    (True, 'spark-internal')
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The server class in PySpark's ``spark-connect`` JAR.
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Spark Connect's usual port.
DEFAULT_PORT = 15002

#: Settings every server started here gets, over snap-spark's session defaults
#: (``conf/spark-defaults.conf``: UTC, Arrow, Delta's small-log snapshot, ...); ``conf`` of
#: :func:`server_command` wins.
SERVER_SETTINGS: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
#: Session defaults a server does not take: on a server without Delta's parser the analyzer
#: binding *breaks* SQL parameters of Connect sessions (docs/development.md, *Spark lines*).
NOT_FOR_SERVERS = ("spark.sql.legacy.parameterSubstitution.constantsOnly",)


def spark_submit() -> str:
    """The ``spark-submit`` of the installed PySpark."""
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def server_command(port: int = DEFAULT_PORT, *, host: str = "127.0.0.1",
                   master: str = "local[*]", conf: Mapping[str, str] | None = None,
                   delta: bool | None = None) -> list[str]:
    """The ``spark-submit`` command line of a Connect server on ``host:port``.

    ``delta``: load Delta Lake from the JARs ``make setup`` cached (``None``: when cached).
    The driver JVM gets the class archive ``make setup`` built (a server lives long: no
    short-job flags; :func:`snap_spark.runtime.jvm_archive.driver_jvm_flags`).
    """
    from snap_spark.lake import DELTA_CATALOG, DELTA_EXTENSION
    from snap_spark.runtime.jvm_archive import driver_jvm_flags
    from snap_spark.runtime.maven_jars import DELTA, DeltaJarsError
    from snap_spark.runtime.session import read_spark_conf

    settings = {key: value for key, value in read_spark_conf().items()
                if key not in NOT_FOR_SERVERS}
    settings.update(SERVER_SETTINGS)
    jars = DELTA.available() if delta is not False else None
    if delta and not jars:
        raise DeltaJarsError("Delta's JARs are not cached: run `make setup`")
    if jars:
        settings.update({"spark.sql.extensions": DELTA_EXTENSION,
                         "spark.sql.catalog.spark_catalog": DELTA_CATALOG})
    settings.update({"spark.connect.grpc.binding.address": host,
                     "spark.connect.grpc.binding.port": str(port)})
    settings.update(conf or {})
    command = [spark_submit(), "--master", master, "--class", SERVER_CLASS,
               "--name", "snap-spark-connect"]
    if jars:
        command += ["--jars", ",".join(jars)]
    flags = driver_jvm_flags(short_job=False)
    if flags:
        command += ["--driver-java-options", flags]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]


def server_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the server's workers on this
    interpreter and Spark bound to loopback unless set otherwise."""
    env = dict(os.environ if base is None else base)
    env["PYSPARK_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.runtime.connect_server``: run a server (or print its command)."""
    parser = argparse.ArgumentParser(
        prog="python -m snap_spark.runtime.connect_server",
        description="Run a Spark Connect server from the installed PySpark, with Delta Lake "
                    "and snap-spark's functions usable from sc://HOST:PORT.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="default %(default)s")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default %(default)s: this machine only)")
    parser.add_argument("--master", default="local[*]", help="default %(default)s")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the server (repeatable)")
    parser.add_argument("--print", action="store_true", help="print the command, run nothing")
    args = parser.parse_args(argv)
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--conf takes KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    command = server_command(args.port, host=args.host, master=args.master, conf=conf)
    if args.print:
        print(" ".join(command))
        return 0
    print(f"Spark Connect server starting on sc://{args.host}:{args.port} (Ctrl-C stops it)",
          file=sys.stderr, flush=True)
    os.execve(command[0], command, server_environment())
    return 0  # not reached: execve replaces this process


if __name__ == "__main__":
    sys.exit(main())
