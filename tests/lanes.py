"""A lane: some of the suite's tests run again, in a pytest process of their own, with
settings that send them down other paths (``SNAP_SPARK_NATIVE=0``: the Python core;
``SNAP_SPARK_DRIVER_LIMITS=spark``: every two-way step as Spark stages; the lane of
``tests/integration/test_python_core.py`` sets both). ``make test`` runs the lane after its
parallel part, on two pytest-xdist workers of the lane's own (``SNAP_SPARK_LANE_WORKERS=2``;
one, in one process, when unset)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_lane(tmp_path: Path, env: Mapping[str, str], tests: Sequence[str],
             deselect: Sequence[str] = (), *, fewest: int) -> str:
    """Run ``tests`` (paths or node ids) less ``deselect`` with ``env`` set (and no
    inherited ``PYTEST_*`` or variable of ``env``), and check that all of at least
    ``fewest`` tests passed (a collection that lost files fails): the summary line."""
    given = {k: v for k, v in os.environ.items()
             if not k.startswith("PYTEST_") and k not in env}
    workers = int(os.environ.get("SNAP_SPARK_LANE_WORKERS", "0") or 0)
    parallel = ["-n", str(workers), "--dist", "loadfile"] if workers > 1 else ["-p", "no:xdist"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *parallel,
         "--basetemp", str(tmp_path / "run"), *tests,
         *(f"--deselect={test}" for test in deselect)],
        cwd=ROOT, env={**given, **env}, capture_output=True, text=True, timeout=1500)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= fewest, summary
    assert not re.search(r"\d+ (failed|error|skipped)", summary), summary
    return summary
