"""``rollout.engine: auto`` (the SmolLM2 configs): vLLM for a real model where vLLM runs, in one process; hf for the
tiny model, under several processes, or where vLLM does not run. No engine starts here: only the choice."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from hpd.methods.rl.core import RLTrainer
from hpd.policy.tiny import TINY_MARKER


def _choice(engine: str, model: Path, world: int = 1) -> str:
    cfg = SimpleNamespace(rollout=SimpleNamespace(engine=engine))
    return RLTrainer._engine_name(SimpleNamespace(cfg=cfg, world=world, model_path=model))


@pytest.mark.parametrize("runs", [True, False])
def test_auto_follows_the_backend_rule(tmp_path, monkeypatch, runs):
    monkeypatch.setattr("hpd.policy.backends.vllm.vllm_available", lambda: (runs, "" if runs else "no vllm"))
    real, tiny = tmp_path / "real", tmp_path / "tiny"
    real.mkdir()
    tiny.mkdir()
    (tiny / TINY_MARKER).write_text("{}")
    assert _choice("auto", real) == ("vllm" if runs else "hf")
    assert _choice("auto", tiny) == "hf"
    assert _choice("auto", real, world=2) == "hf"         # a vLLM rollout engine takes the weights in-process
    assert (_choice("hf", real), _choice("vllm", real)) == ("hf", "vllm")   # named engines stay as asked
