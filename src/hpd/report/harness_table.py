"""Figure 4 (right) from a registry study: each variant, by the harness it was trained in, evaluated in each harness.

A registry cell says where its variant was trained and where it was evaluated through its manifest's config: a demo
cell's ``harness`` (absent: ``pi``, as :meth:`hpd.demo.DemoConfig.to_record` leaves Pi out) is both; a transfer
cell (a spec group of ``kind: transfer``, :mod:`hpd.study`) has ``trained_harness``, ``harness`` and the arm that
trained it (``from_arm``); Base is trained nowhere. BFCL cells are left out.

:func:`harness_rows` gives one row per (defect rate, variant, training arm), Base's pooled over the arms, with the
mean ± std over seeds of every metric per harness evaluated in; :func:`harness_markdown` renders them (rows: the
variant and where it was trained; columns: the harness evaluated in, :data:`KEYS` each), and
:func:`harness_table` is both from a registry folder (``results/<study>``): the README's table of Figure 4.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .registry import load_study, variant_rank
from .results import METRIC_KEYS
from .results import mean_std_text
from .runs import mean_std

#: the metrics of each harness's columns
KEYS = ("TS", "F1", "RC")


def cell_place(cell: dict) -> tuple[str | None, str | None, str] | None:
    """``(training arm, trained in, evaluated in)`` of a registry cell (:func:`hpd.report.registry.load_study`);
    None for a cell without the demo's metrics (BFCL). Base: ``(None, None, evaluated in)``."""
    cfg = cell["manifest"].get("config") or {}
    if "TS" not in cell["metrics"] or cfg.get("kind") == "bfcl":
        return None
    evaluated = cfg.get("harness", "pi")
    if cell["variant"] == "Base":
        return None, None, evaluated
    return cfg.get("from_arm", cell["arm"]), cfg.get("trained_harness", evaluated), evaluated


def _row_key(key: tuple) -> tuple:
    rate, variant, arm, trained = key
    return rate, variant_rank(variant), variant, trained != "pi", trained or "", arm or ""


def harness_rows(cells: dict[str, dict]) -> list[dict]:
    """``[{"defect_rate", "variant", "arm", "trained", "evaluated": {harness: {"seeds", "arms", "metrics"}}}]`` in
    table order (module doc); ``metrics``: mean ± std over seeds (:func:`hpd.report.runs.mean_std`)."""
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for c in cells.values():
        place = cell_place(c)
        if place is not None:
            arm, trained, evaluated = place
            groups[(c["defect_rate"], c["variant"], arm, trained)][evaluated].append(c)
    rows = []
    for key in sorted(groups, key=_row_key):
        rate, variant, arm, trained = key
        evaluated = {}
        for h in sorted(groups[key], key=lambda h: (h != "pi", h)):
            cs = sorted(groups[key][h], key=lambda c: (c["seed"], c["arm"]))
            evaluated[h] = {"seeds": sorted({c["seed"] for c in cs}), "arms": sorted({c["arm"] for c in cs}),
                            "metrics": {k: mean_std([float(c["metrics"].get(k) or 0.0) for c in cs])
                                        for k in METRIC_KEYS}}
        rows.append({"defect_rate": rate, "variant": variant, "arm": arm, "trained": trained, "evaluated": evaluated})
    return rows


def harnesses_of(rows: list[dict]) -> list[str]:
    """The harnesses evaluated in, Pi first."""
    return sorted({h for r in rows for h in r["evaluated"]}, key=lambda h: (h != "pi", h))



def harness_markdown(rows: list[dict], keys: tuple[str, ...] = KEYS) -> str:
    """The table of :func:`harness_rows`: a value is the one seed's, else mean ± std over seeds; – where the
    variant was not evaluated in that harness."""
    hs = harnesses_of(rows)
    head = ["defects", "variant", "trained in (arm)", *(f"{h} {k}" for h in hs for k in keys), "seeds"]
    out = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in rows:
        where = "–" if r["trained"] is None else f"{r['trained']} ({r['arm']})"
        vals = []
        for h in hs:
            e = r["evaluated"].get(h)
            vals += [("–" if e is None else mean_std_text(e["metrics"][k])) for k in keys]
        seeds = sorted({s for e in r["evaluated"].values() for s in e["seeds"]})
        out.append(f"| {100 * r['defect_rate']:.0f}% | {r['variant']} | {where} | " + " | ".join(vals)
                   + f" | {','.join(map(str, seeds))} |")
    return "\n".join(out)


def harness_table(study_dir: str | Path, keys: tuple[str, ...] = KEYS) -> str:
    """The markdown table of a registry study folder (``results/<study>``), e.g. for the README; a line saying so
    when it holds no evaluated cell."""
    study_dir = Path(study_dir)
    rows = harness_rows(load_study(study_dir)) if study_dir.is_dir() else []
    if not rows:
        return f"No evaluated cell of the study `{study_dir.name}` is in the registry yet (`{study_dir.as_posix()}/`)."
    return harness_markdown(rows, keys)
