"""benchmarks/train_roofline.py counts attention FLOPs on the CPU with formulas torch registers only for the CUDA
kernels. Without them the roofline's train GFLOP/s would silently leave out attention (27 % of a demo update).
Hand-computed: q, k, v of shape (1, 2, 4, 8), i.e. b*h = 2, s = 4, d = 8, so one score or output product is
2 * 2 * 4 * 8 * 4 = 512 FLOPs. The forward pass has two (1,024). The backward pass recomputes the scores and
takes four gradient products: 5 * 512 = 2,560."""

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "train_roofline.py"


def _module():
    spec = importlib.util.spec_from_file_location("train_roofline", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _qkv(grad: bool):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 2, 4, 8, generator=g, requires_grad=grad) for _ in range(3)]


def test_cpu_attention_is_invisible_to_torchs_own_counter():
    q, k, v = _qkv(False)
    with FlopCounterMode(display=False) as fc:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert fc.get_total_flops() == 0


def test_cpu_attention_forward_and_backward_counts():
    mapping = _module()._cpu_flash_formulas()
    q, k, v = _qkv(False)
    with FlopCounterMode(display=False, custom_mapping=mapping) as fc:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert fc.get_total_flops() == 1024
    q, k, v = _qkv(True)
    with FlopCounterMode(display=False, custom_mapping=mapping) as fc:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert fc.get_total_flops() == 1024 + 2560
