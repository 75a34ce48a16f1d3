"""The lane: the checking and job-exactness tests once more on the Python core (the
reference, and the fallback where the native core is not built) with every two-way step
forced into Spark stages, as one item of the suite: a pytest run of :data:`LANE_TESTS`
with ``SNAP_SPARK_NATIVE=0`` and ``SNAP_SPARK_DRIVER_LIMITS=spark``
(:mod:`snap_spark.common.placement`).

Why both settings in one run. The main run checks with the native core, and most of its
inputs are small, so its job tests take the driver paths. The lane takes the other value
of both switches at once: the Python core then checks inside Spark's Python workers
(``tests/pipeline/test_transforms.py`` checks that they used it) and the batch job's tests
reach the Spark path of its landing, ``messages`` write, replay candidates and task fold,
comparing what lands with the pure-Python checker and the sample's labels. The two
switches are independent (a core is the checking function, a path is where it runs) and
each pairing the lane leaves out is covered elsewhere: both cores are held equal on every
column by ``tests/unit/test_native_differential.py``, the Python core's driver-side pieces
by the lane's ``tests/pipeline/test_land.py`` and ``tests/unit/test_cli.py``, and each
two-way step is run both ways side by side on one input in the main run
(``test_a_small_input_lands_on_the_driver_...``,
``test_messages_written_in_a_spark_stage_...``, ``test_replay_store``,
``test_task_refresh``, the stream's ``[in Spark stages]`` case,
``test_lookups_on_the_driver_equal_the_spark_joins``, the audit's and delta-spark's reads).
Those side-by-side tests stay out of the lane, as do a damaged Delta log (one line of
error, whichever core or path) and the cold ``spark-submit`` (its launch is the same
whichever core and path its steps take, and costs a driver JVM of its own).

Until 2026-12-02 these were two lanes, one per switch, run one after the other: 50 s and
40 s on this machine, against 42-44 s for the one lane (234 tests). Running the whole of
``tests/integration``, ``tests/stream`` and ``tests/nostr`` with the Spark path forced
passed on 2026-11-29 (but for the two tests of a run that never starts Spark, which cannot)
and took 12:52 on two workers.

``make test`` runs it after its parallel part (``make test-lanes``), on two pytest-xdist
workers of its own (:mod:`tests.lanes`): inside the parallel part the whole took as long or
longer."""

from __future__ import annotations

from pathlib import Path

import pytest

from snap_spark.common.placement import ENV, SPARK_ONLY
from tests.lanes import run_lane

pytestmark = [pytest.mark.slow]

#: The tests of the verdicts: the checks, the spec's vectors, the properties, the CLI, the
#: pipeline's checking steps (landing and the transforms; reading the lines, in
#: ``tests/pipeline/test_read.py``, involves no core) and the batch job end to end.
LANE_TESTS = ("tests/unit/test_validate.py", "tests/unit/test_spec_vectors.py",
              "tests/unit/test_properties.py", "tests/unit/test_cli.py",
              "tests/pipeline/test_land.py", "tests/pipeline/test_transforms.py",
              "tests/integration/test_verify_job.py")
#: Tests of those files left out of the lane (they run in the main one; the module's text
#: says why).
NOT_LANE_TESTS = tuple(
    f"tests/integration/test_verify_job.py::{name}" for name in (
        "test_a_small_input_lands_on_the_driver_as_spark_tasks_land_it",
        "test_messages_written_in_a_spark_stage_equal_those_written_on_the_driver",
        "test_a_damaged_table_log_is_one_line", "test_spark_submit_runs_the_job"))
#: The fewest tests the lane holds (234 on 2026-12-02): a collection that lost files fails.
FEWEST = 228


def test_the_checking_and_exactness_tests_pass_on_the_python_core_in_spark_stages(
        tmp_path: Path) -> None:
    run_lane(tmp_path, {"SNAP_SPARK_NATIVE": "0", ENV: SPARK_ONLY}, LANE_TESTS,
             NOT_LANE_TESTS, fewest=FEWEST)
