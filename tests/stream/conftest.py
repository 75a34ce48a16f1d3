"""Fixtures for Kafka tests: one real broker for the whole session (:mod:`tests.kafka`) and
the test SparkSession, whose Kafka connector (cached by ``make setup``) talks to it.

``kafka_broker`` fetches the broker's JARs on first use (``python -m tests.kafka fetch``
does it ahead), starts Kafka in KRaft mode on 127.0.0.1 and stops its process group at the
end of the session, also when a test or the start itself fails.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kafka import KafkaBroker, KafkaTopics


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """The running broker (``.bootstrap`` is its ``host:port``)."""
    broker = KafkaBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_spark(spark: Any) -> Any:
    """The session's SparkSession, failing the Kafka tests with one clear line when it has
    no Kafka connector."""
    from snap_spark.runtime.maven_jars import KafkaConnectorMissing, require_kafka_connector

    try:
        require_kafka_connector(spark)
    except KafkaConnectorMissing as error:
        pytest.fail(str(error), pytrace=False)
    return spark


@pytest.fixture(scope="session")
def kafka(kafka_broker: KafkaBroker, kafka_spark: Any) -> KafkaTopics:
    """``create_topic(name, partitions)`` and ``produce(topic, lines)`` on the broker."""
    return KafkaTopics(kafka_broker, kafka_spark)


@pytest.fixture
def topic_name() -> str:
    """A topic name no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"
