"""Packed (padding-free) and padded micro-batches give the same completion-only loss as one example at a time."""

import pytest
import torch
import torch.nn.functional as F

from hpd.train.student import row_loss_sum
from hpd.train.trainer import micro_batches
from hpd.views import Renderer, build_views, synthetic_records


@pytest.fixture(scope="module")
def model(tiny_dir):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()


@torch.no_grad()
def test_packed_and_padded_equal_per_example_loss(model, tok):
    ex, _ = build_views(synthetic_records(4, seed=5), Renderer(tok), max_length=4096)
    exs = ex["T"][:3] + ex["I"][:2] + ex["R"][:3]
    ref = 0.0
    for e in exs:
        logits = model(input_ids=torch.tensor([e.input_ids])).logits[0, :-1]
        ref += float(F.cross_entropy(logits, torch.tensor(e.labels()[1:]), ignore_index=-100, reduction="sum"))
    for mode in ("packed", "padded"):
        for budget in (1400, 8192):
            mbs = micro_batches(exs, mode, budget)
            assert len(mbs) >= (2 if budget == 1400 else 1)
            got = sum(float(row_loss_sum(model, mb)) for mb in mbs)
            assert got == pytest.approx(ref, rel=1e-5), (mode, budget)
