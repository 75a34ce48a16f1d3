"""Soak: the stream over traffic spanning many replay windows keeps its state flat.

6,000 generated messages span about 27 minutes of receipt time, some 27 windows of 60 s
(the replay window is a setting: half the default, so that half the traffic spans as many
windows, with as many lines per window and per drop); they arrive in 15 drops, one
micro-batch each. The replay state must hold only the keys received within the window
(plus the lateness) of the newest receipt time: the count per batch (printed, and written
by ``--progress-json``) stays near the traffic of one window and lateness, while the keys
seen grow with history. Verdicts still equal the checker's with the same window.
"""

from __future__ import annotations

import json
import resource
import uuid
from pathlib import Path
from typing import Any

import pytest

from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from snap_spark.stream.stream_job import StreamPlan, run_stream
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DROPS = 15
LATENESS = 30.0
WINDOW = 60.0


def test_state_stays_flat_over_many_windows(spark: Any, tmp_path: Path) -> None:
    """15 drops over some 27 replay windows: the state's keys after each batch stay under
    two drops' worth and do not grow from the first half of the run to the second; the
    verdicts are the checker's (same replay window) over every line."""
    lines = [line for line, _ in generate(SampleConfig(agents=6, messages=6_000, seed=77,
                                                       attack_share=0.1))]
    landing = tmp_path / "landing"
    landing.mkdir()
    size = -(-len(lines) // DROPS)
    where: list[tuple[str, int]] = []
    for i in range(DROPS):
        part = lines[i * size:(i + 1) * size]
        path = landing / f"drop-{i:02d}.jsonl"
        path.write_bytes(b"\n".join(part) + b"\n")
        where.extend((str(path), n) for n in range(1, len(part) + 1))
    received = []
    for line in lines:
        try:
            received.append(float(json.loads(line)["received_at"]))
        except (ValueError, KeyError, TypeError):
            continue
    span = max(received) - min(received)
    assert span > 20 * WINDOW  # the soak covers many windows
    progress = tmp_path / "progress.jsonl"
    plan = StreamPlan(lake_dir=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ckpt"),
                      settings=VerifySettings(replay_window=WINDOW), lateness=LATENESS,
                      run_id=uuid.uuid4().hex, landing=str(landing),
                      max_files_per_trigger=1, progress_json=str(progress))
    rss = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]
    result = run_stream(spark, plan, {"availableNow": True})
    rss.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    assert result.batches == DROPS and result.lines_read == len(lines)

    reports = [json.loads(line) for line in progress.read_text().splitlines()]
    keys = [r["state_keys"] for r in reports]
    print(f"state keys after each batch: {keys}; driver max RSS {rss[0]} -> {rss[1]} KiB; "
          f"{len(lines)} lines over {span / 60:.0f} min")
    assert len(keys) == DROPS
    # After a batch the state holds that batch's keys (expired at the next watermark) and
    # those received within window + lateness before it: about one drop (400 messages) and
    # a minute and a half of traffic, never the history (6,000 keys).
    assert max(keys) < 2 * size < len(lines) // 6
    assert max(keys[DROPS // 2:]) <= 1.5 * max(keys[:DROPS // 2])  # flat, not growing
    # and nothing was decided differently for it
    names = [line_name(src, n) for src, n in where]
    reference = {key: (v.error_code, v.error_detail or None) for key, v in
                 zip(where, check_lines(lines, ReceiptClock.refuse(), names=names,
                                        replay_window=WINDOW), strict=True)}
    got = {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
           for m in delta_rows(tmp_path / "lake" / "messages")}
    assert got == reference
