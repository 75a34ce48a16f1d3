"""A real Kafka broker for tests: Apache Kafka in KRaft mode, one JVM on 127.0.0.1.

The broker's JARs (``org.apache.kafka:kafka_2.13`` :data:`BROKER_VERSION`, the line of the
kafka-clients Spark's connector uses, with its dependencies and a logging binding) are
resolved once from Maven Central by Spark's own resolver into ``.venv/kafka-broker`` (or
``$SNAP_SPARK_KAFKA_BROKER``): :func:`fetch_broker_jars`, which the tests' session fixture
calls and ``python -m tests.kafka fetch`` runs by hand. Scala's library comes from the
installed PySpark (Spark's resolver leaves it out: Spark ships it).

:class:`KafkaBroker` then runs one combined broker+controller node: free ports, a
``server.properties`` under a temporary folder, ``kafka.tools.StorageTool format``, and
``java -cp <jars> kafka.Kafka server.properties`` in its own process group, stopped (the
whole group) by :meth:`KafkaBroker.stop` or on leaving a ``with`` block. It is ready when
its log says the server started and its port accepts connections (seconds, not minutes).

:class:`KafkaTopics` creates topics (Kafka's Admin client, in the Spark driver's JVM, from
the connector's kafka-clients) and produces lines with Spark's Kafka writer: each line is
one record's value, bytes exact (invalid UTF-8 and empty lines included), in order.

Example (needs a SparkSession ``spark`` with the connector)::

    with KafkaBroker() as broker:
        topics = KafkaTopics(broker, spark)
        topics.create_topic("lines", partitions=1)
        topics.produce("lines", [b"a", b"\\xff", b""])
        spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

import pyspark

from snap_spark.runtime import maven_jars
from tests.child_server import free_port, port_open, wait_ready

#: Kafka of the line Spark 4.0.1's connector is built and tested against (its kafka-clients
#: and its own test broker are 3.9.1).
BROKER_VERSION = "3.9.1"

#: The broker's JARs, cached like the project's own JAR sets (tests only).
BROKER_JARS = maven_jars.JarSet(
    name="kafka-broker",
    label="Kafka broker JARs (tests)",
    artifacts=(
        "org.apache.kafka:kafka_2.13",
        # Kafka 3.9 logs through SLF4J 1.7 to log4j 1 (reload4j), as its distribution does
        "org.slf4j:slf4j-reload4j:1.7.36",
    ),
    versions=lambda: BROKER_VERSION,
    cache_env="SNAP_SPARK_KAFKA_BROKER",
    folder="kafka-broker",
    marker="org.apache.kafka_kafka_2.13-",
    consequence="the Kafka tests fail",
    for_spark=False,  # the broker's own class path: every JAR it resolved
    remote_only=True,  # Kafka's dependencies are often half-present in ~/.m2
)

#: Runs the broker's JVM (its command line: "$@") and stops it when the test process is gone
#: without stopping it (killed: no fixture teardown), so no broker outlives its tests.
WATCHDOG = """\
"$@" &
broker=$!
trap 'kill -TERM $broker 2>/dev/null' TERM INT
while kill -0 "$KAFKA_TEST_PARENT" 2>/dev/null && kill -0 $broker 2>/dev/null; do
  sleep 1
done
kill -TERM $broker 2>/dev/null
wait $broker
"""

#: What the broker's log says once it serves requests.
STARTED_MARKER = "Kafka Server started"

LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
"""


def fetch_broker_jars(timeout: float = maven_jars.FETCH_TIMEOUT_SECONDS) -> list[str]:
    """The broker's classpath: its cached JARs (fetched on first use) and Scala's library.

    Raises:
        snap_spark.runtime.maven_jars.MavenJarsError: the JARs are not cached and could not be
            fetched (no network).
    """
    jars = maven_jars.fetch(BROKER_JARS, timeout=timeout)
    scala = sorted((Path(pyspark.__file__).parent / "jars").glob("scala-library-2.13.*.jar"))
    if not scala:
        raise maven_jars.MavenJarsError("the installed PySpark has no scala-library JAR")
    return [*jars, str(scala[-1])]


def cluster_id() -> str:
    """A new KRaft cluster id: a random UUID in Kafka's 22-character URL-safe base64.

    Examples:
        >>> len(cluster_id())
        22
    """
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class KafkaBroker:
    """One Kafka node (broker and KRaft controller) on 127.0.0.1, started by :meth:`start`,
    ended by :meth:`stop`; its data and log live under a temporary folder, removed on stop
    unless ``keep`` is set."""

    def __init__(self, startup_seconds: float = 120.0, heap: str = "512m",
                 keep: bool = False) -> None:
        self.startup_seconds = startup_seconds
        self.heap = heap
        self.keep = keep
        self.port = 0
        self.controller_port = 0
        self.home = Path(tempfile.mkdtemp(prefix="kafka-broker-"))
        self.log_path = self.home / "server.log"
        self.started_seconds = 0.0
        self._classpath = ""
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>``: the value of ``kafka.bootstrap.servers``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> KafkaBroker:
        """Fetch the JARs if needed, format the storage, start the broker and wait until it
        serves; raises ``RuntimeError`` (with the end of its log) when it does not."""
        self._classpath = os.pathsep.join(fetch_broker_jars())
        began = time.monotonic()
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port, self.controller_port = free_port(), free_port()
            if self.port == self.controller_port:
                continue
            properties = self._write_configuration()
            self._format(properties)
            with open(self.home / "stdout.log", "ab") as out:
                self._process = subprocess.Popen(
                    ["bash", "-c", WATCHDOG, "kafka-broker",
                     *self._java(), "kafka.Kafka", str(properties)],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env={**os.environ, "KAFKA_TEST_PARENT": str(os.getpid())},
                    start_new_session=True,  # its own process group: stop() ends all of it
                )
            try:
                ready = self._wait_ready()
            except BaseException:
                self._kill()
                raise
            if ready:
                self.started_seconds = time.monotonic() - began
                return self
            self._kill()
        raise RuntimeError(f"the Kafka broker did not start; see {self.log_path}:\n{self.log()}")

    def _java(self) -> list[str]:
        """The JVM command line both the storage tool and the broker run with (``java``
        of ``$JAVA_HOME`` when set, as Spark picks it, else of the ``PATH``)."""
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else "java"
        return [
            java, f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.home / 'log4j.properties'}",
            f"-Dkafka.logs.dir={self.home}",
            "-cp", self._classpath,
        ]

    def _write_configuration(self) -> Path:
        """``server.properties`` of a single combined node, and its logging settings."""
        data = self.home / f"data-{self.port}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (f"PLAINTEXT://127.0.0.1:{self.port},"
                          f"CONTROLLER://127.0.0.1:{self.controller_port}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # two cores shared with Spark: few threads
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.enable": "false",
        }
        properties = self.home / f"server-{self.port}.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()),
                              encoding="utf-8")
        (self.home / "log4j.properties").write_text(
            LOG4J_PROPERTIES.format(log=self.log_path), encoding="utf-8")
        return properties

    def _format(self, properties: Path) -> None:
        """``kafka-storage.sh format``: write the cluster id and node's metadata to its log
        folder (KRaft needs it before the first start)."""
        done = subprocess.run(
            # "=": a random id may start with "-", which would read as an option
            [*self._java(), "kafka.tools.StorageTool", "format",
             f"--cluster-id={cluster_id()}", f"--config={properties}"],
            capture_output=True, text=True, timeout=120, check=False,
        )
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-4000:]
            raise RuntimeError(f"formatting the broker's storage in {self.home} failed:\n{output}")

    def _wait_ready(self) -> bool:
        assert self._process is not None
        return wait_ready(self._process, self.startup_seconds, lambda: (
            STARTED_MARKER in self.log(last_chars=0) and port_open(self.port)))

    def stop(self) -> None:
        """Stop the broker's process group (TERM, then KILL if it lingers) and remove its
        folder (unless ``keep``, or the broker never started: its log says why)."""
        self._kill()
        if not self.keep and self.started_seconds:
            import shutil

            shutil.rmtree(self.home, ignore_errors=True)

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):  # anything left in its group
            os.killpg(process.pid, signal.SIGKILL)

    def log(self, last_chars: int = 4000) -> str:
        """The broker's log (its end: ``last_chars``; 0 for all of it)."""
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace")
            return text[-last_chars:] if last_chars else text
        return ""

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class KafkaTopics:
    """Topics and records of a :class:`KafkaBroker`, through a SparkSession with the Kafka
    connector loaded (its kafka-clients for the Admin client, its writer for records)."""

    def __init__(self, broker: KafkaBroker, spark: Any) -> None:
        self.broker = broker
        self.spark = spark

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 60.0) -> None:
        """Create topic ``name`` with ``partitions`` partitions (replication factor 1) and
        wait until every partition has a leader."""
        jvm = self.spark.sparkContext._jvm
        props = jvm.java.util.Properties()
        props.setProperty("bootstrap.servers", self.broker.bootstrap)
        admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
        try:
            optional = jvm.java.util.Optional
            topic = jvm.org.apache.kafka.clients.admin.NewTopic(
                name, optional.of(partitions), optional.empty())  # replication: the default
            seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
            admin.createTopics(jvm.java.util.List.of(topic)).all().get(int(timeout), seconds)
            deadline = time.monotonic() + timeout
            while True:
                described = admin.describeTopics(jvm.java.util.List.of(name))
                try:
                    info = described.allTopicNames().get(int(timeout), seconds).get(name)
                except Exception as exc:  # py4j's error, naming Kafka's
                    # created, but the broker's metadata does not have it yet (seen on a
                    # busy machine): UnknownTopicOrPartitionException; ask again
                    if "UnknownTopicOrPartition" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
                    continue
                leaders = [p.leader() for p in info.partitions()]
                if len(leaders) == partitions and all(leader is not None for leader in leaders):
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {name}: partitions without a leader")
                time.sleep(0.1)
        finally:
            admin.close()

    def produce(self, topic: str, lines: list[bytes], partition: int | None = None) -> None:
        """Write each of ``lines`` as one record's value (bytes exact, no key), in order,
        with Spark's Kafka writer; all to ``partition`` when given, else as Kafka's
        partitioner spreads them."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType, StructField, StructType

        schema = StructType([StructField("value", BinaryType(), nullable=False)])
        frame = self.spark.createDataFrame([(bytes(line),) for line in lines], schema)
        frame = frame.coalesce(1)  # one task, one producer: the records keep their order
        if partition is not None:
            frame = frame.withColumn("partition", F.lit(partition))
        (frame.write.format("kafka")
         .option("kafka.bootstrap.servers", self.broker.bootstrap)
         .option("topic", topic)
         .save())


def main(argv: list[str]) -> int:
    """``python -m tests.kafka fetch``: cache the broker's JARs (``make test`` runs it);
    ``python -m tests.kafka run``: start a broker and print its address until Ctrl-C."""
    if argv[:1] == ["fetch"]:
        if maven_jars.available(BROKER_JARS) is not None:
            return 0  # cached: stay quiet, `make test` runs this every time
        try:
            jars = fetch_broker_jars()
        except maven_jars.MavenJarsError as error:
            print(f"test setup: Kafka broker JARs not fetched ({error}); the Kafka tests "
                  "fail until this machine can reach Maven Central", file=sys.stderr)
            return 1
        print(f"test setup: Kafka broker {BROKER_VERSION}: {len(jars)} JARs in "
              f"{maven_jars.cache_dir(BROKER_JARS)}")
        return 0
    if argv[:1] == ["run"]:
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # TERM stops it cleanly too
        with KafkaBroker() as broker:
            print(f"Kafka {BROKER_VERSION} on {broker.bootstrap} "
                  f"(started in {broker.started_seconds:.1f} s; log {broker.log_path})")
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    print("usage: python -m tests.kafka fetch|run", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
