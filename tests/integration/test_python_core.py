"""The checking and job-exactness tests once more on the Python core (the reference, and
the fallback where the native core is not built), as one item of the suite: a pytest run of
:data:`PYTHON_CORE_TESTS` with ``SNAP_SPARK_NATIVE=0``, which reaches Spark's Python
workers too (``tests/pipeline/test_transforms.py`` checks that they used the Python core).

``make test`` runs it after its parallel part (``make test-python-core``), on two pytest-xdist
workers of its own (``SNAP_SPARK_LANE_WORKERS=2``; one, in one process, when unset): inside
the parallel part the whole took as long or longer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
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
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "SNAP_SPARK_NATIVE"))}
    env["SNAP_SPARK_NATIVE"] = "0"
    workers = int(os.environ.get("SNAP_SPARK_LANE_WORKERS", "0") or 0)
    parallel = ["-n", str(workers), "--dist", "loadfile"] if workers > 1 else ["-p", "no:xdist"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *parallel,
         "--basetemp", str(tmp_path / "run"), *PYTHON_CORE_TESTS,
         *(f"--deselect={test}" for test in NOT_CORE_TESTS)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= FEWEST, summary
    assert not re.search(r"\d+ (failed|error|skipped)", summary), summary
