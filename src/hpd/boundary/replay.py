"""Replay a task's reference trajectory through the step-wise Pi harness and capture every boundary.

For one task: a :class:`~hpd.bench.replay.ReplayEnv` answers tool calls, ``Harness.start`` parks at
the first provider boundary, and the reference is fed in as assistant messages, one per reference
turn. Before each step the boundary is captured (native context, runtime-state snapshot, reference
action, control documents); after it, the outcome of the reference action is recorded.

**Grouping of reference calls into turns** (config, :class:`ReplayConfig`):

- ``parallel="one_turn"`` (default): a parallel task issues all its reference calls in one assistant
  message (Pi runs them as one parallel batch), then a final-answer turn: 2 boundaries;
- ``sequential="one_per_turn"`` (default): one call per turn, then a final-answer turn: n+1 boundaries;
- either may be set to ``"one_turn"`` / ``"one_per_turn"``. The defaults give exactly the D2 boundary
  count of ``hpd data stats`` (``Task.n_boundaries``: 2 per parallel task, steps+1 per sequential task;
  unscorable steps -- recorded failures, tools missing from the catalog -- still get their boundary, as
  the gold history is the gold history; ``reference_meta.scorable`` marks them for Action-Acc).

**Reference action form**: a call uses the catalog's display name when the step's tool resolves into
the catalog (the harness matches names exactly; the data sometimes spells a tool with other
whitespace/case), else the raw name (Pi answers ``Tool <name> not found``); its arguments are the
step's non-empty arguments (``Step.call()``). Call ids are ``call_<boundary>_<k>``. The final turn is
the reference final answer as one text block.

**Labelled defects** (the built-in benchmark's ``defect_rate``, :mod:`hpd.bench.builtin.defects`): a step
labelled ``Step.defect`` is issued like any gold step (the replay continues after it as the data does); a task
with ``Task.final_after`` (premature_finish) gets its final-answer turn after that many steps, so its episode
ends there. The boundary whose reference action holds a defect carries ``reference_meta["defect"]`` (the
kind) and ``reference_meta["clean_action"]``: the correct action there (the turn's clean calls; when the
turn has none, the next clean gold call, else the final answer), which the oracle document states as the
next action. Defective steps are never scorable and never pending in the plan. ``issues`` gains
``repeated_call`` (a labelled repeat) and ``premature_end`` (answering while scorable steps remain).

**Budget**: ``max_turns="auto"`` is the number of reference turns + 2 (docs/traject-bench.md 9.2: at least
n_gold + 2); an int or ``None`` (unbounded) is used as given.

**Restoring** (:func:`restore`): a boundary is re-created by replaying the same task with the same
config for ``recipe["prefix"]`` reference turns; the harness is then parked at exactly that boundary
(a test checks the context is identical). ``replay_task(..., keep_forks=True)`` instead keeps a
``Harness.fork()`` on each Boundary (``boundary.harness``) while in memory.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpd.bench.episode import SYSTEM_PROMPT as EPISODE_SYSTEM_PROMPT
from hpd.bench.episode import start_episode
from hpd.document.compile import compile_all, document_entry
from hpd.document.schema import DOC_VERSION, PRIVILEGES
from hpd.document.sources import arg_sources
from hpd.harness.loop import Harness
from hpd.harness.messages import assistant_message, text, tool_call, tool_calls_of
from hpd.runfolder import config_hash

from .record import Boundary
from .state import Tracker, smolagents_observe, smolagents_snapshot

GROUPINGS = ("one_turn", "one_per_turn")

# ONE native episode spec: replay captures exactly the contexts evaluation rollouts produce.
DEFAULT_SYSTEM_PROMPT = EPISODE_SYSTEM_PROMPT


@dataclass
class ReplayConfig:
    """Everything that decides the replay's output (hashed into the manifest)."""

    parallel: str = "one_turn"
    sequential: str = "one_per_turn"
    tool_execution: str = "parallel"  # the harness mode (Pi's default)
    max_turns: int | str | None = "auto"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    pool_k: int | None = 20  # tools shown per episode (gold + seeded distractors), hpd.bench.pool
    full_domain: bool = False
    allow_global: bool = False
    mark_truncated: bool = False
    privileges: tuple[str, ...] = PRIVILEGES
    harness: str = "pi"  # hpd.harnesses.registry name; recorded (and hashed) only when it is not Pi's

    def __post_init__(self) -> None:
        from hpd.harnesses.registry import get_harness

        get_harness(self.harness)
        for k in ("parallel", "sequential"):
            if getattr(self, k) not in GROUPINGS:
                raise ValueError(f"{k} grouping must be one of {GROUPINGS}, not {getattr(self, k)!r}")
        self.privileges = tuple(self.privileges)
        bad = [p for p in self.privileges if p not in PRIVILEGES]
        if bad or not self.privileges:
            raise ValueError(f"privileges must be a non-empty subset of {PRIVILEGES}, got {list(self.privileges)}")
        if not (self.max_turns in ("auto", None) or (isinstance(self.max_turns, int) and self.max_turns >= 1)):
            raise ValueError(f"max_turns must be 'auto', None or an int >= 1, not {self.max_turns!r}")

    def to_record(self) -> dict:
        d = asdict(self)
        d["privileges"] = list(self.privileges)
        d["doc_version"] = DOC_VERSION
        if self.harness == "pi":   # Pi's records and hashes stay those of before the registry
            del d["harness"]
        return d

    def hash(self) -> str:
        return config_hash(self.to_record())

    @classmethod
    def from_record(cls, d: dict) -> "ReplayConfig":
        d = {k: v for k, v in d.items() if k != "doc_version"}
        return cls(**d)


@dataclass
class TaskPlan:
    """The reference of one task as the replay drives it."""

    turns: list[list[int]]  # step indices per reference turn; the last (final) turn is []
    messages: list[dict]  # the reference assistant message per turn
    reference: list[dict]  # per step: tool, callable, recorded, scorable, arguments, sources
    issues: list[list[str]] = field(default_factory=list)  # per turn: static non-compliance reasons
    defects: dict[int, str] = field(default_factory=dict)  # turn -> defect kind of its reference action
    clean: dict[int, dict] = field(default_factory=dict)   # turn -> the correct action at a defective turn


def plan_task(task, env, config: ReplayConfig) -> TaskPlan:
    """Group the reference into turns and build the reference messages (see module docstring)."""
    pool = getattr(env, "pool", None)
    catalog = pool.catalog if pool is not None else None
    offered = {t.name for t in env.tools()}
    grouping = config.parallel if task.kind == "parallel" else config.sequential
    n = len(task.steps)
    final_after = getattr(task, "final_after", None)
    n_exec = n if final_after is None else max(0, min(n, final_after))
    if grouping == "one_turn":
        turns = [list(range(n_exec))] if n_exec else []
    else:
        turns = [[i] for i in range(n_exec)]
    turns.append([])
    reference, defaults = [], []
    for s in task.steps:
        name = s.tool
        if s.key is not None and catalog is not None and s.key in catalog:
            name = catalog[s.key].name
        call = s.call()
        dflt = {}
        if s.key is not None and catalog is not None and s.key in catalog:
            d = catalog[s.key]
            dflt = {str(p.get("name", "")).strip(): p.get("default") for p in d.required + d.optional}
        defaults.append(dflt)
        reference.append({"tool": name, "callable": name in offered, "recorded": "ok" if s.status == "success" else "failed",
                          "scorable": bool(s.scorable), "arguments": call["arguments"],
                          "defect": getattr(s, "defect", None)})
    srcs = arg_sources(task.query, [(r["arguments"], s.output) for r, s in zip(reference, task.steps)], defaults,
                       chain=task.kind != "parallel")
    for r, sr in zip(reference, srcs):
        r["sources"] = sr
    messages, issues = [], []
    for b, steps in enumerate(turns):
        if steps:
            blocks = [tool_call(f"call_{b}_{j}", reference[i]["tool"], reference[i]["arguments"])
                      for j, i in enumerate(steps)]
            messages.append(assistant_message(blocks))
            iss = []
            if any(not reference[i]["callable"] for i in steps):
                iss.append("off_catalog")
            if any(reference[i]["recorded"] == "failed" for i in steps):
                iss.append("recorded_failure")
            if any(reference[i]["defect"] == "repeat" for i in steps):
                iss.append("repeated_call")
            issues.append(iss)
        else:
            messages.append(assistant_message([text(task.final_answer)]))
            iss = [] if task.final_answer.strip() else ["empty_answer"]
            if any(reference[i]["scorable"] for i in range(n_exec, n)):
                iss.insert(0, "premature_end")
            issues.append(iss)
    plan = TaskPlan(turns=turns, messages=messages, reference=reference, issues=issues)
    _mark_defects(plan, task, grouping, n_exec)
    return plan


def _mark_defects(plan: TaskPlan, task, grouping: str, n_exec: int) -> None:
    """Fill ``plan.defects`` / ``plan.clean`` for the turns whose reference action is a labelled defect."""
    ref = plan.reference
    n = len(ref)

    def calls_msg(b: int, idx: list[int]) -> dict:
        return assistant_message([tool_call(f"call_{b}_{j}", ref[i]["tool"], ref[i]["arguments"])
                                  for j, i in enumerate(idx)])

    for b, steps in enumerate(plan.turns):
        if steps:
            kinds = [ref[i]["defect"] for i in steps if ref[i]["defect"]]
            if not kinds:
                continue
            clean = [i for i in steps if not ref[i]["defect"]]
            if not clean:
                clean = [next((i for i in range(max(steps) + 1, n) if not ref[i]["defect"]), None)]
            plan.defects[b] = kinds[0]
            plan.clean[b] = (calls_msg(b, clean) if clean[0] is not None
                             else assistant_message([text(task.final_answer)]))
        elif getattr(task, "final_after", None) is not None and n_exec < n:
            pending = [i for i in range(n_exec, n) if not ref[i]["defect"]]
            if not pending:
                continue
            plan.defects[b] = "premature_finish"
            plan.clean[b] = calls_msg(b, pending if grouping == "one_turn" else pending[:1])


def _max_turns(config: ReplayConfig, n_turns: int) -> int | None:
    return n_turns + 2 if config.max_turns == "auto" else config.max_turns


def start_replay(task, bench, config: ReplayConfig):
    """``(harness, env, plan)`` parked at the first boundary of ``task``."""
    env = bench.env(task, k=config.pool_k, full_domain=config.full_domain, allow_global=config.allow_global,
                    mark_truncated=config.mark_truncated)
    plan = plan_task(task, env, config)
    st = start_episode(task, bench, env=env, max_turns=_max_turns(config, len(plan.turns)),
                             system_prompt=config.system_prompt, tool_execution=config.tool_execution,
                             harness=config.harness)
    if config.harness != "pi":
        _to_harness_actions(plan, st.harness)
    return st.harness, env, plan


def _to_harness_actions(plan: TaskPlan, h) -> None:
    """The plan's reference (and clean) actions in the harness's own form: for smolagents, calls with its tool
    names and the final prose answer as one ``final_answer`` call (:func:`hpd.harnesses.smolagents.reference_to_smolagents`)."""
    from hpd.harnesses.smolagents import reference_to_smolagents

    names = h.tool_names
    plan.messages = [reference_to_smolagents(m, names, final=not steps) for m, steps in zip(plan.messages, plan.turns)]
    plan.clean = {b: reference_to_smolagents(m, names, final=not tool_calls_of(m)) for b, m in plan.clean.items()}


def _outcome_issues(tracker: Tracker, base: list[str]) -> list[str]:
    iss = list(base)
    for o in tracker.last_batch:
        c = tracker.calls[o - 1]
        k = c["error_kind"]
        if k and k not in ("recorded_failure",) and k not in iss:
            if k == "unknown_tool" and "off_catalog" in iss:
                continue
            iss.append(k)
    return iss


def replay_task(task, bench, config: ReplayConfig | None = None, *, keep_forks: bool = False,
                compile_docs: bool = True, tokenizer=None) -> list[Boundary]:
    """All boundaries of one task's reference replay (see module docstring)."""
    config = config or ReplayConfig()
    h, env, plan = start_replay(task, bench, config)
    tracker = Tracker(plan.reference, plan.turns)
    chash = config.hash()
    smol = config.harness == "smolagents"
    out: list[Boundary] = []
    for b, (steps, msg) in enumerate(zip(plan.turns, plan.messages)):
        if h.done:
            raise RuntimeError(f"{task.uid}: the harness ended ({h.end_reason}) before reference turn {b}")
        state = smolagents_snapshot(tracker, h) if smol else tracker.snapshot(h)
        fork = h.fork() if (keep_forks or compile_docs) else None
        bd = Boundary(
            uid=f"{task.uid}/b{b}", task_uid=task.uid, index=b, kind=h.boundary_kind, context=h.context(),
            state=state, reference=msg,
            reference_meta={"kind": "calls" if steps else "final", "steps": list(steps),
                            "scorable": all(plan.reference[i]["scorable"] for i in steps),
                            **({"defect": plan.defects[b], "clean_action": plan.clean[b]} if b in plan.defects else {})},
            recipe={"task_uid": task.uid, "prefix": b, "config_hash": chash},
            harness=fork if keep_forks else None,
        )
        if compile_docs:
            docs = compile_all(bd, fork, config.privileges, consume_fork=not keep_forks)
            bd.documents = {p: document_entry(docs[p], tokenizer) for p in config.privileges}
        n_env = len(getattr(env, "calls", []) or [])
        h.step(msg)
        env = h.env
        if smol:
            smolagents_observe(tracker, h, msg, steps, n_env)
        else:
            tracker.observe_step(h, msg, steps, n_env)
        issues = _outcome_issues(tracker, plan.issues[b]) if steps else list(plan.issues[b])
        bd.reference_meta.update({"compliant": not issues, "issues": issues})
        out.append(bd)
    if not h.done:
        raise RuntimeError(f"{task.uid}: the harness did not end after the final reference turn")
    return out


def _recipe(boundary, config: ReplayConfig) -> dict:
    """The boundary's restore recipe, checked against ``config``."""
    recipe = boundary.recipe if hasattr(boundary, "recipe") else boundary["recipe"]
    if recipe.get("config_hash") not in (None, config.hash()):
        raise ValueError(f"boundary {recipe.get('task_uid')}/b{recipe.get('prefix')} was replayed with config "
                         f"{recipe.get('config_hash')}, not {config.hash()}; pass the run's ReplayConfig")
    return recipe


def restore(boundary, bench, config: ReplayConfig | None = None) -> Harness:
    """A live Harness parked at ``boundary`` (re-driven from its recipe; deterministic).

    The teacher/verifier forks the result per candidate: ``g = restore(b, bench, cfg).fork(); g.step(msg)``.
    """
    config = config or ReplayConfig()
    recipe = _recipe(boundary, config)
    task = bench.task(recipe["task_uid"])
    h, env, plan = start_replay(task, bench, config)
    for msg in plan.messages[: recipe["prefix"]]:
        h.step(msg)
    return h


class Restorer:
    """:func:`restore` with a cache: the first boundary of a task replays the task once (no document
    compile) keeping a fork at every boundary, so restoring all boundaries of a task costs one replay, not
    one each. Each call returns a fresh fork, equal to ``restore(boundary, bench, config)``.

    ``bench`` is loaded from ``data_dir`` on first use when not given. At most ``max_tasks`` tasks stay
    cached (least recently used first out)."""

    def __init__(self, config: ReplayConfig, *, bench=None, data_dir=None, max_tasks: int = 256):
        self.config = config
        self._bench = bench
        self.data_dir = Path(data_dir) if data_dir else None
        self.max_tasks = max_tasks
        self._forks: OrderedDict = OrderedDict()  # task uid -> {boundary index: Harness}

    @property
    def bench(self):
        if self._bench is None:
            from hpd.bench.loader import load_bench
            from .store import StoreError

            if self.data_dir is None or not self.data_dir.is_dir():
                raise StoreError(f"data folder {self.data_dir} of the replay run is missing (pass --data)")
            self._bench = load_bench(self.data_dir)
        return self._bench

    def __call__(self, boundary) -> Harness:
        recipe = _recipe(boundary, self.config)
        uid = recipe["task_uid"]
        per = self._forks.get(uid)
        if per is None:
            bench = self.bench
            got = replay_task(bench.task(uid), bench, self.config, keep_forks=True, compile_docs=False)
            per = self._forks[uid] = {b.index: b.harness for b in got}
            while len(self._forks) > self.max_tasks:
                self._forks.popitem(last=False)
        else:
            self._forks.move_to_end(uid)
        h = per.get(recipe["prefix"])
        return h.fork() if h is not None else restore(boundary, self.bench, self.config)
