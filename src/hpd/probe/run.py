"""``hpd probe``: Figure 3's diagnostics for several variants over the boundaries of a replay folder.

Every variant (the base model, or the base model + an adapter) scores the same boundaries
(:class:`hpd.probe.scorer.BoundaryScorer`); the run folder ``out`` gets:

- ``rows.jsonl``: one row per (variant, boundary): ``variant``, ``uid``, ``reference`` (``call`` | ``finish``),
  ``p_call``, ``p_finish``, ``entry_log_odds``, ``entropy``, ``geo_mean``, ``log_p_continuation``,
  ``n_continuation``, ``n_prompt``;
- ``probe.json``: the definitions, the opening's token ids, and per variant its adapter, a summary
  (:func:`summarize`) and the KDE curves behind the plots;
- ``plots/control_entry.png`` (KDE of ``entry_log_odds`` = log p_call - log p_finish, at boundaries whose
  reference calls a tool: solid, or finishes: dashed; a log scale, since a base model's ``p_call`` can sit
  at 1e-7 and a trained one's ``p_finish`` as close to 0), ``plots/entropy.png``,
  ``plots/continuation.png``: one curve per variant;
- ``manifest.json`` (:mod:`hpd.runfolder`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hpd.policy.dtype import default_device, resolve_dtype_name
from hpd.runfolder import checksum, finish_manifest, new_manifest, write_json, write_jsonl

from . import measures
from .density import curves, plot_curves
from .scorer import BoundaryScorer, ProbeError, load_variant, reference_kind

DEFINITIONS = {
    "position": "first assistant position: right after the generation prompt of the native context",
    "p_call": "P(<tool_call> opening tokens o_1..o_m | prompt) = prod_i P(o_i | prompt, o_<i)",
    "p_finish": "1 - P(o_1 | prompt): mass of starting the turn with anything but a tool call",
    "entry_log_odds": "log p_call - log p_finish",
    "entropy": "entropy (nats) of the next-token distribution at the first assistant position",
    "geo_mean": "exp(mean_j log P(c_j | prompt, c_<j)) over the rendered reference action c (with <|im_end|>)",
}


@dataclass(frozen=True)
class Variant:
    name: str
    adapter: str | None   # None: the base model alone


def parse_variant(text: str) -> Variant:
    """``NAME=ADAPTER`` (an empty ADAPTER is the base model alone)."""
    name, sep, adapter = text.partition("=")
    if not sep or not name.strip():
        raise ProbeError(f"--variant {text!r}: expected NAME=ADAPTER (NAME= for the base model alone)")
    return Variant(name.strip(), adapter.strip() or None)


def adapter_variant(adapter: str | Path) -> Variant:
    """``--adapter DIR`` as a variant named after its run folder (``runs/hpd/adapter`` -> ``hpd``)."""
    p = Path(adapter)
    return Variant(p.parent.name if p.name in ("adapter", "model") and p.parent.name else p.name, str(p))


def _stats(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "median": statistics.median(values)} if values else \
        {"mean": None, "median": None}


def summarize(rows: list[dict]) -> dict:
    """Per-variant summary: mean and median of each measure; mean ``p_call`` where the reference calls and
    mean ``p_finish`` where it finishes; ``entry_accuracy`` = share of boundaries where the larger of
    ``p_call`` / ``p_finish`` is the reference's own choice."""
    calls = [r for r in rows if r["reference"] == "call"]
    fins = [r for r in rows if r["reference"] == "finish"]
    hits = sum((r["p_call"] > r["p_finish"]) == (r["reference"] == "call") for r in rows)
    return {"n_boundaries": len(rows), "n_call": len(calls), "n_finish": len(fins),
            **{k: _stats([r[k] for r in rows if r[k] is not None]) for k in measures.MEASURES},
            "p_call_at_call": _stats([r["p_call"] for r in calls])["mean"],
            "p_finish_at_finish": _stats([r["p_finish"] for r in fins])["mean"],
            "entry_accuracy": hits / len(rows) if rows else None}


def probe_variant(variant: Variant, boundaries: list, model_dir: str | Path, *, device: str | None, dtype: str,
                  enable_thinking: bool, log: Callable[[str], None]) -> tuple[list[dict], list[int]]:
    model, tok = load_variant(model_dir, variant.adapter, device=device, dtype=dtype)
    scorer = BoundaryScorer(model, tok, enable_thinking=enable_thinking)
    rows = []
    for i, b in enumerate(boundaries, 1):
        rows.append({"variant": variant.name, "uid": b.uid, "reference": reference_kind(b.reference),
                     **scorer.measure(b)})
        if i % 50 == 0 or i == len(boundaries):
            log(f"{variant.name}: {i}/{len(boundaries)} boundaries")
    return rows, scorer.opening


def kde_curves(rows_by_variant: dict[str, list[dict]]) -> dict:
    """The three plots' curves (:func:`hpd.probe.density.curves`)."""
    side = {"call": "ref calls", "finish": "ref finishes"}
    entry = {f"{v} ({side[k]})": [r["entry_log_odds"] for r in rows
                                   if r["reference"] == k and r["entry_log_odds"] is not None]
             for v, rows in rows_by_variant.items() for k in side}
    return {"control_entry": curves(entry),
            "entropy": curves({v: [r["entropy"] for r in rows] for v, rows in rows_by_variant.items()}, 0.0, None),
            "continuation": curves({v: [r["geo_mean"] for r in rows] for v, rows in rows_by_variant.items()}, 0.0, 1.0)}


def write_plots(kde: dict, out: Path) -> list[str]:
    styles = {name: "--" if name.endswith("finishes)") else "-" for name in kde["control_entry"]}
    plot_curves(kde["control_entry"], out / "plots" / "control_entry.png", xlabel="log p_call - log p_finish (control entry)",
                title="Control entry", styles=styles)
    plot_curves(kde["entropy"], out / "plots" / "entropy.png", xlabel="entropy of the first action token (nats)",
                title="First-token entropy")
    plot_curves(kde["continuation"], out / "plots" / "continuation.png",
                xlabel="geometric-mean probability of the reference continuation", title="Reference continuation")
    return ["plots/control_entry.png", "plots/entropy.png", "plots/continuation.png"]


def select_boundaries(boundaries_dir: str | Path, limit: int | None) -> list:
    from hpd.boundary import StoreError, open_run

    try:
        bds = open_run(boundaries_dir).boundaries()
    except StoreError as e:
        raise ProbeError(str(e)) from None
    return bds[:limit] if limit is not None else bds


def run_probe(boundaries_dir: str | Path, model_dir: str | Path, variants: list[Variant], out: str | Path, *,
              limit: int | None = None, device: str | None = None, dtype: str = "auto",
              enable_thinking: bool = False, log: Callable[[str], None] = print) -> dict:
    """Score every variant on the selected boundaries and write the run folder (module doc); returns
    the ``probe.json`` document."""
    names = [v.name for v in variants]
    if not variants or len(set(names)) != len(names):
        raise ProbeError(f"variant names must be given and unique, got {names}")
    bds = select_boundaries(boundaries_dir, limit)
    if not bds:
        raise ProbeError(f"{boundaries_dir}: no boundaries selected")
    out = Path(out)
    cfg = {"model": str(model_dir), "variants": {v.name: v.adapter for v in variants}, "limit": limit,
           "dtype": dtype, "enable_thinking": enable_thinking}
    shards = {"path": str(boundaries_dir), "sha256": checksum(Path(boundaries_dir) / "boundaries", "*.jsonl")}
    man = new_manifest("hpd probe", cfg, inputs={"boundaries": shards, "model": model_dir}, n_boundaries=len(bds),
                       dtype=resolve_dtype_name(dtype, device or default_device()))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "manifest.json", man)
    by_variant, opening = {}, []
    for v in variants:
        by_variant[v.name], opening = probe_variant(v, bds, model_dir, device=device, dtype=dtype,
                                                    enable_thinking=enable_thinking, log=log)
    kde = kde_curves(by_variant)
    doc = {"definitions": DEFINITIONS, "opening": {"text": measures.TOOL_CALL_OPEN, "ids": opening},
           "n_boundaries": len(bds),
           "variants": {v.name: {"adapter": v.adapter, "summary": summarize(by_variant[v.name])}
                        for v in variants},
           "kde": kde}
    write_jsonl(out / "rows.jsonl", [r for rows in by_variant.values() for r in rows])
    write_json(out / "probe.json", doc)
    plots = write_plots(kde, out)
    write_json(out / "manifest.json", finish_manifest(man, outputs=["probe.json", "rows.jsonl", *plots]))
    return doc
