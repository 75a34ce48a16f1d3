"""Where the runtime takes effect: the one switch that turns it off, and which masters are
local.

Every piece of :mod:`snap_spark.runtime` that changes how Spark starts or runs (the
deferred session, the driver JVM's flags and class archive, the worker daemon, the warm
interpreter of a stream's start, PySpark from its installed folder) asks two things before
it acts:

- **Is the runtime on?** :data:`RUNTIME_ENV` (``SNAP_SPARK_RUNTIME``) set to ``off`` turns
  every piece off at once: snap-spark's sessions then start as plain
  ``SparkSession.builder`` sessions with snap-spark's settings (UTC, Delta's and the Kafka
  connector's JARs), and every process runs PySpark as Spark starts it. Each piece also
  has a finer switch of its own, listed in docs/settings.md ("The runtime").
- **Is the master on this machine?** :func:`local_master`: the speed-ups are measured for
  a driver that shares its machine with its workers, and some (the worker daemon, the warm
  interpreter) rely on files that exist only on this machine.

And one more question is asked by :class:`snap_spark.runtime.session`: did snap-spark build
this session? A SparkContext started by someone else (a notebook's, a shared cluster's) is
never changed (:func:`snap_spark.runtime.session.build_session`).

Examples:
    >>> runtime_on({}), runtime_on({"SNAP_SPARK_RUNTIME": "off"})
    (True, False)
    >>> local_master("local[2]"), local_master(None), local_master("yarn")
    (True, True, False)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

#: The environment variable that turns the whole runtime off: ``off`` (or ``0``, ``false``,
#: ``no``); ``on`` (or unset, ``1``, ``true``, ``yes``) leaves each piece to its own switch.
RUNTIME_ENV: Final = "SNAP_SPARK_RUNTIME"

_OFF: Final = ("0", "off", "false", "no")
_ON: Final = ("", "1", "on", "true", "yes")


class RuntimeSettingError(ValueError):
    """:data:`RUNTIME_ENV` holds a value that is neither on nor off."""


def runtime_on(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the runtime may act (``environ``: default ``os.environ``). A value this does
    not know counts as on here (a worker must not fail over it); :func:`check_setting`
    refuses it before a job starts.

    Examples:
        >>> runtime_on({"SNAP_SPARK_RUNTIME": "OFF"}), runtime_on({"SNAP_SPARK_RUNTIME": "1"})
        (False, True)
    """
    env = os.environ if environ is None else environ
    return env.get(RUNTIME_ENV, "").strip().lower() not in _OFF


def switched_off(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the piece whose own switch is the environment variable ``name`` is off: the
    whole runtime off, or ``name`` set to ``0``, ``off``, ``false`` or ``no``.

    Examples:
        >>> switched_off("SNAP_SPARK_WARM_PREINIT", {"SNAP_SPARK_WARM_PREINIT": "0"})
        True
        >>> switched_off("SNAP_SPARK_WARM_PREINIT", {"SNAP_SPARK_RUNTIME": "off"})
        True
        >>> switched_off("SNAP_SPARK_WARM_PREINIT", {})
        False
    """
    env = os.environ if environ is None else environ
    return not runtime_on(env) or env.get(name, "").strip().lower() in _OFF


def check_setting(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a :data:`RUNTIME_ENV` value that is neither on nor off.

    Raises:
        RuntimeSettingError: the value, and the ones accepted.

    Examples:
        >>> check_setting({"SNAP_SPARK_RUNTIME": "of"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        snap_spark.runtime.scope.RuntimeSettingError: SNAP_SPARK_RUNTIME='of': use off ...
    """
    env = os.environ if environ is None else environ
    value = env.get(RUNTIME_ENV, "")
    if value.strip().lower() not in (*_OFF, *_ON):
        raise RuntimeSettingError(f"{RUNTIME_ENV}={value!r}: use off (or 0, false, no) or "
                                  "on (or 1, true, yes)")


def local_master(master: str | None) -> bool:
    """Whether a driver on ``master`` runs its executors on this machine: ``local``,
    ``local[N]``, ``local[N, F]``, ``local-cluster[...]``, or ``None`` (spark-submit's
    default, ``local[*]``). Any other master (``yarn``, ``k8s://``, ``spark://``,
    ``sc://``) is a cluster's.

    Examples:
        >>> local_master("local"), local_master(" LOCAL[*] ")
        (True, True)
        >>> local_master("local-cluster[2,1,1024]")
        True
        >>> local_master("spark://127.0.0.1:7077"), local_master("localhost:7077")
        (False, False)
    """
    if master is None:
        return True
    name = master.strip().lower()
    return name == "local" or name.startswith(("local[", "local-cluster["))


def local_parallelism(master: str | None) -> int | None:
    """The task slots of an in-process local master (``None`` for any other, including
    ``local-cluster``): what ``sparkContext.defaultParallelism`` gives unless
    ``spark.default.parallelism`` is set. ``None`` as ``master`` is ``local[*]``.

    Examples:
        >>> local_parallelism("local[2]"), local_parallelism("local"), local_parallelism("yarn")
        (2, 1, None)
        >>> local_parallelism("local[3, 4]")
        3
    """
    if master is None:
        master = "local[*]"
    name = master.strip().lower()
    if name == "local":
        return 1
    match = re.fullmatch(r"local\[\s*(\d+|\*)\s*(?:,\s*\d+\s*)?\]", name)
    if match is None:
        return None
    if match.group(1) == "*":
        return os.cpu_count() or 1
    return int(match.group(1))
