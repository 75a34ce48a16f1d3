"""Shared pieces of the integration tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from snap_spark.pipeline.batch_job import run


def run_dying_before_messages_commit(spark: Any, inputs: list[str], lake: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the batch job so that it stops after its ``raw_messages`` commit, before the
    ``messages`` one (a driver lost between them). The patch is the only way to stop a run
    at exactly that point in-process (the kill -9 tests of test_crash.py and
    test_leftovers.py do it for real, holding the job at that point); it is undone before
    returning."""
    from snap_spark.lake import DataCommit, LakeError
    from snap_spark.lake.delta_rs import DeltaRsLake

    real_commit = DeltaRsLake.commit

    def failing_commit(self: Any, spark_: Any, change: DataCommit) -> bool:
        if change.mode == "add" and change.path.endswith("/messages"):
            raise LakeError("the driver dies before the second commit")
        return real_commit(self, spark_, change)

    with monkeypatch.context() as patch:
        patch.setattr(DeltaRsLake, "commit", failing_commit)
        with pytest.raises(LakeError):
            run(spark, inputs, str(lake))

