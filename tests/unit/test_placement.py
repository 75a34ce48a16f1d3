"""The one policy of where a two-way step runs (:mod:`snap_spark.common.placement`): its setting
is read as written, refused when malformed, and no other module keeps a limit of its own."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import snap_spark
from snap_spark.common.placement import ENV, DriverLimits, limits
from snap_spark.settings import SettingsError

NAMES = [field.name for field in dataclasses.fields(DriverLimits)]
VALUES = st.one_of(st.integers(min_value=0, max_value=10**12), st.just("spark"))
SPACE = st.sampled_from(["", " ", "  "])


@given(parts=st.lists(st.tuples(st.sampled_from([*NAMES, "spark"]), VALUES, SPACE),
                      max_size=12))
def test_a_setting_gives_the_last_value_of_each_limit(
        parts: list[tuple[str, int | str, str]]) -> None:
    """Each limit is its default, then what the parts set in order: ``spark`` alone sends
    every limit to Spark, ``name=spark`` one of them, ``name=N`` sets N."""
    expected: dict[str, int | None] = {name: getattr(DriverLimits(), name) for name in NAMES}
    pieces = []
    for name, value, pad in parts:
        if name == "spark":
            expected = dict.fromkeys(NAMES)
            pieces.append(f"{pad}spark{pad}")
        else:
            expected[name] = None if value == "spark" else int(value)
            pieces.append(f"{pad}{name}{pad}={pad}{value}{pad}")
    got = DriverLimits.parse(",".join(pieces))
    for name in NAMES:
        bound = expected[name]
        if bound is None:
            assert not got.fits(name, 0), name  # type: ignore[arg-type]
        else:
            assert getattr(got, name) == bound
            assert got.fits(name, bound) and not got.fits(name, bound + 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("text, says", [
    ("land=5", "unknown limit 'land'"),
    ("land_bytes", "'land_bytes' has no ="),
    ("land_bytes=-1", "land_bytes='-1' is not a whole number"),
    ("read_rows=1.5", "read_rows='1.5' is not a whole number"),
    ("read_rows=\u00b2", "is not a whole number"),
    ("read_rows=", "read_rows='' is not a whole number"),
])
def test_a_malformed_setting_is_refused_naming_the_variable(text: str, says: str) -> None:
    with pytest.raises(SettingsError) as refused:
        DriverLimits.parse(text)
    assert str(refused.value).startswith(f"{ENV}: ") and says in str(refused.value)


def test_the_limits_are_read_from_the_environment_at_each_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert limits() == DriverLimits()
    monkeypatch.setenv(ENV, "pass_lines=3")
    assert limits() == DriverLimits(pass_lines=3)
    monkeypatch.setenv(ENV, "spark")
    assert limits() == DriverLimits.spark_only()
    assert not any(limits().fits(name, 0) for name in NAMES)  # type: ignore[arg-type]


def test_no_other_module_keeps_a_driver_limit() -> None:
    """No module but :mod:`snap_spark.common.placement` binds a module-level ``LOCAL_*`` name: the
    thresholds of old lived as such constants in six modules, each read its own way."""
    root = Path(snap_spark.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            found += [f"{module}.{target.id}" for target in targets
                      if isinstance(target, ast.Name) and target.id.startswith("LOCAL_")]
    assert len(list(root.rglob("*.py"))) > 50
    assert found == [], found
