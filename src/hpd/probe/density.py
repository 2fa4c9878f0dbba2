"""Gaussian kernel density estimates (numpy; scipy is not a dependency) and the per-variant KDE plots.

:func:`gaussian_kde` is ``scipy.stats.gaussian_kde`` in one dimension with Scott's rule: bandwidth
``h = s * n ** (-1/5)`` (``s`` the sample standard deviation, ddof=1) and
``f(x) = 1/n sum_i N(x; x_i, h^2)``. A sample with no spread (one value, or all equal) gets ``h =``
:data:`MIN_BANDWIDTH` (a narrow spike) instead of failing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpd.runfolder import save_png

MIN_BANDWIDTH = 0.01
GRID_POINTS = 101


def bandwidth(values) -> float:
    v = np.asarray(values, dtype=float)
    s = float(v.std(ddof=1)) if len(v) > 1 else 0.0
    return s * len(v) ** (-0.2) if s > 0 else MIN_BANDWIDTH


def gaussian_kde(values, grid) -> np.ndarray:
    """Density of ``values`` at each point of ``grid`` (module doc)."""
    v = np.asarray(values, dtype=float)
    x = np.asarray(grid, dtype=float)
    h = bandwidth(v)
    z = (x[:, None] - v[None, :]) / h
    return np.exp(-0.5 * z ** 2).sum(axis=1) / (len(v) * h * np.sqrt(2 * np.pi))


def grid_for(samples: list, lo: float | None = None, hi: float | None = None, n: int = GRID_POINTS) -> np.ndarray:
    """An evaluation grid over every sample's range, a free end widened by three of the widest bandwidth so
    the tails show (``lo``/``hi`` fix an end, e.g. 0 and 1 for probabilities)."""
    used = [s for s in samples if len(s)]
    allv = np.concatenate([np.asarray(s, dtype=float) for s in used] or [np.zeros(1)])
    pad = 3 * max((bandwidth(s) for s in used), default=0.0)
    a = float(allv.min()) - pad if lo is None else lo
    b = float(allv.max()) + pad if hi is None else hi
    return np.linspace(a, b if b > a else a + 1.0, n)


def curves(samples: dict[str, list], lo: float | None = None, hi: float | None = None) -> dict:
    """``{"x": grid, name: density or None (no values)}`` for every named sample, on one shared grid."""
    x = grid_for(list(samples.values()), lo, hi)
    out: dict = {"x": [round(float(t), 6) for t in x]}
    for name, vals in samples.items():
        out[name] = [round(float(y), 6) for y in gaussian_kde(vals, x)] if len(vals) else None
    return out


def plot_curves(curve: dict, path: Path, *, xlabel: str, title: str, styles: dict | None = None) -> Path:
    """One line per named curve of :func:`curves` (``styles``: name -> matplotlib linestyle)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for name, ys in curve.items():
        if name != "x" and ys is not None:
            ax.plot(curve["x"], ys, (styles or {}).get(name, "-"), label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_png(fig, path)
