"""The checking and job-exactness tests once more on the Python core (the reference, and
the fallback where the native core is not built), as one item of the suite: a pytest run of
:data:`PYTHON_CORE_TESTS` with ``SNAP_SPARK_NATIVE=0``, which reaches Spark's Python
workers too (``tests/pipeline/test_transforms.py`` checks that they used the Python core).

``make test`` runs it after its parallel part (``make test-lanes``), on two pytest-xdist
workers of its own (:mod:`tests.lanes`): inside the parallel part the whole took as long or
longer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lanes import run_lane

pytestmark = [pytest.mark.slow]

#: The tests of the verdicts: the checks, the spec's vectors, the properties, the CLI, the
#: pipeline's checking steps (landing and the transforms; reading the lines, in
#: ``tests/pipeline/test_read.py``, involves no core) and the batch job end to end.
PYTHON_CORE_TESTS = ("tests/unit/test_validate.py", "tests/unit/test_spec_vectors.py",
                     "tests/unit/test_properties.py", "tests/unit/test_cli.py",
                     "tests/pipeline/test_land.py", "tests/pipeline/test_transforms.py",
                     "tests/integration/test_verify_job.py")
#: Tests of those files left out of this lane (they run in the main one): a damaged Delta
#: log must be one line of error, whichever core checks; the job run as a cold
#: ``spark-submit`` adds only the launch to what the lane's in-process job tests check on
#: this core (that the core's setting reaches Spark's workers is
#: ``tests/pipeline/test_transforms.py``'s), and costs a whole driver JVM of its own.
NOT_CORE_TESTS = ("tests/integration/test_verify_job.py::test_a_damaged_table_log_is_one_line",
                  "tests/integration/test_verify_job.py::test_spark_submit_runs_the_job")
#: The fewest tests the lane holds (237 on 2026-11-29): a collection that lost files fails.
FEWEST = 230


def test_the_checking_and_exactness_tests_pass_on_the_python_core(tmp_path: Path) -> None:
    run_lane(tmp_path, {"SNAP_SPARK_NATIVE": "0"}, PYTHON_CORE_TESTS, NOT_CORE_TESTS,
             fewest=FEWEST)
