"""The cron recipe of docs/audit-job.md ("Nightly with cron"), taken from the page and run
as cron runs a crontab line: ``/bin/sh -c`` under ``env -i`` with a bare ``PATH``. Its
placeholders (the checkout's folder, the lake, the report folder) become local ones, and
local Spark settings go before the job; the rest is the page's text. It must mail once for
every run that is not clean, telling findings (exit 3) from failures (any other non-zero
status).

``mail`` is a stand-in script first on ``PATH`` that records its arguments and what it
reads: no mail server can exist here (no MTA to hand mail to, no network to reach one), and
what the recipe asks of ``mail`` is all there is to check.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from snap_spark.protocol.keys import tweak_private_key
from snap_spark.samples.messages import SampleConfig, sample_agents, write_sample

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "audit-job.md"
#: What cron gives a command: no virtualenv, a bare PATH (the stand-in's folder goes first).
BARE_PATH = "/usr/bin:/bin"
#: Spark settings for a run here: two cores, no UI, the delta-rs backend (no Delta JARs).
LOCAL_SPARK = ("--master 'local[2]' --conf spark.ui.enabled=false "
               "--conf spark.snap.lake.backend=delta-rs --conf spark.sql.shuffle.partitions=2")
#: The JAR caches, when the tests were pointed at other ones.
JAR_CACHES = {name: os.environ[name] for name in ("SNAP_SPARK_DELTA_JARS",
                                                  "SNAP_SPARK_KAFKA_JARS")
              if name in os.environ}

#: The stand-in for ``mail``: each call writes one file holding its arguments (one a line),
#: a separator line, and its standard input.
MAIL_STAND_IN = """#!/bin/sh
# Stands in for mail(1) in the test of the cron recipe: no mail server can exist where the
# test runs, so this records what the recipe asked to send, one file per call.
record="{folder}/mail-$$"
{{ for word in "$@"; do printf '%s\\n' "$word"; done; printf '%s\\n' '--- body ---'; cat; }} \\
    > "$record"
"""


def recipe_command() -> str:
    """The command of the cron line of the page's "Nightly with cron" section (the line
    without its five schedule fields, ``\\%`` as cron passes it on: ``%``)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Nightly with cron"):]
    block = re.search(r"```cron\n(?P<lines>.*?)```", section, re.DOTALL)
    assert block is not None, "no cron block in the section"
    lines = [line for line in block["lines"].splitlines() if line.strip()]
    assert len(lines) == 1, lines
    fields = lines[0].split(maxsplit=5)
    assert len(fields) == 6, lines[0]
    return fields[5].replace("\\%", "%")


@dataclass(frozen=True)
class Mail:
    """One call of the stand-in: its arguments and what it was given to send."""

    args: list[str]
    body: str


def run_recipe(tmp_path: Path, lake: Path) -> tuple[subprocess.CompletedProcess[str], list[Mail],
                                                     Path]:
    """Run the page's cron command with ``lake`` and a report folder under ``tmp_path``;
    what it did, the mails it sent, and the day's report folder."""
    command = recipe_command()
    replacements = {
        "/opt/snap-spark": shlex.quote(str(ROOT)),
        "s3a://lake/snap": shlex.quote(str(lake)),
        "/srv/audit/": f"{shlex.quote(str(tmp_path / 'audit'))}/",
        "snap-spark submit audit": f"snap-spark submit {LOCAL_SPARK} audit",
    }
    for placeholder, local in replacements.items():
        assert placeholder in command, (placeholder, command)
        command = command.replace(placeholder, local)
    assert "/srv/" not in command and "s3a:" not in command, command
    (tmp_path / "audit").mkdir()
    stand_in = tmp_path / "bin" / "mail"
    stand_in.parent.mkdir()
    mails = tmp_path / "mails"
    mails.mkdir()
    stand_in.write_text(MAIL_STAND_IN.format(folder=mails))
    stand_in.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    variables = {"PATH": f"{stand_in.parent}:{BARE_PATH}", "HOME": str(home), "TZ": "UTC",
                 **JAR_CACHES}
    done = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in variables.items()),
                           "/bin/sh", "-c", command],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    sent = []
    for record in sorted(mails.iterdir()):
        head, _, body = record.read_text().partition("--- body ---\n")
        sent.append(Mail(head.splitlines(), body))
    day = dt.datetime.now(dt.UTC).date().isoformat()
    return done, sent, tmp_path / "audit" / day


def sample_configs(attack_share: float) -> list[SampleConfig]:
    """Sample traffic received yesterday and today (UTC), ``attack_share`` of it attacks:
    whichever day the recipe's ``date -d yesterday`` names when it runs, past midnight or
    not, its window holds some of it."""
    today = dt.datetime.now(dt.UTC).date()
    configs = []
    for days in (1, 0):
        day = today - dt.timedelta(days=days)
        noon = int(dt.datetime(day.year, day.month, day.day, 12, tzinfo=dt.UTC).timestamp())
        configs.append(SampleConfig(agents=5, messages=600, seed=31 + days,
                                    attack_share=attack_share, start_time=noon))
    return configs


#: Sample lines that are valid messages yet cross a default limit (an illegal transition).
NOT_CLEAN = ("task_illegal_transition",)


def landed_lake(spark: Any, root: Path, configs: list[SampleConfig], *,
                clean: bool = False) -> Path:
    """A lake of the batch job on the samples ``configs`` describe, under ``root``; with
    ``clean``, each sample's seed is moved on until the sample holds no line of
    :data:`NOT_CLEAN` (the generator's own count, not the audit's)."""
    from snap_spark.pipeline.batch_job import run

    root.mkdir(parents=True, exist_ok=True)
    inputs = []
    for i, config in enumerate(configs):
        path = root / f"traffic-{i}.jsonl"
        while True:
            kinds = write_sample(config, str(path), tasks_path=None)
            if not clean or not any(kinds[kind] for kind in NOT_CLEAN):
                break
            config = dataclasses.replace(config, seed=config.seed + 100)
        inputs.append(str(path))
    lake = root / "lake"
    run(spark, inputs, str(lake))
    return lake


@pytest.fixture(scope="module")
def attacked_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake of the batch job on sample traffic with attacks (:func:`sample_configs`): the
    recipe's window holds traffic that crosses the default limits."""
    return landed_lake(spark, tmp_path_factory.mktemp("cron"), sample_configs(0.3))


@pytest.mark.slow
def test_the_recipe_mails_a_failure(tmp_path: Path) -> None:
    """A lake that is not there: the audit stops with exit 2, and one mail says the run
    failed, with that status, carrying the audit's one line."""
    lake = tmp_path / "no-such-lake"
    done, sent, _ = run_recipe(tmp_path, lake)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(sent) == 1, (sent, done.stderr[-3000:])
    day = dt.datetime.now(dt.UTC).date().isoformat()
    assert sent[0].args == ["-s", f"snap-spark audit {day}: FAILED (exit 2)",
                            "soc@example.org"], sent[0]
    assert f"audit: --lake {lake}: no such folder" in sent[0].body, sent[0].body


@pytest.mark.slow
def test_the_recipe_mails_the_findings(attacked_lake: Path, tmp_path: Path) -> None:
    """A lake whose audit crosses the default limits: exit 3, one mail of findings whose
    body is the day's ``summary.json``."""
    done, sent, out = run_recipe(tmp_path, attacked_lake)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(sent) == 1, (sent, (out.parent / f"{out.name}.log").read_text()[-3000:])
    assert sent[0].args == ["-s", f"snap-spark audit {out.name}: findings",
                            "soc@example.org"], sent[0]
    summary = json.loads(sent[0].body)
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["alert"] is True and summary["exit_status"] == 3
    assert summary["lake"] == str(attacked_lake)
    assert {"forged_signature_rate", "replay_rate"} <= {
        t["name"] for t in summary["thresholds"] if t["crossed"]}
    assert (out / "report.html").is_file()
    said = (out.parent / f"{out.name}.log").read_text()
    assert said.rstrip().endswith("alert: thresholds crossed (exit 3)"), said[-3000:]
    # delta-rs is the lake's backend, so `snap-spark submit` gave no Delta JARs on purpose:
    # the session does not warn about their absence
    assert "Delta's classes are not on" not in said, said[-3000:]
    # no private key of the sample's agents (plain or taproot-tweaked) in what the run said
    secrets = [k.hex() for config in sample_configs(0.3) for a in sample_agents(config)
               for k in (a.private_key, tweak_private_key(a.private_key))]
    assert len(secrets) == 4 * 5 and not any(s in said for s in secrets)


@pytest.mark.slow
def test_the_recipe_sends_nothing_on_a_clean_day(spark: Any, tmp_path: Path) -> None:
    """A lake of traffic without attacks, within the default limits: exit 0, the report
    written, no mail."""
    lake = landed_lake(spark, tmp_path / "clean", sample_configs(0.0), clean=True)
    done, sent, out = run_recipe(tmp_path, lake)
    said = (out.parent / f"{out.name}.log").read_text()
    assert done.returncode == 0, done.stderr[-3000:]
    assert sent == [], (sent, said[-3000:])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["alert"] is False and summary["exit_status"] == 0, summary["thresholds"]
    assert summary["figures"]["messages"]["total"] > 0  # the window held traffic
    assert "clean: no threshold crossed" in said, said[-3000:]
    assert (out / "report.html").is_file()
