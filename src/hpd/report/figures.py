"""The one way hpd saves a matplotlib figure: tight layout, parent folders created, PNG at 110 dpi, closed."""

from __future__ import annotations

from pathlib import Path


def save_png(fig, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
