"""``snap-spark publish`` run as a user runs it, against a ``snap-spark relay`` process."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from snap_spark.nostr.client import fetch_events
from tests.nostr.conftest import card_event, message_event
from tests.nostr.relays import CODE_ROOT, RelayProcess, cli_env


def publish(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snap_spark.cli", "publish", *args],
                          input=stdin, capture_output=True, text=True, timeout=60,
                          check=False, env=cli_env(), cwd=CODE_ROOT)


def test_publish_reports_each_event_and_skipped_line(relay: RelayProcess, tmp_path: Path,
                                                     now: int) -> None:
    raw = message_event(created_at=now, content="raw")
    framed = message_event(created_at=now, content="framed")
    card = card_event(created_at=now)
    forged = {**message_event(created_at=now, content="forged"), "sig": "ab" * 64}
    lines = [
        json.dumps(raw),
        json.dumps(["EVENT", "sub-1", framed]),
        json.dumps({"received_at": now + 0.25, "relay": "wss://relay.example", "event": card}),
        json.dumps(forged),
        "",
        '{"kind": 1',
        '["EOSE", "sub-1"]',
        json.dumps(raw),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    proc = publish("--relay", relay.url, str(path))

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"{raw['id']} accepted",
        f"{framed['id']} accepted",
        f"{card['id']} accepted",
        f"{forged['id']} refused invalid: invalid event signature",
        "- skipped line 5: empty line",
        "- skipped line 6: not JSON: unterminated object or array at end of input (truncated?)",
        "- skipped line 7: a relay 'EOSE' message, not an EVENT",
        f"{raw['id']} accepted duplicate: already have this event",
    ]
    assert proc.stderr.startswith(
        f"published to {relay.url}: 5 events, 4 accepted, 1 refused; 3 lines skipped (")
    [fetch] = fetch_events([relay.url])
    assert {json.loads(e.event_json)["id"] for e in fetch.events} == {
        raw["id"], framed["id"], card["id"]}


def test_publish_reads_stdin_and_gzip(relay: RelayProcess, tmp_path: Path, now: int) -> None:
    first, second = (message_event(created_at=now, content=c) for c in ("stdin", "gzip"))
    deep_frame = '["EVENT", "s", {"tags": ' + "[" * 50_000 + "]" * 50_000 + "}]"
    proc = publish("--relay", relay.url, "-", stdin=json.dumps(first) + "\n" + deep_frame)
    assert (proc.returncode, proc.stdout) == (0, f"{first['id']} accepted\n- skipped line 2: "
                                              "the event nests too deeply to write as JSON\n")

    path = tmp_path / "events.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(second))  # no final line break
    proc = publish("--relay", relay.url, str(path))
    assert (proc.returncode, proc.stdout) == (0, f"{second['id']} accepted\n")


def test_publish_to_a_down_relay_exits_1(down_relay_url: str, now: int) -> None:
    proc = publish("--relay", down_relay_url, "--timeout", "5", "-",
                   stdin=json.dumps(message_event(created_at=now)))
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"snap-spark publish: relay {down_relay_url} unreachable: "
                           "cannot connect: Connection refused (os error 111)\n")


def test_publish_refuses_bad_options(relay: RelayProcess, tmp_path: Path) -> None:
    missing = publish("--relay", relay.url, str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    folder = publish("--relay", relay.url, str(tmp_path))
    assert folder.returncode == 2 and "not a file" in folder.stderr
    timeout = publish("--relay", relay.url, "--timeout", "0", "-", stdin="")
    assert timeout.returncode == 2 and "--timeout" in timeout.stderr


def test_publish_help_names_the_three_line_shapes() -> None:
    proc = subprocess.run([sys.executable, "-m", "snap_spark.cli", "publish", "--help"],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=cli_env(), cwd=CODE_ROOT)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert '["EVENT", <sub>, {...}]' in text and '"received_at"' in text
