"""``rollout.engine: vllm``: the RL rollouts sample from an in-process vLLM engine that is given the training
model's merged weights before each update. The check that the weights really arrive: the gap between the log-probs
vLLM sampled with and the training model's own log-probs of the same tokens (``logprob_gap`` in ``rl.csv``) stays
small after the first update has moved the weights; with the weight load disabled it grows."""

import csv

import pytest

from policy_helpers import vllm_or_fail
from rl_helpers import smoke_config

OVER = {"lora__enabled": True, "lora__r": 4, "lora__alpha": 8, "optim__lr": 3e-2, "updates": 3, "batch__tasks": 2,
        "batch__group_size": 4, "rollout__engine": "vllm", "checkpoint__every": 3}


def _gaps(out):
    with (out / "rl.csv").open() as f:
        return [float(r["logprob_gap"]) for r in csv.DictReader(f)]


@pytest.mark.slow     # two RL runs of 3 updates, each with a vLLM CPU engine (~1-2 min each)
def test_vllm_rollouts_sample_the_training_weights(tmp_path, keys_start, keys_dir, monkeypatch):
    vllm_or_fail()
    from hpd.methods.rl import grpo
    from hpd.policy.backends.vllm import VLLMPolicy

    out = grpo.run(smoke_config("grpo", keys_start, keys_dir, **OVER), tmp_path / "synced")
    assert (out / "adapter_config.json").is_file()
    synced = _gaps(tmp_path / "synced")
    monkeypatch.setattr(VLLMPolicy, "load_weights", lambda self, weights: None)
    grpo.run(smoke_config("grpo", keys_start, keys_dir, **OVER), tmp_path / "stale")
    stale = _gaps(tmp_path / "stale")
    print(f"logprob gap per update: synced {synced}, stale {stale}")
    assert len(synced) == len(stale) == 3
    # measured (fp32, one thread): synced 3.6e-7, 3.5e-7, 3.5e-7 (the same weights, vLLM's kernels); stale 3.6e-7,
    # 0.026, 0.106 (the engine kept the start's weights while training moved them)
    assert max(synced) < 1e-4 and stale[0] < 1e-4 and stale[-1] > 0.01
