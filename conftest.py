"""Fixtures shared by the tests (``tests/``) and the docstring examples (``snap_spark/``).

The local SparkSession lives here, at the root, so both can use it. A docstring example
that names ``spark`` gets that session in its namespace and the ``spark`` marker, as does
every test that uses the fixture; tests that use a relay, a Kafka broker, an S3 server or
Chromium get a marker of each (:data:`FIXTURE_MARKERS`), so ``make test-fast``, which
leaves them out, starts no JVM and no other process of that kind; an example that does not
name ``spark`` never starts Spark. Every docstring
example also gets ``tmp``, a fresh empty folder (a :class:`~pathlib.Path`) for the files
and lakes it writes, and pytest's ``getfixture`` (``getfixture("monkeypatch")``).
"""

from __future__ import annotations

import ast
import doctest
import re
from collections.abc import Iterator
from typing import Any

import pytest
from _pytest.doctest import DoctestItem


def _names_spark(source: str) -> bool:
    """True when one example's source reads the name ``spark``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # not Python on its own (doctest still runs it): look at the words
        return re.search(r"(?<![\w.])spark\b", source) is not None
    return any(isinstance(node, ast.Name) and node.id == "spark" for node in ast.walk(tree))


def uses_spark(item: pytest.Item) -> bool:
    """True when ``item`` is a docstring example (doctest) that reads the name ``spark``
    (in an example that runs: not in one marked ``+SKIP``)."""
    if not isinstance(item, DoctestItem):
        return False
    cached = getattr(item, "_snap_uses_spark", None)
    if cached is None:
        cached = any(_names_spark(example.source) for example in item.dtest.examples
                     if not example.options.get(doctest.SKIP))
        item._snap_uses_spark = cached  # type: ignore[attr-defined]
    return bool(cached)


#: The marker a test gets from a fixture it uses, directly or through another fixture: each
#: fixture starts something besides the test's own process. ``make test-fast`` leaves out
#: every test with one of these markers (and those marked ``slow``).
FIXTURE_MARKERS = {
    "spark": "spark",  # the run's SparkSession: a JVM (below)
    "relay": "relay",  # a `snap-spark relay` process (tests/nostr/conftest.py)
    "kafka_broker": "kafka",  # a Kafka broker JVM (tests/stream/conftest.py)
    "s3": "s3",  # moto's S3 server process (tests/storage/conftest.py)
    "chromium": "browser",  # headless Chromium (tests/operate/test_audit.py)
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give each test the markers of :data:`FIXTURE_MARKERS` for the fixtures it uses,
    whether or not it says so itself; a docstring example that uses ``spark`` is a Spark
    test too (``-m spark``)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in fixtures:
                item.add_marker(marker)
        if uses_spark(item):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(autouse=True)
def _doctest_namespace_setup(
    request: pytest.FixtureRequest, doctest_namespace: dict[str, Any]
) -> Iterator[None]:
    """For a docstring example: ``tmp`` (a fresh folder) and, if it names it, ``spark``."""
    if not isinstance(request.node, DoctestItem):
        yield
        return
    doctest_namespace["tmp"] = request.getfixturevalue("tmp_path")
    if uses_spark(request.node):
        doctest_namespace["spark"] = request.getfixturevalue("spark")
    yield
    doctest_namespace.pop("tmp", None)
    doctest_namespace.pop("spark", None)


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] SparkSession for the whole run (delta's python tests do the same).

    It loads Delta Lake from the JARs ``make setup`` cached, so the delta-spark tests run on
    it, but its default backend is delta-rs: tests that want delta-spark ask for it
    (``get_lake(spark, backend="delta-spark")``, ``tests.lake.helpers.use_backend``).
    ``build_session`` also puts Spark's Kafka connector (cached by ``make setup`` too) on
    its ``spark.jars``: the Kafka tests (``tests/stream``) read and write with it.
    """
    from snap_spark.lake import LAKE_BACKEND_CONF
    from snap_spark.runtime.session import build_session
    from snap_spark.runtime.streaming import CHECKPOINT_MANAGER_CONF, FILE_SYSTEM_CHECKPOINTS

    session = build_session(
        app_name="snap-spark-tests",
        master="local[2]",
        extra_conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "2g",
            LAKE_BACKEND_CONF: "delta-rs",
            "spark.databricks.delta.snapshotPartitions": "2",  # small logs, 2 cores
            # checkpoint files through Hadoop's FileSystem API, as a job's stream writes them
            # on a local disk (snap_spark.runtime.streaming.configure_checkpoint_files), also
            # for the queries tests start themselves: through Spark's default (FileContext)
            # every rename forks a `readlink` and costs far more (test_replay_state and
            # test_task_refresh: 99.6-104.5 CPU-s against 108.4-129.9, 2026-12-02). The
            # FileContext path stays tested: test_stream_job's "FileContext" case names it.
            CHECKPOINT_MANAGER_CONF: FILE_SYSTEM_CHECKPOINTS,
        },
    )
    yield session
    session.stop()
