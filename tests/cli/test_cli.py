"""The `hpd` command: help, `hpd data stats|split` and `hpd eval` end to end, one-line errors for bad input."""

import json

import pytest
from typer.testing import CliRunner

from hpd.cli import app

runner = CliRunner()


def test_help_lists_commands():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for c in ("demo", "data", "harness", "model", "replay", "teach", "train", "eval", "probe", "report", "serve"):
        assert c in r.output


def test_cli_stats_split_eval(mini_dir, tmp_path):
    r = runner.invoke(app, ["data", "stats", "--data", str(mini_dir), "--out", str(tmp_path / "st")])
    assert r.exit_code == 0, r.output
    assert "Zoology" in r.output and json.loads((tmp_path / "st" / "stats.json").read_text())["n_tasks"] == 13
    assert (tmp_path / "st" / "manifest.json").is_file()
    r = runner.invoke(app, ["data", "split", "--data", str(mini_dir), "--out", str(tmp_path / "sp"), "--test-frac", "0.5"])
    assert r.exit_code == 0, r.output
    sp = json.loads((tmp_path / "sp" / "split.json").read_text())
    assert sp["leakage"] == {k: 0 for k in ("query", "trajectory", "twin", "template", "tool_sequence")}
    r = runner.invoke(app, ["eval", "--policy", "reference", "--data", str(mini_dir), "--out", str(tmp_path / "ev")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert m["TS"] == m["Step-SR"] == m["Exact"] == m["RC"] == m["Action-Acc"] == 1.0 and m["n_tasks"] == 13
    assert "TS" in r.output and len((tmp_path / "ev" / "tasks.jsonl").read_text().splitlines()) == 13
    r = runner.invoke(app, ["eval", "--data", str(mini_dir), "--out", str(tmp_path / "ev2"),
                            "--split-file", str(tmp_path / "sp" / "split.json"), "--split", "test"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "ev2" / "metrics.json").read_text())["n_tasks"] == sp["sizes"]["test"]


def test_eval_spread_takes_the_demos_held_out_set(builtin_dir, builtin_bench, tmp_path):
    """--limit N --spread evaluates hpd demo's held-out set (kinds and domains in turn), not the first N."""
    from hpd.demo import held_out

    def uids(out):
        return [json.loads(line)["uid"] for line in (out / "tasks.jsonl").read_text().splitlines()]

    for spread in (True, False):
        out = tmp_path / f"ev-{spread}"
        r = runner.invoke(app, ["eval", "--data", str(builtin_dir), "--out", str(out), "--limit", "6",
                                *(["--spread"] if spread else [])])
        assert r.exit_code == 0, r.output
        want = held_out(builtin_bench.tasks, 6) if spread else builtin_bench.tasks[:6]
        assert uids(out) == [t.uid for t in want]
    assert len({t.domain for t in held_out(builtin_bench.tasks, 6)}) > len({t.domain for t in builtin_bench.tasks[:6]})


@pytest.mark.parametrize("args", [
    ["data", "stats", "--data", "/nonexistent/dir"],
    ["eval", "--out", "/tmp/x", "--policy", "nope"],
    ["eval", "--out", "/tmp/x", "--split", "test"],
    ["data", "split", "--out", "/tmp/x", "--test-frac", "2"],
])
def test_cli_bad_input_is_one_line(args, mini_dir):
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "Traceback" not in r.output
