"""bf16 training keeps what trains in fp32: after the trainer's setup in bf16 the base weights are bf16 and the
LoRA weights fp32, and after an update AdamW's state is fp32 too (peft's autocast_adapter_dtype; bf16 is the
autocast's compute dtype). Full fine-tuning keeps fp32 master weights under the same autocast. The trainer's
``auto`` follows hpd.policy.dtype (mocked here)."""

from __future__ import annotations

import json

import torch

from hpd.train.trainer import Trainer
from hpd.views import synthetic_records


def _cfg(tiny_dir, precision: str, lora: bool = True) -> dict:
    return {"name": "p", "seed": 0, "model": {"path": str(tiny_dir), "precision": precision},
            "lora": {"enabled": lora, "r": 4, "alpha": 8, "dropout": 0.0}, "optim": {"lr": 1e-3},
            "batch": {"global_batch": 2, "micro_batch_tokens": 2048}, "data": {"max_length": 2048},
            "schedule": {"phases": [{"views": {"T": 1}, "updates": 1}]}, "checkpoint": {"every": 100},
            "logging": {"probe_examples": 0, "progress": False, "tensorboard": False}}


def _dtypes(tensors) -> set[torch.dtype]:
    return {t.dtype for t in tensors}


def _state(trainer) -> set[torch.dtype]:
    opt = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    return {v.dtype for st in opt.state.values() for v in st.values() if torch.is_tensor(v) and v.dim() > 0}


def test_bf16_lora_keeps_adapter_and_adamw_state_fp32(tiny_dir, tmp_path, one_torch_thread):
    t = Trainer(synthetic_records(2, seed=3), _cfg(tiny_dir, "bf16"), tmp_path / "run")
    t.setup()
    assert t.dtype == torch.bfloat16 and t.accelerator.mixed_precision == "bf16"
    assert _dtypes(p for p in t.model.parameters() if not p.requires_grad) == {torch.bfloat16}   # the base
    lora = [p for n, p in t.model.named_parameters() if p.requires_grad]
    assert lora and all("lora_" in n for n, p in t.model.named_parameters() if p.requires_grad)
    assert _dtypes(lora) == {torch.float32}
    t.step(0)
    assert _state(t) == {torch.float32}                                 # exp_avg, exp_avg_sq
    assert _dtypes(lora) == {torch.float32}
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["dtype"] == "bfloat16"


def test_bf16_full_finetuning_keeps_fp32_master_weights(tiny_dir, tmp_path, one_torch_thread):
    t = Trainer(synthetic_records(2, seed=3), _cfg(tiny_dir, "bf16", lora=False), tmp_path / "full")
    t.setup()
    assert t.accelerator.mixed_precision == "bf16"                      # bf16 compute, under autocast
    assert _dtypes(t.model.parameters()) == {torch.float32}
    t.step(0)
    assert _state(t) == {torch.float32}


def test_auto_precision_follows_the_resolver(tiny_dir, tmp_path, monkeypatch, one_torch_thread):
    import hpd.policy.dtype as D

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)     # the CPU rule, on any machine
    for flag, want in ((True, torch.bfloat16), (False, torch.float32)):
        monkeypatch.setattr(D, "cpu_has_bf16", lambda flag=flag: flag)
        t = Trainer(synthetic_records(2, seed=3), _cfg(tiny_dir, "auto"), tmp_path / f"auto-{flag}")
        t.setup()
        assert t.dtype == want and t.accelerator.mixed_precision == ("bf16" if flag else "no")
        assert _dtypes(p for p in t.model.parameters() if not p.requires_grad) == {want}


def test_bf16_update_skips_peft_input_casts_bit_for_bit(tiny_dir, tmp_path, one_torch_thread):
    """Under bf16 autocast the update's forwards run without peft's cast of the LoRA inputs to fp32, which autocast
    undoes at once: the loss and every gradient equal those of the update with the casts, bit for bit."""
    import contextlib

    from peft.tuners.tuners_utils import BaseTunerLayer

    t = Trainer(synthetic_records(2, seed=3), _cfg(tiny_dir, "bf16"), tmp_path / "run")
    t.setup()
    layers = [m for m in t.model.modules() if isinstance(m, BaseTunerLayer)]
    seen = []
    hook = layers[0].register_forward_pre_hook(lambda m, a: seen.append(m.cast_input_dtype_enabled))
    batch = t.streams[t.schedule.view_at(0)].take(2)

    def grads():
        return [p.grad.clone() for p in t.model.parameters() if p.requires_grad]

    loss, _ = t.update_loss(batch)
    fast = grads()
    t.model.zero_grad(set_to_none=True)
    t.uncast_adapter_inputs = contextlib.nullcontext
    ref, _ = t.update_loss(batch)
    hook.remove()
    assert seen and not seen[0] and seen[-1]                 # skipped in the first update only
    assert all(m.cast_input_dtype_enabled for m in layers)    # and restored after it
    assert loss == ref and all(torch.equal(a, b) for a, b in zip(fast, grads()))
