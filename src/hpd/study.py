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

from hpd.demo import METRIC_KEYS, Demo, DemoConfig, DemoPaths, full_record
from hpd.report.runs import STUDY_FILE, mean_std
from hpd.runfolder import RunFolderError, dumps, finish_manifest, new_manifest, read_json, write_json


def cell_paths(root: Path, rate: float, seed: int, rates: list[float], seeds: list[int],
               nested: bool = False) -> DemoPaths:
    """The folders of one cell: ``defects-<r>/seed-<s>`` in any study of several cells (module doc); a study of
    one rate and one seed is a plain demo folder, unless ``nested`` (a study with a results registry: every
    cell of it in its own ``defects-<r>/seed-<s>``, whichever command runs it)."""
    if len(rates) == 1 and len(seeds) == 1 and not nested:
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
    prev, new = full_record(old.get("config") or {}), full_record(json.loads(dumps(cfg.to_record())))
    diff = [k for k in new if k not in _STUDY_FREE and k in prev and prev[k] != new[k]]
    if diff:
        what = ", ".join(f"{k} {prev[k]!r} (asked: {new[k]!r})" for k in diff)
        raise RunFolderError(f"{root} holds a study of another config: {what}; use another --out")
    return list(old.get("cells") or [])


def aggregate(cells: list[dict]) -> dict:
    """Per defect rate and variant: mean and std over seeds of every metric, and of the differences to SFT; a
    variant only some cells have (the baselines of one seed) is summarised over those (``n``)."""
    out: dict[str, dict] = {}
    for rate in sorted({c["defect_rate"] for c in cells}):
        rows = [c for c in cells if c["defect_rate"] == rate]
        variants = list(dict.fromkeys(v for r in rows for v in r["variants"]))
        agg = {v: {k: mean_std([r["variants"][v][k] for r in rows if v in r["variants"]]) for k in METRIC_KEYS}
               for v in variants}
        if "SFT" in variants:
            for v in (x for x in variants if x in ("HPD-T", "HPD")):
                both = [r for r in rows if v in r["variants"] and "SFT" in r["variants"]]
                if both:
                    agg[f"{v} - SFT"] = {k: mean_std([r["variants"][v][k] - r["variants"]["SFT"][k] for r in both])
                                         for k in METRIC_KEYS}
        out[f"{rate:.2f}"] = agg
    return out


def plot_sweep(summary: dict, path: Path, keys=("TS", "RC")) -> Path | None:
    """HPD-T - SFT and HPD - SFT (mean +- std over seeds) against the defect rate, one panel per metric; None
    until one of the two differences exists at two rates (a sweep of Base cells alone has nothing to draw)."""
    from hpd.report.studystats import sweep_png

    rates = sorted(summary, key=float)
    series = {}
    for name in ("HPD-T - SFT", "HPD - SFT"):
        pts = {k: [(100 * float(r), summary[r][name][k]) for r in rates if name in summary[r]] for k in keys}
        if all(len(p) >= 2 for p in pts.values()):
            series[name] = {k: ([x for x, _ in p], [m["mean"] for _, m in p], [m["std"] for _, m in p])
                            for k, p in pts.items()}
    return sweep_png(series, keys, path, "difference") if series else None


def _cell_demo(cfg: DemoConfig, rate: float, seed: int, rates: list[float], seeds: list[int], log,
               registry=None) -> Demo:
    paths = cell_paths(Path(cfg.out), rate, seed, rates, seeds, nested=registry is not None)
    return Demo(replace(cfg, seed=seed, defect_rate=rate, out=paths.cell), log=log, paths=paths, registry=registry)


def run_cell(cfg: DemoConfig, rate: float, seed: int, rates: list[float], seeds: list[int], log,
             registry=None) -> tuple[dict, float]:
    """One cell's results document and wall seconds; with ``registry`` (:class:`hpd.report.registry.Registry`)
    each finished variant is copied there and a variant found there is not run again."""
    demo = _cell_demo(cfg, rate, seed, rates, seeds, log, registry)
    log(f"== cell: defect rate {rate:.2f}, seed {seed} -> {demo.out}")
    t0 = time.perf_counter()
    res = demo.run()
    return res, round(time.perf_counter() - t0, 1)


def prepare_shared(cfg: DemoConfig, rates: list[float], seeds: list[int], log, registry=None) -> None:
    """What cells share, built once before they run side by side: the base model and its evaluation at the
    root, the data, split and boundaries of every rate."""
    for i, rate in enumerate(rates):
        demo = _cell_demo(cfg, rate, seeds[0], rates, seeds, log, registry)
        bench, tasks, base, _bds = demo.prepare()
        if i == 0 and "Base" in demo.variant_names():
            demo.eval_stage("Base", bench, tasks, base, None)


def _lane_cell(cfg: DemoConfig, rate: float, seed: int, rates: list[float], seeds: list[int],
               threads: int, registry=None) -> tuple[dict, float]:
    """A cell in a lane process: ``threads`` torch threads, no progress bars, log lines tagged with the cell."""
    import os

    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    from hpd.demo import setup_threads

    setup_threads()
    tag = f"[{rate:.2f}/seed-{seed}]"
    return run_cell(replace(cfg, progress=False), rate, seed, rates, seeds, lambda m: print(f"{tag} {m}", flush=True),
                    registry)


def run_lanes(cfg: DemoConfig, grid: list[tuple[float, int]], rates: list[float], seeds: list[int], lanes: int,
              log, threads: int | None = None, registry=None) -> dict:
    """The cells of ``grid`` in ``lanes`` processes side by side (each with ``threads`` torch threads; default:
    the cores split evenly), after :func:`prepare_shared`; ``(rate, seed) -> (results, wall seconds)``."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor, as_completed

    prepare_shared(cfg, rates, seeds, log, registry)
    threads = threads or max(1, (os.cpu_count() or 1) // lanes)
    log(f"== {len(grid)} cells in {lanes} lanes of {threads} thread(s)")
    out = {}
    with ProcessPoolExecutor(max_workers=lanes, mp_context=multiprocessing.get_context("spawn")) as pool:
        futs = {pool.submit(_lane_cell, cfg, r, s, rates, seeds, threads, registry): (r, s) for r, s in grid}
        for f in as_completed(futs):
            out[futs[f]] = f.result()
            log(f"== cell done: defect rate {futs[f][0]:.2f}, seed {futs[f][1]} ({out[futs[f]][1]:.0f}s)")
    return out


def run_study(cfg: DemoConfig, seeds: list[int], rates: list[float],
              log: Callable[[str], None] = print, lanes: int = 1, threads: int | None = None, registry=None) -> dict:
    """Run every (rate, seed) cell (skipping finished ones; with ``lanes`` > 1 several side by side, each in its
    own process), then write ``study.json``, the sweep plot and the study report; returns the study document.
    ``registry`` (:class:`hpd.report.registry.Registry`): every cell in ``defects-<r>/seed-<s>`` even when there
    is one, each finished variant copied there at once, and a variant it holds not run again."""
    root = Path(cfg.out)
    root.mkdir(parents=True, exist_ok=True)
    man = new_manifest("hpd demo (study)", {**cfg.to_record(), "seeds": seeds, "defect_rates": rates, "lanes": lanes},
                       seed=seeds[0])
    write_json(root / "manifest.json", man)
    before = {(c["defect_rate"], c["seed"]): c for c in earlier_cells(root, cfg)}
    grid = [(rate, seed) for rate in rates for seed in seeds]
    if lanes > 1:
        done = run_lanes(cfg, grid, rates, seeds, lanes, log, threads, registry)
    else:
        done = {(r, s): run_cell(cfg, r, s, rates, seeds, log, registry) for r, s in grid}
    cells, walls = [], {}
    for rate, seed in grid:
        res, wall = done[(rate, seed)]
        walls[f"{rate:.2f}/{seed}"] = wall
        cells.append({"defect_rate": rate, "seed": seed,
                      "folder": str(cell_paths(root, rate, seed, rates, seeds, registry is not None).cell
                                    .relative_to(root)),
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


# ------------------------------------------------------------------------------------------ a declared study
# A study spec (configs/studies/<name>.yaml, hpd.report.studyplan) lists the cells; these turn its cells into demo
# configs and config hashes, and run the cells the registry lacks (``hpd study run``).


def spec_config(spec, arm: str, rate: float, seed: int, root: Path) -> DemoConfig:
    """The :class:`DemoConfig` ``hpd demo`` builds from the flags of ``arm`` (the same defaults per model)."""
    from hpd.demo import DEFAULT_MODEL, config_for_model
    from hpd.report.studyplan import DEMO_FLAGS

    from dataclasses import fields

    kw = {DEMO_FLAGS[k]: v for k, v in spec.arm_flags(arm).items()}
    have = {f.name for f in fields(DemoConfig)}
    if "dtype" in kw and "dtype" not in have:   # an hpd demo before --dtype: it computes in float32
        kw.pop("dtype")
    missing = sorted(set(kw) - have)
    if missing:
        raise RunFolderError(f"{spec.path}: hpd demo of this checkout has no {', '.join(missing)}")
    if "full_finetune" in kw:               # the spec flag is `lora`
        kw["full_finetune"] = not kw["full_finetune"]
    if kw.get("data") is not None:
        kw["data"] = Path(kw["data"])
    return config_for_model(kw.pop("model", DEFAULT_MODEL), out=Path(root) / arm, seed=seed, defect_rate=rate, **kw)


def _from_arm_config(spec, cell, root: Path) -> dict:
    """What decides a cell that evaluates a trained variant of another arm (a BFCL or a transfer cell): its
    settings (BFCL's; a transfer's harness and the harness it was trained in) and the config hash of that variant."""
    from hpd.demo import registry_config
    from hpd.runfolder import config_hash

    g = spec.group(cell.group)
    src_cfg = spec_config(spec, g.from_arm, cell.defect_rate, cell.seed, root)
    src = registry_config(src_cfg, cell.variant)
    own = g.bfcl if cell.kind == "bfcl" else {"harness": g.harness, "trained_harness": src_cfg.harness}
    return {"kind": cell.kind, "variant": cell.variant, "from_arm": g.from_arm, "source_config_hash": config_hash(src),
            **own}


def spec_hash(spec, cell, root: Path) -> str:
    """The config hash a registry cell of ``cell`` must hold to count as done."""
    from hpd.demo import registry_config
    from hpd.runfolder import config_hash

    if cell.kind != "demo":
        return config_hash(_from_arm_config(spec, cell, root))
    return config_hash(registry_config(spec_config(spec, cell.arm, cell.defect_rate, cell.seed, root), cell.variant))


def spec_status(spec, root: Path, registry: Path) -> dict:
    """:func:`hpd.report.studyplan.study_status` with each cell's config hash checked."""
    from hpd.report.studyplan import study_status

    return study_status(spec, root, registry, lambda c: spec_hash(spec, c, root))


def run_spec(spec, root: Path, registry: Path, cells: list[str] | None = None,
             log: Callable[[str], None] = print) -> list[str]:
    """Run the cells of ``spec`` the registry lacks (``cells``: only these ids), one (arm, rate, seed) after
    another through :func:`run_study` (demo cells), ``hpd bfcl`` (BFCL cells) or the demo's evaluation in another
    harness (transfer cells), each variant written to the registry as soon as it is evaluated; returns the cell ids
    it ran."""
    import shlex

    from hpd.report.registry import Registry
    from hpd.report.studyplan import BASELINES, VARIANTS, demo_args

    status = spec_status(spec, root, registry)
    known = {r["cell"] for r in status["cells"]}
    unknown = sorted(set(cells or ()) - known)
    if unknown:
        raise RunFolderError(f"not cells of {spec.path}: {', '.join(unknown)} (hpd study status lists them)")
    todo = [c for c in spec.cells() if c.id in {r["cell"] for r in status["cells"] if r["state"] != "done"}
            and (cells is None or c.id in cells)]
    units: dict[tuple, list] = {}
    for c in todo:
        units.setdefault((c.kind, c.arm, c.defect_rate, c.seed), []).append(c)
    ran = []
    for (kind, arm, rate, seed), group_cells in units.items():
        label = spec.group(group_cells[0].group).label
        if kind != "demo":
            run_one = _run_bfcl_cell if kind == "bfcl" else _run_transfer_cell
            for c in group_cells:
                run_one(spec, c, Path(root), Registry(registry, spec.study, arm, label=label), log)
                ran.append(c.id)
            continue
        names = [c.variant for c in group_cells]
        args = demo_args(spec, arm, [rate], [seed], names, Path(root), Path(registry))
        log(f"== {', '.join(c.id for c in group_cells)}\n   $ {' '.join(shlex.quote(a) for a in args)}")
        cfg = replace(spec_config(spec, arm, rate, seed, root),
                      variants=(tuple(v for v in VARIANTS if v in names) or VARIANTS)
                      + tuple(b for b in BASELINES if b in names),
                      baselines=any(v in BASELINES for v in names))
        reg = Registry(registry, spec.study, arm, command=" ".join(shlex.quote(a) for a in args), label=label)
        run_study(cfg, seeds=[seed], rates=[rate], log=log, registry=reg)
        ran += [c.id for c in group_cells]
    return ran


def _trained_source(spec, cell, root: Path) -> tuple[DemoConfig, Path, Path | None]:
    """``(source arm's config, its base model, the trained variant)`` of a BFCL or transfer cell; a one-line
    error when the source run folder lacks the weights."""
    from hpd.report.studyplan import trained_dir

    g = spec.group(cell.group)
    src = spec_config(spec, g.from_arm, cell.defect_rate, cell.seed, root)
    base = Path(root) / g.from_arm / "base" if src.model in ("tiny", "smollm2") else Path(src.model)
    trained = trained_dir(root, g.from_arm, cell.defect_rate, cell.seed, cell.variant)
    for need in (base, trained):
        if need is not None and not Path(need).is_dir():
            raise RunFolderError(f"{cell.id}: no {need} (weights are not kept in the registry: run the "
                                 f"{g.from_arm} cell of {cell.variant} in this --root first)")
    return src, base, trained


def _run_transfer_cell(spec, cell, root: Path, reg, log) -> None:
    """The demo's evaluation of a trained variant of the cell's source arm in the group's harness: the source
    cell's held-out tasks, base model and weights, into ``<root>/<arm>/defects-<r>/seed-<s>/eval/<variant>``."""
    from hpd.report.studyplan import demo_cell_dir, run_command

    g = spec.group(cell.group)
    src, _base, trained = _trained_source(spec, cell, root)
    src_paths = cell_paths(Path(root) / g.from_arm, cell.defect_rate, cell.seed, [cell.defect_rate], [cell.seed],
                           nested=True)
    out = demo_cell_dir(root, cell.arm, cell.defect_rate, cell.seed)
    reg.command = reg.command or run_command(spec, root, reg.root, [cell.id])
    log(f"== {cell.id}: {g.from_arm}'s trained {cell.variant} evaluated in {g.harness}\n   $ {reg.command}")
    demo = Demo(replace(src, harness=g.harness, out=out), log=log, paths=replace(src_paths, cell=out), registry=reg)
    _data, bench, tasks, base = demo.eval_inputs()
    metrics = demo.eval_stage(cell.variant, bench, tasks, base, trained)
    demo.register(cell.variant, metrics, config=_from_arm_config(spec, cell, root))


def _run_bfcl_cell(spec, cell, root: Path, reg, log) -> None:
    """``hpd bfcl`` on a trained variant of the cell's source arm (its run folder must still hold the weights)."""
    import shlex

    from hpd.bfcl import GenConfig, run_bfcl
    from hpd.bfcl.pipeline import make_policy
    from hpd.demo_engine import model_and_adapter
    from hpd.report.studyplan import bfcl_args, bfcl_out

    g = spec.group(cell.group)
    src, base, trained = _trained_source(spec, cell, root)
    model, adapter = model_and_adapter(base, trained)
    args = bfcl_args(spec, g, cell.defect_rate, cell.seed, cell.variant, root)
    command = " ".join(shlex.quote(a) for a in args)
    log(f"== {cell.id}\n   $ {command}")
    b = g.bfcl
    out = bfcl_out(root, cell)
    policy = make_policy("hf", str(model), adapter=adapter)
    t0 = time.perf_counter()
    try:
        run_bfcl(out, policy, categories=list(b["categories"]), sample=b.get("sample"), seed=int(b.get("seed", 0)),
                 gen=GenConfig(max_new_tokens=int(b.get("max_new_tokens", 512)), seed=int(b.get("seed", 0))),
                 describe={"model": str(model), "adapter": adapter, "backend": "hf"}, command=command,
                 inputs={"model": model, "adapter": adapter})
    finally:
        policy.close()
    dest = reg.write(cell.id, out, config=_from_arm_config(spec, cell, root), command=command, seed=cell.seed,
                     wall_s=time.perf_counter() - t0, dtype=getattr(src, "dtype", None),
                     extra={"variant": cell.variant, "run_folder": str(out)})
    log(f"  {cell.id}: registered in {dest}")
