"""Peak memory of this process, phase by phase: where a run's memory goes (rollout or training pass).

On the CPU the figure is the resident set's high-water mark (Linux ``VmHWM`` in ``/proc/self/status``), which
:func:`reset_peak` sets back to the current resident set (``/proc/self/clear_refs``, Linux 4.0 and later); on a GPU
it is CUDA's peak allocation on this process's device (``torch.cuda.max_memory_allocated``), reset the same way.
Where neither can be read (another OS), :func:`peak_gb` returns None and the logs leave the field empty.
"""

from __future__ import annotations

import re
from pathlib import Path

_STATUS, _CLEAR = Path("/proc/self/status"), Path("/proc/self/clear_refs")


def _cuda():
    import torch

    return torch.cuda if torch.cuda.is_available() and torch.cuda.is_initialized() else None


def reset_peak() -> None:
    """Start a new phase: the peak so far is forgotten (CPU resident set and CUDA allocation)."""
    try:
        _CLEAR.write_text("5")
    except OSError:
        pass
    if (cuda := _cuda()) is not None:
        cuda.reset_peak_memory_stats()


def peak_gb() -> float | None:
    """The phase's peak in GB (10^9 bytes): CUDA's peak allocation on a GPU, else the CPU resident set's."""
    if (cuda := _cuda()) is not None:
        return round(cuda.max_memory_allocated() / 1e9, 3)
    try:
        m = re.search(r"VmHWM:\s+(\d+) kB", _STATUS.read_text())
    except OSError:
        return None
    return round(int(m.group(1)) * 1e3 / 1e9, 3) if m else None


def run_peak(rows: list[dict], key: str = "peak_gb") -> float | None:
    """A run's peak from its log rows (``metrics.csv`` / ``rl.csv``): the largest ``key`` logged, None when none
    was (logs written before the field existed, or an OS where it cannot be read)."""
    return max((float(r[key]) for r in rows if r.get(key) not in (None, "")), default=None)
