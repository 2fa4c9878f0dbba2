"""`hpd data import` on traces real harnesses wrote: Pi session logs the real npm Pi produced through the bridge
(`hpd eval --harness pi` writes them) and an OpenAI chat-completions log recorded from a client's HTTP calls to
`hpd serve`. The imported folder loads with the same queries, recorded outputs and answers; the reference
replays to 1.000; `hpd demo --data` runs on it. Traces that cannot be imported are one line each."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from gold_policy import GoldScriptPolicy
from hpd.cli import app
from pi_helpers import bridge_or_fail

runner = CliRunner()


@pytest.fixture(scope="module")
def episodes(builtin_bench, tok):
    """12 parallel + 12 sequential built-in tasks and the scripted greedy policy that plays them (variant 3 of
    GoldScriptPolicy never answers: those episodes end on the turn budget, with no final answer)."""
    tasks = [t for t in builtin_bench.tasks if t.kind == "parallel"][:12]
    tasks += [t for t in builtin_bench.tasks if t.kind == "sequential"][:12]
    return tasks, GoldScriptPolicy(tok, tasks, builtin_bench.catalog)


@pytest.fixture(scope="module")
def pi_sessions(builtin_bench, episodes, tmp_path_factory):
    """The real Pi's session logs of the episodes (hpd eval --harness pi against hpd serve)."""
    bridge_or_fail()
    from hpd.eval.pi_rollout import PiHarnessPolicy
    from hpd.eval.variant import evaluate_variant
    from hpd.serve.app import BackgroundServer

    tasks, pol = episodes
    out = tmp_path_factory.mktemp("pi")
    with BackgroundServer(pol, model_name="gold", max_tokens_cap=512) as srv:
        evaluate_variant(builtin_bench, tasks, PiHarnessPolicy(base_url=srv.base_url, model_id="gold", workers=3,
                                                               max_new_tokens=512, sessions_dir=out / "sessions"),
                         out, max_turns=6)
    return out / "sessions"


class LoggingTransport(httpx.HTTPTransport):
    """An HTTP client's log of its chat-completions calls: one {"request", "response"} line per call."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def handle_request(self, request):
        response = super().handle_request(request)
        response.read()
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"request": json.loads(request.content), "response": response.json()}) + "\n")
        return response


def _import(fmt, files, out, *extra):
    return runner.invoke(app, ["data", "import", "--format", fmt, *map(str, files), "--out", str(out), *extra])


def _check_imported(out, tasks, n_bad):
    from hpd.bench.loader import load_bench

    rep = json.loads((out / "import.json").read_text())
    assert rep["tasks"] == len(tasks) - n_bad and len(rep["skipped"]) == n_bad
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    imported = load_bench(out)
    by_q = {t.query: t for t in imported.tasks}
    clean = [t for i, t in enumerate(tasks) if i % 6 == 0]   # GoldScriptPolicy variant 0: the gold, unchanged
    for t in clean:
        got = by_q[t.query]
        assert got.kind == t.kind and got.final_answer == t.final_answer
        assert [(s.tool, s.output) for s in got.steps] == [(s.tool, s.output) for s in t.steps if s.key is not None]
    r = runner.invoke(app, ["eval", "--policy", "reference", "--data", str(out), "--out", str(out.parent / "ref")])
    assert r.exit_code == 0, r.output
    m = json.loads((out.parent / "ref" / "metrics.json").read_text())
    assert m["n_tasks"] == len(tasks) - n_bad and m["TS"] == m["Step-SR"] == m["Exact"] == m["Action-Acc"] == 1.0
    return imported


@pytest.mark.slow
@pytest.mark.node
def test_import_real_pi_sessions(pi_sessions, episodes, tmp_path):
    tasks, _ = episodes
    files = sorted(pi_sessions.glob("*.jsonl"))
    assert len(files) == len(tasks)
    r = _import("pi-session", files, tmp_path / "refused")
    bad = [ln for ln in r.output.splitlines() if "record" in ln]
    assert r.exit_code == 2 and len(bad) == 4 and not (tmp_path / "refused" / "tools").exists()
    assert all(": record " in ln and ln.endswith("no final answer: the trace does not end with an assistant turn "
                                                 "of text without tool calls") for ln in bad)
    r = _import("pi-session", files, tmp_path / "data", "--skip-bad", "--domain", "MyPi")
    assert r.exit_code == 0, r.output
    imported = _check_imported(tmp_path / "data", tasks, 4)
    assert {t.domain for t in imported.tasks} == {"MyPi"}
    # variant 1 called an undeclared tool inside the gold batch: kept as an off-catalog (unscorable) step
    odd = next(t for t in imported.tasks if any(s.tool == "no_such_tool" for s in t.steps))
    assert [s.scorable for s in odd.steps if s.tool == "no_such_tool"] == [False]


def test_import_openai_chat_log(builtin_bench, episodes, tmp_path):
    from hpd.eval.rollout import ModelEpisodePolicy, run_rollouts
    from hpd.policy.backends.openai import OpenAIPolicy
    from hpd.serve.app import BackgroundServer

    tasks, pol = episodes
    log = tmp_path / "chat.jsonl"
    with BackgroundServer(pol, model_name="gold", max_tokens_cap=512) as srv:
        client = OpenAIPolicy(srv.base_url, "gold", transport=LoggingTransport(log), max_concurrency=1)
        run_rollouts(builtin_bench, tasks, ModelEpisodePolicy(client, max_new_tokens=512), max_turns=6)
    r = _import("openai-chat", [log], tmp_path / "data", "--skip-bad")
    assert r.exit_code == 0, r.output
    _check_imported(tmp_path / "data", tasks, 4)
    rep = json.loads((tmp_path / "data" / "import.json").read_text())
    assert rep["merged_records"] > 0 and all(s.startswith(f"{log}: record ") for s in rep["skipped"])


@pytest.mark.slow
@pytest.mark.node
def test_demo_runs_on_imported_pi_sessions(pi_sessions, tmp_path):
    from hpd.demo import METRIC_KEYS, VARIANTS, Demo, DemoConfig

    r = _import("pi-session", sorted(pi_sessions.glob("*.jsonl")), tmp_path / "data", "--skip-bad")
    assert r.exit_code == 0, r.output
    cfg = DemoConfig(out=tmp_path / "demo", model="tiny", data=tmp_path / "data", updates=6, global_batch=4,
                     test_limit=2, train_limit=10, max_new_tokens=24, teacher="oracle")
    Demo(cfg, log=lambda s: None).run()
    saved = json.loads((tmp_path / "demo" / "results.json").read_text())
    assert list(saved["variants"]) == list(VARIANTS)
    for m in saved["variants"].values():
        assert m["n_tasks"] >= 1 and m["n_boundaries"] > 0 and all(0.0 <= m[k] <= 1.0 for k in METRIC_KEYS)
