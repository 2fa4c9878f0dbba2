"""An RL run's curves: ``<out>/curves.json`` and ``<out>/curves.png`` from its ``rl.csv``, one point per update.

Five panels: the mean episode reward with its spread over the update's episodes (± one std), the harness metrics
of the rollouts (TS, RC, F1), the loss with the share of clipped tokens, each update's seconds (rollout and
training pass) with their peak memory (:mod:`hpd.train.memory`), and the task groups: the share with a single
reward (no signal), the share with TS 0 in every rollout, and the advantage mass those carry. The trainer rewrites both files at every
checkpoint and at the end (:meth:`hpd.methods.rl.core.RLTrainer.after_checkpoint`); :func:`write_rl_curves`
rebuilds them from any RL run folder. The rollout metrics are the sampled policy's on its training tasks at
temperature 1.0, not a held-out evaluation.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hpd.runfolder import write_json

from .log import read_rl_csv

SERIES = ("reward", "reward_std", "TS", "RC", "F1", "loss", "clipped", "kl", "flat_groups", "fail_groups",
          "fail_adv_share", "rollout_s", "train_s", "rollout_peak_gb", "train_peak_gb")


def rl_curves(rows: list[dict]) -> dict[str, list]:
    """``{update, <series>...}`` lists from :func:`hpd.methods.rl.log.read_rl_csv` rows (``update`` 1-based,
    as the optimizer updates done; a value the row lacks is None)."""
    return {"update": [r["update"] + 1 for r in rows], **{k: [r.get(k) for r in rows] for k in SERIES}}


def write_rl_curves(out_dir: str | Path, png: bool = True) -> dict:
    """``curves.json`` and, with ``png`` and matplotlib installed, ``curves.png`` (module doc); returns the JSON
    document (``png`` names the plot, or says why there is none)."""
    out_dir = Path(out_dir)
    doc = {"source": "rl.csv", "curves": rl_curves(read_rl_csv(out_dir / "rl.csv")), "png": "curves.png"}
    if not png:
        doc["png"] = None
    elif importlib.util.find_spec("matplotlib") is None:
        doc["png"] = "not drawn: matplotlib is not installed"
    else:
        plot_rl_curves(doc["curves"], out_dir / "curves.png")
    write_json(out_dir / "curves.json", doc)
    return doc


def _points(c: dict, key: str) -> tuple[list, list]:
    pts = [(u, v) for u, v in zip(c["update"], c[key]) if v is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_rl_curves(c: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hpd.runfolder import save_png

    fig, ax = plt.subplots(1, 5, figsize=(22, 3.8))
    u, r = _points(c, "reward")
    sd = [s or 0.0 for s in c["reward_std"][:len(r)]]
    ax[0].plot(u, r, marker=".", lw=1.2)
    ax[0].fill_between(u, [a - b for a, b in zip(r, sd)], [a + b for a, b in zip(r, sd)], alpha=0.2, lw=0)
    ax[0].set(xlabel="update", ylabel="reward", title="episode reward (mean ± std)")
    for k in ("TS", "RC", "F1"):
        ax[1].plot(*_points(c, k), marker=".", lw=1, label=k)
    ax[1].set(xlabel="update", ylabel="fraction", ylim=(0, 1), title="rollout metrics (training tasks, sampled)")
    ax[1].legend()
    ax[2].plot(*_points(c, "loss"), marker=".", lw=1, label="loss")
    ax[2].plot(*_points(c, "clipped"), marker=".", lw=1, label="clipped share")
    ax[2].set(xlabel="update", title="loss and clipped tokens")
    ax[2].legend()
    for k in ("rollout_s", "train_s"):
        ax[3].plot(*_points(c, k), marker=".", lw=1, label=k)
    ax[3].set(xlabel="update", ylabel="seconds", title="time and peak memory per update")
    ax[3].set_ylim(bottom=0)
    mem = ax[3].twinx()
    for k, style in (("rollout_peak_gb", ":"), ("train_peak_gb", "--")):
        mem.plot(*_points(c, k), ls=style, color="grey", lw=1, label=k)
    mem.set_ylabel("GB")
    mem.set_ylim(bottom=0)
    lines = ax[3].get_legend_handles_labels(), mem.get_legend_handles_labels()
    ax[3].legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], fontsize=7)
    for k, label in (("flat_groups", "one reward in the group"), ("fail_groups", "TS 0 in every rollout"),
                     ("fail_adv_share", "advantage mass in TS-0 groups")):
        ax[4].plot(*_points(c, k), marker=".", lw=1, label=label)
    ax[4].set(xlabel="update", ylabel="share", ylim=(0, 1), title="task groups")
    ax[4].legend(fontsize=7)
    save_png(fig, path)
