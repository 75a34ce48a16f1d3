"""A row filter written once, for both ways a table is read: a Spark scan (a ``Column``,
which Spark pushes down to the Delta files) and a delta-rs scan on the driver (a
``pyarrow.compute`` expression, which :func:`snap_spark.lake.read_arrow` pushes down).

A step that runs in the driver process for a small table and in Spark for a large one
(:mod:`snap_spark.common.placement`) states its filter once with :func:`col`, and each path renders
it: :meth:`Where.spark` and :meth:`Where.arrow` keep rows by the same rule, SQL's: a row is
kept when the filter is true, not when it is false or null.

Examples:
    >>> rule = (col("received_at") >= 10.0) & (col("code").is_null() | col("code").isin([2]))
    >>> rule
    ((received_at >= 10.0) & (code is null | code in [2]))
    >>> import pyarrow as pa
    >>> t = pa.table({"received_at": [9.0, 10.0, 11.0, None], "code": [None, 2, 3, None]})
    >>> t.filter(rule.arrow())["received_at"].to_pylist()
    [10.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pyarrow.compute as pc
    from pyspark.sql import Column

__all__ = ["Where", "col"]


@dataclass(frozen=True)
class Where:
    """A filter: a comparison of a column with a value, a null test, a membership test, or
    an ``&`` / ``|`` of two filters. Build it with :func:`col`."""

    op: str
    name: str = ""
    value: Any = None
    parts: tuple[Where, ...] = ()

    def __and__(self, other: Where) -> Where:
        return Where("&", parts=(self, other))

    def __or__(self, other: Where) -> Where:
        return Where("|", parts=(self, other))

    def __repr__(self) -> str:
        if self.op in ("&", "|"):
            return "(" + f" {self.op} ".join(map(repr, self.parts)) + ")"
        if self.op in ("is null", "is not null"):
            return f"{self.name} {self.op}"
        if self.op == "in":
            return f"{self.name} in {list(self.value)}"
        return f"({self.name} {self.op} {self.value!r})"

    def arrow(self) -> pc.Expression:
        """The filter as a ``pyarrow.compute`` expression (for a dataset scan or
        ``Table.filter``)."""
        import pyarrow.compute as pc

        expression: pc.Expression = self._render(_Engine(
            pc.field, pc.scalar, lambda f: f.is_null(), lambda f: f.is_valid(),
            lambda f, values: f.isin(list(values))))
        return expression

    def spark(self) -> Column:
        """The filter as a Spark ``Column`` (for ``DataFrame.filter``)."""
        from pyspark.sql import functions as F

        column: Column = self._render(_Engine(
            F.col, F.lit, lambda c: c.isNull(), lambda c: c.isNotNull(),
            lambda c, values: c.isin(*values)))
        return column

    def _render(self, engine: _Engine) -> Any:
        """The filter in the terms of ``engine`` (both engines overload ``&``, ``|`` and
        the comparisons, so only their names for a column, a value and the tests differ)."""
        if self.op == "&":
            return self.parts[0]._render(engine) & self.parts[1]._render(engine)
        if self.op == "|":
            return self.parts[0]._render(engine) | self.parts[1]._render(engine)
        field = engine.field(self.name)
        if self.op == "is null":
            return engine.is_null(field)
        if self.op == "is not null":
            return engine.is_valid(field)
        if self.op == "in":
            return engine.isin(field, self.value)
        return _COMPARE[self.op](field, engine.literal(self.value))


class _Engine(NamedTuple):
    """How one engine names a column, a literal value and the null and membership tests."""

    field: Callable[[str], Any]
    literal: Callable[[Any], Any]
    is_null: Callable[[Any], Any]
    is_valid: Callable[[Any], Any]
    isin: Callable[[Any, Sequence[Any]], Any]


_COMPARE: dict[str, Any] = {
    "==": lambda a, b: a == b, ">=": lambda a, b: a >= b, ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
}


@dataclass(frozen=True)
class _Column:
    """A column named in a filter (:func:`col`)."""

    name: str

    def __eq__(self, value: object) -> Where:  # type: ignore[override]
        return Where("==", self.name, value)

    def __hash__(self) -> int:
        return hash(self.name)

    def __ge__(self, value: Any) -> Where:
        return Where(">=", self.name, value)

    def __gt__(self, value: Any) -> Where:
        return Where(">", self.name, value)

    def __le__(self, value: Any) -> Where:
        return Where("<=", self.name, value)

    def __lt__(self, value: Any) -> Where:
        return Where("<", self.name, value)

    def is_null(self) -> Where:
        return Where("is null", self.name)

    def is_valid(self) -> Where:
        return Where("is not null", self.name)

    def isin(self, values: Sequence[Any]) -> Where:
        return Where("in", self.name, tuple(values))


def col(name: str) -> _Column:
    """The column ``name`` of a filter: compare it (``==``, ``>=``, ``>``, ``<=``, ``<``),
    test it for null (``is_null``, ``is_valid``) or membership (``isin``)."""
    return _Column(name)
