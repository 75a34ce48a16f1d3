"""Markers come from the fixtures a test uses (the root ``conftest.py``), so that ``make
test-fast`` leaves out every test that starts a JVM, a relay, a broker, an S3 server or a
browser, whether or not the test says so itself."""

from __future__ import annotations

from typing import Any

import pytest

import conftest


class FakeItem:
    """What ``pytest_collection_modifyitems`` reads of a collected test."""

    def __init__(self, *fixtures: str) -> None:
        self.fixturenames = ["request", *fixtures]
        self.markers: list[str] = []

    def add_marker(self, marker: Any) -> None:
        self.markers.append(marker if isinstance(marker, str) else marker.name)


@pytest.mark.parametrize(("fixtures", "expected"), [
    (("tmp_path",), []),
    (("spark", "tmp_path"), ["spark"]),
    (("relay", "now"), ["relay"]),
    (("kafka", "kafka_broker", "kafka_spark", "spark"), ["spark", "kafka"]),
    (("s3_prefix", "s3"), ["s3"]),
    (("audited", "chromium", "full_lake", "spark"), ["spark", "browser"]),
])
def test_a_test_gets_the_markers_of_its_fixtures(fixtures: tuple[str, ...],
                                                 expected: list[str]) -> None:
    item = FakeItem(*fixtures)
    conftest.pytest_collection_modifyitems(None, [item])  # type: ignore[arg-type]
    assert sorted(item.markers) == sorted(expected)


def test_every_fixture_marker_is_registered(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(conftest.FIXTURE_MARKERS.values()) <= registered
