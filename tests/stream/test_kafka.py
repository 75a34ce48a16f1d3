"""Spark's Kafka connector against a real broker: batch reads, and streaming reads that
resume from their checkpoint (the streaming job's source)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from snap_spark.runtime import maven_jars
from tests.kafka import KafkaBroker, KafkaTopics

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def sample_lines(count: int, seed: int) -> list[bytes]:
    """``count`` lines of any bytes but newline: invalid UTF-8, an empty line, NUL, CR,
    and JSON-ish text, each distinct so that losses and duplicates show."""
    rng = random.Random(seed)
    fixed = [b"", b"\xff\xfe\xfd", b"\x80abc", b"\xc3\x28", b"\xed\xa0\x80", b"a\x00b",
             b"x\ry", b"\t", "é€😀".encode(), b"{\"id\":\"m1\"}"]
    lines = list(fixed)
    while len(lines) < count:
        body = rng.randbytes(rng.randrange(0, 60)).replace(b"\n", b"")
        lines.append(b"%d:" % len(lines) + body)
    assert len(set(lines)) == len(lines) and not any(b"\n" in line for line in lines)
    assert any(not _is_utf8(line) for line in lines)
    return lines


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_batch(spark: Any, broker: KafkaBroker, topic: str) -> list[Any]:
    """Every record of ``topic``, in partition and offset order."""
    frame = (spark.read.format("kafka")
             .option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic)
             .option("startingOffsets", "earliest")
             .option("endingOffsets", "latest")
             .load())
    return frame.select("partition", "offset", "value").orderBy("partition", "offset").collect()


def test_the_test_session_has_the_kafka_connector(spark: Any) -> None:
    """``build_session`` put the cached connector on ``spark.jars``; its classes load."""
    from snap_spark.runtime.session import jvm_has_class

    jars = maven_jars.KAFKA.available()
    assert jars is not None, f"not cached in {maven_jars.KAFKA.cache_dir()}: run `make setup`"
    listed = spark.sparkContext.getConf().get("spark.jars", "").split(",")
    assert all(jar in listed for jar in jars)
    maven_jars.require_kafka_connector(spark)  # passes
    assert jvm_has_class(maven_jars.KAFKA_SOURCE_PROVIDER, spark)
    assert jvm_has_class("org.apache.kafka.clients.consumer.KafkaConsumer", spark)
    assert jvm_has_class("org.apache.spark.kafka010.KafkaConfigUpdater", spark)  # token provider


def test_a_session_without_the_connector_is_told_what_to_do(spark: Any) -> None:
    """The failure path, through the same JVM lookup: a class this JVM cannot load."""
    missing = "org.apache.spark.sql.kafka010.NoSuchSourceProvider"
    with pytest.raises(maven_jars.KafkaConnectorMissing) as raised:
        maven_jars.require_kafka_connector(spark, missing)
    message = str(raised.value)
    assert message.startswith(
        "the Kafka connector is not loaded: run make setup, or pass --packages "
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version}")
    assert missing in message
    assert isinstance(raised.value, maven_jars.KafkaJarsError)


def test_lines_come_back_bytes_exact_in_order(
    kafka: KafkaTopics, kafka_broker: KafkaBroker, topic_name: str
) -> None:
    lines = sample_lines(1000, seed=1)
    kafka.create_topic(topic_name, partitions=1)
    kafka.produce(topic_name, lines)
    rows = read_batch(kafka.spark, kafka_broker, topic_name)
    assert len(rows) == len(lines)
    assert [bytes(row.value) for row in rows] == lines
    assert [row.offset for row in rows] == list(range(len(lines)))


def test_several_partitions_hold_every_line_once(
    kafka: KafkaTopics, kafka_broker: KafkaBroker, topic_name: str
) -> None:
    lines = sample_lines(600, seed=2)
    kafka.create_topic(topic_name, partitions=3)
    kafka.produce(topic_name, lines[:200], partition=0)
    kafka.produce(topic_name, lines[200:], partition=2)
    rows = read_batch(kafka.spark, kafka_broker, topic_name)
    assert Counter(bytes(row.value) for row in rows) == Counter(lines)
    by_partition = {p: [bytes(r.value) for r in rows if r.partition == p] for p in (0, 1, 2)}
    assert by_partition == {0: lines[:200], 1: [], 2: lines[200:]}


def test_available_now_stream_resumes_from_its_checkpoint(
    kafka: KafkaTopics, kafka_broker: KafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    """Two ``availableNow`` runs on one checkpoint: the second reads only what came after."""
    spark = kafka.spark
    kafka.create_topic(topic_name, partitions=2)
    first, second = sample_lines(500, seed=3), sample_lines(300, seed=4)
    batches: list[tuple[int, list[bytes]]] = []

    def collect(frame: Any, batch_id: int) -> None:
        batches.append((batch_id, [bytes(row.value) for row in frame.select("value").collect()]))

    def run() -> list[bytes]:
        seen = len(batches)
        query = (spark.readStream.format("kafka")
                 .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
                 .option("subscribe", topic_name)
                 .option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", 200)  # several micro-batches per run
                 .load()
                 .writeStream.foreachBatch(collect)
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True)
                 .start())
        try:
            assert query.awaitTermination(180), "the availableNow query did not end"
        finally:
            query.stop()
        assert query.exception() is None
        return [value for _, values in batches[seen:] for value in values]

    kafka.produce(topic_name, first)
    got = run()
    assert len(got) == len(first) and Counter(got) == Counter(first)
    assert len(batches) >= 3  # maxOffsetsPerTrigger took effect
    kafka.produce(topic_name, second)
    again = run()
    assert len(again) == len(second) and Counter(again) == Counter(second)
    ids = [batch_id for batch_id, _ in batches]
    assert ids == sorted(set(ids))  # the second run continued the batch ids: same checkpoint
