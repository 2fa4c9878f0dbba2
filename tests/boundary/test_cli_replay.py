"""`hpd replay` end to end (small), and its one-line errors."""

import json

from typer.testing import CliRunner

from hpd.cli import app

runner = CliRunner()


def test_hpd_replay_small(tmp_path, builtin_dir, bench):
    out = tmp_path / "r"
    r = runner.invoke(app, ["replay", "--data", str(builtin_dir), "--out", str(out), "--limit", "3", "--quiet",
                            "--privilege", "plan"])
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    d2 = sum(t.n_boundaries for t in bench.tasks[:3])
    assert m["n_tasks"] == 3 and m["n_boundaries"] == d2 and m["privileges"] == ["plan"]
    assert f"boundaries {d2}  (D2 count {d2}, matches)" in r.output
    assert "plan " in r.output and "non-compliant reference actions:" in r.output
    s = json.loads((out / "replay_stats.json").read_text())
    assert set(s["doc_tokens"]) == {"plan"} and s["n_boundaries"] == d2
    assert (out / "inspector.html").stat().st_size > 1000


def test_hpd_replay_bad_input(tmp_path, builtin_dir):
    for args in (["--privilege", "root"], ["--max-turns", "lots"], ["--parallel", "two"], ["--workers", "0"]):
        r = runner.invoke(app, ["replay", "--data", str(builtin_dir), "--out", str(tmp_path / "x"), *args])
        assert r.exit_code == 2 and "Traceback" not in r.output, (args, r.output)
    r = runner.invoke(app, ["replay", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "not found" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["replay", "--data", str(builtin_dir), "--out", str(tmp_path / "z"),
                            "--split-file", str(tmp_path / "nope.json")])
    assert r.exit_code == 2 and "split file not found" in r.output


def test_hpd_replay_sample_is_recorded(tmp_path, builtin_dir, bench):
    from hpd.boundary.run import select_tasks

    out = tmp_path / "s"
    r = runner.invoke(app, ["replay", "--data", str(builtin_dir), "--out", str(out), "--sample", "4", "--seed", "7",
                            "--quiet", "--privilege", "plan", "--inspector-tasks", "1"])
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    want = select_tasks(bench, sample=4, seed=7)
    assert m["sample"] == 4 and m["seed"] == 7 and m["n_tasks"] == 4
    assert m["n_boundaries"] == sum(t.n_boundaries for t in want)
    r = runner.invoke(app, ["replay", "--data", str(builtin_dir), "--out", str(tmp_path / "t"), "--sample", "0"])
    assert r.exit_code == 2 and "--sample must be >= 1" in r.output and "Traceback" not in r.output
