"""What the modules of :mod:`snap_spark.cluster` share: where the checkout and the batch
job are, the installed Spark's home, and the error they raise.

Examples:
    >>> (CHECKOUT / "snap_spark" / "cluster" / "common.py").exists()
    True
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: The ``snap_spark`` package folder, and the checkout holding it (a source checkout has
#: ``jobs/`` and ``conf/`` beside it).
PACKAGE_DIR = Path(__file__).resolve().parent.parent
CHECKOUT = PACKAGE_DIR.parent
#: The batch job's entry point (shipped in the package).
VERIFY_JOB = PACKAGE_DIR / "jobs" / "verify_messages.py"


class ClusterError(RuntimeError):
    """The cluster did not start, an environment to ship could not be made, or a step of the
    demo failed (the message says which)."""


def spark_home() -> Path:
    """The installed PySpark's folder: it holds ``bin/spark-class``, ``jars/`` and
    ``python/lib/pyspark.zip`` (a pip-installed PySpark is a whole Spark distribution).

    Examples:
        >>> (spark_home() / "bin" / "spark-class").exists()
        True
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterError("PySpark is not installed in this environment")
    return Path(spec.origin).resolve().parent
