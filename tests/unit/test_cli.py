"""The snap-spark console script, run as a user runs it (a real subprocess)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from snap_spark.cli import main
from snap_spark.protocol import keys
from tests.unit.helpers import (
    ADDR_A,
    BAD_KEY_TEXTS,
    EDGE_KEY_TEXTS,
    PRIV_A,
    T0,
    assert_not_quoted,
    envelope,
    message,
    signed,
)


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "snap_spark.cli", *args], input=stdin,
                          capture_output=True, timeout=120, check=False)


def verdicts(out: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def test_check_prints_one_verdict_per_line(tmp_path: Path) -> None:
    good = signed()
    lines = [envelope(good), b"", b"{broken", envelope(good, T0 + 5),
             b"\xff\xfe\x00garbage", envelope(message(id="msg-002"), T0)]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    proc = run("check", str(path))
    assert proc.returncode == 0, proc.stderr
    rows = verdicts(proc.stdout)
    assert [r["line_no"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["error_code"] for r in rows] == [None, 1003, 1003, 2006, 1003, 2002]
    assert rows[0]["verdict"] == "valid" and rows[1]["verdict"] == "rejected"
    assert all(isinstance(r["error_detail"], str) for r in rows)
    assert b"lines read: 6" in proc.stderr and b"balance: OK" in proc.stderr


def test_check_reads_gzip(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(envelope(signed()) + b"\n")
    rows = verdicts(run("check", str(path)).stdout)
    assert [r["error_code"] for r in rows] == [None]


def test_bare_lines_need_an_explicit_clock(tmp_path: Path) -> None:
    path = tmp_path / "bare.jsonl"
    path.write_bytes(json.dumps(signed()).encode() + b"\n")
    refused = run("check", str(path))
    assert refused.returncode == 2 and b"--bare-clock" in refused.stderr
    assert refused.stdout == b""
    ok = run("check", str(path), "--bare-clock", "message")
    assert [r["error_code"] for r in verdicts(ok.stdout)] == [None]
    stale = run("check", str(path), "--bare-clock", str(T0 + 3600))
    assert [r["error_code"] for r in verdicts(stale.stdout)] == [2004]
    assert run("check", str(path), "--bare-clock", "yesterday").returncode == 2


def test_huge_and_deep_lines_are_rejected_not_crashed(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    huge = b'{"received_at": 1, "message": {"payload": "' + b"x" * (50 * 1024 * 1024) + b'"}}'
    deep = b"[" * 10_000 + b"]" * 10_000
    path.write_bytes(huge + b"\n" + deep + b"\n")
    proc = run("check", str(path))
    assert proc.returncode == 0, proc.stderr[-500:]
    assert [r["error_code"] for r in verdicts(proc.stdout)] == [1003, 1003]


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    proc = run("check", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2 and b"no such file" in proc.stderr


def test_keygen_and_sign_round_trip(tmp_path: Path) -> None:
    keygen = run("keygen", "--private-key", PRIV_A.hex())
    info = json.loads(keygen.stdout)
    assert info["p2tr_address"] == ADDR_A
    msg = message()
    msg.pop("from")
    proc = run("sign", "-", "--key", PRIV_A.hex(), "--zero-aux", stdin=json.dumps(msg).encode())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["from"] == ADDR_A and out["sig"] == signed()["sig"]
    path = tmp_path / "signed.jsonl"
    path.write_bytes(envelope(out) + b"\n")
    assert [r["error_code"] for r in verdicts(run("check", str(path)).stdout)] == [None]


def test_sign_refuses_a_key_that_is_not_from(tmp_path: Path) -> None:
    proc = run("sign", "-", "--key", "0b" * 32, stdin=json.dumps(message()).encode())
    assert proc.returncode == 2 and b"not the address of this key" in proc.stderr


def _write_key_file(path: Path, text: str) -> Path:
    path.write_text(text + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def _keygen(key: str, _: Path) -> subprocess.CompletedProcess[bytes]:
    return run("keygen", "--private-key", key)


def _sign_key(key: str, _: Path) -> subprocess.CompletedProcess[bytes]:
    return run("sign", "-", "--key", key, "--zero-aux",
               stdin=json.dumps(message(**{"from": None})).encode())


def _sign_key_file(key: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    path = _write_key_file(tmp_path / "agent.key", key)
    return run("sign", "-", "--key-file", str(path), "--zero-aux",
               stdin=json.dumps(message(**{"from": None})).encode())


KEY_COMMANDS = {"keygen --private-key": _keygen, "sign --key": _sign_key,
                "sign --key-file": _sign_key_file}


@pytest.mark.parametrize("command", KEY_COMMANDS)
@pytest.mark.parametrize("bad", BAD_KEY_TEXTS)  # ids are the names: no key in test output
def test_commands_refuse_a_key_that_is_not_64_hex_digits_of_a_valid_key(
    command: str, bad: str, tmp_path: Path
) -> None:
    key = BAD_KEY_TEXTS[bad]
    proc = KEY_COMMANDS[command](key, tmp_path)
    assert proc.returncode == 2  # the usage error's status (docs/cli.md)
    assert proc.stdout == b""
    said = proc.stderr.decode()
    assert said.endswith("\n") and said.count("\n") == 1, "one line"
    assert said.startswith(f"snap-spark {command.split()[0]}: bad ")
    assert ("64 hex digits" in said) != ("from 1 to n-1" in said)
    assert_not_quoted(key, proc.stdout, proc.stderr)


@pytest.mark.parametrize("command", KEY_COMMANDS)
@pytest.mark.parametrize("edge", EDGE_KEY_TEXTS)
def test_commands_take_the_smallest_and_largest_keys(
    command: str, edge: str, tmp_path: Path
) -> None:
    key = EDGE_KEY_TEXTS[edge]
    proc = KEY_COMMANDS[command](key, tmp_path)
    assert proc.returncode == 0 and proc.stderr == b""
    out = json.loads(proc.stdout)
    address = keys.p2tr_address(keys.internal_pubkey(bytes.fromhex(key)))
    if command == "keygen --private-key":
        assert out["private_key"] == key and out["p2tr_address"] == address
    else:
        checked = verdicts(_check(tmp_path, out))
        assert out["from"] == address and [r["verdict"] for r in checked] == ["valid"]


def _check(tmp_path: Path, msg: dict[str, object]) -> bytes:
    path = tmp_path / "signed.jsonl"
    path.write_bytes(envelope(msg) + b"\n")
    return run("check", str(path)).stdout


def test_an_empty_key_is_refused_not_replaced_by_a_new_one(tmp_path: Path) -> None:
    for proc in (_keygen("", tmp_path), _sign_key("", tmp_path),
                 _sign_key_file("", tmp_path)):
        assert proc.returncode == 2 and proc.stdout == b""
        assert proc.stderr.count(b"\n") == 1 and b"64 hex digits" in proc.stderr


def test_a_key_file_of_undecodable_bytes_is_refused_without_quoting_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.key"
    path.write_bytes(b"\xc3\xa9" + b"0a" * 31)
    proc = run("sign", "-", "--key-file", str(path),
               stdin=json.dumps(message(**{"from": None})).encode())
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr == b"snap-spark sign: bad key: a private key is exactly 64 hex digits\n"
    missing = run("sign", "-", "--key-file", str(tmp_path / "none"), stdin=b"{}")
    assert missing.returncode == 2 and missing.stderr.count(b"\n") == 1
    assert b"cannot read the key file" in missing.stderr


def test_help_explains_the_clock() -> None:
    proc = run("check", "--help")
    assert proc.returncode == 0 and b"--bare-clock" in proc.stdout


@pytest.mark.parametrize("option", [["--max-drift", "nan"], ["--replay-window", "-1"],
                                    ["--max-drift", "inf"], ["--bare-clock", "soon"]])
def test_check_refuses_settings_that_would_change_verdicts(
        option: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"{}\n")
    assert main(["check", str(path), *option]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and option[0].lstrip("-") in captured.err


def test_check_reads_a_folder_with_replay_across_its_files(tmp_path: Path) -> None:
    first = [envelope(signed(id="m1")), b"garbage"]
    second = [envelope(signed(id="m1"), received_at=T0 + 5)]  # replay of a.jsonl's line 1
    (tmp_path / "in" / "day").mkdir(parents=True)
    (tmp_path / "in" / "a.jsonl").write_bytes(b"\n".join(first) + b"\n")
    (tmp_path / "in" / "day" / "b.jsonl").write_bytes(b"\n".join(second) + b"\n")
    (tmp_path / "in" / "notes.txt").write_text("ignored")
    proc = run("check", str(tmp_path / "in"))
    assert proc.returncode == 0, proc.stderr
    rows = verdicts(proc.stdout)
    assert [(Path(str(r["source_file"])).name, r["line_no"], r["error_code"]) for r in rows] == [
        ("a.jsonl", 1, None), ("a.jsonl", 2, 1003), ("b.jsonl", 1, 2006)]
    missing = run("check", str(tmp_path / "nope"))
    assert missing.returncode == 2 and b"no such file or folder" in missing.stderr


def test_sample_writes_its_expected_tasks_beside_the_traffic(tmp_path: Path) -> None:
    out = tmp_path / "s" / "traffic.jsonl"
    proc = run("sample", "--agents", "4", "--messages", "1500", "--seed", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    beside = tmp_path / "s" / "traffic.expected-tasks.txt"
    assert str(beside).encode() in proc.stderr
    rows = [json.loads(line) for line in beside.read_text().splitlines()]
    assert len(rows) > 50 and {r["state"] for r in rows} >= {"completed", "failed"}
    chosen = tmp_path / "other" / "tasks.txt"
    proc = run("sample", "--agents", "4", "--messages", "1500", "--seed", "3",
               "--out", str(tmp_path / "again.jsonl"), "--tasks", str(chosen))
    assert proc.returncode == 0, proc.stderr
    assert chosen.read_bytes() == beside.read_bytes()
    assert b"expected-tasks" in run("sample", "--help").stdout


def test_check_names_what_is_wrong_with_its_input(tmp_path: Path) -> None:
    """An empty folder is there but holds no input; a FIFO is no file to read; a missing
    path is missing. Each gets its own one line (exit 2)."""
    import os

    empty = tmp_path / "empty"
    empty.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    said = {}
    for name, path in (("empty", empty), ("fifo", fifo), ("missing", tmp_path / "no.jsonl")):
        proc = run("check", str(path))
        assert proc.returncode == 2, proc.stderr
        said[name] = proc.stderr.decode().strip()
        assert len(said[name].splitlines()) == 1, said[name]
    assert said["empty"] == f"snap-spark check: no .jsonl/.ndjson/.json(.gz) files under {empty}"
    assert "neither a regular file nor a folder" in said["fifo"]
    assert said["missing"] == f"snap-spark check: no such file or folder: {tmp_path / 'no.jsonl'}"


def _truncate_newest_log(table: Path) -> Path:
    newest = sorted((table / "_delta_log").glob("*.json"))[-1]
    newest.write_bytes(newest.read_bytes()[:40])
    return newest


def test_lake_check_names_the_damaged_log_file(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    lake = tmp_path / "lake"
    for name in ("messages", "tasks"):
        write_deltalake(str(lake / name), pa.table({"x": [1, 2]}))
        write_deltalake(str(lake / name), pa.table({"x": [3]}), mode="append")
    healthy = run("lake", "check", "--lake", str(lake))
    assert healthy.returncode == 0, healthy.stderr
    assert healthy.stdout.decode().splitlines() == [
        "messages: ok, version 1", "tasks: ok, version 1",
        f"lake {lake}: 2 tables, 0 damaged"]
    damaged = _truncate_newest_log(lake / "messages")
    proc = run("lake", "check", "--lake", str(lake))
    assert proc.returncode == 1
    lines = proc.stdout.decode().splitlines()
    assert lines[0].startswith("messages: DAMAGED: ") and str(damaged) in lines[0]
    assert "(version 1)" in lines[0] and "versionAsOf=0" in lines[0]
    assert lines[1:] == ["tasks: ok, version 1", f"lake {lake}: 2 tables, 1 damaged"]
