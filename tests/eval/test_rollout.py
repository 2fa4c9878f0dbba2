"""Batched rollout engine (hpd.eval.rollout): waves with refill, turn budget, the resumable shard log, the
model policy over the hf backend, and `hpd eval --model`."""

from __future__ import annotations

import json
import re

import pytest

from hpd.eval import rollout as R
from hpd.eval.variant import evaluate_variant
from hpd.policy.backends.base import Generation, Policy
from hpd.runfolder import ShardLog


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    from hpd.bench.builtin import generate
    from hpd.bench.loader import load_bench

    d = generate(tmp_path_factory.mktemp("builtin") / "data", seed=0, n_per_domain=5)
    return load_bench(d)


class ToolThenAnswer(Policy):
    """Calls the first tool listed in the prompt, then answers once a tool response is in the context."""

    def __init__(self, tokenizer=None):
        self.tokenizer = tokenizer
        self.batches: list[int] = []
        self.name = "tool-then-answer"

    def render(self, ctx, *, document=None, enable_thinking=False):
        return json.dumps(ctx)  # a Pi-level fake: no tokenizer needed

    def generate(self, prompts, n=1, **kw):
        self.batches.append(len(prompts))
        out = []
        for p in prompts:
            ctx = json.loads(p)
            if any(m["role"] == "toolResult" for m in ctx["messages"]):
                out.append([Generation(text="The answer is 42.", token_ids=[1, 2])])
            else:
                name = ctx["tools"][0]["name"]
                out.append([Generation(text=f'<tool_call>\n{{"name": "{name}", "arguments": {{}}}}\n</tool_call>',
                                       token_ids=[3, 4, 5])])
        return out


def _tasks(bench, n):
    return bench.tasks[:n]


def test_waves_refill_and_results(bench):
    pol = R.ModelEpisodePolicy(ToolThenAnswer())
    done = []
    starts = [(lambda t=t: R.start_episode(t, bench)) for t in _tasks(bench, 5)]
    c = R.advance(starts, pol, batch_size=3, on_done=done.append)
    assert c == {"waves": 4, "boundaries": 10, "episodes": 5}
    assert pol.policy.batches == [3, 3, 2, 2]  # one batched call per wave; freed slots are refilled
    for st in done:
        roles = [m["role"] for m in st.harness.messages]
        assert roles[0] == "user" and roles[1] == "assistant" and roles[-1] == "assistant"
        assert st.harness.end_reason == "natural"
        assert st.harness.messages[1]["content"][0]["id"] == "call_t0_0"


def test_turn_budget(bench):
    pol = R.ModelEpisodePolicy(ToolThenAnswer())
    done = []
    R.advance([(lambda t=t: R.start_episode(t, bench, max_turns=1)) for t in _tasks(bench, 2)], pol,
              batch_size=8, on_done=done.append)
    assert [st.harness.end_reason for st in done] == ["max_turns", "max_turns"]
    assert pol.policy.batches == [2]


def test_resumable_log(bench, tmp_path):
    tasks = _tasks(bench, 5)
    with ShardLog(tmp_path / "run", key="uid") as log:
        rows1, info1 = R.run_rollouts(bench, tasks, R.ModelEpisodePolicy(ToolThenAnswer()), log=log,
                                      shard_size=2, batch_size=4)
    assert [r["uid"] for r in rows1] == [t.uid for t in tasks] and info1["new_rows"] == 5
    # simulate a kill: three rows written, the fourth cut mid-line
    part = tmp_path / "run" / "part-00000.jsonl"
    lines = part.read_text().splitlines(keepends=True)
    assert len(lines) == 5
    part.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    again, seen = ToolThenAnswer(), []
    with ShardLog(tmp_path / "run", key="uid") as log:
        rows2, info2 = R.run_rollouts(bench, tasks, R.ModelEpisodePolicy(again), log=log, shard_size=2, batch_size=4,
                                      on_episode=lambda done, n: seen.append((done, n)))
    assert seen == [(3, 5), (4, 5), (5, 5)]      # the progress: resumed rows at the start, then each new row
    # the cut chunk [2, 3] runs again whole (episode 2's row stands), then chunk [4]: 3 episodes x 2 turns
    assert info2["resumed_rows"] == 3 and info2["new_rows"] == 2 and sum(again.batches) == 6
    strip = lambda rs: [{k: v for k, v in r.items() if k != "messages"} for r in rs]  # noqa: E731
    assert strip(rows2) == strip(rows1)
    assert part.read_text() == "".join(lines[:3])            # the torn line was cut, old parts never rewritten
    assert len((tmp_path / "run" / "part-00001.jsonl").read_text().splitlines()) == 2


def test_model_policy_on_tiny_model(bench, tiny_dir, tmp_path):
    pol = R.make_model_policy(str(tiny_dir), max_new_tokens=8, temperature=1.0, seed=5)
    summary = evaluate_variant(bench, _tasks(bench, 3), pol, tmp_path / "ev", batch_size=3, max_turns=2)
    assert summary["n_tasks"] == 3 and 0.0 <= summary["TS"] <= 1.0 and 0.0 <= summary["RC"] <= 1.0
    assert pol.stats["generations"] >= 3 and pol.stats["generated_tokens"] > 0
    assert summary["rollout"]["new_rows"] == 3 and summary["n_boundaries"] > 0 and summary["policy"] == "model"
    shard = {r["uid"]: r for r in ShardLog(tmp_path / "ev" / "shards", key="uid").iter_records()}
    assert all(r["messages"][0]["role"] == "user" for r in shard.values())
    # per-(task, turn) seeds: the same task sampled alone gives the same first action
    solo = R.make_model_policy(str(tiny_dir), max_new_tokens=8, temperature=1.0, seed=5)
    uid = _tasks(bench, 3)[1].uid
    evaluate_variant(bench, _tasks(bench, 3)[1:2], solo, tmp_path / "ev2", batch_size=1, max_turns=1)
    solo_rows = list(ShardLog(tmp_path / "ev2" / "shards", key="uid").iter_records())
    assert solo_rows[0]["messages"][1]["content"] == shard[uid]["messages"][1]["content"]


def test_cli_eval_with_model(bench, tiny_dir, tmp_path):
    from typer.testing import CliRunner

    from hpd.cli import app

    r = CliRunner().invoke(app, ["eval", "--model", str(tiny_dir), "--data", str(bench.data_dir), "--limit", "2",
                                 "--max-new-tokens", "8", "--max-turns", "2", "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert re.search(r"^TS\s", r.output, re.M) and "n_tasks" in r.output
    m = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert m["n_tasks"] == 2 and m["policy"] == "model"
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert man["status"] == "complete" and man["config"]["policy"]["name"] == "model"
    assert man["inputs"]["model"]["sha256"] and len(list((tmp_path / "out" / "shards").glob("part-*.jsonl"))) == 1
    assert re.search(r"hpd eval python: 100%\S* 2/2 ", r.stderr if r.stderr_bytes is not None else r.output)
