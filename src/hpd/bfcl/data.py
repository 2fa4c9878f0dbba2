"""BFCL v4 categories, what hpd scores and skips, loading the shipped data, and the seeded sample.

The data is the JSON-lines files inside the ``bfcl-eval`` wheel (questions, function docs, possible answers);
nothing is downloaded. Categories are BFCL's own names (``constants/category_mapping.py``); BFCL's group names
(``all``, ``single_turn``, ``multi_turn``, ``live``, ``non_live``, ``python``, ``non_python``, ``agentic``,
``memory``, ``web_search``, ``all_scoring``) expand as ``bfcl generate --test-category`` expands them, plus:

* ``offline`` (the default): every scoring category that runs offline, i.e. :data:`SCORED`;
* the BFCL v3 names ``simple``, ``java``, ``javascript`` for ``simple_python``, ``simple_java``, ``simple_javascript``.

Categories that cannot be run here are never an error: they are listed in :data:`SKIPPED` with the reason,
which ``hpd bfcl`` prints and writes to ``metrics.json``.

Sampling (``--sample N --seed S``) is hpd's, not BFCL's: per category, ``N`` entries drawn without replacement by
``random.Random(f"bfcl:{category}:{S}")`` (stable across Python versions and machines), kept in BFCL's id order.
The HPD paper's 92-case BFCL set cannot be identified from the data (docs/bfcl.md), so a sample is our own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hpd.bfcl import lib

NON_LIVE = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
            "irrelevance"]
LIVE = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
        "live_relevance"]
MULTI_TURN = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
#: Every category ``hpd bfcl`` scores, in BFCL's order: the AST checker for single-turn, the multi-turn executor.
SCORED = NON_LIVE + LIVE + MULTI_TURN

_AGENTIC = ("BFCL scores it with its agentic pipeline (an answer-string match on the final message, after "
            "memory prerequisite conversations), which hpd bfcl does not run")
#: Categories BFCL v4 defines that hpd does not run, with the reason printed and written to metrics.json.
SKIPPED = {
    "web_search_base": "needs the live web: BFCL's WebSearchAPI backend calls SerpAPI (SERPAPI_API_KEY) and "
                       "fetches pages over HTTP; hpd bfcl runs offline",
    "web_search_no_snippet": "needs the live web (same backend as web_search_base); hpd bfcl runs offline",
    "memory_kv": "memory category: each backend first replays 37 prerequisite conversations that write a memory "
                 f"snapshot to disk; {_AGENTIC}",
    "memory_vector": "needs the all-MiniLM-L6-v2 SentenceTransformer from the Hugging Face hub plus faiss (loaded "
                     f"when the backend is imported), and {_AGENTIC}",
    "memory_rec_sum": f"memory category: prerequisite conversations write a memory snapshot first; {_AGENTIC}",
    "format_sensitivity": "not scored by BFCL (it varies the prompt format of prompting, non-FC models); hpd "
                          "renders one format, Qwen3 function calling",
}
ALIASES = {"simple": "simple_python", "java": "simple_java", "javascript": "simple_javascript"}
GROUPS = {
    "offline": SCORED,
    "all": SCORED + list(SKIPPED),
    "all_scoring": SCORED + [c for c in SKIPPED if c != "format_sensitivity"],
    "single_turn": NON_LIVE + LIVE,
    "non_live": NON_LIVE,
    "live": LIVE,
    "multi_turn": MULTI_TURN,
    "python": [c for c in NON_LIVE + LIVE if c not in ("simple_java", "simple_javascript")],
    "non_python": ["simple_java", "simple_javascript"],
    "web_search": ["web_search_base", "web_search_no_snippet"],
    "memory": ["memory_kv", "memory_vector", "memory_rec_sum"],
    "agentic": ["memory_kv", "memory_vector", "memory_rec_sum", "web_search_base", "web_search_no_snippet"],
}


class CategoryError(ValueError):
    """An unknown category name (one line, listing the valid ones)."""


def is_multi_turn(category: str) -> bool:
    return category.startswith("multi_turn")


def is_relevance(category: str) -> bool:
    """``irrelevance`` / ``live_irrelevance`` / ``live_relevance``: scored on whether any call was decoded."""
    return category.endswith("relevance")


def parse_categories(spec: str | list[str] | None) -> tuple[list[str], dict[str, str]]:
    """``"simple_python,multi_turn"`` (or a list) -> (scored categories in BFCL's order, {skipped: reason})."""
    names = spec if isinstance(spec, list) else (spec or "offline").split(",")
    wanted: set[str] = set()
    for raw in (n.strip() for n in names):
        if not raw:
            continue
        name = ALIASES.get(raw, raw)
        if name in GROUPS:
            wanted.update(GROUPS[name])
        elif name in SCORED or name in SKIPPED:
            wanted.add(name)
        else:
            valid = ", ".join(SCORED + list(SKIPPED) + list(GROUPS) + list(ALIASES))
            raise CategoryError(f"unknown BFCL category {raw!r}; valid: {valid}")
    if not wanted:
        raise CategoryError("no BFCL category given")
    scored = [c for c in SCORED if c in wanted]
    skipped = {c: r for c, r in SKIPPED.items() if c in wanted}
    return scored, skipped


@dataclass
class Case:
    """One BFCL entry as hpd runs it: the prompt entry BFCL's generation sees (function docs with the language
    hint), the one its evaluation sees (without), and the possible answer (None for the relevance categories)."""

    id: str
    category: str
    entry: dict
    eval_entry: dict
    answer: dict | None


def load_cases(category: str) -> list[Case]:
    """All entries of one scored category, in the data file's order (the order BFCL's evaluation aligns on)."""
    if category not in SCORED:
        raise CategoryError(f"{category!r} is not a category hpd bfcl scores")
    lib.load()
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    gen = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=True)
    ev = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    answers = None if is_relevance(category) else load_ground_truth_entry(category)
    if answers is not None and len(answers) != len(ev):
        raise ValueError(f"{category}: {len(ev)} entries but {len(answers)} possible answers")
    return [Case(id=g["id"], category=category, entry=g, eval_entry=e, answer=None if answers is None else answers[i])
            for i, (g, e) in enumerate(zip(gen, ev))]


def sample_cases(cases: list[Case], n: int | None, seed: int) -> list[Case]:
    """The seeded per-category subset (module doc); ``n=None`` keeps every entry."""
    if n is None or n >= len(cases):
        return list(cases)
    if n < 1:
        raise ValueError("--sample must be >= 1")
    category = cases[0].category if cases else ""
    keep = set(random.Random(f"bfcl:{category}:{seed}").sample(range(len(cases)), n))
    return [c for i, c in enumerate(cases) if i in keep]


def select(categories: list[str], n: int | None = None, seed: int = 0) -> dict[str, list[Case]]:
    """``{category: cases}`` for the run: every entry, or the seeded sample of ``n`` per category."""
    return {c: sample_cases(load_cases(c), n, seed) for c in categories}
