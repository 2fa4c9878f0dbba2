"""hpd's one dtype rule (hpd.policy.dtype): auto = bf16 where the device computes it natively, else fp32;
every accepted spelling; the trainer's model.precision and the probe go through it. Detection is mocked."""

from __future__ import annotations

import pytest
import torch

from hpd.policy import dtype as D


@pytest.fixture
def machine(monkeypatch):
    """Set what the (mocked) machine has: CUDA visible, CUDA bf16 support, the CPU's bf16 flags."""
    def set_(cuda: bool = False, cuda_bf16: bool = False, cpu_bf16: bool = False) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: cuda_bf16)
        monkeypatch.setattr(D, "cpu_has_bf16", lambda: cpu_bf16)
    return set_


@pytest.mark.parametrize("cuda_bf16, want", [(True, torch.bfloat16), (False, torch.float32)])
def test_auto_on_cuda_follows_bf16_support(machine, cuda_bf16, want):
    machine(cuda=True, cuda_bf16=cuda_bf16, cpu_bf16=not cuda_bf16)     # the CPU's flags do not matter on CUDA
    assert D.resolve_dtype("auto", "cuda") == want
    assert D.resolve_dtype("auto", "cuda:1") == want
    assert D.resolve_dtype("auto") == want                             # default device: cuda when visible
    assert D.resolve_dtype_name("auto", torch.device("cuda", 0)) == D.dtype_name(want)


@pytest.mark.parametrize("flag, want", [(True, torch.bfloat16), (False, torch.float32)])
def test_auto_on_cpu_follows_the_bf16_flags(machine, flag, want):
    machine(cuda=False, cpu_bf16=flag)
    assert D.resolve_dtype("auto", "cpu") == want
    assert D.resolve_dtype("auto") == want                             # default device: cpu without CUDA
    assert D.resolve_dtype("auto", "mps") == torch.float32             # any other device: fp32


def test_cpu_detection_reads_the_cpuinfo_flags(monkeypatch):
    for flags, want in [({"avx512f", "avx512_bf16"}, True), ({"amx_bf16", "amx_tile"}, True),
                        ({"avx2", "avx512f", "avx512_vnni"}, False)]:
        monkeypatch.setattr(D, "_cpuinfo_flags", lambda flags=flags: frozenset(flags))
        assert D.cpu_has_bf16() is want


def test_cpuinfo_parsing(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile\n\nprocessor\t: 1\n")
    real = D.Path

    monkeypatch.setattr(D, "Path", lambda p: info if p == "/proc/cpuinfo" else real(p))
    D._cpuinfo_flags.cache_clear()
    try:
        assert D._cpuinfo_flags() == frozenset({"fpu", "sse", "avx512f", "amx_bf16", "amx_tile"})
        assert D.cpu_has_bf16() is True
    finally:
        D._cpuinfo_flags.cache_clear()


@pytest.mark.parametrize("name, want", [("float32", torch.float32), ("fp32", torch.float32), ("FP32", torch.float32),
                                        ("bfloat16", torch.bfloat16), ("bf16", torch.bfloat16),
                                        ("torch.bfloat16", torch.bfloat16)])
def test_explicit_names_ignore_the_device(machine, name, want):
    machine(cuda=False, cpu_bf16=False)
    assert D.resolve_dtype(name, "cpu") == want and D.resolve_dtype(name, "cuda") == want


def test_unknown_names_and_the_trainer_spellings(machine):
    with pytest.raises(ValueError, match="unknown dtype 'float16'"):
        D.resolve_dtype("float16")
    assert [D.precision_name(n) for n in ("auto", "float32", "fp32", "bfloat16", "bf16")] == \
        ["auto", "fp32", "fp32", "bf16", "bf16"]
    assert D.canonical("bf16") == "bfloat16" and D.DTYPES == ("auto", "float32", "bfloat16")


def test_the_trainer_and_the_probe_use_the_same_rule(machine, monkeypatch):
    from hpd.train.student import resolve_dtype as train_resolve

    for cpu_bf16 in (True, False):
        machine(cuda=False, cpu_bf16=cpu_bf16)
        want = torch.bfloat16 if cpu_bf16 else torch.float32
        assert train_resolve("auto") == want and train_resolve("fp32") == torch.float32
        assert train_resolve("bf16") == torch.bfloat16

    import hpd.policy.backends.hf as hf
    from hpd.probe.scorer import load_variant

    seen = {}

    class Fake:
        def __init__(self, path, *, adapter=None, device=None, dtype=None):
            seen.update(device=device, dtype=dtype)
            self.model, self.tokenizer = "model", "tok"

    monkeypatch.setattr(hf, "HFPolicy", Fake)
    machine(cuda=False, cpu_bf16=True)
    load_variant("m", None)
    assert seen == {"device": "cpu", "dtype": "bfloat16"}
    machine(cuda=True, cuda_bf16=False)
    load_variant("m", None, dtype="auto")
    assert seen == {"device": "cuda", "dtype": "float32"}
