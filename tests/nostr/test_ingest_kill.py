"""SIGKILL jobs/ingest_nostr.py (its whole process group) between its commits, run it again:
the tables equal one uninterrupted run, each stored message is in ``messages`` once, and no
stray file is left in a table folder.

Points, one after the other on the same lake (each killed run is the next one's starting
point): while the stored messages are landing (between the batch job's ``raw_messages`` and
``messages`` commits), after the stored messages landed (before any Nostr table), after
``agent_card_history``, after ``agent_cards`` (before ``nostr_events``, committed last).
The run is held still at a point by the test-only hook :mod:`tests.hold`, right after the
log line that marks it (``stage 3/4 raw_messages``, ``stored messages: ...``,
``<table>: ...``), then killed.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample
from tests.hold import HOLDING
from tests.jobs import finish, kill_when, logged_files, parquet_files, start_job
from tests.lake.helpers import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLES = ("nostr_events", "agent_card_history", "agent_cards", "messages", "raw_messages")
PER_RUN = ("ingest_id", "ingest_time")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    stem = str(tmp_path_factory.mktemp("nostr-kill") / "s")
    write_nostr_sample(NostrSampleConfig(cards=12, messages=60, well_known=6, seed=9), stem)
    return output_paths(stem)


def args(paths: dict[str, str], lake: Path) -> list[str]:
    return ["--lake", str(lake), "--input", paths["events"], "--keyring", paths["keyring"],
            "--well-known", paths["well_known"]]


def tables(lake: Path) -> dict[str, list[str]]:
    out = {}
    for name in TABLES:
        rows = delta_rows(lake / name)
        for row in rows:
            for column in PER_RUN:
                row.pop(column, None)
        # the stored messages' inbox file lives in the lake: name the lake the same
        out[name] = sorted(json.dumps(r, sort_keys=True, default=str).replace(str(lake), "LAKE")
                           for r in rows)
    return out


@pytest.fixture(scope="module")
def reference(spark: Any, paths: dict[str, str], tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, list[str]]:
    """The tables of one uninterrupted run, landed in this process (the session's settings
    are the job processes': local[2], two shuffle partitions, delta-rs)."""
    from snap_spark.nostr.ingest import ingest
    from snap_spark.nostr.stored import Keyring

    lake = tmp_path_factory.mktemp("nostr-kill-ref") / "lake"
    ingest(spark, str(lake), inputs=[paths["events"]], keyring=Keyring.load(paths["keyring"]),
           well_known=[paths["well_known"]])
    return tables(lake)


def test_killed_at_each_commit_in_turn_then_finished_equals_one_run(
        paths: dict[str, str], reference: Any, tmp_path: Path) -> None:
    """Killed between the batch job's raw_messages and messages commits of the stored
    messages; run again (it completes them from raw_messages) and killed once they landed,
    before any Nostr table; again after agent_card_history, again after agent_cards; then
    run to the end: the tables equal one run, nothing landed twice, no stray file."""
    lake = tmp_path / "lake"
    kill_when(start_job("ingest_nostr.py", args(paths, lake),
                        hold_at="stage 3/4 raw_messages"), HOLDING)
    assert (lake / "raw_messages" / "_delta_log").is_dir()
    assert not (lake / "messages" / "_delta_log").is_dir()
    # the line each step logs once it is done (a table's: committed, or nothing to commit)
    for hold in ("stored messages: ", "agent_card_history: ", "agent_cards: "):
        kill_when(start_job("ingest_nostr.py", args(paths, lake), hold_at=hold),
                  HOLDING + hold)
        print(f"killed after {hold!r}:",
              {t: (lake / t / "_delta_log").is_dir() for t in TABLES})
        if hold == "stored messages: ":  # completed from raw_messages; no Nostr table yet
            assert (lake / "messages" / "_delta_log").is_dir()
            assert not any((lake / t / "_delta_log").is_dir() for t in TABLES[:3])
    finish(start_job("ingest_nostr.py", args(paths, lake)))
    check(lake, reference)


def check(lake: Path, reference: dict[str, list[str]]) -> None:
    got = tables(lake)
    differing = {name: {"only here": sorted(set(got[name]) - set(reference[name]))[:3],
                        "only in the reference": sorted(set(reference[name])
                                                        - set(got[name]))[:3],
                        "rows": (len(got[name]), len(reference[name]))}
                 for name in TABLES if got[name] != reference[name]}
    assert not differing, json.dumps(differing, indent=1)
    sources = Counter(r["source"] for r in delta_rows(lake / "raw_messages"))
    assert sources and max(sources.values()) == 1  # each stored message landed once
    for name in TABLES:
        assert parquet_files(lake / name) == logged_files(lake / name), name
