"""The worker daemon's preloading, in a process of its own (it freezes that process's
objects for good, which the test process must not do to itself)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json, sys
from snap_spark.runtime.worker_daemon import preload
before = gc.get_freeze_count()
loaded = preload(("json", "no_such_module_for_the_test", "csv"))
print(json.dumps({"loaded": loaded, "before": before, "after": gc.get_freeze_count(),
                  "walked": len(gc.get_objects()), "csv": "csv" in sys.modules}))
"""


def test_preload_imports_what_imports_skips_the_rest_and_freezes() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["loaded"] == ["json", "csv"]
    assert found["csv"] is True
    assert found["before"] == 0 < found["after"]
    assert found["walked"] < found["after"]
