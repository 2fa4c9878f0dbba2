"""Results of a run as a table, a bar plot and a self-contained HTML report.

``write_results_report(out, results)`` reads ``results["variants"]`` (variant -> metric dict with the keys
``TS F1 Step-SR RC Exact Action-Acc``) and writes ``results.md``, ``plots/metrics.png`` and ``report.html``.
The HTML embeds the plot (base64) and links the boundary inspector (``boundaries/inspector.html``) and the
teacher's coverage plot (``teach/coverage.png``) when those exist beside it.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

METRIC_KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")


def markdown_table(variants: dict[str, dict], keys=METRIC_KEYS) -> str:
    lines = ["| variant | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for v, m in variants.items():
        lines.append(f"| {v} | " + " | ".join(f"{float(m[k]):.3f}" for k in keys) + " |")
    return "\n".join(lines) + "\n"


def plot_metrics(variants: dict[str, dict], path: Path, keys=METRIC_KEYS) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(variants)
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(9, 3.8))
    for i, v in enumerate(names):
        xs = [j + i * width for j in range(len(keys))]
        ax.bar(xs, [float(variants[v][k]) for k in keys], width, label=v)
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(keys))])
    ax.set_xticklabels(keys)
    ax.set_ylim(0, 1)
    ax.set_ylabel("fraction")
    ax.legend(ncol=len(names), fontsize=8, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_results_report(out: Path, results: dict) -> Path:
    out = Path(out)
    variants = results["variants"]
    (out / "results.md").write_text(markdown_table(variants))
    png = plot_metrics(variants, out / "plots" / "metrics.png")
    img = base64.b64encode(png.read_bytes()).decode()
    rows = "".join(
        "<tr><th>" + html.escape(v) + "</th>" + "".join(f"<td>{float(m[k]):.3f}</td>" for k in METRIC_KEYS)
        + f"<td>{int(m.get('n_tasks', 0))}</td><td>{int(m.get('n_boundaries', 0))}</td></tr>"
        for v, m in variants.items())
    links = []
    if (out / "boundaries" / "inspector.html").is_file():
        links.append('<li><a href="boundaries/inspector.html">Boundary inspector</a> (native context, control '
                     "document, reference action per boundary)</li>")
    if (out / "teach" / "coverage.png").is_file():
        links.append('<li><a href="teach/coverage.png">Teacher coverage by attempt</a> '
                     '(<a href="teach/diagnostics.json">diagnostics.json</a>)</li>')
    priv = html.escape(str(results.get("document_privilege", "")))
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hpd results</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:960px}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}}
th:first-child{{text-align:left}}</style></head>
<body><h1>hpd results</h1>
<p>Native evaluation inside the harness on held-out tasks (no control document at test time).
Teacher document privilege: <code>{priv}</code>. Seed: <code>{html.escape(str(results.get("seed")))}</code>.</p>
<table id="results"><tr><th>variant</th>{"".join(f"<th>{k}</th>" for k in METRIC_KEYS)}<th>n_tasks</th><th>n_boundaries</th></tr>
{rows}</table>
<p><img alt="metrics" src="data:image/png;base64,{img}" style="max-width:100%"></p>
<ul>{"".join(links)}</ul>
</body></html>
"""
    path = out / "report.html"
    path.write_text(page)
    return path
