"""The batch job's tests once more with every two-way step forced into Spark stages
(``SNAP_SPARK_DRIVER_LIMITS=spark``, :mod:`snap_spark.common.placement`), as one item of the
suite: most inputs of the suite are small, so without it the suite would gate mostly the
driver paths, while a large production run takes the Spark ones.

The lane is a subset, chosen to keep ``make test`` within 12 minutes on two cores. The
batch job's tests compare what it lands with the pure-Python checker and the sample's
labels, and forced this way they reach the Spark path of its landing, ``messages`` write,
replay candidates and task fold. The main run holds a test of each two-way step that runs
both paths side by side on one input and compares them
(``test_a_small_input_lands_on_the_driver_...``,
``test_messages_written_in_a_spark_stage_...``, ``test_replay_store``,
``test_task_refresh``, the stream's ``[in Spark stages]`` case,
``test_lookups_on_the_driver_equal_the_spark_joins``, the audit's and delta-spark's
reads); those stay out of the lane, as do the tests that reach no two-way step (refusals
before Spark starts, a damaged log) and the cold ``spark-submit`` (its launch is the same
whichever path its steps take). Nostr ingestion's archive test on both backends was in the
lane at first; it added 20-25 s to a suite at the edge of its 12 minutes.

Running the whole of ``tests/integration``, ``tests/stream`` and ``tests/nostr`` this way
passed on 2026-11-29 (but for the two tests of a run that never starts Spark, which
cannot) and took 12:52 on two workers.

``make test`` runs it after its parallel part (``make test-lanes``, :mod:`tests.lanes`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from snap_spark.common.placement import ENV, SPARK_ONLY
from tests.lanes import run_lane

pytestmark = [pytest.mark.slow]

SPARK_PATH_TESTS = ("tests/integration/test_verify_job.py",)
#: Tests of those files left out (see the module's text).
NOT_SPARK_PATH_TESTS = tuple(
    f"tests/integration/test_verify_job.py::{name}" for name in (
        "test_a_small_input_lands_on_the_driver_as_spark_tasks_land_it",
        "test_messages_written_in_a_spark_stage_equal_those_written_on_the_driver",
        "test_spark_submit_runs_the_job", "test_job_errors_are_clear_and_write_nothing",
        "test_a_wrong_input_is_refused_before_spark_starts",
        "test_a_damaged_table_log_is_one_line"))
#: The fewest tests the lane holds: a collection that lost files fails.
FEWEST = 12


def test_the_two_way_steps_pass_on_the_spark_path(tmp_path: Path) -> None:
    run_lane(tmp_path, {ENV: SPARK_ONLY}, SPARK_PATH_TESTS, NOT_SPARK_PATH_TESTS,
             fewest=FEWEST)
