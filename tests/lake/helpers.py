"""Read Delta tables back with delta-rs's own query engine, independently of the lake code.

``QueryBuilder`` (DataFusion inside delta-rs) is used rather than ``to_pyarrow_table()``: it
applies the log's partition values and file statistics itself, and it avoids pyarrow dataset
threads that can abort the interpreter at exit (delta-io/delta-rs#2184).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder


def delta_rows(path: str | Path, sql: str = "select * from t") -> list[dict[str, Any]]:
    """Rows of ``sql`` over the latest version of the table at ``path``, registered as ``t``."""
    table = DeltaTable(str(path))
    return pa.table(QueryBuilder().register("t", table).execute(sql).read_all()).to_pylist()
