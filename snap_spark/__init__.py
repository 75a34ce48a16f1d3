"""snap-spark: verify SNAP agent-to-agent traffic at scale.

The Spark-free protocol core lives in :mod:`snap_spark.protocol`; everything else builds on it.
"""

__version__ = "0.1.0"
