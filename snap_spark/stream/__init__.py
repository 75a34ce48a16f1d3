"""Structured Streaming pieces of snap-spark: stateful operators over streaming DataFrames.

:mod:`snap_spark.stream.replay_state` holds the replay window (check 6) in streaming state.
"""
