"""``results.md``, the console table and ``plots/bfcl.png`` (per-category accuracy and BFCL's aggregates)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hpd.runfolder import write_text

AGG_LABELS = {"overall": "Overall (BFCL weights; not-run categories count 0)", "non_live": "Non-live",
              "live": "Live", "multi_turn": "Multi-turn", "agentic": "Agentic (web search, memory: never run here, 0)",
              "relevance": "Relevance", "irrelevance": "Irrelevance"}


def _pct(x: float | None) -> str:
    return "N/A" if x is None else f"{100 * x:.2f}%"


def category_lines(metrics: dict) -> list[str]:
    rows = [f"| {cat} | {_pct(s['accuracy'])} | {s['correct']}/{s['total']} | "
            f"{s['reply_issues']['no_call']} | {s['reply_issues']['malformed_call']} | "
            f"{', '.join(f'{k} {v}' for k, v in s['errors'].items()) or '-'} |"
            for cat, s in metrics["categories"].items()]
    return ["| category | accuracy | correct | no call | malformed call | failures by BFCL error type |",
            "|---|---|---|---|---|---|", *rows, "",
            "*no call*: single-turn entries answered in text (right in irrelevance); *malformed call*: entries with "
            "a `<tool_call>` hpd's parser could not read (a failure, the reason is in entries.jsonl)."]


def markdown(metrics: dict) -> str:
    """The results page: per-category table, BFCL's aggregates, the skipped categories with their reasons."""
    sample = metrics["sample"]
    scope = (f"a seeded sample of {sample['n']} entries per category (seed {sample['seed']})" if sample["n"]
             else "every entry of each category")
    lines = [f"# BFCL v4: {metrics.get('model')}", "",
             f"bfcl-eval {metrics['bfcl_eval']}, backend {metrics.get('backend')}, adapter {metrics.get('adapter')}; "
             f"{metrics['n_entries']} entries: {scope}. Scored with bfcl-eval's own checkers; model-produced calls "
             f"ran in the sandbox ({metrics['isolation']['mode']}).", "", "## Per category", "",
             *category_lines(metrics), "", "## BFCL's aggregates", "", "| aggregate | value |", "|---|---|",
             *(f"| {AGG_LABELS[k]} | {_pct(v)} |" for k, v in metrics["aggregates"].items()), ""]
    if metrics["skipped"]:
        lines += ["## Not run", "", *(f"- **{c}**: {r}" for c, r in metrics["skipped"].items()), ""]
    cc = metrics.get("crosscheck")
    if cc is not None:
        lines += [f"Cross-check with bfcl-eval's own evaluation: {crosscheck_line(cc)} (crosscheck.json).", ""]
    return "\n".join(lines)


def crosscheck_line(cc: dict) -> str:
    if cc.get("error"):
        return f"it failed: {cc['error']}"
    return "every number matches" if cc["match"] else f"MISMATCH, {cc['n_differences']} differences"


def console(metrics: dict) -> str:
    """The table ``hpd bfcl`` prints."""
    w = max([len(c) for c in metrics["categories"]] + [len("Overall"), 12])
    lines = [f"{'category':<{w}}  {'accuracy':>9}  {'correct':>9}  {'no call':>7}  {'malformed':>9}"]
    for cat, s in metrics["categories"].items():
        r = s["reply_issues"]
        lines.append(f"{cat:<{w}}  {_pct(s['accuracy']):>9}  {s['correct']:>4}/{s['total']:<4}  {r['no_call']:>7}  "
                     f"{r['malformed_call']:>9}")
    lines.append("BFCL aggregates: " + ", ".join(f"{k} {_pct(v)}" for k, v in metrics["aggregates"].items()))
    for cat, reason in metrics["skipped"].items():
        lines.append(f"skipped {cat}: {reason}")
    if metrics.get("crosscheck") is not None:
        lines.append(f"cross-check with bfcl-eval's own evaluation: {crosscheck_line(metrics['crosscheck'])}")
    return "\n".join(lines)


def plot(metrics: dict, path: Path) -> Path:
    """Horizontal bars: each category's accuracy, then BFCL's aggregates (N/A ones left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = list(metrics["categories"].items())
    aggs = [(k, v) for k, v in metrics["aggregates"].items() if v is not None]
    short = {"overall": "Overall, BFCL weights", "agentic": "Agentic, not run: 0"}
    labels = [f"{c} (n={s['total']})" for c, s in cats] + \
             [f"[{short.get(k, AGG_LABELS[k])}]" for k, _ in aggs]
    values = [s["accuracy"] for _, s in cats] + [v for _, v in aggs]
    colors = ["tab:blue"] * len(cats) + ["tab:orange"] * len(aggs)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(labels) + 1.2))
    ax.barh(range(len(labels)), values, color=colors)
    for i, v in enumerate(values):
        ax.text(min(v, 1.0) + 0.01, i, f"{100 * v:.1f}%", va="center", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("accuracy")
    ax.set_title(f"BFCL v4 ({metrics['n_entries']} entries): categories (blue), BFCL aggregates (orange)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".png")
    os.close(fd)
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def write_report(out: Path, metrics: dict) -> list[str]:
    """``results.md`` and ``plots/bfcl.png``; returns their names relative to ``out``."""
    write_text(Path(out) / "results.md", markdown(metrics) + "\n")
    written = ["results.md"]
    if metrics["categories"]:
        plot(metrics, Path(out) / "plots" / "bfcl.png")
        written.append("plots/bfcl.png")
    return written
