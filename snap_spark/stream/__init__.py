"""The stream job (``jobs/stream_verify.py``) and its pieces.

- :mod:`snap_spark.stream.stream_job`: the query (a landing folder or Kafka → the lake's tables),
  its ``foreachBatch`` commit, and the CLI;
- :mod:`snap_spark.stream.replay_state`: the replay window (check 6) in streaming state;
- :mod:`snap_spark.stream.landing`: landing-folder files that grow, change or vanish after
  the stream picked them up;
- :mod:`snap_spark.stream.progress`: one progress line (and JSON object) per micro-batch.
"""
