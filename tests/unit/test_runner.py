"""The shared job runner: options, config files and validation, before any Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from snap_spark.pipeline.batch_job import VerifyMessages
from snap_spark.runner import EXIT_USAGE, main, prepare, resolve_location
from snap_spark.settings import SettingsError, VerifySettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("option", "value"), [
    ("--max-drift", "nan"), ("--max-drift", "-5"), ("--max-drift", "inf"),
    ("--replay-window", "nan"), ("--replay-window", "-1"), ("--replay-window", "x"),
    ("--batch-rows", "0"), ("--batch-rows", "2.5"), ("--verify-threads", "-1"),
    ("--bare-clock", "yesterday"), ("--bare-clock", "-3"), ("--conf", "novalue"),
])
def test_bad_settings_exit_2_with_one_line(option: str, value: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    given = tmp_path / "in.jsonl"  # a real input: inputs are listed before Spark starts
    given.write_bytes(b"{}\n")
    code = main(VerifyMessages(), ["--input", str(given), "--lake", str(tmp_path / "lake"),
                                   option, value])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE
    assert len(err) == 1 and err[0].startswith("verify_messages:")
    assert option.lstrip("-").split("-")[0] in err[0] or "KEY=VALUE" in err[0]
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("name,value,message", [
    ("SNAP_SPARK_DRIVER_LIMITS", "land_bytes=1MB",
     "SNAP_SPARK_DRIVER_LIMITS: land_bytes='1MB' is not a whole number >= 0 nor spark"),
    ("SNAP_SPARK_RUNTIME", "disabled",
     "SNAP_SPARK_RUNTIME='disabled': use off (or 0, false, no) or on (or 1, true, yes)"),
])
def test_a_malformed_environment_setting_exits_2_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        name: str, value: str, message: str) -> None:
    given = tmp_path / "in.jsonl"
    given.write_bytes(b"{}\n")
    monkeypatch.setenv(name, value)
    code = main(VerifyMessages(), ["--input", str(given), "--lake", str(tmp_path / "lake")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE
    assert err == [f"verify_messages: {message}"]
    assert not (tmp_path / "lake").exists()


def test_config_paths_are_relative_to_the_config_file(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "p.toml").write_text('[lake]\npath = "../lakes/main"\n'
                                 '[verify]\nmax_drift_seconds = 30\n')
    elsewhere = tmp_path / "somewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (elsewhere / "x.jsonl").write_bytes(b"{}\n")
    context = prepare(VerifyMessages(), ["--input", "x.jsonl", "--config", str(conf / "p.toml")])
    assert context.lake == str(tmp_path / "lakes" / "main")
    assert context.verify.max_drift == 30.0
    given = prepare(VerifyMessages(), ["--input", "x.jsonl", "--config", str(conf / "p.toml"),
                                       "--lake", "mine", "--max-drift", "10"])
    assert given.lake == str(elsewhere / "mine") and given.verify.max_drift == 10.0


def test_the_default_lake_is_the_checkouts_wherever_the_job_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.jsonl").write_bytes(b"{}\n")
    context = prepare(VerifyMessages(), ["--input", "x.jsonl"])
    assert context.lake == str(ROOT / "data" / "lake")


def test_config_errors_are_usage_errors(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[verify\n")
    assert main(VerifyMessages(), ["--input", "x", "--config", str(bad)]) == EXIT_USAGE
    assert "not valid TOML" in capsys.readouterr().err
    nan = tmp_path / "nan.toml"
    nan.write_text("[verify]\nreplay_window_seconds = nan\n")
    assert main(VerifyMessages(), ["--input", "x", "--config", str(nan)]) == EXIT_USAGE
    assert "replay-window" in capsys.readouterr().err


def test_settings_validation() -> None:
    assert VerifySettings(max_drift=0, replay_window=0).validated().max_drift == 0.0
    with pytest.raises(SettingsError):
        VerifySettings(verify_threads=True).validated()  # type: ignore[arg-type]
    assert resolve_location("gs://b/lake", ROOT) == "gs://b/lake"
