"""The batch job and the commit path every landing job shares.

- :mod:`snap_spark.pipeline.batch_job`: ``jobs/verify_messages.py`` (``run``, ``reverify``);
- :mod:`snap_spark.pipeline.commit`: the one commit path of landed lines
  (:func:`~snap_spark.pipeline.commit.commit_pass` with a
  :class:`~snap_spark.pipeline.commit.CommitPlan`), and what a pass did
  (:class:`~snap_spark.pipeline.commit.JobResult`);
- :mod:`snap_spark.pipeline.land` / :mod:`~snap_spark.pipeline.checked` /
  :mod:`~snap_spark.pipeline.read`: the landing pass (read, check, write);
- :mod:`snap_spark.pipeline.ledger`: which bytes of which file a run lands (the ledger);
- :mod:`snap_spark.pipeline.replay_store`: replay decided against the lake;
- :mod:`snap_spark.pipeline.task_tables`: the task tables; :mod:`~snap_spark.pipeline.runs`:
  run markers and clean-up; :mod:`~snap_spark.pipeline.transforms`: DataFrame -> DataFrame
  transforms for notebooks.
"""
