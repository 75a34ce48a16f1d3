"""The batch job and the commit path every landing job shares.

- :mod:`snap_spark.pipeline.job`: ``jobs/verify_messages.py`` (``run``, ``reverify``) and
  :func:`~snap_spark.pipeline.job.commit_landed`, the commit path of landed lines;
- :mod:`snap_spark.pipeline.land` / :mod:`~snap_spark.pipeline.checked` /
  :mod:`~snap_spark.pipeline.read`: the landing pass (read, check, write);
- :mod:`snap_spark.pipeline.ingest`: which bytes of which file a run lands (the ledger);
- :mod:`snap_spark.pipeline.replay_store`: replay decided against the lake;
- :mod:`snap_spark.pipeline.tasks`: the task tables; :mod:`~snap_spark.pipeline.runs`:
  run markers and clean-up; :mod:`~snap_spark.pipeline.transforms`: DataFrame -> DataFrame
  transforms for notebooks.
"""
