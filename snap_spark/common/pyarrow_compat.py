"""What differs between the pyarrow releases of snap-spark's range (``pyarrow>=18``).

Examples:
    >>> import pyarrow as pa
    >>> table = pa.table({"k": [2, None, 1], "v": ["b", "n", "a"]})
    >>> sort_nulls_first(table, ["k"]).column("v").to_pylist()
    ['n', 'a', 'b']
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa


@functools.cache
def _placement_per_key() -> bool:
    """Whether sort keys take their own null placement (pyarrow >= 20; from 25 on, the one
    placement for all keys is deprecated)."""
    try:
        pa.table({"k": [1]}).sort_by([("k", "ascending", "at_start")])
    except (ValueError, TypeError):
        return False
    return True


def sort_nulls_first(table: Any, names: Sequence[str]) -> Any:
    """``table`` sorted ascending by ``names``, nulls first in every key (Spark's order of
    ``sortWithinPartitions``), on every pyarrow of the range."""
    if _placement_per_key():
        return table.sort_by([(name, "ascending", "at_start") for name in names])
    return table.sort_by([(name, "ascending") for name in names], null_placement="at_start")
