"""``hpd report --study results/<study>``: a study's registry as tables with intervals and tests.

Read from the registry (:mod:`hpd.report.registry`), nothing from run folders:

* **mean ± std over seeds** of every metric, per (arm, defect rate, variant): the sample standard deviation
  (``ddof=1``; 0 with one seed), from each cell's ``metrics.json``;
* **paired differences** ``HPD − SFT`` and ``HPD-T − SFT`` per (arm, defect rate): per seed the two variants'
  per-task rows are paired on the task ``uid``, and the pairs of every seed are pooled. A metric over a set of
  rows is a ratio of sums, as the evaluation aggregates it (:data:`PAIRED`): TS, F1 and Exact are per-task means,
  Step-SR = Σ matched / Σ scorable steps, RC = Σ valid turns / Σ turns; the difference is the metric of the
  variant minus that of SFT over the paired rows. An arm without SFT (the oracle-teacher upper bound) is compared
  with the SFT of arm ``main`` at the same rate and seeds.
* **95 % bootstrap intervals**: percentile intervals of ``resamples`` (10,000) resamples, seeded
  (``numpy.random.default_rng(seed)``); a resample draws task uids with replacement and takes every seed's pair of
  each drawn task (the seeds of one task stay together: they share the task's difficulty);
* **McNemar's test on TS**: the discordant pairs ``b`` (variant solves, SFT fails) and ``c`` (the reverse),
  pooled over seeds; the exact two-sided binomial p-value ``min(1, 2 · P(X ≤ min(b, c)))``, ``X ~ Bin(b + c,
  1/2)`` (1 when there is no discordant pair);
* the **sweep** (the differences with their intervals against the defect rate, arms with ≥ 2 rates) and the
  **main table** bars (mean ± std over seeds) and differences (with their intervals) as PNGs;
* BFCL cells (arm ``bfcl``, ``metrics.json`` of ``hpd bfcl``): their aggregates, one row per cell.
* **why they differ** (:mod:`hpd.report.studywhy`): how each variant's episodes end (turn limit, turns, calls,
  call precision) and, for the cells that carry ``teacher.json``, what the teacher did;
* **by harness** (Figure 4, :mod:`hpd.report.harness_table`): each variant by the harness it was trained in, with
  its metrics in each harness it was evaluated in (a transfer cell adds another harness to a trained row); shown
  when the study evaluates in more than one harness.

Writes ``study_report.json`` (stable keys, :func:`study_report`), ``study_report.md`` and ``plots/``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from hpd.runfolder import save_png, write_json, write_text

from .harness_table import harness_markdown, harness_rows, harnesses_of
from .registry import agent_cells, load_study, read_tasks, variant_groups
from .results import METRIC_KEYS, mean_std_text
from .runs import mean_std
from .studywhy import behaviour_rows, markdown_lines, teacher_rows

#: per-task metric -> (numerator field, denominator field or None for 1): the evaluation's aggregates
PAIRED = {"TS": ("TS", None), "F1": ("F1", None), "Step-SR": ("matched", "n_scorable"),
          "RC": ("valid_turns", "turns"), "Exact": ("Exact", None)}
COMPARED = ("HPD-T", "HPD")
REFERENCE = "SFT"
#: within one arm and seed: HPD against HPD-T, the same teacher targets with and without the document views
WITHIN = (("HPD", "HPD-T"),)
BFCL_KEYS = ("overall", "non_live", "live", "irrelevance", "relevance")


class StudyReportError(ValueError):
    """A registry folder that holds no study (one line)."""


# ------------------------------------------------------------------------------------------ statistics
def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value of ``b`` and ``c`` discordant pairs (binomial, p = 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def paired_terms(pairs: list[tuple[dict, dict]], metric: str) -> list[tuple[float, float, float, float]]:
    """Per pair ``(num_a, den_a, num_b, den_b)`` of a metric (:data:`PAIRED`)."""
    num, den = PAIRED[metric]
    return [(float(a.get(num) or 0), float(a.get(den) or 0) if den else 1.0,
             float(b.get(num) or 0), float(b.get(den) or 0) if den else 1.0) for a, b in pairs]


def paired_difference(pairs: list[tuple[str, dict, dict]], metric: str, resamples: int = 10_000, seed: int = 0,
                      level: float = 0.95) -> dict:
    """``metric(a) − metric(b)`` over ``pairs`` of ``(uid, row a, row b)`` and its percentile bootstrap interval,
    resampling uids (all pairs of a drawn uid together)."""
    import numpy as np

    terms = paired_terms([(a, b) for _, a, b in pairs], metric)
    if not terms:
        return {"diff": None, "ci_low": None, "ci_high": None}
    t = np.asarray(terms, dtype=float)
    diff = _ratio(t[:, 0].sum(), t[:, 1].sum()) - _ratio(t[:, 2].sum(), t[:, 3].sum())
    uids = sorted({u for u, _, _ in pairs})
    index = {u: i for i, u in enumerate(uids)}
    sums = np.zeros((len(uids), 4))
    for (u, _, _), row in zip(pairs, t):
        sums[index[u]] += row
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(uids), size=(resamples, len(uids)))
    tot = sums[draw].sum(axis=1)                                  # (resamples, 4)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(tot[:, 1] > 0, tot[:, 0] / tot[:, 1], 0.0)
        b = np.where(tot[:, 3] > 0, tot[:, 2] / tot[:, 3], 0.0)
    lo, hi = np.quantile(a - b, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {"diff": float(diff), "ci_low": float(lo), "ci_high": float(hi)}


def mcnemar_ts(pairs: list[tuple[str, dict, dict]]) -> dict:
    """McNemar's exact test on TS over ``pairs`` (module doc)."""
    b = sum(1 for _, x, y in pairs if x.get("TS") and not y.get("TS"))
    c = sum(1 for _, x, y in pairs if not x.get("TS") and y.get("TS"))
    return {"b": b, "c": c, "n_discordant": b + c, "p": mcnemar_exact(b, c)}


# ------------------------------------------------------------------------------------------ the registry
def _key(rate: float) -> str:
    return f"{rate:.2f}"


def summarize(cells: dict[str, dict]) -> list[dict]:
    """Mean ± sample std over seeds per (arm, defect rate, variant) of every metric (BFCL cells left out)."""
    out = []
    for (arm, rate, v), cs in variant_groups(cells).items():
        metrics = {k: mean_std([float(c["metrics"].get(k) or 0.0) for c in cs]) for k in METRIC_KEYS}
        label = cs[0]["manifest"].get("label")
        out.append({"arm": arm, "label": label, "defect_rate": rate, "variant": v, "seeds": [c["seed"] for c in cs],
                    "n_tasks": [c["metrics"].get("n_tasks") for c in cs], "metrics": metrics})
    return out


def comparisons(cells: dict[str, dict], resamples: int = 10_000, seed: int = 0) -> list[dict]:
    """``HPD − SFT`` and ``HPD-T − SFT`` per (arm, defect rate) (an arm without SFT, such as the oracle arm, against
    main's), then ``HPD − HPD-T`` within an arm (:data:`WITHIN`): pooled paired differences, intervals, McNemar.
    Over :func:`agent_cells` only (:func:`bfcl_rows` reports the BFCL cells)."""
    by = defaultdict(dict)   # (arm, rate) -> {(variant, seed): cell}
    for c in agent_cells(cells):
        by[(c["arm"], c["defect_rate"])][(c["variant"], c["seed"])] = c
    out = []
    for (arm, rate), have in sorted(by.items(), key=lambda kv: (kv[0][0] != "main", kv[0])):
        ref_arm = arm if any(v == REFERENCE for v, _ in have) else "main"
        pairs = [(v, REFERENCE, ref_arm) for v in COMPARED] + [(v, w, arm) for v, w in WITHIN]
        for v, ref, r_arm in pairs:
            c = _comparison(have, by.get((r_arm, rate), {}), v, ref, arm, r_arm, rate, resamples, seed)
            if c is not None:
                out.append(c)
    return out


def _comparison(have: dict, ref_cells: dict, v: str, ref: str, arm: str, ref_arm: str, rate: float,
                resamples: int, seed: int) -> dict | None:
    """``v`` (of ``have``) − ``ref`` (of ``ref_cells``) over the seeds both hold, paired on task uid."""
    seeds = sorted(s for (x, s) in have if x == v and (ref, s) in ref_cells)
    pairs, per_seed = [], {}
    for s in seeds:
        a = {r["uid"]: r for r in read_tasks(have[(v, s)]["folder"])}
        b = {r["uid"]: r for r in read_tasks(ref_cells[(ref, s)]["folder"])}
        common = sorted(set(a) & set(b))
        per_seed[str(s)] = len(common)
        pairs += [(u, a[u], b[u]) for u in common]
    if not pairs:
        return None
    name = f"{v} − {ref}" if ref_arm == arm == "main" else f"{v} [{arm}] − {ref} [{ref_arm}]"   # arm named off main
    dtypes = {v: sorted({str(have[(v, s)]["manifest"].get("dtype")) for s in seeds}),
              ref: sorted({str(ref_cells[(ref, s)]["manifest"].get("dtype")) for s in seeds})}
    return {"name": name, "dtypes": dtypes, "arm": arm, "label": have[(v, seeds[0])]["manifest"].get("label"),
            "defect_rate": rate, "variant": v, "reference": ref, "reference_arm": ref_arm,
            "seeds": seeds, "pairs_per_seed": per_seed, "n_pairs": len(pairs),
            "n_tasks": len({u for u, _, _ in pairs}),
            "metrics": {k: paired_difference(pairs, k, resamples, seed) for k in PAIRED},
            "mcnemar_TS": mcnemar_ts(pairs)}


def bfcl_rows(cells: dict[str, dict]) -> list[dict]:
    rows = []
    for cid, c in sorted(cells.items()):
        agg = c["metrics"].get("aggregates")
        if isinstance(agg, dict):
            rows.append({"cell": cid, "arm": c["arm"], "defect_rate": c["defect_rate"], "seed": c["seed"],
                         "variant": c["variant"], "n_entries": c["metrics"].get("n_entries"),
                         **{k: agg.get(k) for k in BFCL_KEYS}})
    return rows


# ------------------------------------------------------------------------------------------ plots
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def sweep_png(series: dict[str, dict[str, tuple]], keys, path: Path, ylabel: str) -> Path:
    """One panel per metric key: each series' ``(xs, ys, yerr)`` (difference against the defect rate in %),
    with error bars and a zero line; the sweep plot of a demo study and of a registry study."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(keys), figsize=(4.4 * len(keys), 3.5), squeeze=False)
    for ax, k in zip(axes[0], keys):
        for name, per_key in series.items():
            if k in per_key:
                xs, ys, err = per_key[k]
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=name)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("defective train references (%)")
        ax.set_ylabel(f"{k} {ylabel}")
        ax.set_title(k)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_png(fig, path)


def _ci_points(cs: list[dict], k: str) -> tuple:
    m = [c["metrics"][k] for c in cs]
    ys = [x["diff"] for x in m]
    err = [[y - x["ci_low"] for x, y in zip(m, ys)], [x["ci_high"] - y for x, y in zip(m, ys)]]
    return [100 * c["defect_rate"] for c in cs], ys, err


def plot_sweep(comps: list[dict], path: Path, keys=("TS", "RC")) -> Path | None:
    """Each comparison's difference (with its 95 % interval) against the defect rate, arms with ≥ 2 rates."""
    lines = defaultdict(list)
    for c in comps:
        lines[c["name"]].append(c)
    lines = {n: sorted(cs, key=lambda c: c["defect_rate"]) for n, cs in lines.items() if len(cs) >= 2}
    if not lines:
        return None
    series = {name: {k: _ci_points(cs, k) for k in keys} for name, cs in lines.items()}
    return sweep_png(series, keys, path, "difference (95% bootstrap CI)")


def main_rate(summary: list[dict]) -> float | None:
    """The defect rate of the main table: arm ``main``'s rate with the most seeds (then the lowest rate)."""
    rows = [r for r in summary if r["arm"] == "main"] or summary
    if not rows:
        return None
    return min(rows, key=lambda r: (-len(r["seeds"]), r["defect_rate"]))["defect_rate"]


def plot_main_table(summary: list[dict], comps: list[dict], rate: float, path: Path,
                    keys=METRIC_KEYS) -> Path | None:
    """Left: mean ± std over seeds per variant and metric at ``rate``; right: the paired differences at ``rate``
    with their 95 % bootstrap intervals."""
    rows = [r for r in summary if r["defect_rate"] == rate]
    if not rows:
        return None
    plt = _plt()
    comps = [c for c in comps if c["defect_rate"] == rate]
    fig, axes = plt.subplots(1, 2 if comps else 1, figsize=(13 if comps else 9, 3.9), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]} if comps else None)
    ax = axes[0][0]
    width = 0.8 / len(rows)
    for i, r in enumerate(rows):
        name = r["variant"] if r["arm"] == "main" else f"{r['variant']} [{r['arm']}]"
        xs = [j + i * width for j in range(len(keys))]
        ax.bar(xs, [r["metrics"][k]["mean"] for k in keys], width, yerr=[r["metrics"][k]["std"] for k in keys],
               capsize=2, label=f"{name} (n={len(r['seeds'])})")
    ax.set_xticks([j + width * (len(rows) - 1) / 2 for j in range(len(keys))])
    ax.set_xticklabels(keys)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean ± std over seeds")
    ax.set_title(f"defective train references {100 * rate:.0f}%")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    if comps:
        ax = axes[0][1]
        ks = list(PAIRED)
        width = 0.8 / len(comps)
        for i, c in enumerate(comps):
            xs = [j + i * width for j in range(len(ks))]
            m = [c["metrics"][k] for k in ks]
            ys = [x["diff"] for x in m]
            ax.bar(xs, ys, width, yerr=[[y - x["ci_low"] for x, y in zip(m, ys)],
                                        [x["ci_high"] - y for x, y in zip(m, ys)]], capsize=2, label=c["name"])
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks([j + width * (len(comps) - 1) / 2 for j in range(len(ks))])
        ax.set_xticklabels(ks)
        ax.set_ylabel("paired difference (95% bootstrap CI)")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    return save_png(fig, path)


# ------------------------------------------------------------------------------------------ the report
def study_report(study_dir: str | Path, resamples: int = 10_000, seed: int = 0) -> dict:
    """The report document of a registry study folder (``results/<study>``): stable keys, no plots."""
    study_dir = Path(study_dir)
    cells = load_study(study_dir) if study_dir.is_dir() else {}
    if not cells:
        raise StudyReportError(f"{study_dir} holds no registry cells (<arm>/defects-<r>/seed-<s>/<variant>/)")
    summary = summarize(cells)
    comps = comparisons(cells, resamples, seed)
    return {"study": study_dir.name, "registry": str(study_dir), "metric_keys": list(METRIC_KEYS),
            "paired_metrics": list(PAIRED),
            "bootstrap": {"resamples": resamples, "seed": seed, "level": 0.95, "interval": "percentile",
                          "unit": "task uid (every seed's pair of a task together)"},
            "cells": sorted(cells), "main_rate": main_rate(summary), "summary": summary, "comparisons": comps,
            "bfcl": bfcl_rows(cells), "harnesses": harness_rows(cells), "behaviour": behaviour_rows(cells),
            "teacher": teacher_rows(cells)}


def dtype_caveats(comps: list[dict]) -> list[str]:
    """One line per comparison whose two sides computed in different dtypes (each registered cell's manifest
    ``dtype``: ``auto`` resolves per machine, bfloat16 on a CPU with AVX512-BF16, float32 without)."""
    out = []
    for c in comps:
        d = c.get("dtypes") or {}
        if len({x for v in d.values() for x in v}) > 1:
            sides = "; ".join(f"{v} in {', '.join(x)}" for v, x in d.items())
            out.append(f"Mixed precision: {c['name']} compares cells computed in different dtypes ({sides}).")
    return out


def _ci(m: dict) -> str:
    if m["diff"] is None:
        return "–"
    return f"{m['diff']:+.3f} [{m['ci_low']:+.3f}, {m['ci_high']:+.3f}]"


def markdown(doc: dict) -> str:
    keys = doc["metric_keys"]
    out = [f"# Study {doc['study']}", "", f"Registry: `{doc['registry']}`, {len(doc['cells'])} cells.", "",
           "## Mean ± std over seeds", "",
           "| arm | defects | variant | seeds | " + " | ".join(keys) + " |", "|---" * (len(keys) + 4) + "|"]
    for r in doc["summary"]:
        arm = r["arm"] + (f" ({r['label']})" if r.get("label") and r["label"] != r["arm"] else "")
        out.append(f"| {arm} | {100 * r['defect_rate']:.0f}% | {r['variant']} | {len(r['seeds'])} | "
                   + " | ".join(mean_std_text(r["metrics"][k]) for k in keys) + " |")
    pk = doc["paired_metrics"]
    b = doc["bootstrap"]
    out += ["", "## Paired differences (per-task, paired on uid within a seed, pooled over seeds)", "",
            f"95% percentile bootstrap intervals over tasks ({b['resamples']} resamples, seed {b['seed']}); "
            "McNemar: exact binomial test on the TS discordant pairs (b: variant solves and SFT fails, c: the "
            "reverse).", "",
            "| comparison | defects | seeds | pairs | " + " | ".join(pk) + " | McNemar TS b/c | p |",
            "|---" * (len(pk) + 6) + "|"]
    for c in doc["comparisons"]:
        mc = c["mcnemar_TS"]
        out.append(f"| {c['name']} | {100 * c['defect_rate']:.0f}% | {len(c['seeds'])} | {c['n_pairs']} | "
                   + " | ".join(_ci(c["metrics"][k]) for k in pk) + f" | {mc['b']}/{mc['c']} | {mc['p']:.4g} |")
    caveats = dtype_caveats(doc["comparisons"])
    if caveats:
        out += [""] + caveats
    out += markdown_lines(doc)
    if doc["bfcl"]:
        out += ["", "## BFCL transfer", "", "| cell | entries | " + " | ".join(BFCL_KEYS) + " |",
                "|---" * (len(BFCL_KEYS) + 2) + "|"]
        for r in doc["bfcl"]:
            out.append(f"| {r['cell']} | {r['n_entries']} | "
                       + " | ".join("–" if r[k] is None else f"{float(r[k]):.3f}" for k in BFCL_KEYS) + " |")
    if len(harnesses_of(doc["harnesses"])) > 1:
        out += ["", "## By harness (Figure 4)", "",
                "Rows: the variant and the harness it was trained in (its arm); columns: the harness it was evaluated "
                "in. A row with values under another harness than its own is a transfer.", "",
                harness_markdown(doc["harnesses"])]
    if doc.get("plots"):
        out += ["", "## Plots", ""] + [f"![{k}]({v})" for k, v in doc["plots"].items()]
    return "\n".join(out) + "\n"


def write_study_report(study_dir: str | Path, out: str | Path, resamples: int = 10_000, seed: int = 0) -> dict:
    """``<out>/study_report.json``, ``study_report.md`` and ``plots/`` (main table, sweep); returns the doc."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = study_report(study_dir, resamples, seed)
    plots = {}
    if doc["main_rate"] is not None:
        p = plot_main_table(doc["summary"], doc["comparisons"], doc["main_rate"], out / "plots" / "main_table.png")
        if p:
            plots["main_table"] = "plots/main_table.png"
    if plot_sweep(doc["comparisons"], out / "plots" / "sweep.png"):
        plots["sweep"] = "plots/sweep.png"
    doc["plots"] = plots
    write_json(out / "study_report.json", doc)
    write_text(out / "study_report.md", markdown(doc))
    return doc
