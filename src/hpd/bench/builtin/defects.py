"""Labelled defective reference actions for the built-in benchmark, as TRAJECT-Bench references have them.

``generate(..., defect_rate=r)`` calls :func:`inject` on the clean files. Kinds (:data:`KINDS`), each the
reference action of one boundary, each rejected by the Pi runtime / the verifier:

* ``tool_failure``: a failed first attempt before a clean step: the same tool with one argument changed to
  a well-typed bad value (an unknown city, an out-of-range number, an impossible date, ...); its recorded
  output is the tool's real error, ``ERROR: <message>``, ``execution_status: "failed"``. Replay serves the
  recording (an error result); verification: ``recorded_failure``.
* ``off_catalog``: before a clean step, a call to a tool name the catalog lacks (a renamed / retired API of
  the same parent, e.g. ``"<parent>: <API> V2"``), recorded with the clean step's output. Pi answers
  ``Tool <name> not found``; verification: ``unknown_tool``.
* ``schema``: before a clean step, the same tool with arguments that fail the schema, variant
  (:data:`SCHEMA_VARIANTS`, rotated) ``wrong_type`` (a number as words, a string as a list: Pi's
  validation), ``unknown_field`` (an extra parameter: the replay executor's schema check) or
  ``missing_required`` (a required parameter dropped: Pi's validation); recorded as the tool's real
  error. Verification: ``invalid_args``.
* ``repeat``: an identical copy of an earlier clean call (sequential: inserted at a seeded later position;
  parallel: appended to the batch), recorded with the same output. Replay serves the recording again;
  verification: ``repeated_call`` (the exemption for recorded repeats covers scorable gold only).
* ``premature_finish`` (sequential tasks with >= 2 steps): the reference gives its final answer after its
  first ``k`` steps (``1 <= k < n``); every step stays in the data as scorable gold, the reference episode
  ends with the early answer. Verification: ``premature_end``.

Labels: an injected step carries ``"defect": {"kind": ..., ...details}`` (TRAJECT readers ignore unknown
keys; :mod:`hpd.bench.loader` keeps the kind as ``Step.defect`` and makes the step unscorable); a
premature finish is the task key ``"defect": {"kind": "premature_finish", "final_after_steps": k}``
(``Task.final_after``). Metrics, ``can_end`` and the plan/oracle documents therefore see the clean gold
only; a replayed defective boundary carries ``reference_meta["defect"]`` (:func:`boundary_defect`).

Only train-split tasks get defects: the split is ``make_split(tasks, seed=split_seed)`` (the demo's) of the
clean data, and the split keys ignore labelled steps (:mod:`hpd.bench.split`), so the split of the defective
data is the same. **Rate** = defective boundaries / train-split boundaries after injection (D2 count, the
replay's default grouping: a defect inserted into a sequential task adds its own boundary, one into a
parallel batch adds none, a premature finish removes the skipped ones). At most one defect per task; train
tasks are visited in a seeded order and defects added until the share reaches the rate (it exceeds it by
less than one boundary); each task takes the least-used kind that applies to it. Everything is a pure
function of the arguments (byte-identical files).
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from typing import Any

from .registry import ToolInputError
from .tools import call, get_tool

KINDS = ("tool_failure", "off_catalog", "schema", "repeat", "premature_finish")
SCHEMA_VARIANTS = ("wrong_type", "unknown_field", "missing_required")
#: verifier reason of the defective reference action, per kind (hpd.teacher.types codes)
EXPECTED_REASON = {"tool_failure": "recorded_failure", "off_catalog": "unknown_tool", "schema": "invalid_args",
                   "repeat": "repeated_call", "premature_finish": "premature_end"}

_BAD = {"STRING": ["Atlantis", "XX-0000", "unknown"], "ENUM": ["unknown", "other"],
        "NUMBER": [-1, 0, 100000, -12.5], "DATE (YYYY-MM-DD)": ["2025-02-30", "2025-13-01"]}
_OFF_NAMES = ("{parent}: {api} V2", "{parent}: Legacy {api}", "{parent} Pro: {api}", "{parent}: {api}Ex")
_EXTRA_FIELDS = (("verbose", True), ("lang", "en"), ("response_format", "json"), ("include_details", True))


# ----------------------------------------------------------------------------- raw step helpers

def _args(step: dict) -> dict:
    return {p["name"]: p["value"] for p in step.get("required parameters", []) + step.get("optional parameters", [])}


def _with_args(step: dict, args: dict) -> dict:
    """A deep copy of ``step`` whose parameter lists hold ``args`` (known required names first)."""
    st = copy.deepcopy(step)
    t = get_tool(step["tool name"])
    req_names = {p.name for p in t.required}
    st["required parameters"] = [{"name": k, "value": v} for k, v in args.items() if k in req_names]
    st["optional parameters"] = [{"name": k, "value": v} for k, v in args.items() if k not in req_names]
    return st


def _error(tool: str, args: dict, world_seed: int) -> str | None:
    """The tool's real error text for ``args`` (``ERROR: ...``), or None when the call succeeds."""
    try:
        call(tool, args, world_seed)
    except ToolInputError as e:
        return f"ERROR: {e}"
    except (ValueError, ArithmeticError, KeyError, TypeError) as e:  # pragma: no cover - tools raise ToolInputError
        return f"ERROR: {type(e).__name__}: {e}"
    return None


def _failed(st: dict, output: str, label: dict) -> dict:
    st["execution_status"] = "failed"
    st["executed_output"] = output
    for k in ("adapt_parameter", "adapt_constraint", "adapt_reason"):
        st.pop(k, None)
    st["defect"] = label
    return st


# ----------------------------------------------------------------------------- the kinds

def _tool_failure(steps, rng, ctx):
    for j in rng.sample(range(len(steps)), len(steps)):
        step = steps[j]
        t = get_tool(step["tool name"])
        args = _args(step)
        params = [p for p in t.required + t.optional if p.name in args and p.type in _BAD]
        for p in rng.sample(params, len(params)):
            for bad in _BAD[p.type]:
                if bad == args[p.name]:
                    continue
                new = dict(args, **{p.name: bad})
                err = _error(t.name, new, ctx["world_seed"])
                if err is None:
                    continue
                st = _failed(_with_args(step, new), err, {"kind": "tool_failure", "param": p.name})
                return j, st
    return None


def _off_catalog(steps, rng, ctx):
    j = rng.randrange(len(steps))
    step = steps[j]
    t = get_tool(step["tool name"])
    for fmt in rng.sample(_OFF_NAMES, len(_OFF_NAMES)):
        name = fmt.format(parent=t.parent, api=t.api)
        if ctx["catalog"].resolve(name) is None:
            st = copy.deepcopy(step)
            st["tool name"] = name
            if "API name" in st:
                st["API name"] = name.split(": ", 1)[1]
            for k in ("adapt_parameter", "adapt_constraint", "adapt_reason"):
                st.pop(k, None)
            st["defect"] = {"kind": "off_catalog", "catalog_tool": t.name}
            return j, st
    return None


def _schema_args(variant: str, t, args: dict, key: str, ctx) -> tuple[dict, str] | None:
    if variant == "wrong_type":
        nums = [p for p in t.required + t.optional if p.name in args and p.type == "NUMBER"]
        if nums:
            p = nums[0]
            return dict(args, **{p.name: f"about {args[p.name]}"}), p.name
        strs = [p for p in t.required + t.optional if p.name in args and p.type != "BOOLEAN"]
        if strs:
            p = strs[0]
            return dict(args, **{p.name: [args[p.name]]}), p.name
        return None
    if variant == "unknown_field":
        cat = ctx["catalog"]
        facts = cat.facts.get(key)
        used = set(cat[key].param_names()) | (facts.used_names if facts else set())
        k = ctx["schema_next"] // len(SCHEMA_VARIANTS)
        for name, value in _EXTRA_FIELDS[k % len(_EXTRA_FIELDS):] + _EXTRA_FIELDS[:k % len(_EXTRA_FIELDS)]:
            if name not in used:
                return dict(args, **{name: value}), name
        return None
    required = [n for n in ctx["catalog"].required_names(key) if n in args]
    if not required:
        return None
    return {k: v for k, v in args.items() if k != required[0]}, required[0]


def _schema(steps, rng, ctx):
    order = SCHEMA_VARIANTS[ctx["schema_next"] % 3:] + SCHEMA_VARIANTS[: ctx["schema_next"] % 3]
    for j in rng.sample(range(len(steps)), len(steps)):
        step = steps[j]
        t = get_tool(step["tool name"])
        key = ctx["catalog"].resolve(t.name)
        for variant in order:
            got = _schema_args(variant, t, _args(step), key, ctx)
            if got is None:
                continue
            new, param = got
            err = _error(t.name, new, ctx["world_seed"]) or "ERROR: invalid arguments"
            st = _failed(_with_args(step, new), err, {"kind": "schema", "variant": variant, "param": param})
            ctx["schema_next"] += 1
            return j, st
    return None


def _repeat(steps, rng, ctx, parallel: bool):
    j = rng.randrange(len(steps))
    st = copy.deepcopy(steps[j])
    for k in ("adapt_parameter", "adapt_constraint", "adapt_reason"):
        st.pop(k, None)
    st["defect"] = {"kind": "repeat", "of_step": j}
    pos = len(steps) if parallel else rng.randint(j + 1, len(steps))
    return pos, st


# ----------------------------------------------------------------------------- injection

def _apply(entry: dict, kind: str, rng: random.Random, ctx: dict) -> int | None:
    """Inject one defect of ``kind`` into a raw task entry; returns the change of its boundary count, or
    None when the kind does not apply (the entry is then unchanged)."""
    steps = entry.get("tool list") or []
    parallel = entry.get("trajectory_type") == "parallel"
    if not steps:
        return None
    if kind == "premature_finish":
        if parallel or len(steps) < 2:
            return None
        k = rng.randint(1, len(steps) - 1)
        entry["defect"] = {"kind": "premature_finish", "final_after_steps": k}
        return -(len(steps) - k)
    if kind == "repeat":
        got = _repeat(steps, rng, ctx, parallel)
    else:
        got = {"tool_failure": _tool_failure, "off_catalog": _off_catalog, "schema": _schema}[kind](steps, rng, ctx)
    if got is None:
        return None
    pos, st = got
    steps.insert(pos, st)
    if parallel:
        entry["tool count"] = len(steps)
    else:
        entry["num_tools_used"] = len(steps)
        entry["num_successful_tools"] = sum(1 for s in steps if s.get("execution_status", "success") == "success")
    return 0 if parallel else 1


def inject(files: dict[str, object], *, rate: float, seed: int = 0, world_seed: int = 0,
           split_seed: int = 0, test_frac: float = 0.10) -> dict:
    """Inject labelled defects into the train-split tasks of ``files`` (``build()`` output, changed in
    place); returns the manifest's ``defects`` section (see module docstring)."""
    import tempfile
    from pathlib import Path

    from hpd.bench.loader import load_bench
    from hpd.bench.split import make_split

    if not 0.0 <= rate < 1.0:
        raise ValueError("defect_rate must be in [0, 1)")
    with tempfile.TemporaryDirectory(prefix="hpd-builtin-clean-") as tmp:
        for rel, obj in files.items():
            f = Path(tmp) / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
        bench = load_bench(tmp)
    split = make_split(bench.tasks, seed=split_seed, test_frac=test_frac)
    train = sorted(split["splits"]["train"])
    n_bound = {t.uid: t.n_boundaries for t in bench.tasks}
    total = sum(n_bound[u] for u in train)
    ctx = {"catalog": bench.catalog, "world_seed": world_seed, "schema_next": 0}
    order = list(train)
    random.Random(f"{seed}|defects|order").shuffle(order)
    counts: Counter = Counter()
    variants: Counter = Counter()
    n_def = 0
    for uid in order:
        if total <= 0 or n_def >= rate * total:
            break
        rel, idx = uid.rsplit("#", 1)
        entry = files[rel][int(idx)]
        rng = random.Random(f"{seed}|defect|{uid}")
        for kind in sorted(KINDS, key=lambda k: (counts[k], KINDS.index(k))):
            delta = _apply(entry, kind, rng, ctx)
            if delta is not None:
                counts[kind] += 1
                n_def += 1
                total += delta
                if kind == "schema":
                    variants[next(s["defect"]["variant"] for s in entry["tool list"] if "defect" in s)] += 1
                break
    return {
        "rate": rate, "seed": seed,
        "split": {"seed": split_seed, "test_frac": test_frac, "part": "train"},
        "train_tasks": len(train), "defective_tasks": n_def,
        "train_boundaries": total, "defective_boundaries": n_def,
        "share": round(n_def / total, 6) if total else 0.0,
        "by_kind": {k: counts[k] for k in KINDS},
        "schema_variants": {v: variants[v] for v in SCHEMA_VARIANTS},
        "labels": {"step": 'step key "defect": {"kind": ...} on an injected step (never scorable)',
                   "task": 'task key "defect": {"kind": "premature_finish", "final_after_steps": k}'},
    }


# ----------------------------------------------------------------------------- boundaries

def boundary_defect(b: Any) -> str | None:
    """The defect kind of a replayed boundary's reference action (``reference_meta["defect"]``), else None.
    Accepts a :class:`hpd.boundary.record.Boundary`, a stored record dict or a TeachItem."""
    if isinstance(b, dict):
        meta = b.get("reference_meta")
    else:
        meta = getattr(b, "reference_meta", None)
        if meta is None:
            meta = (getattr(b, "meta", None) or {}).get("reference_meta")
    return (meta or {}).get("defect") or None


def _uid(b: Any) -> str:
    if isinstance(b, dict):
        return b.get("uid") or b.get("boundary_id") or b.get("id")
    return getattr(b, "uid", None) or getattr(b, "id")


def _source(rec: Any) -> str | None:
    """The target source of a teach record / target dict / Target, or None when it has no target."""
    if rec is None:
        return None
    if isinstance(rec, dict):
        tgt = rec["target"] if "target" in rec else (rec if "source" in rec else None)
    else:
        tgt = getattr(rec, "target", rec)
    if tgt is None:
        return None
    return tgt.get("source") if isinstance(tgt, dict) else getattr(tgt, "source", None)


def defect_accounting(boundaries, targets: dict | None = None) -> dict:
    """Count the defective boundaries among ``boundaries`` and, with ``targets`` (boundary uid -> teach
    record of :func:`hpd.teacher.run.teach`, a target dict or a Target), what became of them.

    Keys (stable): ``n_boundaries``, ``n_defective``, ``share``, ``by_kind`` {kind: n}; with targets also
    ``replaced`` (defective boundaries whose target is a verified teacher action), ``fell_back`` (target =
    the reference, ``reference_fallback``), ``dropped`` (no target, or no record) and ``per_kind`` {kind:
    {n, replaced, fell_back, dropped}}. Every kind of :data:`KINDS` is always present."""
    bs = list(boundaries)
    defective = [(b, boundary_defect(b)) for b in bs]
    defective = [(b, k) for b, k in defective if k]
    by_kind = Counter(k for _, k in defective)
    kinds = list(KINDS) + sorted(k for k in by_kind if k not in KINDS)
    out: dict[str, Any] = {
        "n_boundaries": len(bs), "n_defective": len(defective),
        "share": len(defective) / len(bs) if bs else 0.0,
        "by_kind": {k: by_kind[k] for k in kinds},
    }
    if targets is None:
        return out
    per = {k: {"n": by_kind[k], "replaced": 0, "fell_back": 0, "dropped": 0} for k in kinds}
    tot = Counter()
    for b, k in defective:
        src = _source(targets.get(_uid(b)))
        what = "replaced" if src == "teacher" else "fell_back" if src == "reference_fallback" else "dropped"
        per[k][what] += 1
        tot[what] += 1
    out.update(replaced=tot["replaced"], fell_back=tot["fell_back"], dropped=tot["dropped"], per_kind=per)
    return out
