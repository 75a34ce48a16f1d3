"""Vectorized (Arrow batch) adapters of :mod:`snap_spark.protocol` for Spark."""
