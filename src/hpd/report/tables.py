"""The paper's table layouts over run folders (``hpd report``): markdown, JSON and plots.

Each table (:data:`TABLES`) lists rows (:class:`hpd.report.runs.Row`) under the paper's row heading, with
the metric columns TS, F1, Step-SR, RC, Exact, Action-Acc and n_tasks. Markdown shows percentages with two
decimals, as the paper prints them; JSON keeps fractions in [0, 1] under the metric keys. Tables that
describe training runs add what the training manifest says (``schedule``, ``updates``, ``checkpoint``).

Table 5 (seeds) adds, per group, a ``mean ± std`` row: the mean and the sample standard deviation
(``ddof=1``, :func:`hpd.report.runs.mean_std`, the study's own aggregate) over the group's seeds; a metric
that some seed lacks (``None``) has no aggregate.

Written into ``out`` for table ``N`` named ``key``: ``tableN-key.md``, ``tableN-key.json``,
``plots/tableN-key.png`` (bars per row, :func:`hpd.report.results.plot_metrics`) and, for Table 5,
``plots/table5-seeds-spread.png`` (every seed as a point, the mean as a line, ± std as a band).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpd.runfolder import save_png, write_json, write_text

from .runs import METRIC_KEYS, Row, mean_std


@dataclass(frozen=True)
class TableSpec:
    number: int
    key: str
    title: str
    row_header: str
    info: tuple[str, ...] = ()
    aggregate: bool = False

    @property
    def stem(self) -> str:
        return f"table{self.number}-{self.key}"


TABLES = {t.key: t for t in (
    TableSpec(1, "methods", "Table 1: methods (native evaluation)", "method"),
    TableSpec(2, "components", "Table 2: view components and schedules", "components", ("schedule", "updates")),
    TableSpec(5, "seeds", "Table 5: seeds (mean ± sample std over seeds)", "seed", aggregate=True),
    TableSpec(6, "checkpoints", "Table 6: intermediate checkpoints", "run", ("checkpoint", "updates")),
    TableSpec(7, "weights", "Table 7: T:I:R weights", "weights", ("schedule", "updates")),
    TableSpec(8, "sizes", "Table 8: model sizes", "model"),
)}


def table_spec(name: str) -> TableSpec:
    """A table by key (``seeds``), number (``5``) or ``table5``; ValueError naming the choices."""
    n = name.lower().removeprefix("table")
    for t in TABLES.values():
        if n in (t.key, str(t.number)):
            return t
    raise ValueError(f"unknown table {name!r}; choose from "
                     + ", ".join(f"{t.number} ({t.key})" for t in TABLES.values()))


def aggregate(rows: list[Row]) -> dict:
    """Per metric ``{"mean", "std", "n"}`` over ``rows`` (None when a row lacks the metric)."""
    out = {}
    for k in METRIC_KEYS:
        vals = [r.metrics.get(k) for r in rows]
        out[k] = None if any(v is None for v in vals) else mean_std(vals)
    return out


def groups(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r.group, []).append(r)
    return out


def table_doc(spec: TableSpec, rows: list[Row], problems: list[str]) -> dict:
    """The JSON document of one table (stable keys)."""
    doc = {"table": spec.number, "key": spec.key, "title": spec.title, "row_header": spec.row_header,
           "metric_keys": list(METRIC_KEYS),
           "rows": [{"group": r.group, "row": r.row, **r.metrics, "info": r.info, "folder": r.folder, "kind": r.kind}
                    for r in rows],
           "missing": problems}
    if spec.aggregate:
        doc["aggregate"] = {g: aggregate(rs) for g, rs in groups(rows).items()}
    return doc


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.2f}"


def _pm(a: dict | None) -> str:
    return "–" if a is None else f"{100 * a['mean']:.2f} ± {100 * a['std']:.2f}"


def markdown(spec: TableSpec, doc: dict) -> str:
    """The table as markdown (module doc); missing runs are listed under it, one line each."""
    grouped = any(r["group"] for r in doc["rows"])
    head = (["group"] if grouped else []) + [spec.row_header, *spec.info, *METRIC_KEYS, "n_tasks"]
    lines = [f"## {spec.title}", "", "Metrics in % (two decimals, as in the paper).", "",
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for g in dict.fromkeys(r["group"] for r in doc["rows"]):
        rows = [r for r in doc["rows"] if r["group"] == g]
        for r in rows:
            cells = ([g] if grouped else []) + [r["row"], *(str(r["info"].get(k, "–")) for k in spec.info),
                                                 *(_pct(r[k]) for k in METRIC_KEYS), str(r.get("n_tasks") or "–")]
            lines.append("| " + " | ".join(cells) + " |")
        if spec.aggregate:
            agg = doc["aggregate"][g]
            cells = ([g] if grouped else []) + [f"mean ± std ({len(rows)})", *("" for _ in spec.info),
                                                 *(_pm(agg[k]) for k in METRIC_KEYS), ""]
            lines.append("| " + " | ".join(cells) + " |")
    if doc["missing"]:
        lines += ["", "Missing or incomplete runs:", *(f"- {p}" for p in doc["missing"])]
    return "\n".join(lines) + "\n"


def _label(r: dict) -> str:
    return f"{r['group']} {r['row']}".strip()


def plot_spread(doc: dict, path: Path) -> Path:
    """Table 5's seed spread: one panel per metric; per group every seed as a point, the mean as a line
    and mean ± std as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in METRIC_KEYS if any(a and a.get(k) for a in doc["aggregate"].values())]
    fig, axes = plt.subplots(1, len(keys), figsize=(2.6 * len(keys), 3.2), squeeze=False)
    for ax, k in zip(axes[0], keys):
        for i, (g, agg) in enumerate(doc["aggregate"].items()):
            ys = [r[k] for r in doc["rows"] if r["group"] == g and r[k] is not None]
            ax.plot([i] * len(ys), ys, "o", alpha=0.6)
            if agg[k]:
                m, s = agg[k]["mean"], agg[k]["std"]
                ax.hlines(m, i - 0.3, i + 0.3, color="k")
                ax.fill_between([i - 0.3, i + 0.3], m - s, m + s, alpha=0.2)
        ax.set_xticks(range(len(doc["aggregate"])))
        ax.set_xticklabels(list(doc["aggregate"]), rotation=30, fontsize=7)
        ax.set_title(k)
        ax.grid(axis="y", alpha=0.3)
    return save_png(fig, path)


def write_table(spec: TableSpec, rows: list[Row], problems: list[str], out: Path) -> list[str]:
    """Write one table's markdown, JSON and plots into ``out``; returns the written paths (relative)."""
    from .results import plot_metrics

    out = Path(out)
    doc = table_doc(spec, rows, problems)
    write_text(out / f"{spec.stem}.md", markdown(spec, doc))
    write_json(out / f"{spec.stem}.json", doc)
    written = [f"{spec.stem}.md", f"{spec.stem}.json"]
    bars = {_label(r): {k: r[k] or 0.0 for k in METRIC_KEYS} for r in doc["rows"]}
    if bars:
        plot_metrics(bars, out / "plots" / f"{spec.stem}.png")
        written.append(f"plots/{spec.stem}.png")
    if spec.aggregate and rows:
        plot_spread(doc, out / "plots" / f"{spec.stem}-spread.png")
        written.append(f"plots/{spec.stem}-spread.png")
    return written
