"""One progress line per micro-batch of the stream, and the same as JSON lines for shippers.

The stream's ``foreachBatch`` records what it committed (:meth:`BatchProgress.record`: lines,
verdict counts, commit time, end-to-end latency); a ``StreamingQueryListener``
(:class:`ProgressListener`) joins that with Spark's own progress of the batch (input rows,
state rows of the replay window (one per bucket of keys), batch duration) and prints::

    batch 12: 4,000 in, valid 3,642, rejected 358 (1003:40 2001:12 2004:280 2006:26),
    state keys 2,913, state rows 32, 1.8 s, latency p50 3.1 s max 9.7 s

on stderr, and appends the same fields as one JSON object per line to ``--progress-json``.

Examples:
    >>> line = format_line({"batch_id": 3, "rows_in": 10, "valid": 9, "rejected": 1,
    ...                     "codes": {"2006": 1}, "state_rows": 7, "batch_seconds": 1.25,
    ...                     "latency_p50": 2.0, "latency_max": 3.5})
    >>> line
    'batch 3: 10 in, valid 9, rejected 1 (2006:1), state rows 7, 1.2 s, latency p50 2.0 s max 3.5 s'
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from pyspark.sql.streaming.listener import StreamingQueryListener

from snap_spark.pipeline.commit import coded


class BatchProgress:
    """What ``foreachBatch`` committed, by batch id, until the listener reports it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: dict[int, dict[str, Any]] = {}

    def record(self, batch_id: int, outcome: Any, seconds: float,
               landed_at: Sequence[float], state_keys: int | None = None,
               landing: dict[str, Any] | None = None,
               committed_at: float | None = None) -> None:
        """Note a committed batch: ``outcome`` a :class:`~snap_spark.pipeline.commit.JobResult`,
        ``landed_at`` when each input of the batch arrived (file modification times, Kafka
        record times; unix seconds), ``committed_at`` when its rows became visible in the
        lake (unix seconds; now when not given): latencies run from the one to the other."""
        now = time.time() if committed_at is None else committed_at
        latencies = sorted(max(0.0, now - at) for at in landed_at)
        codes = rejected_codes(outcome.counts)
        with self._lock:
            self._batches[batch_id] = {
                "batch_id": batch_id,
                "lines": outcome.lines_read,
                "valid": outcome.valid,
                "rejected": outcome.rejected,
                "codes": codes,
                "rows_redecided": outcome.rows_redecided,
                # what re-deciding them did to the table's count per code: these added to
                # every line's valid and codes give the table's counts
                "redecided_codes": coded(outcome.redecided_codes),
                # rows of unfinished last lines removed (their lines landed again
                # completed): lines less these add up to the table's rows, and these codes
                # (negative) count in its counts
                "rows_replaced": outcome.rows_replaced,
                "replaced_codes": coded(outcome.replaced_codes),
                # a batch re-run after a restart whose commits were made before it: the
                # figures are those the lake recorded then, and no row was written now
                "already_committed": bool(outcome.already_committed),
                "rows_written": outcome.message_rows_written,
                "state_keys": state_keys,
                "commit_seconds": round(seconds, 3),
                "latency_p50": round(statistics.median(latencies), 3) if latencies else None,
                "latency_p95": round(percentile(latencies, 0.95), 3) if latencies else None,
                "latency_max": round(latencies[-1], 3) if latencies else None,
                # one per input: a file, or a Kafka partition's records of the batch
                "latencies": [round(x, 3) for x in latencies],
                "committed_at": now,
                # landing folder: files that grew / changed after they were landed (landed
                # now), and files that vanished before they could be read (names)
                "files_grown": 0, "files_changed": 0, "files_vanished": 0, "vanished": [],
                **(landing or {}),
            }

    def pop(self, batch_id: int) -> dict[str, Any] | None:
        with self._lock:
            return self._batches.pop(batch_id, None)


def rejected_codes(counts: dict[int | None, int]) -> dict[str, int]:
    """The rejected lines of a batch per code, as the progress JSON gives them.

    Examples:
        >>> rejected_codes({None: 5, 2006: 2, 1003: 1, 2001: 0})
        {'1003': 1, '2006': 2}
    """
    return {str(code): n for code, n in sorted(counts.items(), key=lambda kv: kv[0] or 0)
            if code is not None and n}


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (sorted or not).

    Examples:
        >>> percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.95), percentile([2.0], 0.5)
        (5.0, 2.0)
    """
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def format_line(fields: dict[str, Any]) -> str:
    """The progress line of one batch (see the module docstring)."""
    codes = " ".join(f"{code}:{n}" for code, n in fields.get("codes", {}).items())
    name = (f"batch {fields['batch_id']}" if fields.get("batch_id") is not None
            else f"landing folder at {fields.get('landing_watch', 'start')}")
    parts = [f"{name}: {fields.get('rows_in', 0):,} in",
             f"valid {fields.get('valid', 0):,}",
             f"rejected {fields.get('rejected', 0):,}" + (f" ({codes})" if codes else "")]
    if fields.get("state_keys") is not None:
        parts.append(f"state keys {fields['state_keys']:,}")
    if fields.get("state_rows") is not None:
        parts.append(f"state rows {fields['state_rows']:,}")
    if fields.get("batch_seconds") is not None:
        parts.append(f"{fields['batch_seconds']:.1f} s")
    if fields.get("latency_p50") is not None:
        p95 = fields.get("latency_p95")
        parts.append(f"latency p50 {fields['latency_p50']:.1f} s"
                     + (f" p95 {p95:.1f} s" if p95 is not None else "")
                     + f" max {fields['latency_max']:.1f} s")
    if fields.get("rows_redecided"):
        moved = " ".join(f"{code} {n:+d}"
                         for code, n in (fields.get("redecided_codes") or {}).items())
        parts.append(f"{fields['rows_redecided']} earlier rows re-decided"
                     + (f" ({moved})" if moved else ""))
    if fields.get("rows_replaced"):
        parts.append(f"{fields['rows_replaced']} row(s) of unfinished lines replaced")
    if fields.get("files_grown") or fields.get("files_changed"):
        parts.append(f"{fields.get('files_grown', 0)} grown and "
                     f"{fields.get('files_changed', 0)} changed file(s) landed again")
    if fields.get("files_vanished"):
        parts.append(f"{fields['files_vanished']} file(s) vanished before they were read")
    if fields.get("already_committed"):
        parts.append("committed before a restart (figures as committed then, "
                     "nothing new written)")
    return ", ".join(parts)


class ProgressListener(StreamingQueryListener):
    """Prints one line per micro-batch (and appends it as JSON to ``json_path``).

    Spark's progress of a batch is read as its JSON text, in one call to the JVM: PySpark's
    own listener bridge first copies the whole progress object field by field into Python
    (hundreds of calls over the gateway, a noticeable part of each micro-batch of the
    latency measure, on the cores the next micro-batch runs on: docs/speed.md, *Figures
    behind the code*). :attr:`_jlistener` gives Spark that lighter bridge
    (:class:`_JsonBridge`) where PySpark is the one it was written for."""

    def __init__(self, progress: BatchProgress, json_path: str | None = None) -> None:
        self.progress = progress
        self.json_path = json_path
        self.reported: set[int] = set()
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @property
    def _jlistener(self) -> Any:
        # What StreamingQueryManager.addListener/removeListener register (PySpark 4.0): the
        # JVM wrapper of a Python object implementing PythonStreamingQueryListener.
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            assert jvm is not None
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonBridge(self))
        return self._jlistenerobj

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.report(json.loads(event.progress.json))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def report(self, raw: dict[str, Any]) -> None:
        """Join Spark's progress of one batch (its JSON, parsed) with what was committed, and
        print it."""
        from snap_spark.stream.replay_state import state_rows

        batch_id = int(raw["batchId"])
        with self._lock:
            if batch_id in self.reported:
                return
            committed = self.progress.pop(batch_id)
            if committed is None:
                return  # a batch with no data, or not committed by this process
            self.reported.add(batch_id)
            fields = {
                **committed,
                "rows_in": committed["lines"],
                "input_rows": int(raw.get("numInputRows") or 0),
                "state_rows": state_rows(raw),
                "batch_seconds": (raw.get("durationMs", {}).get("triggerExecution", 0) or 0)
                / 1000.0,
                "query_id": str(raw["id"]),
            }
            self.lines.append(fields)
            print(f"[snap-spark] {format_line(fields)}", file=sys.stderr, flush=True)
            if self.json_path:
                with open(self.json_path, "a", encoding="utf-8") as out:
                    out.write(json.dumps(fields, sort_keys=True) + "\n")

    def report_landing(self, when: str, changes: Any) -> None:
        """Report what the landing watch landed outside a micro-batch (``when``: ``start``,
        before the first one; ``watch``, between micro-batches, when no new file arrived;
        ``stop``, after the last): one line and one JSON object (``batch_id`` null), so the
        progress lines add up to what the tables hold."""
        if changes.result is None:
            return
        outcome = changes.result
        codes = rejected_codes(outcome.counts)
        fields = {"batch_id": None, "landing_watch": when, "lines": outcome.lines_read,
                  "rows_in": outcome.lines_read, "valid": outcome.valid,
                  "rejected": outcome.rejected, "codes": codes,
                  "rows_written": outcome.message_rows_written,
                  "rows_redecided": outcome.rows_redecided,
                  "redecided_codes": coded(outcome.redecided_codes),
                  "rows_replaced": outcome.rows_replaced,
                  "replaced_codes": coded(outcome.replaced_codes),
                  "already_committed": bool(outcome.already_committed),
                  "files_grown": len(changes.grown), "files_changed": len(changes.changed),
                  "files_vanished": 0, "vanished": [], "committed_at": time.time()}
        with self._lock:
            self.lines.append(fields)
            print(f"[snap-spark] {format_line(fields)}", file=sys.stderr, flush=True)
            if self.json_path:
                with open(self.json_path, "a", encoding="utf-8") as out:
                    out.write(json.dumps(fields, sort_keys=True) + "\n")

    def flush(self, query: Any) -> None:
        """Report the batches whose progress event has not arrived yet (at stop), from the
        query's recent progress read as JSON texts (``recentProgress`` would first copy up
        to 100 progress objects into Python field by field: seconds)."""
        jquery = getattr(query, "_jsq", None)
        if jquery is None:  # not the PySpark this was written for: its own copies
            for progress in query.recentProgress:
                self.report(json.loads(progress.json))
            return
        for jprogress in jquery.recentProgress():
            self.report(json.loads(jprogress.json()))


class _JsonBridge:
    """The Python side of Spark's ``PythonStreamingQueryListener`` for a
    :class:`ProgressListener`: hands it each batch's progress as parsed JSON, read in one
    call (``progress().json()``) instead of PySpark's field-by-field copy."""

    def __init__(self, listener: ProgressListener) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        self.listener.report(json.loads(jevent.progress().json()))

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        pass

    class Java:
        implements: ClassVar[list[str]] = [
            "org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
