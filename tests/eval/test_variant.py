"""The one evaluation recipe (hpd.eval.variant.evaluate_variant): outputs, resume, never mixed, and the
proof that `hpd eval` and `hpd demo` both run it."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpd.cli import app
from hpd.eval import variant as V
from hpd.eval.reference import ReferencePolicy
from hpd.runfolder import validate_manifest


def test_reference_run_folder(bench, tmp_path):
    tasks = bench.tasks[:12]
    s = V.evaluate_variant(bench, tasks, ReferencePolicy(), tmp_path / "ev", pool_k=20)
    for k in ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc"):
        assert s[k] == 1.0, k
    assert s["n_tasks"] == 12 and s["policy"] == "reference" and set(s["by_kind"]) == {"parallel"}
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text()) == json.loads(json.dumps(s))
    rows = [json.loads(x) for x in (tmp_path / "ev" / "tasks.jsonl").read_text().splitlines()]
    assert [r["uid"] for r in rows] == [t.uid for t in tasks] and "messages" not in rows[0]
    man = json.loads((tmp_path / "ev" / "manifest.json").read_text())
    assert validate_manifest(man) == [] and man["status"] == "complete"
    assert man["inputs"]["data"]["path"] == str(bench.data_dir)


def test_resume_after_a_kill_and_never_mixed(bench, tmp_path):
    tasks = bench.tasks[::10]
    out = tmp_path / "ev"
    first = V.evaluate_variant(bench, tasks, ReferencePolicy("drop_call"), out)
    assert first["Action-Acc"] is None and first["TS"] == 0.0
    # a kill before the end: the manifest still says running, the log holds a torn last line
    man = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**man, "status": "running", "wall_s": None}))
    (out / "metrics.json").unlink()
    part = out / "shards" / "part-00000.jsonl"
    lines = part.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[:4]) + lines[4][:20])
    again = V.evaluate_variant(bench, tasks, ReferencePolicy("drop_call"), out)
    assert again["rollout"]["resumed_rows"] == 4 and again["rollout"]["new_rows"] == len(tasks) - 4
    drop = ("rollout",)
    assert {k: v for k, v in again.items() if k not in drop} == {k: v for k, v in first.items() if k not in drop}
    # the same finished evaluation is not run again
    assert V.evaluate_variant(bench, tasks, ReferencePolicy("drop_call"), out) == again
    # another policy in the same folder is refused, one line; --overwrite replaces it
    with pytest.raises(V.EvalError, match="different config_hash"):
        V.evaluate_variant(bench, tasks, ReferencePolicy(), out)
    ok = V.evaluate_variant(bench, tasks, ReferencePolicy(), out, overwrite=True)
    assert ok["TS"] == 1.0 and ok["rollout"]["resumed_rows"] == 0


def test_bad_policy_is_one_line():
    with pytest.raises(V.EvalError, match="unknown --policy"):
        V.make_episode_policy("nope")
    with pytest.raises(V.EvalError, match="needs --model"):
        V.make_episode_policy("model")
    with pytest.raises(V.EvalError, match="perturbation"):
        V.make_episode_policy("reference", perturb="twice")


def test_cli_and_demo_call_the_same_recipe(bench, builtin_dir, tmp_path, monkeypatch):
    """`hpd eval` and the demo's eval stage only parse options and call evaluate_variant."""
    calls = []

    def spy(bench_, tasks, policy, out, **kw):
        calls.append((type(policy).__name__, Path(out).name, len(tasks), kw))
        return {"TS": 0.5, "F1": 0.5, "Step-SR": 0.5, "RC": 0.5, "Exact": 0.5, "Action-Acc": 0.5,
                "Action-Acc_calls": 0.5, "n_boundaries": 3, "n_tasks": len(tasks), "n_scorable_steps": 1}

    monkeypatch.setattr(V, "evaluate_variant", spy)
    r = CliRunner().invoke(app, ["eval", "--data", str(builtin_dir), "--limit", "3", "--out", str(tmp_path / "cli")])
    assert r.exit_code == 0, r.output
    monkeypatch.setattr(V, "make_episode_policy", lambda name, **kw: ReferencePolicy())
    from hpd.demo import Demo, DemoConfig

    demo = Demo(DemoConfig(out=tmp_path / "demo", model="tiny"), log=lambda s: None)
    m = demo.evaluate("sft", bench, bench.tasks[:2], tmp_path / "base", None, tmp_path / "demo" / "eval" / "sft")
    assert m["TS"] == 0.5 and m["n_tasks"] == 2 and m["Action-Acc_calls"] == 0.5
    assert [(c[0], c[1], c[2]) for c in calls] == [("ReferencePolicy", "cli", 3), ("ReferencePolicy", "sft", 2)]
    assert calls[1][3]["pool_k"] == 6 and calls[1][3]["action_batch_size"] == 64


def test_read_metrics_reads_only_finished_evaluations(bench, tmp_path):
    from hpd.runfolder import RunFolderError, new_manifest, write_json

    s = V.evaluate_variant(bench, bench.tasks[:2], ReferencePolicy(), tmp_path / "ev", pool_k=20)
    assert V.read_metrics(tmp_path / "ev") == json.loads(json.dumps(s))
    with pytest.raises(RunFolderError, match=r"^no evaluation metrics at .*nope/metrics.json$"):
        V.read_metrics(tmp_path / "nope")
    write_json(tmp_path / "ev" / "manifest.json", new_manifest("hpd eval", {}))     # status 'running'
    with pytest.raises(RunFolderError, match=r"ev is an unfinished evaluation \(manifest status 'running'\)"):
        V.read_metrics(tmp_path / "ev")
