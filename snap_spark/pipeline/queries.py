"""What every Structured Streaming job of snap-spark shares, whatever it reads: its
``--trigger``, its settings, its checkpoint's files and its query id.

``jobs/stream_verify.py`` (:mod:`snap_spark.stream`) and ``jobs/stream_nostr.py``
(:mod:`snap_spark.nostr.live`) both use these; neither package imports the other.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import threading
from typing import TYPE_CHECKING, Any, ClassVar

from snap_spark.common.console import UsageError
from snap_spark.files import storage

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

    from snap_spark.settings import VerifySettings

_TRIGGER = re.compile(r"^(available-now|processing-time=(\d+(?:\.\d+)?)(ms|s|m)?)$")


def parse_trigger(text: str) -> dict[str, Any]:
    """``DataStreamWriter.trigger`` arguments for ``--trigger``.

    Examples:
        >>> parse_trigger("available-now")
        {'availableNow': True}
        >>> parse_trigger("processing-time=10s")
        {'processingTime': '10 seconds'}
        >>> parse_trigger("processing-time=500ms")
        {'processingTime': '500 milliseconds'}
    """
    match = _TRIGGER.match(text.strip())
    if not match:
        raise UsageError(f"--trigger must be available-now or processing-time=<n>[ms|s|m], "
                         f"got {text!r}")
    if match.group(1) == "available-now":
        return {"availableNow": True}
    unit = {"ms": "milliseconds", "s": "seconds", "m": "minutes", None: "seconds"}[
        match.group(3)]
    return {"processingTime": f"{match.group(2)} {unit}"}


def trigger_seconds(trigger: dict[str, Any]) -> float | None:
    """The interval of a processing-time trigger (:func:`parse_trigger`'s arguments) in
    seconds; ``None`` for any other trigger.

    Examples:
        >>> trigger_seconds(parse_trigger("processing-time=500ms"))
        0.5
        >>> trigger_seconds(parse_trigger("processing-time=2m")), trigger_seconds(
        ...     parse_trigger("available-now"))
        (120.0, None)
    """
    text = trigger.get("processingTime")
    if not isinstance(text, str):
        return None
    number, _, unit = text.strip().partition(" ")
    scale = {"millisecond": 0.001, "second": 1.0, "minute": 60.0, "hour": 3600.0}.get(
        unit.strip().rstrip("s"), 1.0)
    return float(number) * scale


def query_id(checkpoint: str) -> str:
    """The id of the query of ``checkpoint`` (Spark writes it to ``<checkpoint>/metadata``
    when the query first starts, and keeps it across restarts).

    Raises:
        RuntimeError: the checkpoint has no metadata yet (the query has not started).
    """
    location = storage.join(checkpoint, "metadata")
    try:
        with storage.open_input(location) as handle:
            return str(json.loads(handle.read().decode("utf-8").splitlines()[0])["id"])
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise RuntimeError(f"no query id in {location}: {exc}") from None


def stream_settings(settings: VerifySettings | None, spark: SparkSession) -> VerifySettings:
    """A stream's verification settings, validated and decided as the batch job's
    (:func:`snap_spark.pipeline.batch_job.decided_settings`).

    Raises:
        UsageError: ``--bare-clock now``: a micro-batch run again after a restart would see
            another "now", and so other receipt times.
    """
    from snap_spark.pipeline.batch_job import decided_settings

    decided = decided_settings(settings, spark)
    if decided.bare_clock == "now":
        raise UsageError("--bare-clock now would give a replayed micro-batch other receipt "
                         "times: use message or a fixed time for a stream")
    return decided


# -- stopping a stream on a signal ----------------------------------------------------------


#: The signals that ask a stream to stop cleanly (SIGTERM: ``kill``, a service manager;
#: SIGINT: Ctrl-C).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Whether the process was asked to stop, and by which signal. A signal only sets it
    (the stream's loop looks every second): nothing is written, logged or called through
    Py4J in a signal handler, which interrupts the main thread wherever it is."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.names: list[str] = []

    def ask(self, name: str) -> None:
        """Ask the stream to stop (``name``: the signal's, ``SIGTERM``)."""
        self.names.append(name)
        self.event.set()

    def is_set(self) -> bool:
        """True once asked."""
        return self.event.is_set()

    @property
    def name(self) -> str:
        """The signal that asked first."""
        return self.names[0] if self.names else "asked to stop"

    def on_signal(self, signum: int, _frame: Any) -> None:
        """Python's signal handler."""
        self.ask(signal.Signals(signum).name)


class JvmStopHandler:
    """A ``sun.misc.SignalHandler`` of the driver JVM, written in Python (a Py4J callback):
    the signal asks the stream to stop instead of shutting the JVM down. Under spark-submit
    the driver JVM is the process ``kill PID`` names, and Ctrl-C reaches it too: it would
    otherwise stop Spark under the stream, which then ends with Py4J errors and skips its
    stop-time work."""

    def __init__(self, request: StopRequest) -> None:
        self.request = request

    def handle(self, jsignal: Any) -> None:
        self.request.ask(f"SIG{jsignal.getName()}")

    class Java:
        implements: ClassVar[list[str]] = ["sun.misc.SignalHandler"]


@contextlib.contextmanager
def stop_on_signals(spark: SparkSession) -> Iterator[StopRequest]:
    """In the block, SIGTERM and SIGINT (:data:`STOP_SIGNALS`) set the :class:`StopRequest`
    it gives instead of ending the process: Python's handlers, and the driver JVM's
    (:class:`JvmStopHandler`). The handlers before are put back after. Only a stream run by
    the main thread (the job's) takes the signals: one run by another thread (a test, a
    notebook) is stopped with ``query.stop()``, and its request is never set."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {sig: signal.signal(sig, request.on_signal) for sig in STOP_SIGNALS}
    jvm: Any = spark.sparkContext._jvm
    jvm_previous: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # no sun.misc.Signal in this JVM: Python's only
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(  # type: ignore[no-untyped-call]
            spark.sparkContext._gateway)
        handler = JvmStopHandler(request)
        for sig in STOP_SIGNALS:
            name = sig.name.removeprefix("SIG")
            jvm_previous[name] = jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal(name), handler)
    try:
        yield request
    finally:
        for name, jhandler in jvm_previous.items():
            with contextlib.suppress(Exception):
                jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal(name), jhandler)
        for number, python_handler in previous.items():
            signal.signal(number, python_handler)
