"""``hpd data stats``: counts of a loaded data folder (compare with docs/traject-bench.md sec 2.3, 3, 5, 9.3).

* ``tasks``: per domain x kind x difficulty;
* ``per_domain``: tasks, mean steps for parallel / sequential tasks, sequential step success % (status
  ``success`` / all sequential steps), D2 boundaries, scorable steps;
* ``boundaries_D2`` = 2 per parallel task + (steps + 1) per sequential task;
* ``scorable``: scorable / all gold steps, per kind; tasks whose steps are all scorable;
* ``catalog``: entries per tools file, distinct names, and coverage of gold tool names (in catalog by
  canonical name, by alias or path template, not in catalog; steps and successful steps not in catalog);
  tasks whose gold tools are all in their own domain's tools file.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from hpd.bench.canon import canon_name


def _r(x: float, n: int = 4) -> float:
    return round(x, n)


def _per_domain(tasks) -> tuple[dict, dict]:
    """(task count grid domain -> kind/difficulty, per-domain step and boundary figures)."""
    grid: dict[str, dict[str, int]] = defaultdict(dict)
    dom: dict[str, dict] = {}
    for t in tasks:
        cell = f"{t.kind}/{t.difficulty}"
        grid[t.domain][cell] = grid[t.domain].get(cell, 0) + 1
        d = dom.setdefault(t.domain, {"tasks": 0, "par_tasks": 0, "par_steps": 0, "seq_tasks": 0, "seq_steps": 0,
                                      "seq_success": 0, "boundaries_D2": 0, "steps": 0, "scorable_steps": 0})
        d["tasks"] += 1
        d["boundaries_D2"] += t.n_boundaries
        d["steps"] += len(t.steps)
        d["scorable_steps"] += len(t.scorable_steps)
        if t.kind == "parallel":
            d["par_tasks"] += 1
            d["par_steps"] += len(t.steps)
        else:
            d["seq_tasks"] += 1
            d["seq_steps"] += len(t.steps)
            d["seq_success"] += sum(1 for s in t.steps if s.status == "success")
    per_domain = {}
    for name, d in sorted(dom.items()):
        per_domain[name] = {
            "tasks": d["tasks"],
            "mean_steps_parallel": _r(d["par_steps"] / d["par_tasks"], 2) if d["par_tasks"] else None,
            "mean_steps_sequential": _r(d["seq_steps"] / d["seq_tasks"], 2) if d["seq_tasks"] else None,
            "seq_step_success_pct": _r(100 * d["seq_success"] / d["seq_steps"], 1) if d["seq_steps"] else None,
            "boundaries_D2": d["boundaries_D2"],
            "steps": d["steps"],
            "scorable_steps": d["scorable_steps"],
        }
    return grid, per_domain


def compute_stats(bench) -> dict:
    tasks = bench.tasks
    cat = bench.catalog
    grid, per_domain = _per_domain(tasks)
    kinds = Counter(t.kind for t in tasks)
    steps_k = Counter()
    scor_k = Counter()
    all_scor = Counter()
    for t in tasks:
        steps_k[t.kind] += len(t.steps)
        scor_k[t.kind] += len(t.scorable_steps)
        all_scor[t.kind] += int(all(s.scorable for s in t.steps))
    # catalog coverage
    names = {}
    for t in tasks:
        for s in t.steps:
            names.setdefault(s.tool, s.key)
    direct = sum(1 for n, k in names.items() if k is not None and canon_name(n) == k)
    aliased = sum(1 for n, k in names.items() if k is not None and canon_name(n) != k)
    missing = sorted(n for n, k in names.items() if k is None)
    miss_steps = sum(1 for t in tasks for s in t.steps if s.key is None)
    miss_ok = sum(1 for t in tasks for s in t.steps if s.key is None and s.status == "success")
    own_file = Counter()
    for t in tasks:
        src = cat.domain_file(t.domain)
        own = set(cat.by_file.get(src, [])) if src else set()
        own_file[t.kind] += int(all(s.key is not None and s.key in own for s in t.steps))
    return {
        "data_dir": str(bench.data_dir),
        "n_tasks": len(tasks),
        "tasks": {k: dict(sorted(v.items())) for k, v in sorted(grid.items())},
        "tasks_by_kind": dict(sorted(kinds.items())),
        "per_domain": per_domain,
        "steps": {"total": sum(steps_k.values()), **dict(sorted(steps_k.items()))},
        "boundaries_D2": sum(t.n_boundaries for t in tasks),
        "scorable": {"steps": sum(scor_k.values()), **{f"{k}_steps": v for k, v in sorted(scor_k.items())},
                     "share": _r(sum(scor_k.values()) / max(1, sum(steps_k.values()))),
                     "tasks_all_scorable": dict(sorted(all_scor.items())),
                     "tasks_without_scorable": sum(1 for t in tasks if not t.scorable_steps)},
        "catalog": {
            "entries_per_file": {src: sum(1 for _ in _entries(bench, src)) for src in sorted(cat.by_file)},
            "distinct_names": len(cat),
            "gold_names": len(names),
            "gold_names_in_catalog": direct,
            "gold_names_by_alias_or_template": aliased,
            "gold_names_not_in_catalog": len(missing),
            "gold_steps_not_in_catalog": miss_steps,
            "gold_successful_steps_not_in_catalog": miss_ok,
            "tasks_all_tools_in_own_domain_file": dict(sorted(own_file.items())),
        },
        "skipped_files": bench.skipped,
    }


def _entries(bench, src: str):
    import json
    with open(bench.data_dir / src, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, list) else []


def format_table(st: dict) -> str:
    """A plain-text rendering of the main tables."""
    cells = sorted({c for v in st["tasks"].values() for c in v})
    lines = ["tasks per domain x kind/difficulty"]
    head = f"{'domain':<14}" + "".join(f"{c:>22}" for c in cells) + f"{'total':>8}{'mean steps p/s':>16}{'seq ok%':>9}{'D2':>7}{'scorable':>10}"
    lines.append(head)
    tot = Counter()
    for d, row in st["tasks"].items():
        pd = st["per_domain"][d]
        ms = f"{pd['mean_steps_parallel'] or '-'} / {pd['mean_steps_sequential'] or '-'}"
        lines.append(f"{d:<14}" + "".join(f"{row.get(c, 0):>22}" for c in cells) + f"{pd['tasks']:>8}{ms:>16}"
                     f"{(pd['seq_step_success_pct'] if pd['seq_step_success_pct'] is not None else '-'):>9}"
                     f"{pd['boundaries_D2']:>7}{pd['scorable_steps']:>10}")
        for c in cells:
            tot[c] += row.get(c, 0)
    lines.append(f"{'total':<14}" + "".join(f"{tot[c]:>22}" for c in cells) + f"{st['n_tasks']:>8}")
    sc = st["scorable"]
    c = st["catalog"]
    lines += [
        f"steps: {st['steps']}  D2 boundaries: {st['boundaries_D2']}",
        f"scorable steps: {sc['steps']} ({sc['share']:.2%}); tasks all scorable: {sc['tasks_all_scorable']}",
        f"catalog: {c['distinct_names']} distinct names in {len(c['entries_per_file'])} files "
        f"({sum(c['entries_per_file'].values())} entries); gold names {c['gold_names']}: "
        f"{c['gold_names_in_catalog']} direct, {c['gold_names_by_alias_or_template']} by alias/template, "
        f"{c['gold_names_not_in_catalog']} missing ({c['gold_steps_not_in_catalog']} steps, "
        f"{c['gold_successful_steps_not_in_catalog']} successful)",
    ]
    return "\n".join(lines)
