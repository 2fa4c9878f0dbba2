"""Write the built-in benchmark in the TRAJECT-Bench ``public_data`` layout.

Layout (identical file names and keys to TRAJECT-Bench, see docs/traject-bench.md §2)::

    <out>/parallel/<Domain>/simple_ver.json    list of {query, "tool list", trajectory_type, "tool count", final_answer}
    <out>/parallel/<Domain>/hard_ver.json      same trajectories (index i <-> i), other query + answer
    <out>/sequential/<Domain>/traj_query.json  list of {query, final_answer:{answer,reason}, "tool list", sequence_name, ...}
    <out>/tools/<Domain>_tool.json             catalog entries with the 11 TRAJECT keys
    <out>/selected_category.json               {Domain: {description, "tool list": [parents]}}
    <out>/builtin_manifest.json                generator, version, seed, world_seed, sizes, file hashes

Mirrored structural quirks: parallel simple/hard twins share the trajectory (tools, args, outputs) and
differ in query and answer; every sequential template (``generation_info.sequence_index``) has exactly
5 instantiations (``trajectory_index`` 0..4); sequential step ``tool description`` is the chain-role
instruction (not the catalog text); dependencies are recorded only through ``param_for_next_tool`` and
``adapt_parameter``/``adapt_constraint``/``adapt_reason``; every tools file carries one distractor tool
of other domains.

Defects: with ``defect_rate > 0`` a seeded, labelled share of the train-split boundaries get a defective
reference action (recorded tool failure, off-catalog tool, schema-invalid arguments, identical repeat,
premature final answer; :mod:`hpd.bench.builtin.defects`); the manifest gets a ``defects`` section.

Departures: without defects every recorded output is a real, successful execution (no ``ERROR:`` steps, no
truncation); sequential files have one phrasing per task, so phrasing alternates inside each template: even
``trajectory_index`` -> simple (explicit) wording, odd -> hard (paraphrased) wording.
Everything is a pure function of (seed, world_seed, sizes, defect_rate): no clock, no salted ``hash()``; two runs
with the same arguments give byte-identical files (the manifest holds no wall-clock time on purpose).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from pathlib import Path

from .domains import MODULES
from .registry import ToolDef
from .spec import Ask, Recorder
from .tools import call, domain_catalog, get_tool
from .world import get_world

GENERATOR_VERSION = "1.0.0"
SEQ_PER_TEMPLATE = 5
_HARD_OPENERS = ["I'm sorting out a few things today.", "Quick favour, if you can.", "Can you help me out?",
                 "A few questions for you.", "I need some information.", "Before I decide anything:"]
_ANSWER_OPENERS = ["Here is what I found.", "Done, here are the results.", "Here you go."]


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _param_lists(t: ToolDef, args: dict) -> tuple[list, list]:
    req = [{"name": p.name, "value": args[p.name]} for p in t.required if p.name in args]
    opt = [{"name": p.name, "value": args[p.name]} for p in t.optional if p.name in args]
    return req, opt


def _parallel_pair(rng: random.Random, mod, world_seed: int, n_calls: int) -> tuple[dict, dict]:
    world = get_world(world_seed)
    fns = rng.sample(mod.ASKS, n_calls)
    asks: list[Ask] = [f(rng, world) for f in fns]
    steps, objs = [], []
    for a in asks:
        t = get_tool(a.tool)
        obj, out = call(a.tool, a.args, world_seed)
        req, opt = _param_lists(t, a.args)
        steps.append({"tool name": t.name, "tool description": t.description, "required parameters": req,
                      "optional parameters": opt, "executed_output": out})
        objs.append(obj)
    answers = [a.answer(o) for a, o in zip(asks, objs)]
    order = list(range(n_calls))
    rng.shuffle(order)
    simple_q = f"Please {_join([a.simple for a in asks])}."
    hard_q = f"{rng.choice(_HARD_OPENERS)} Could you {_join([asks[i].hard for i in order])}?"
    simple_a = " ".join(answers)
    hard_a = rng.choice(_ANSWER_OPENERS) + " " + " ".join(answers[i] for i in order)

    def entry(q, ans):
        return {"query": q, "tool list": json.loads(json.dumps(steps)), "trajectory_type": "parallel",
                "tool count": len(steps), "final_answer": ans}
    return entry(simple_q, simple_a), entry(hard_q, hard_a)


def _seq_task(chain, rng, world_seed, domain, d_idx, t_idx, ti, seed) -> dict:
    rec = Recorder(lambda name, args: call(name, args, world_seed))
    res = chain.run(rng, get_world(world_seed), rec)
    steps = []
    for k, s in enumerate(rec.steps, 1):
        t = get_tool(s.tool)
        req, opt = _param_lists(t, s.args)
        orig = repr({"tool name": t.name, "use description": s.role, "param for next tool": s.next_param})
        st = {"tool name": t.name, "tool description": s.role, "required parameters": req,
              "optional parameters": opt, "execution_status": "success", "executed_output": s.output,
              "API name": t.api, "domain name": t.domain, "parent tool name": t.parent,
              "sequence_step": {"step_number": k, "tool_name": t.name, "description": s.role,
                                "param_for_next_tool": s.next_param, "original_description": orig},
              "original_description": orig}
        if s.adapt:
            st["adapt_parameter"] = ", ".join(a.param for a in s.adapt)
            st["adapt_constraint"] = "; ".join(a.constraint for a in s.adapt)
            st["adapt_reason"] = " ".join(f"Selected {a.param}={s.args[a.param]!r} from the output of step "
                                          f"{a.source_step} ({a.constraint})." for a in s.adapt)
        steps.append(st)
    stamp = dt.datetime(2025, 1, 1) + dt.timedelta(minutes=(seed % 100000) * 7 + d_idx * 997 + t_idx * 5 + ti)
    return {"query": res.simple if ti % 2 == 0 else res.hard,
            "final_answer": {"answer": res.answer, "reason": res.reason},
            "tool list": steps, "sequence_name": chain.name, "sequence_description": chain.description,
            "num_tools_used": len(steps), "num_successful_tools": len(steps), "domain": domain,
            "executable": True,
            "generation_info": {"domain_index": d_idx, "sequence_index": t_idx, "trajectory_index": ti,
                                "timestamp": stamp.strftime("%Y-%m-%d %H:%M:%S"),
                                "model": f"hpd.bench.builtin-{GENERATOR_VERSION}"}}


def build(seed: int = 0, n_parallel: int = 40, n_sequential: int = 40, domains: list[str] | None = None,
          world_seed: int = 0) -> dict[str, object]:
    """Build every file's content in memory: {relative path: JSON-able object}."""
    doms = list(MODULES) if domains is None else list(domains)
    unknown = [d for d in doms if d not in MODULES]
    if unknown:
        raise ValueError(f"unknown built-in domain(s) {unknown}; known: {', '.join(MODULES)}")
    if n_parallel < 0 or n_sequential < 0:
        raise ValueError("n_parallel and n_sequential must be >= 0")
    files: dict[str, object] = {}
    for d_idx, d in enumerate(doms):
        mod = MODULES[d]
        files[f"tools/{d}_tool.json"] = [t.catalog_entry() for t in domain_catalog(d)]
        simple, hard, seen = [], [], set()
        for i in range(n_parallel):
            for attempt in range(50):
                rng = random.Random(f"{seed}|{d}|parallel|{i}|{attempt}")
                s, h = _parallel_pair(rng, mod, world_seed, 2 + i % 3)
                sig = json.dumps([s["query"], s["tool list"]])
                if s["query"] not in seen and sig not in seen:
                    break
            seen.update([s["query"], sig])
            simple.append(s)
            hard.append(h)
        if n_parallel:
            files[f"parallel/{d}/simple_ver.json"] = simple
            files[f"parallel/{d}/hard_ver.json"] = hard
        seq = []
        n_templates = -(-n_sequential // SEQ_PER_TEMPLATE)
        for t_idx in range(n_templates):
            chain = mod.CHAINS[t_idx % len(mod.CHAINS)]
            queries = set()
            for ti in range(SEQ_PER_TEMPLATE):
                for attempt in range(50):
                    rng = random.Random(f"{seed}|{d}|seq|{t_idx}|{ti}|{attempt}")
                    task = _seq_task(chain, rng, world_seed, d, d_idx, t_idx, ti, seed)
                    if task["query"] not in queries:
                        break
                queries.add(task["query"])
                seq.append(task)
        if seq:
            files[f"sequential/{d}/traj_query.json"] = seq
    files["selected_category.json"] = {
        d: {"description": f"Built-in simulated {d} tools (hpd.bench.builtin).",
            "tool list": sorted({t.parent for t in MODULES[d].TOOLS})} for d in doms}
    return files


def _dump(obj) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def generate(out_dir: str | Path, seed: int = 0, n_per_domain: int = 40, *, n_parallel: int | None = None,
             n_sequential: int | None = None, domains: list[str] | None = None, world_seed: int = 0,
             defect_rate: float = 0.0, split_seed: int = 0) -> Path:
    """Generate the benchmark into ``out_dir`` and return it.

    ``n_per_domain`` sets both the parallel trajectories per domain (each written twice: simple and
    hard phrasing) and the sequential tasks per domain (rounded up to a multiple of 5, one template =
    5 instantiations); ``n_parallel`` / ``n_sequential`` override them separately. With the defaults
    (4 domains, 40) that is 4 x (80 + 40) = 480 task entries. ``world_seed`` fixes the simulated world
    (cities' weather, products, orders, hotels); tools executed later must use the same world_seed
    (it is recorded in ``builtin_manifest.json``; default 0).

    ``defect_rate``: the share of the train-split boundaries whose reference action is a labelled defect
    (:func:`hpd.bench.builtin.defects.inject`; the split is ``make_split(tasks, seed=split_seed)`` of the
    clean data, test tasks stay clean). 0.0 (default) writes exactly the clean benchmark and no ``defects``
    manifest section.
    """
    from hpd import __version__
    out = Path(out_dir)
    n_par = n_per_domain if n_parallel is None else n_parallel
    n_seq = n_per_domain if n_sequential is None else n_sequential
    files = build(seed, n_par, n_seq, domains, world_seed)
    defects = None
    if defect_rate:
        from .defects import inject
        defects = inject(files, rate=defect_rate, seed=seed, world_seed=world_seed, split_seed=split_seed)
    blobs = {p: _dump(o) for p, o in files.items()}
    counts = {"parallel_simple": 0, "parallel_hard": 0, "sequential": 0}
    for p, o in files.items():
        if p.startswith("parallel/"):
            counts["parallel_simple" if p.endswith("simple_ver.json") else "parallel_hard"] += len(o)
        elif p.startswith("sequential/"):
            counts["sequential"] += len(o)
    manifest = {
        "generator": "hpd.bench.builtin", "generator_version": GENERATOR_VERSION, "hpd_version": __version__,
        "seed": seed, "world_seed": world_seed, "n_parallel_per_domain": n_par,
        "n_sequential_per_domain": -(-n_seq // SEQ_PER_TEMPLATE) * SEQ_PER_TEMPLATE,
        "domains": list(MODULES) if domains is None else list(domains),
        "counts": counts | {"tasks": sum(counts.values())},
        "sequential_phrasing": "even trajectory_index: simple wording; odd: hard wording",
        "files": {p: hashlib.sha256(b).hexdigest() for p, b in sorted(blobs.items())},
    }
    if defects is not None:
        manifest["defects"] = defects
    for p, b in blobs.items():
        f = out / p
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b)
    (out / "builtin_manifest.json").write_bytes(_dump(manifest))
    return out
