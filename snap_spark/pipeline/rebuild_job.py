"""``jobs/rebuild_tasks.py``: rebuild the task tables from ``messages``, around
:func:`snap_spark.pipeline.task_tables.rebuild_tasks`.

Example::

    spark-submit jobs/rebuild_tasks.py --lake data/lake
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from snap_spark.pipeline.task_tables import TasksResult, rebuild_tasks
from snap_spark.runner import Context, Job
from snap_spark.runner import main as run_job

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["RebuildTasks", "main"]


class RebuildTasks(Job):
    """``jobs/rebuild_tasks.py``: ``messages`` → ``task_events`` and ``tasks``."""

    name = "rebuild_tasks"
    description = ("Rebuild the task_events and tasks tables under --lake in full from "
                   "its messages table (valid responses reporting a task state).")

    def run(self, spark: SparkSession, context: Context) -> TasksResult:
        return rebuild_tasks(spark, context.lake)

    def summary(self, result: Any) -> str:
        assert isinstance(result, TasksResult)
        return (f"tasks: {result.tasks}   reports: {result.reports}   illegal transitions: "
                f"{result.illegal}   foreign reports: {result.foreign}   "
                f"({result.seconds:.1f}s)")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``jobs/rebuild_tasks.py``."""
    return run_job(RebuildTasks(), argv)
