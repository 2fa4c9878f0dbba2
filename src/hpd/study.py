"""Several seeds and defect rates of the demo as one resumable study with one results file.

``hpd demo --seed 0,1,2`` (the 3-seed study) and ``hpd demo --defect-rate 0,0.12,0.25`` (the defect sweep)
run a :class:`hpd.demo.Demo` per (defect rate, seed) cell under ``--out``::

    <out>/base/, <out>/eval/base/         the base model and its evaluation (shared by every cell)
    <out>/defects-<r>/data, split.json, boundaries/   per defect rate (shared by its seeds)
    <out>/defects-<r>/seed-<s>/           one cell: train/, teach/, eval/, results.json, report.html
    <out>/study.json                      every cell's metrics + mean and std over seeds per rate
    <out>/plots/sweep.png                 HPD-T - SFT and HPD - SFT against the defect rate (>= 2 rates)
    <out>/report.html                     the tables, the sweep plot, links to every cell's report

``--lanes N`` runs N cells side by side, each in its own process with the cores split evenly between them
(:func:`run_lanes`): what cells share (the base model and its evaluation, each rate's data, split and boundaries)
is built first, in this process, and each lane logs one-line stage messages tagged with its cell instead of
progress bars. A 135M model does not keep many cores busy (the training update runs at about half of the CPU's
matmul rate on 2 threads, ``benchmarks/train_roofline.py``), so independent cells side by side use a
many-core machine better than one cell on all of its cores.

Every cell resumes from its own folders, so a killed study continues where it stopped. ``std`` is the
sample standard deviation over seeds (``ddof=1``; 0 with one seed).

Studies share a root: the cell of (rate, seed) always lives in ``defects-<r>/seed-<s>``, so the 3-seed study
(``--seed 0,1,2``) and the defect sweep (``--defect-rate 0,0.12,0.25``) run into the same ``--out`` share their
12 %, seed-0 cell (it is run once), and ``study.json`` holds the cells of every study run there: each rate is
summarised over the seeds that rate has (``n`` says how many). A root whose earlier study had another config
(anything but the seeds and rates) is refused with a one-line error.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from hpd.demo import METRIC_KEYS, Demo, DemoConfig, DemoPaths
from hpd.report.runs import STUDY_FILE, mean_std
from hpd.runfolder import RunFolderError, dumps, finish_manifest, new_manifest, read_json, save_png, write_json


def cell_paths(root: Path, rate: float, seed: int, rates: list[float], seeds: list[int]) -> DemoPaths:
    """The folders of one cell: ``defects-<r>/seed-<s>`` in any study of several cells (module doc); a study of
    one rate and one seed is a plain demo folder."""
    if len(rates) == 1 and len(seeds) == 1:
        return DemoPaths.single(root)
    rate_dir = root / f"defects-{rate:.2f}"
    return DemoPaths(root=root, rate=rate_dir, cell=rate_dir / f"seed-{seed}")


#: study config fields that may differ between the studies of one root
_STUDY_FREE = ("out", "seed", "defect_rate", "seeds", "defect_rates", "variants", "baselines", "progress")


def earlier_cells(root: Path, cfg: DemoConfig) -> list[dict]:
    """The cells that earlier studies in ``root`` recorded in ``study.json`` (none when absent); a one-line
    ``RunFolderError`` when that study had another config."""
    f = Path(root) / STUDY_FILE
    if not f.is_file():
        return []
    old = read_json(f, "study")
    prev, new = old.get("config") or {}, json.loads(dumps(cfg.to_record()))
    diff = [k for k in new if k not in _STUDY_FREE and k in prev and prev[k] != new[k]]
    if diff:
        what = ", ".join(f"{k} {prev[k]!r} (asked: {new[k]!r})" for k in diff)
        raise RunFolderError(f"{root} holds a study of another config: {what}; use another --out")
    return list(old.get("cells") or [])


def aggregate(cells: list[dict]) -> dict:
    """Per defect rate and variant: mean and std over seeds of every metric, and of the differences to SFT."""
    out: dict[str, dict] = {}
    for rate in sorted({c["defect_rate"] for c in cells}):
        rows = [c for c in cells if c["defect_rate"] == rate]
        variants = list(rows[0]["variants"])
        agg = {v: {k: mean_std([r["variants"][v][k] for r in rows]) for k in METRIC_KEYS} for v in variants}
        if "SFT" in variants:
            for v in (x for x in variants if x in ("HPD-T", "HPD")):
                agg[f"{v} - SFT"] = {k: mean_std([r["variants"][v][k] - r["variants"]["SFT"][k] for r in rows])
                                     for k in METRIC_KEYS}
        out[f"{rate:.2f}"] = agg
    return out


def plot_sweep(summary: dict, path: Path, keys=("TS", "RC")) -> Path | None:
    """HPD-T - SFT and HPD - SFT (mean +- std over seeds) against the defect rate, one panel per metric."""
    rates = sorted(summary, key=float)
    if len(rates) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.4), squeeze=False)
    for ax, k in zip(axes[0], keys):
        for name in ("HPD-T - SFT", "HPD - SFT"):
            pts = [(float(r), summary[r][name][k]) for r in rates if name in summary[r]]
            if pts:
                ax.errorbar([100 * x for x, _ in pts], [m["mean"] for _, m in pts],
                            yerr=[m["std"] for _, m in pts], marker="o", capsize=3, label=name)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("defective train references (%)")
        ax.set_ylabel(f"{k} difference")
        ax.set_title(k)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_png(fig, path)


def _cell_demo(cfg: DemoConfig, rate: float, seed: int, rates: list[float], seeds: list[int], log) -> Demo:
    paths = cell_paths(Path(cfg.out), rate, seed, rates, seeds)
    return Demo(replace(cfg, seed=seed, defect_rate=rate, out=paths.cell), log=log, paths=paths)


def run_cell(cfg: DemoConfig, rate: float, seed: int, rates: list[float], seeds: list[int], log) -> tuple[dict, float]:
    """One cell's results document and wall seconds."""
    demo = _cell_demo(cfg, rate, seed, rates, seeds, log)
    log(f"== cell: defect rate {rate:.2f}, seed {seed} -> {demo.out}")
    t0 = time.perf_counter()
    res = demo.run()
    return res, round(time.perf_counter() - t0, 1)


def prepare_shared(cfg: DemoConfig, rates: list[float], seeds: list[int], log) -> None:
    """What cells share, built once before they run side by side: the base model and its evaluation at the
    root, the data, split and boundaries of every rate."""
    for i, rate in enumerate(rates):
        demo = _cell_demo(cfg, rate, seeds[0], rates, seeds, log)
        bench, tasks, base, _bds = demo.prepare()
        if i == 0 and "Base" in demo.variant_names():
            demo.eval_stage("Base", bench, tasks, base, None)


def _lane_cell(cfg: DemoConfig, rate: float, seed: int, rates: list[float], seeds: list[int],
               threads: int) -> tuple[dict, float]:
    """A cell in a lane process: ``threads`` torch threads, no progress bars, log lines tagged with the cell."""
    import os

    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    from hpd.demo import setup_threads

    setup_threads()
    tag = f"[{rate:.2f}/seed-{seed}]"
    return run_cell(replace(cfg, progress=False), rate, seed, rates, seeds, lambda m: print(f"{tag} {m}", flush=True))


def run_lanes(cfg: DemoConfig, grid: list[tuple[float, int]], rates: list[float], seeds: list[int], lanes: int,
              log, threads: int | None = None) -> dict:
    """The cells of ``grid`` in ``lanes`` processes side by side (each with ``threads`` torch threads; default:
    the cores split evenly), after :func:`prepare_shared`; ``(rate, seed) -> (results, wall seconds)``."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor, as_completed

    prepare_shared(cfg, rates, seeds, log)
    threads = threads or max(1, (os.cpu_count() or 1) // lanes)
    log(f"== {len(grid)} cells in {lanes} lanes of {threads} thread(s)")
    out = {}
    with ProcessPoolExecutor(max_workers=lanes, mp_context=multiprocessing.get_context("spawn")) as pool:
        futs = {pool.submit(_lane_cell, cfg, r, s, rates, seeds, threads): (r, s) for r, s in grid}
        for f in as_completed(futs):
            out[futs[f]] = f.result()
            log(f"== cell done: defect rate {futs[f][0]:.2f}, seed {futs[f][1]} ({out[futs[f]][1]:.0f}s)")
    return out


def run_study(cfg: DemoConfig, seeds: list[int], rates: list[float],
              log: Callable[[str], None] = print, lanes: int = 1, threads: int | None = None) -> dict:
    """Run every (rate, seed) cell (skipping finished ones; with ``lanes`` > 1 several side by side, each in its
    own process), then write ``study.json``, the sweep plot and the study report; returns the study document."""
    root = Path(cfg.out)
    root.mkdir(parents=True, exist_ok=True)
    man = new_manifest("hpd demo (study)", {**cfg.to_record(), "seeds": seeds, "defect_rates": rates, "lanes": lanes},
                       seed=seeds[0])
    write_json(root / "manifest.json", man)
    before = {(c["defect_rate"], c["seed"]): c for c in earlier_cells(root, cfg)}
    grid = [(rate, seed) for rate in rates for seed in seeds]
    if lanes > 1:
        done = run_lanes(cfg, grid, rates, seeds, lanes, log, threads)
    else:
        done = {(r, s): run_cell(cfg, r, s, rates, seeds, log) for r, s in grid}
    cells, walls = [], {}
    for rate, seed in grid:
        res, wall = done[(rate, seed)]
        walls[f"{rate:.2f}/{seed}"] = wall
        cells.append({"defect_rate": rate, "seed": seed,
                      "folder": str(cell_paths(root, rate, seed, rates, seeds).cell.relative_to(root)),
                      "variants": res["variants"], "timings": res["timings"],
                      "teacher_choice": (res.get("teacher_choice") or {}).get("chosen"),
                      "defects": res.get("defects")})
    asked = {(c["defect_rate"], c["seed"]) for c in cells}
    cells = sorted([c for k, c in before.items() if k not in asked] + cells,
                   key=lambda c: (c["defect_rate"], c["seed"]))
    summary = aggregate(cells)
    doc = {"seeds": sorted({c["seed"] for c in cells}), "defect_rates": sorted({c["defect_rate"] for c in cells}),
           "asked": {"seeds": seeds, "defect_rates": rates}, "metric_keys": list(METRIC_KEYS), "summary": summary,
           "cells": cells, "cell_wall_s": walls, "config": cfg.to_record()}
    write_json(root / STUDY_FILE, doc)
    plot = plot_sweep(summary, root / "plots" / "sweep.png")
    from hpd.report.results import write_study_report

    write_study_report(root, doc, plot)
    write_json(root / "manifest.json", finish_manifest(man, outputs=["study.json", "report.html"]))
    return doc
