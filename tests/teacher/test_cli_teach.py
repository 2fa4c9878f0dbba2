import json

import pytest
from typer.testing import CliRunner

from hpd.cli import app


@pytest.fixture(scope="module")
def replay_dir(builtin_dir, tmp_path_factory):
    from hpd.boundary import run_replay

    out = tmp_path_factory.mktemp("replay")
    run_replay(builtin_dir, out, limit=6)
    return out


def test_teach_cli_oracle_writes_diagnostics(replay_dir, tmp_path):
    out = tmp_path / "teach"
    r = CliRunner().invoke(app, ["teach", "--boundaries", str(replay_dir), "--out", str(out), "--teacher", "oracle", "-K", "2"])
    assert r.exit_code == 0, r.output
    assert "first-attempt acceptance" in r.output
    d = json.loads((out / "diagnostics.json").read_text())
    for k in ("first_attempt_acceptance", "coverage_by_attempt", "n_boundaries", "n_fallback"):
        assert k in d
    man = json.loads((replay_dir / "manifest.json").read_text())
    assert d["n_boundaries"] == man["n_boundaries"]
    assert (out / "inspector.html").read_text().count('"verdicts"') >= 1
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and m["code_version"] and m["seed"] == 0 and m["teacher"] == "oracle"


def test_teach_cli_bad_input_is_one_line_error(replay_dir, tmp_path):
    r = CliRunner().invoke(app, ["teach", "--boundaries", str(tmp_path / "nope"), "--out", str(tmp_path / "o"), "--teacher", "garbage"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["teach", "--boundaries", str(replay_dir), "--out", str(tmp_path / "o"), "--teacher", "hf"])
    assert r.exit_code == 2 and "--model" in r.output
    r = CliRunner().invoke(app, ["teach", "--boundaries", str(replay_dir), "--out", str(tmp_path / "o"), "--fallback", "maybe", "--teacher", "garbage"])
    assert r.exit_code == 2


def test_teach_cli_auto_teacher_is_the_model_teachers_engine(replay_dir, tiny_dir, tmp_path):
    """``--teacher auto`` (the default) names the engine as ``hpd eval --backend auto`` does: hf for the tiny model
    (its ``hpd_tiny.json``); without ``--model`` it is a one-line error."""
    r = CliRunner().invoke(app, ["teach", "--boundaries", str(replay_dir), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "--teacher auto needs --model" in r.output and "Traceback" not in r.output
    out = tmp_path / "teach"
    r = CliRunner().invoke(app, ["teach", "--boundaries", str(replay_dir), "--out", str(out), "--model", str(tiny_dir),
                                 "-K", "1", "--attempts", "1", "--max-new-tokens", "4", "--limit", "2"])
    assert r.exit_code == 0, r.output
    assert "teacher=hf" in r.output and json.loads((out / "manifest.json").read_text())["teacher"] == "hf"
