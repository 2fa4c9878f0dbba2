"""Leakage-safe train/test split over R1 trajectory families (docs/traject-bench.md sec 4, 9.5).

Groups = connected components (union-find) of tasks linked by any of these keys:

* ``twin``: parallel twins, i.e. tasks in the same parallel folder with the same index (``simple[i]`` and
  ``hard[i]`` share their trajectory in 1,787/1,800 pairs);
* ``trajectory``: the exact trajectory = the multiset of ``(canon_name, canon_args)`` over the gold steps;
* ``query``: the normalised query (casefolded, whitespace collapsed);
* ``template``: a sequential template, ``(file, generation_info.sequence_index)`` (5 instantiations each);
* ``tool_sequence``: for sequential tasks, ``(domain, sequence of canon tool names)``.

Keys over steps use the clean gold steps only: a step labelled as an injected defect (``Step.defect``, the
built-in benchmark's ``defect_rate``) is not part of the trajectory, so injecting defects never moves a task.

Assignment: groups are stratified by ``(kind, domain)`` of their smallest uid; within each stratum the groups
(sorted by smallest uid) are shuffled with ``random.Random(f"{seed}:{kind}:{domain}")`` and the first
``round(test_frac * n_groups)`` go to test. Deterministic given the seed and the data.

``verify`` recounts leakage by every key: the number of key values that occur in both train and test. By
construction all are 0; the check is independent of the union-find, so a bug there shows up here.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

from hpd.bench.canon import canon_name

KEYS = ("query", "trajectory", "twin", "template", "tool_sequence")


def norm_query(q: str) -> str:
    return re.sub(r"\s+", " ", q or "").strip().casefold()


def task_keys(t) -> dict[str, object]:
    """The group keys of one task (absent keys are omitted)."""
    out: dict[str, object] = {"query": norm_query(t.query)}
    steps = [s for s in t.steps if getattr(s, "defect", None) is None]
    if steps:
        out["trajectory"] = tuple(sorted((s.sig for s in steps), key=repr))
    if t.kind == "parallel":
        folder = t.path.rsplit("/", 1)[0]
        out["twin"] = (folder, t.index)
    else:
        if "sequence_index" in t.meta:
            out["template"] = (t.path, t.meta["sequence_index"])
        if steps:
            out["tool_sequence"] = (t.domain, tuple(canon_name(s.tool) for s in steps))
    return out


class _UF:
    def __init__(self, n: int):
        self.p = list(range(n))

    def find(self, x: int) -> int:
        while self.p[x] != x:
            self.p[x] = self.p[self.p[x]]
            x = self.p[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.p[max(ra, rb)] = min(ra, rb)


def r1_groups(tasks: list) -> list[list[int]]:
    """R1 groups as lists of task indices, ordered by their smallest uid."""
    uf = _UF(len(tasks))
    first: dict[tuple, int] = {}
    for i, t in enumerate(tasks):
        for k, v in task_keys(t).items():
            j = first.setdefault((k, v), i)
            if j != i:
                uf.union(i, j)
    comp: dict[int, list[int]] = defaultdict(list)
    for i in range(len(tasks)):
        comp[uf.find(i)].append(i)
    groups = [sorted(g, key=lambda i: tasks[i].uid) for g in comp.values()]
    groups.sort(key=lambda g: tasks[g[0]].uid)
    return groups


def leakage(tasks: list, test_uids: Iterable[str]) -> dict[str, int]:
    """Per key: number of key values found in both train and test."""
    test = set(test_uids)
    seen = {k: (set(), set()) for k in KEYS}
    for t in tasks:
        side = 1 if t.uid in test else 0
        for k, v in task_keys(t).items():
            seen[k][side].add(v)
    return {k: len(a & b) for k, (a, b) in seen.items()}


def make_split(tasks: list, *, seed: int = 0, test_frac: float = 0.10) -> dict:
    """Compute the split and its statistics (the content of ``split.json``)."""
    if not 0.0 < test_frac < 1.0:
        raise ValueError("test_frac must be in (0, 1)")
    groups = r1_groups(tasks)
    strata: dict[tuple, list[list[int]]] = defaultdict(list)
    for g in groups:
        t0 = tasks[g[0]]
        strata[(t0.kind, t0.domain)].append(g)
    test_idx: set[int] = set()
    test_groups = 0
    per_stratum = {}
    for (kind, domain), gs in sorted(strata.items()):
        order = list(gs)
        random.Random(f"{seed}:{kind}:{domain}").shuffle(order)
        n_test = int(round(test_frac * len(order)))
        chosen = order[:n_test]
        test_groups += len(chosen)
        for g in chosen:
            test_idx.update(g)
        per_stratum[f"{kind}/{domain}"] = {
            "groups": len(gs), "test_groups": n_test,
            "tasks": sum(len(g) for g in gs), "test_tasks": sum(len(g) for g in chosen),
        }
    test = [tasks[i].uid for i in sorted(test_idx, key=lambda i: tasks[i].uid)]
    train = [t.uid for t in sorted(tasks, key=lambda t: t.uid) if t.uid not in set(test)]
    sizes_hist = Counter(len(g) for g in groups)
    test_set = set(test)
    bnd = {"train": 0, "test": 0}
    slices: dict[str, dict[str, int]] = defaultdict(lambda: {"train": 0, "test": 0})
    for t in tasks:
        side = "test" if t.uid in test_set else "train"
        bnd[side] += t.n_boundaries
        slices[f"{t.kind}/{t.difficulty}"][side] += 1
    return {
        "seed": seed,
        "test_frac": test_frac,
        "group_key": "R1 = union(" + ", ".join(KEYS) + ")",
        "sizes": {"tasks": len(tasks), "train": len(train), "test": len(test),
                  "test_share": len(test) / len(tasks) if tasks else 0.0,
                  "groups": len(groups), "test_groups": test_groups,
                  "boundaries_D2": bnd},
        "group_stats": {"size_histogram": {str(k): v for k, v in sorted(sizes_hist.items())},
                        "largest": sorted((len(g) for g in groups), reverse=True)[:5],
                        "singletons": sizes_hist.get(1, 0)},
        "by_stratum": per_stratum,
        "by_slice": {k: v for k, v in sorted(slices.items())},
        "leakage": leakage(tasks, test_set),
        "splits": {"train": train, "test": test},
    }


class SplitFileError(ValueError):
    """A one-line problem with a split file (missing, unreadable, no such part, unknown uids)."""


def read_split(source, part: str | None) -> list[str]:
    """The task uids of one part of a split: THE split-file reader of every stage.

    ``source`` is a path or an already-loaded object. Accepted forms: the ``split.json`` of
    :func:`make_split` (uid lists under ``"splits"``), any JSON object of uid lists, a bare JSON list of uids,
    or a text file with one uid per line (lines starting with ``#`` skipped). ``part`` names the list
    (``train`` / ``test``); it may be None when the source holds exactly one list."""
    name = "the split"
    if isinstance(source, (str, Path)):
        p = Path(source)
        name = f"split file {p}"
        if not p.is_file():
            raise SplitFileError(f"split file not found: {p}")
        raw = p.read_text(encoding="utf-8")
        try:
            source = json.loads(raw)
        except ValueError:
            return [ln.strip() for ln in raw.splitlines() if ln.strip() and not ln.startswith("#")]
    if isinstance(source, list):
        return [str(u) for u in source]
    if not isinstance(source, dict):
        raise SplitFileError(f"{name}: expected a JSON list or object of uid lists")
    holder = source.get("splits") if isinstance(source.get("splits"), dict) else source
    lists = {k: v for k, v in holder.items() if isinstance(v, list)}
    if part is None:
        if len(lists) == 1:
            return [str(u) for u in next(iter(lists.values()))]
        raise SplitFileError(f"{name} holds several splits {sorted(lists)}; choose one with --split")
    if part not in lists:
        raise SplitFileError(f"split {part!r} not in {name} (has {sorted(lists)})")
    return [str(u) for u in lists[part]]


def select(tasks: list, source, part: str | None) -> list:
    """The tasks of one part of a split (:func:`read_split`), in load order. Every uid of the part must be
    among ``tasks`` (a split of other data is refused, not silently shrunk)."""
    want = set(read_split(source, part))
    missing = want - {t.uid for t in tasks}
    if missing:
        raise SplitFileError(f"{len(missing)} uid(s) of the split are not in the data, e.g. {sorted(missing)[0]}")
    return [t for t in tasks if t.uid in want]
