"""The one compute-dtype rule of hpd: ``auto`` | ``float32`` | ``bfloat16`` -> a torch dtype for a device.

``auto`` is bfloat16 where the device computes it natively, float32 elsewhere:

* a CUDA device: bfloat16 when ``torch.cuda.is_bf16_supported()`` (Ampere and later), else float32;
* a CPU: bfloat16 when it has AVX512-BF16 or AMX-BF16 (``/proc/cpuinfo`` flags ``avx512_bf16`` / ``amx_bf16``;
  where there is no ``/proc/cpuinfo``, torch's own CPU probe), else float32 (what bfloat16 gains on the
  2026-12-03 development CPU, which had both; the 2026-12-04 one had no AVX-512 and computes bf16 at 1/70 of fp32:
  docs/experiments/2026-12-03-cpu-bf16-matmul.md);
* any other device (mps, xpu, ...): float32.

Every model command (``hpd train``, ``teach``, ``eval``, ``serve``, ``bfcl``, ``probe``, ``export``, ``demo``)
takes ``--dtype`` with these names and resolves it here; the trainer's ``model.precision`` (``fp32`` | ``bf16``
| ``auto``) goes through the same rule. Accepted spellings: ``auto``, ``float32`` / ``fp32``, ``bfloat16`` /
``bf16``. Importing this module is cheap: torch is imported when a dtype is resolved.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

#: the names ``--dtype`` takes (canonical spellings)
DTYPES = ("auto", "float32", "bfloat16")
#: every accepted spelling -> its canonical name
ALIASES = {"auto": "auto", "float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}
#: what ``auto`` means, for ``--help`` texts
AUTO_HELP = ("auto = bfloat16 where the device computes it natively (a CUDA GPU with bf16 support, a CPU with "
             "AVX512-BF16 or AMX-BF16), else float32")
DTYPE_HELP = f"Compute dtype: auto | float32 | bfloat16 ({AUTO_HELP})."
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def canonical(name: str) -> str:
    """``auto`` | ``float32`` | ``bfloat16`` for any accepted spelling; :class:`ValueError` otherwise."""
    key = str(name).strip().lower().removeprefix("torch.")
    if key not in ALIASES:
        raise ValueError(f"unknown dtype {name!r}: choose auto, float32 (fp32) or bfloat16 (bf16)")
    return ALIASES[key]


@lru_cache(maxsize=1)
def _cpuinfo_flags() -> frozenset[str] | None:
    """The CPU flags of ``/proc/cpuinfo`` (None where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(flags) if flags else None


def cpu_has_bf16() -> bool:
    """True when this CPU computes bf16 natively (AVX512-BF16 or AMX-BF16); the one function tests mock."""
    flags = _cpuinfo_flags()
    if flags is not None:
        return any(f in flags for f in CPU_BF16_FLAGS)
    try:   # no /proc/cpuinfo (macOS, Windows): torch's cpuinfo probe
        import torch

        probes = (getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None))
        return any(bool(p()) for p in probes if p is not None)
    except Exception:  # noqa: BLE001 - an unknown CPU computes in float32
        return False


def cuda_has_bf16() -> bool:
    """True when the CUDA device supports bf16 (``torch.cuda.is_bf16_supported()``); False without CUDA."""
    import torch

    try:
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    except Exception:  # noqa: BLE001
        return False


def default_device() -> str:
    """``cuda`` when a CUDA device is visible, else ``cpu`` (the backends' and the trainer's default)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype_name(name: str = "auto", device: Any = None) -> str:
    """``float32`` or ``bfloat16``: ``name`` itself, or what ``auto`` means on ``device`` (module doc; ``None``:
    :func:`default_device`). ``device`` may be a string (``cuda:1``) or a ``torch.device``."""
    name = canonical(name)
    if name != "auto":
        return name
    kind = str(device if device is not None else default_device()).split(":", 1)[0].lower()
    if kind == "cuda":
        return "bfloat16" if cuda_has_bf16() else "float32"
    if kind == "cpu":
        return "bfloat16" if cpu_has_bf16() else "float32"
    return "float32"


def resolve_dtype(name: str = "auto", device: Any = None):
    """The ``torch.dtype`` of :func:`resolve_dtype_name`."""
    import torch

    return getattr(torch, resolve_dtype_name(name, device))


def precision_name(name: str) -> str:
    """The trainer's ``model.precision`` spelling (``auto`` | ``fp32`` | ``bf16``) of any accepted name."""
    return {"auto": "auto", "float32": "fp32", "bfloat16": "bf16"}[canonical(name)]


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` -> ``bfloat16`` (the form manifests record)."""
    return str(dtype).replace("torch.", "")


__all__ = ["ALIASES", "AUTO_HELP", "DTYPES", "DTYPE_HELP", "canonical", "cpu_has_bf16", "cuda_has_bf16",
           "default_device", "dtype_name", "precision_name", "resolve_dtype", "resolve_dtype_name"]
