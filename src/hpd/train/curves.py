"""Training curves as the paper's Figure 8 draws them: ``<out>/curves.json`` and ``<out>/curves.png``.

* **Loss per view**: at each logged update ``u`` of view ``v``, the mean of ``v``'s logged losses over the
  last ``window_cycles`` cycles, i.e. the updates in ``(u - window_cycles * L, u]`` with ``L`` the cycle
  length of ``u``'s phase (paper: a 200-cycle running mean), and the 10th and 90th percentiles of the same
  losses (the band). A window holds fewer points at the start of a run and when ``logging.every`` skips
  updates; ``n`` says how many.
* **Native evaluation** (optional, ``evaluation.steps``): TS and F1 of the checkpoints evaluated during
  training (:mod:`hpd.train.evaluation`), read from ``<out>/evals/update-XXXXXXXX/metrics.json``.

The trainer rewrites both files at every checkpoint and at the end; :func:`write_curves` rebuilds them from
a run folder's ``metrics.csv``. The PNG needs matplotlib, which the training path does not otherwise import
(``logging.curves_png: false``, or matplotlib missing, as on a bare GPU machine: JSON only, and ``png`` says so).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from hpd.runfolder import write_json

from .logger import read_csv
from .schedule import Schedule

WINDOW_CYCLES = 200          # paper, Figure 8
BAND = (10, 90)              # percentiles of the band
EVAL_KEYS = ("TS", "F1")


def running_band(updates: list[int], losses: list[float], spans: list[int]) -> dict[str, list[float]]:
    """For point ``i``: mean and 10/90 percentiles of the losses at updates in ``(updates[i] - spans[i],
    updates[i]]`` (``updates`` ascending)."""
    u = np.asarray(updates)
    x = np.asarray(losses, dtype=float)
    out: dict[str, list] = {"mean": [], f"p{BAND[0]}": [], f"p{BAND[1]}": [], "n": []}
    for i in range(len(u)):
        w = x[np.searchsorted(u, u[i] - spans[i], side="right"): i + 1]
        lo, hi = np.percentile(w, BAND)
        out["mean"].append(float(w.mean()))
        out[f"p{BAND[0]}"].append(float(lo))
        out[f"p{BAND[1]}"].append(float(hi))
        out["n"].append(int(len(w)))
    return out


def loss_curves(rows: list[dict], schedule: Schedule, window_cycles: int = WINDOW_CYCLES) -> dict[str, dict]:
    """View -> ``{update, loss, mean, p10, p90, n}`` lists from ``metrics.csv`` rows (``update`` 0-based)."""
    out = {}
    for v in schedule.views():
        pts = sorted((r["update"], r["loss"]) for r in rows if r["view"] == v)
        if not pts:
            continue
        ups = [p[0] for p in pts]
        spans = [window_cycles * len(schedule.phases[schedule.locate(p)[0]].cycle) for p in ups]
        out[v] = {"update": [p + 1 for p in ups], "loss": [p[1] for p in pts], **running_band(ups, [p[1] for p in pts], spans)}
    return out


def eval_points(out_dir: Path) -> dict[str, list]:
    """``{step, TS, F1, n_tasks}`` of the finished in-training evaluations under ``<out>/evals/``."""
    from hpd.eval.variant import read_metrics

    pts: dict[str, list] = {"step": [], **{k: [] for k in EVAL_KEYS}, "n_tasks": []}
    for d in sorted((Path(out_dir) / "evals").glob("update-*")):
        if not (d / "metrics.json").is_file():
            continue
        m = read_metrics(d)
        pts["step"].append(int(d.name.split("-")[1]))
        for k in EVAL_KEYS:
            pts[k].append(m.get(k))
        pts["n_tasks"].append(m.get("n_tasks"))
    return pts


def write_curves(out_dir: str | Path, schedule: Schedule, window_cycles: int = WINDOW_CYCLES, png: bool = True) -> dict:
    """``curves.json`` and, with ``png`` and matplotlib installed, ``curves.png`` of a run folder (module doc);
    returns the JSON document (``png`` names the plot, or says why there is none)."""
    out_dir = Path(out_dir)
    doc = {"window_cycles": window_cycles, "band_percentiles": list(BAND),
           "loss": loss_curves(read_csv(out_dir / "metrics.csv"), schedule, window_cycles),
           "evaluation": eval_points(out_dir), "png": "curves.png"}
    if not png:
        doc["png"] = None
    elif importlib.util.find_spec("matplotlib") is None:
        doc["png"] = "not drawn: matplotlib is not installed"
    else:
        plot_curves(doc, out_dir / "curves.png")
    write_json(out_dir / "curves.json", doc)
    return doc


def plot_curves(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hpd.runfolder import save_png

    evals = doc["evaluation"]["step"]
    fig, axes = plt.subplots(1, 2 if evals else 1, figsize=(11 if evals else 6, 3.8), squeeze=False)
    ax = axes[0][0]
    lo, hi = (f"p{p}" for p in doc["band_percentiles"])
    for v, c in doc["loss"].items():
        line, = ax.plot(c["update"], c["mean"], label=f"{v} view", lw=1.2)
        ax.fill_between(c["update"], c[lo], c[hi], color=line.get_color(), alpha=0.2, lw=0)
    ax.set(xlabel="optimizer update", ylabel="loss",
           title=f"{doc['window_cycles']}-cycle running mean, {lo}-{hi} band")
    if doc["loss"]:
        ax.legend()
    if evals:
        ax = axes[0][1]
        for k in EVAL_KEYS:
            ax.plot(evals, doc["evaluation"][k], marker="o", label=k)
        ax.set(xlabel="optimizer update", ylabel="fraction", title="native evaluation", ylim=(0, 1))
        ax.legend()
    save_png(fig, path)
