"""`hpd eval --backend openai --base-url URL --model NAME` (any OpenAI-compatible endpoint, here `hpd serve`)
and `hpd eval --harness pi` (the real npm Pi through the bridge) from the command line: the same model gives the
same metrics as the in-process evaluation; wrong combinations are one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gold_policy import GoldScriptPolicy
from hpd.cli import app
from pi_helpers import bridge_or_fail

runner = CliRunner()
N = 12
METRICS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc", "n_tasks", "n_boundaries", "end_reasons", "match_levels")


@pytest.fixture(scope="module")
def gold(builtin_bench, tok, tmp_path_factory):
    """The scripted greedy policy on the first N built-in tasks and its in-process (Python harness) metrics."""
    from hpd.eval.rollout import ModelEpisodePolicy
    from hpd.eval.variant import evaluate_variant

    tasks = builtin_bench.tasks[:N]
    pol = GoldScriptPolicy(tok, tasks, builtin_bench.catalog)
    ref = evaluate_variant(builtin_bench, tasks, ModelEpisodePolicy(pol, max_new_tokens=512),
                           tmp_path_factory.mktemp("inproc"), max_turns=4)
    return pol, ref


def _eval(builtin_dir, out, *args):
    r = runner.invoke(app, ["eval", "--data", str(builtin_dir), "--limit", str(N), "--max-turns", "4",
                            "--max-new-tokens", "512", "--out", str(out), *args])
    assert r.exit_code == 0, r.output
    return json.loads((out / "metrics.json").read_text())


def test_eval_openai_backend_against_hpd_serve(gold, builtin_dir, tmp_path):
    from hpd.serve.app import BackgroundServer

    pol, ref = gold
    with BackgroundServer(pol, model_name="gold", max_tokens_cap=512) as srv:
        m = _eval(builtin_dir, tmp_path / "api", "--backend", "openai", "--base-url", srv.base_url, "--model", "gold")
        auto = _eval(builtin_dir, tmp_path / "auto", "--base-url", srv.base_url, "--model", "gold")  # --backend auto
    assert {k: auto[k] for k in METRICS} == {k: ref[k] for k in METRICS}
    assert json.loads((tmp_path / "auto" / "manifest.json").read_text())["config"]["policy"]["backend"] == "OpenAIPolicy"
    assert {k: m[k] for k in METRICS} == {k: ref[k] for k in METRICS}
    assert 0 < m["TS"] < 1 and m["rollout"]["boundaries"] == ref["rollout"]["boundaries"]
    man = json.loads((tmp_path / "api" / "manifest.json").read_text())
    assert man["status"] == "complete" and man["config"]["base_url"] == srv.base_url
    assert man["config"]["policy"]["backend"] == "OpenAIPolicy" and man["config"]["policy"]["model"] == "gold"


@pytest.mark.slow
@pytest.mark.node
def test_eval_harness_pi_against_an_endpoint(gold, builtin_dir, tmp_path):
    bridge_or_fail()
    from hpd.serve.app import BackgroundServer

    pol, ref = gold
    with BackgroundServer(pol, model_name="gold", max_tokens_cap=512) as srv:
        m = _eval(builtin_dir, tmp_path / "pi", "--harness", "pi", "--backend", "openai", "--base-url", srv.base_url,
                  "--model", "gold", "--pi-workers", "3")
    assert {k: m[k] for k in METRICS} == {k: ref[k] for k in METRICS}
    assert m["rollout"]["harness"] == "pi" and m["rollout"]["new_rows"] == N
    assert len(list((tmp_path / "pi" / "sessions").glob("*.jsonl"))) == N


@pytest.mark.node
def test_eval_harness_pi_serves_a_local_model(tiny_dir, builtin_dir, tmp_path, one_torch_thread):
    bridge_or_fail()
    out = tmp_path / "local"
    r = runner.invoke(app, ["eval", "--data", str(builtin_dir), "--limit", "2", "--harness", "pi", "--model",
                            str(tiny_dir), "--max-new-tokens", "8", "--out", str(out)])
    assert r.exit_code == 0, r.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_tasks"] == 2 and m["rollout"]["harness"] == "pi" and m["rollout"]["policy_stats"]["generated_tokens"] > 0
    assert json.loads((out / "manifest.json").read_text())["config"]["policy"]["endpoint"] == "hpd serve (local)"


@pytest.mark.parametrize("args, needle", [
    (["--backend", "openai", "--model", "m"], "--backend openai and --base-url URL go together"),
    (["--backend", "hf", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"],
     "--backend openai and --base-url URL go together"),
    (["--harness", "pi"], "--harness pi evaluates a model"),
    (["--harness", "ruby", "--backend", "openai", "--base-url", "http://x/v1", "--model", "m"], "unknown --harness"),
])
def test_eval_endpoint_option_errors(builtin_dir, tmp_path, args, needle):
    r = runner.invoke(app, ["eval", "--data", str(builtin_dir), "--out", str(tmp_path / "e"), *args])
    assert r.exit_code != 0 and needle in r.output and "Traceback" not in r.output
