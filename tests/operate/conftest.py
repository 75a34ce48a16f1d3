"""One lake with every table, written by the real jobs (the batch job with its task upkeep,
then Nostr ingestion of an archive), shared by the audit and notebook tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

AGENTS = 12
SEED = 7


@dataclass(frozen=True)
class FullLake:
    """A lake folder and the inputs it was landed from."""

    lake: Path
    traffic: Path
    nostr_stem: str


@pytest.fixture(scope="session")
def full_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullLake]:
    from snap_spark.nostr.ingest import ingest
    from snap_spark.nostr.stored import Keyring
    from snap_spark.pipeline.batch_job import run
    from snap_spark.samples.messages import SampleConfig, write_sample
    from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample

    root = tmp_path_factory.mktemp("full-lake")
    traffic = root / "traffic.jsonl"
    write_sample(SampleConfig(agents=AGENTS, messages=3000, seed=SEED), str(traffic))
    lake = root / "lake"
    run(spark, [str(traffic)], str(lake))
    stem = str(root / "nostr" / "sample")
    (root / "nostr").mkdir()
    write_nostr_sample(NostrSampleConfig(agents=AGENTS, cards=24, messages=120, well_known=8,
                                         seed=SEED), stem)
    paths = output_paths(stem)
    ingest(spark, str(lake), inputs=[paths["events"]], keyring=Keyring.load(paths["keyring"]),
           well_known=[paths["well_known"]])
    yield FullLake(lake=lake, traffic=traffic, nostr_stem=stem)
