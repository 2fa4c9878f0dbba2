"""``hpd eval --model <SmolLM2>`` on vLLM's CPU engine in each harness (python, smolagents, pi) gives the same
episodes as the hf backend: in fp32 and greedy, every task record (metrics, turns, end reason, generated tokens,
smolagents' step events) is equal. ``--backend auto`` resolves to vLLM for a real model, so this is the path a
user's ``hpd eval`` takes by default. The sizes are small (2 built-in tasks, 2 tools, 2 turns, 32 new tokens);
the harness's end rules and parse errors still run on the model's real text. Slow: six evaluations, three of
them with an engine start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpd.cli import app
from pi_helpers import bridge_or_fail
from policy_helpers import vllm_or_fail

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

ARGS = ("--limit", "2", "--pool-k", "2", "--max-turns", "2", "--max-new-tokens", "32", "--dtype", "float32")
BACKEND_CLASS = {"hf": "HFPolicy", "vllm": "VLLMPolicy"}


@pytest.fixture(scope="module")
def builtin(tmp_path_factory) -> Path:
    from hpd.bench.builtin import generate

    return generate(tmp_path_factory.mktemp("builtin") / "data", seed=0, n_per_domain=2)


def _records(model: Path, data: Path, out: Path, backend: str, harness: str) -> list[dict]:
    r = CliRunner().invoke(app, ["eval", "--model", str(model), "--data", str(data), "--out", str(out),
                                 "--backend", backend, "--harness", harness, *ARGS])
    assert r.exit_code == 0, r.output[-3000:]
    policy = json.loads((out / "manifest.json").read_text())["config"]["policy"]
    assert policy["backend"] == BACKEND_CLASS[backend] and policy["dtype"] == "float32"
    return [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("harness", ["python", "smolagents", pytest.param("pi", marks=pytest.mark.node)])
def test_vllm_episodes_equal_the_hf_backend(harness, smollm2_dir, builtin, tmp_path):
    vllm_or_fail()
    if harness == "pi":
        bridge_or_fail()
    hf = _records(smollm2_dir, builtin, tmp_path / "hf", "hf", harness)
    vllm = _records(smollm2_dir, builtin, tmp_path / "vllm", "vllm", harness)
    assert len(hf) == 2 and all(r["generated_tokens"] > 0 for r in hf)
    assert vllm == hf
    from hpd.policy.backends.vllm import _IN_PROCESS

    assert not _IN_PROCESS, "hpd eval left its in-process vLLM engine running"   # the next would start in children
