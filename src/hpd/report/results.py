"""Results of a run as a table, plots and a self-contained HTML report.

``write_results_report(out, results, eval_dirs)`` reads a demo cell's ``results.json`` document
(``variants``: variant -> metric dict with the keys ``TS F1 Step-SR RC Exact Action-Acc``; ``teacher``,
``teacher_choice``, ``defects``, ``timings``, ``estimate``, ``committed``) and writes ``results.md``,
``plots/metrics.png`` and ``report.html``: the table, the teacher's choice and its Table 3 figures (acceptance,
coverage by attempt, fallbacks, rejection reasons), the defect accounting, the time of every stage beside its
estimate (:mod:`hpd.demo_estimate`), three held-out transcripts per variant (the same tasks for every variant)
and the study's committed results (:mod:`hpd.report.committed`), dated, with their commits. Images are
embedded (base64), so the page stands alone. ``write_study_report`` does the same for several seeds and
defect rates (:mod:`hpd.study`): mean +- std tables and the defect sweep plot.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from hpd.harness.jsvalues import js_stringify

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



_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}
th:first-child,td.l{text-align:left}.ep{border:1px solid #ddd;margin:.6em 0;padding:.4em .8em}
.msg{margin:.25em 0;white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:12px}
.user{color:#024}.assistant{color:#131}.tool{color:#555}.err{color:#a00}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:.6em}"""


def _e(x) -> str:
    return html.escape(str(x))


def _img(path: Path) -> str:
    if not path.is_file():
        return ""
    return f'<img alt="{_e(path.name)}" src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}" ' \
           'style="max-width:100%">'


def _kv_table(rows: list[tuple], head: tuple, table_id: str = "") -> str:
    tid = f' id="{table_id}"' if table_id else ""
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="l">{_e(c)}</td>' if i == 0 else f"<td>{_e(c)}</td>"
                                     for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table{tid}><tr>{th}</tr>{body}</table>"


def metrics_table(variants: dict[str, dict]) -> str:
    rows = [(v, *(f"{float(m[k]):.3f}" for k in METRIC_KEYS), int(m.get("n_tasks", 0)), int(m.get("n_boundaries", 0)))
            for v, m in variants.items()]
    return _kv_table(rows, ("variant", *METRIC_KEYS, "n_tasks", "n_boundaries"), "results")


def teacher_section(results: dict) -> str:
    diag, choice = results.get("teacher") or {}, results.get("teacher_choice")
    if not diag:
        return "<h2>Teacher</h2><p>No teacher stage in this run.</p>"
    parts = [f"<h2>Teacher</h2><p>Teacher: <code>{_e(diag.get('teacher'))}</code>; document privilege "
             f"<code>{_e(results.get('document_privilege'))}</code>; K = {_e(diag.get('candidates_per_attempt'))}.</p>"]
    if choice:
        rows = [(n, f"{c['first_attempt_acceptance']:.3f}", f"{c['candidate_acceptance']:.3f}", c["n_boundaries"],
                 "chosen" if n == choice["chosen"] else "") for n, c in choice["candidates"].items()]
        parts.append(f"<p>Chosen by {_e(choice['rule'])}:</p>" + _kv_table(
            rows, ("candidate", "first-attempt acceptance", "candidate acceptance", "probe boundaries", ""),
            "teacher-choice"))
    cov = diag.get("coverage_by_attempt") or []
    parts.append("<p>Coverage by attempt (share of train boundaries with a verified proposal):</p>" + _kv_table(
        [(f"attempt {i}", f"{c:.3f}") for i, c in enumerate(cov, 1)], ("attempt", "coverage"), "coverage"))
    parts.append(f"<p>Targets: {diag.get('n_teacher', 0)} verified teacher actions, {diag.get('n_fallback', 0)} "
                 f"reference fallbacks, of {diag.get('n_boundaries', 0)} boundaries.</p>")
    parts.append("<p>Table 3 (the teacher's diagnostics on the train boundaries):</p>"
                 + _kv_table(teacher_figures(diag), ("figure", "value"), "table3"))
    reasons = diag.get("rejection_reasons") or {}
    if reasons:
        parts.append("<p>Rejection reasons (first reason per rejected candidate; every reason counted):</p>" + _kv_table(
            [(k, v, (diag.get("rejection_reasons_all") or {}).get(k, v)) for k, v in reasons.items()],
            ("reason", "first", "all"), "rejections"))
    return "".join(parts)


def teacher_figures(diag: dict) -> list[tuple[str, str]]:
    """Table 3's figures of a teach run's diagnostics (:mod:`hpd.teacher.diagnostics`) as (figure, value) rows."""
    n = diag.get("n_boundaries", 0)
    full = diag.get("attempts_to_full_coverage")
    rows = [("boundaries", str(n)),
            ("candidates per attempt (K)", str(diag.get("candidates_per_attempt", ""))),
            ("first-attempt acceptance", f"{float(diag.get('first_attempt_acceptance') or 0):.3f}"),
            ("candidate acceptance", f"{float(diag.get('candidate_acceptance') or 0):.3f}"),
            ("mean attempts", f"{float(diag.get('mean_attempts') or 0):.2f}"),
            ("attempts to full coverage", str(full) if full else f"not reached in {diag.get('max_attempts', '?')}")]
    rows += [(f"coverage by attempt {i}", f"{float(c):.3f}") for i, c in enumerate(diag.get("coverage_by_attempt") or [], 1)]
    rows += [("targets: verified teacher actions", str(diag.get("n_teacher", 0))),
             ("targets: reference fallbacks", str(diag.get("n_fallback", 0))),
             ("targets: dropped", str(diag.get("n_dropped", 0)))]
    if "targets_equal_reference" in diag:
        rows.append(("targets equal to the reference", str(diag["targets_equal_reference"])))
    return rows


def defects_section(d: dict | None) -> str:
    if not d:
        return ""
    per = d.get("per_kind") or {}
    rows = [(k, n, per.get(k, {}).get("replaced", ""), per.get(k, {}).get("fell_back", ""))
            for k, n in sorted((d.get("by_kind") or {}).items())]
    rows.append(("all", d.get("n_defective", 0), d.get("replaced", ""), d.get("fell_back", "")))
    return (f"<h2>Defective references</h2><p>(a) SFT trained on {d.get('n_defective', 0)} defective reference "
            f"actions of {d.get('n_boundaries', 0)} train boundaries ({100 * float(d.get('share') or 0):.1f}%). "
            "(b) The teacher replaced them with verified actions or fell back to the reference. (c) Each "
            "variant's RC and TS on the clean held-out tasks are in the table above.</p>"
            + _kv_table(rows, ("kind", "(a) in SFT data", "(b) replaced", "(b) fell back"), "defects"))


def timings_section(t: dict | None, resumed: list | None = None, estimate: dict | None = None) -> str:
    """Seconds per stage; a stage found finished by a resumed run shows the time it took when it ran. With the
    demo's ``estimate`` (``results.json["estimate"]``: ``stages`` {stage: seconds}), the estimate beside it."""
    if not t:
        return ""
    resumed = set(resumed or ())
    est = (estimate or {}).get("stages") or {}
    if not est:
        rows = [(k + (" (earlier run)" if k in resumed else ""), f"{v:.0f}") for k, v in t.items()]
        rows.append(("total", f"{sum(t.values()):.0f}"))
        return "<h2>Time by stage</h2>" + _kv_table(rows, ("stage", "seconds"), "timings")
    rows = stage_table(t, resumed, est)
    cal = estimate.get("calibration") or {}
    note = (f"<p>Estimate from the calibration before the first stage: {cal.get('train_tokens_per_s', 0):,.0f} "
            f"train tokens/s, {cal.get('gen_tokens_per_s', 0):,.0f} generated tokens/s "
            "(hpd.demo_estimate).</p>") if cal else ""
    return "<h2>Time by stage</h2>" + note + _kv_table(rows[1:], ("stage", "seconds", "estimate (s)"), "timings")


def stage_table(timings: dict[str, float], resumed=(), est: dict | None = None) -> list[list[str]]:
    """Rows ``[stage, seconds, estimate]`` (header first, total last) of a demo's stages: the measured seconds,
    or ``resumed (took N s when it ran)`` for a stage found finished; the estimate made before it ran beside it
    (:mod:`hpd.demo_estimate`; ``-`` when none). The total counts what ran in this run, and the estimates of
    those stages."""
    resumed, est = set(resumed), est or {}
    rows = [["stage", "seconds", "estimate"]]
    for name in list(timings) + [s for s in est if s not in timings]:
        t = timings.get(name)
        took = "not run" if t is None else f"resumed (took {t:.1f} s when it ran)" if name in resumed else f"{t:.1f}"
        rows.append([name, took, "-" if est.get(name) is None else f"{est[name]:.1f}"])
    ran = [k for k in timings if k not in resumed]
    rows.append(["total (this run)", f"{sum(timings[k] for k in ran):.1f}",
                 f"{sum(est[k] for k in ran if est.get(k) is not None):.1f}" if est else "-"])
    return rows


def text_table(rows: list[list[str]]) -> list[str]:
    """Aligned text lines of a table (first column left, the others right)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]


def mean_std_text(m: dict) -> str:
    """``mean ± std`` of a :func:`hpd.report.runs.mean_std` aggregate to 3 decimals; the value alone for one seed (whose spread is
    unknown, not 0)."""
    return f"{m['mean']:.3f}" if m.get("n", 2) == 1 else f"{m['mean']:.3f} ± {m['std']:.3f}"


def _ms(m: dict) -> str:
    return mean_std_text(m)


def _short(commit: str | None) -> str:
    return (commit or "?")[:10]


def committed_lines(doc: dict | None) -> list[tuple[str, list[tuple], str]]:
    """Per committed study (:mod:`hpd.report.committed`): (heading, main-table rows, provenance line)."""
    out = []
    for st in (doc or {}).get("studies") or []:
        if st.get("error"):
            out.append((f"{st['study']}", [], f"unreadable: {st['error']}"))
            continue
        rows = [(r["arm"] + (f" ({r['label']})" if r.get("label") and r["label"] != r["arm"] else ""), r["variant"],
                 len(r["seeds"]), *(_ms(r["metrics"][k]) for k in METRIC_KEYS)) for r in st["rows"]]
        rate = st.get("main_rate")
        commits = ", ".join(_short(c) for c in st.get("commits") or []) or "unknown"
        when = (st.get("first") or "?")[:10] + ("" if (st.get("last") or "")[:10] == (st.get("first") or "")[:10]
                                                 else f" to {(st.get('last') or '?')[:10]}")
        head = f"{st['study']}" + ("" if rate is None else f", defects {100 * float(rate):.0f}%")
        prov = (f"{st.get('n_cells', 0)} cells in {st.get('folder')}, run {when} at commit {commits}"
                + (" (with uncommitted changes)" if st.get("dirty") else "") + "; mean ± std over seeds.")
        out.append((head, rows, prov))
    return out


def _no_committed(doc: dict) -> str:
    return f"no committed study results in {Path(doc.get('root') or 'results').name}/"


def committed_section(doc: dict | None) -> str:
    """The study's committed results (``results.json["committed"]``), dated, with their commits; nothing for a
    document without that key, one line when the registry root holds no study."""
    if doc is None:
        return ""
    studies = committed_lines(doc)
    if not studies:
        return f"<h2>Committed study results</h2><p>{_e(_no_committed(doc))}</p>"
    parts = ["<h2>Committed study results</h2><p>From the repository's results registry, not from this run: "
             f"<code>{_e(doc.get('root'))}</code>.</p>"]
    for head, rows, prov in studies:
        parts.append(f"<h3>{_e(head)}</h3><p>{_e(prov)}</p>")
        if rows:
            parts.append(_kv_table(rows, ("arm", "variant", "seeds", *METRIC_KEYS), "committed"))
    return "".join(parts)


def _md_table(head: tuple, rows: list[tuple]) -> list[str]:
    return ["| " + " | ".join(str(h) for h in head) + " |", "|---" * len(head) + "|"] + [
        "| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]


def _md_text(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text[:limit] + (" ..." if len(text) > limit else "")


def results_markdown(results: dict, eval_dirs: dict[str, Path] | None = None, n_transcripts: int = 3) -> str:
    """``results.md``: the table, the teacher's Table 3, the defect accounting, the time by stage (with the
    estimate), ``n_transcripts`` held-out transcripts per variant and the committed study results."""
    out = ["# hpd demo results", "", markdown_table(results["variants"]).rstrip("\n")]
    diag = results.get("teacher") or {}
    if diag:
        out += ["", f"## Teacher (Table 3): {diag.get('teacher')}", ""] + _md_table(("figure", "value"),
                                                                                    teacher_figures(diag))
        if diag.get("rejection_reasons"):
            out += ["", "Rejection reasons (first reason per rejected candidate):", ""] + _md_table(
                ("reason", "first", "all"), [(k, v, (diag.get("rejection_reasons_all") or {}).get(k, v))
                                             for k, v in diag["rejection_reasons"].items()])
    d = results.get("defects") or {}
    if d:
        per = d.get("per_kind") or {}
        rows = [(k, n, per.get(k, {}).get("replaced", "-"), per.get(k, {}).get("fell_back", "-"))
                for k, n in sorted((d.get("by_kind") or {}).items())]
        rows.append(("all", d.get("n_defective", 0), d.get("replaced", "-"), d.get("fell_back", "-")))
        out += ["", "## Defective references", "",
                f"{d.get('n_defective', 0)} of {d.get('n_boundaries', 0)} train boundaries "
                f"({100 * float(d.get('share') or 0):.1f}%) had a defective reference (SFT trains on them); what "
                "the teacher did with them:", ""] + _md_table(("kind", "in SFT data", "replaced by the teacher",
                                                                "fell back to the reference"), rows)
    t = results.get("timings") or {}
    if t:
        est = (results.get("estimate") or {}).get("stages") or {}
        rows = stage_table(t, results.get("resumed_stages") or (), est)
        out += ["", "## Time by stage", ""] + _md_table(tuple(rows[0]), [tuple(r) for r in rows[1:]])
    out += _md_transcripts(eval_dirs, n_transcripts)
    if "committed" in results:
        out += ["", "## Committed study results", ""]
        studies = committed_lines(results["committed"])
        if not studies:
            out.append(_no_committed(results["committed"]))
        for head, rows, prov in studies:
            out += [f"### {head}", "", prov, ""]
            if rows:
                out += _md_table(("arm", "variant", "seeds", *METRIC_KEYS), rows) + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def _md_transcripts(eval_dirs: dict[str, Path] | None, n: int) -> list[str]:
    from hpd.eval.variant import transcripts

    if not eval_dirs:
        return []
    uids = [r["uid"] for r in transcripts(next(iter(eval_dirs.values())), n=n)]
    if not uids:
        return []
    rows = {v: {r["uid"]: r for r in transcripts(d, uids)} for v, d in eval_dirs.items()}
    out = ["", f"## Held-out transcripts ({len(uids)} tasks, every variant)"]
    for uid in uids:
        out += ["", f"### {uid}"]
        for v in eval_dirs:
            row = rows[v].get(uid)
            if row is None:
                continue
            out += ["", f"**{v}**: TS {row.get('TS', 0):.0f}, Step-SR {row.get('Step-SR', 0):.2f}, "
                        f"F1 {row.get('F1', 0):.2f}, turns {row.get('turns')}, end {row.get('end_reason')}", ""]
            out += [f"- {m.get('role')}{' (error)' if m.get('isError') else ''}: "
                    f"{_md_text(_content_text(m)) or '(empty)'}" for m in row.get("messages") or []]
    return out


def _content_text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    out = []
    for b in c or []:
        if b.get("type") == "text":
            out.append(b.get("text", ""))
        elif b.get("type") == "toolCall":
            out.append(f"call {b.get('name')}({js_stringify(b.get('arguments'))})")
    return "\n".join(out)


def _episode_html(row: dict) -> str:
    msgs = []
    for m in row.get("messages") or []:
        role = m.get("role")
        cls = {"user": "user", "assistant": "assistant", "toolResult": "tool"}.get(role, "tool")
        text = _content_text(m)
        if role == "toolResult":
            text = text[:300] + (" ..." if len(text) > 300 else "")
            cls += " err" if m.get("isError") else ""
        msgs.append(f'<div class="msg {cls}"><b>{_e(role)}</b>: {_e(text)}</div>')
    head = (f"TS {row.get('TS', 0):.0f} / Step-SR {row.get('Step-SR', 0):.2f} / F1 {row.get('F1', 0):.2f} / "
            f"turns {row.get('turns')} / end {row.get('end_reason')}")
    return f'<div class="ep"><div>{_e(head)}</div>{"".join(msgs)}</div>'


def transcripts_section(eval_dirs: dict[str, Path] | None, n: int = 3) -> str:
    """``n`` held-out episodes per variant, the same tasks for every variant, side by side."""
    from hpd.eval.variant import transcripts

    if not eval_dirs:
        return ""
    first = next(iter(eval_dirs.values()))
    uids = [r["uid"] for r in transcripts(first, n=n)]
    if not uids:
        return ""
    rows = {v: {r["uid"]: r for r in transcripts(d, uids)} for v, d in eval_dirs.items()}   # one read per folder
    blocks = []
    for uid in uids:
        cols = "".join(f"<div><h4>{_e(v)}</h4>{_episode_html(rows[v][uid]) if uid in rows[v] else ''}</div>"
                       for v in eval_dirs)
        blocks.append(f'<h3>{_e(uid)}</h3><div class="cols">{cols}</div>')
    return "<h2>Held-out transcripts</h2>" + "".join(blocks)


def _page(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}</style></head>\n<body><h1>{_e(title)}</h1>{body}</body></html>\n")


def write_results_report(out: Path, results: dict, eval_dirs: dict[str, Path] | None = None) -> Path:
    out = Path(out)
    variants = results["variants"]
    (out / "results.md").write_text(results_markdown(results, eval_dirs))
    png = plot_metrics(variants, out / "plots" / "metrics.png")
    links = []
    if (out / "boundaries" / "inspector.html").is_file():
        links.append('<li><a href="boundaries/inspector.html">Boundary inspector</a> (native context, control '
                     "document, reference action per boundary)</li>")
    model = (results.get("model") or {}).get("name", "")
    body = (f"<p>Native evaluation inside the harness on held-out tasks (no control document at test time). "
            f"Model: <code>{_e(model)}</code>. Seed: <code>{_e(results.get('seed'))}</code>.</p>"
            + metrics_table(variants) + f"<p>{_img(png)}</p>" + teacher_section(results)
            + _img(out / "teach" / "coverage.png") + defects_section(results.get("defects"))
            + timings_section(results.get("timings"), results.get("resumed_stages"), results.get("estimate"))
            + transcripts_section(eval_dirs) + committed_section(results.get("committed"))
            + (f"<ul>{''.join(links)}</ul>" if links else ""))
    f = out / "report.html"
    f.write_text(_page("hpd results", body))
    return f


def study_table(summary: dict) -> str:
    rows = []
    for rate, agg in summary.items():
        for v, m in agg.items():
            rows.append((f"{100 * float(rate):.0f}%", v, *(mean_std_text(m[k]) for k in METRIC_KEYS)))
    return _kv_table(rows, ("defects", "variant", *METRIC_KEYS), "study")


def write_study_report(root: Path, doc: dict, plot: Path | None) -> Path:
    """``<root>/report.html`` and ``<root>/study.md`` of a study (:mod:`hpd.study`)."""
    root = Path(root)
    cells = "".join(f'<li><a href="{_e(c["folder"])}/report.html">defects {100 * c["defect_rate"]:.0f}%, seed '
                    f'{c["seed"]}</a> ({_e(c.get("teacher_choice") or "")})</li>' for c in doc["cells"])
    body = (f"<p>Seeds {_e(doc['seeds'])}, defect rates {_e(doc['defect_rates'])}: mean ± sample std over seeds "
            "of the native held-out metrics.</p>" + study_table(doc["summary"])
            + (f"<h2>Defect sweep</h2><p>{_img(plot)}</p>" if plot else "") + f"<h2>Cells</h2><ul>{cells}</ul>")
    f = root / "report.html"
    f.write_text(_page("hpd study", body))
    lines = ["| defects | variant | " + " | ".join(METRIC_KEYS) + " |", "|---" * (len(METRIC_KEYS) + 2) + "|"]
    for rate, agg in doc["summary"].items():
        for v, m in agg.items():
            lines.append(f"| {100 * float(rate):.0f}% | {v} | "
                         + " | ".join(mean_std_text(m[k]) for k in METRIC_KEYS) + " |")
    (root / "study.md").write_text("\n".join(lines) + "\n")
    return f
