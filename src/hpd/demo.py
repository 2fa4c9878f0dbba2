"""``hpd demo``: the whole HPD pipeline end to end, offline, on a laptop CPU.

Stages (each writes a folder and is skipped when its ``done.json`` is present, so a killed demo resumes
where it stopped; the time of every stage is in ``results.json["timings"]`` and the manifest):

1. ``data/``: the built-in benchmark (:mod:`hpd.bench.builtin`, benchmark seed 0) with a seeded, labelled
   share ``--defect-rate`` (default 0.12) of defective reference actions in the TRAIN tasks only
   (:mod:`hpd.bench.builtin.defects`: tool failures, off-catalog names, schema-failing arguments, repeated
   calls, premature finishes; held-out references stay clean), unless ``--data`` points at a
   TRAJECT-Bench-shaped folder (its own defects, none injected);
2. ``split.json``: the leakage-safe R1 group split (``hpd.bench.split``, split seed 0);
3. ``base/``: the base model (``--model``): ``smollm2`` (default) = SmolLM2-135M-Instruct built from its PyPI
   wheel (``hpd.policy.smollm2``), trained with LoRA as in the paper; ``tiny`` = a random-weight tiny Qwen3
   (fast path for tests; full fine-tuning, see :data:`MODEL_DEFAULTS`); or a local model folder (LoRA);
4. ``boundaries/``: reference replay of the train tasks through the harness + control documents;
5. ``train/sft``: the SFT baseline = T view on the reference actions, defective ones included;
6. ``teach/``: verified teacher targets with the paper's procedure (:mod:`hpd.teacher`): K=2 proposals per
   attempt, up to 5 attempts, temperature 1 over the full vocabulary, each verified on a fork of the
   harness, ranked against the reference, reference fallback flagged. The teacher reads the control
   document at ``teach_privilege``. ``--teacher auto`` (default) measures two teachers on the same probe
   sample (:mod:`hpd.teacher.choose`): ``base-doc`` = the base model reading the document, and ``i-warm`` =
   the base model after a short I-view warm-up on the references (``train/teacher-warm``), and keeps the one
   with the higher first-attempt acceptance (``teach-choice/teacher_choice.json``). ``oracle`` is the
   scripted teacher that copies the oracle document's next action (tests only);
7. ``train/hpd-t`` (T view on teacher targets) and ``train/hpd`` (T, I, R in a 1:1:1 cycle): the same
   number of optimizer updates and batch as SFT;
8. ``eval/<variant>``: native rollouts of Base, SFT, HPD-T and HPD on the held-out tasks inside the harness
   (no document), with TS / F1 / Step-SR / RC / Exact, plus Action-Acc on the gold-history boundaries;
9. ``results.json`` (metrics, teacher choice and coverage, defect accounting, timings), ``results.md``,
   ``plots/``, ``report.html``.

Seeds: ``seed`` drives the LoRA init (the tiny model's init), training order and teacher sampling; the
benchmark and the split stay fixed so seeds are comparable on the same held-out tasks. Several seeds and
defect rates are :mod:`hpd.study` (``hpd demo --seed 0,1,2``, ``--defect-rate 0,0.12,0.25``): a
:class:`Demo` runs one (rate, seed) cell, and shares what does not depend on the seed (data, split,
boundaries per rate) or on either (the base model and its evaluation) through :class:`DemoPaths`.

Departures from the paper (CPU-sized; each is a config field, recorded in the manifest):

* Real models train CPU-sized budgets (:data:`MODEL_DEFAULTS`): 80 updates of 8 rows at a LoRA-typical
  peak LR of 2e-3 instead of the paper's constant 2e-6 (set for batch 128 over 60k updates), with 5 warm-up
  updates and a cosine decay (``--lr-decay``; the paper's LR is constant), batches whose episodes stay together
  (``data.group_episodes``: shared-prefix batching computes an episode's common prompt once), in ``dtype`` (``auto``:
  bf16 where the CPU computes it natively, AVX512-BF16 / AMX-BF16, else fp32; :mod:`hpd.policy.dtype`), on a seeded
  sample of 260 train tasks (~650 boundaries); 24 held-out tasks. docs/demo.md gives the reason for each size,
  and docs/experiments/README.md lists the measurements behind them.
* The built-in benchmark shows 3 tools per episode (``pool_k``; the paper's TRAJECT pools are larger) and
  evaluation stops an episode after 6 turns and a turn after 256 new tokens (the longest built-in reference
  action, a 4-call batch, is about 200 SmolLM2 tokens).
* The tiny random model is trained by full fine-tuning (a LoRA adapter on random weights barely moves the
  loss; docs/departures.md has the figures).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from hpd.demo_engine import BACKENDS, Engines, model_and_adapter
from hpd.policy.dtype import precision_name, resolve_dtype_name
from hpd.report.registry import TEACHER_VARIANTS
from hpd.runfolder import (RunFolderError, dumps, finish_manifest, new_manifest, prepare_out, read_json,
                           read_manifest, write_json)

METRIC_KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")
VARIANTS = ("Base", "SFT", "HPD-T", "HPD")
BASELINE_VARIANTS = ("DPO", "GRPO", "GSPO", "GiGPO")     # --baselines (hpd.methods.baselines)
TEACHERS = ("auto", "base-doc", "i-warm", "oracle")
DEFAULT_EVAL_TURNS = 8     # built-in tasks need at most 5 turns (4 calls + answer)
BUILT_MODELS = ("tiny", "smollm2")   # --model values built into base/; anything else is a local folder
#: a variant's training saves a resumable checkpoint at least this often (updates): a session that ends mid-stage
#: loses at most this much of a long run (a SmolLM2 LoRA checkpoint is a few MB)
CHECKPOINT_EVERY = 5
DEFAULT_MODEL = "smollm2"            # DemoConfig's, config_for_model's and `hpd demo --model`'s default
#: The one table of the settings that depend on the base model's kind (:func:`model_kind`; module doc: departures):
#: :class:`DemoConfig` fills every field it is not given from its model's row, and `hpd demo --help` shows them.
MODEL_DEFAULTS = {
    "tiny": {"updates": 500, "global_batch": 8, "lr": 3e-3, "lr_decay": "constant", "warmup_updates": 0,
             "full_finetune": True, "lora_r": 32, "lora_alpha": 64,
             "pool_k": 6, "n_per_domain": 30, "train_sample": None, "test_limit": None, "group_episodes": False,
             "eval_turns": None, "max_new_tokens": 96},
    "real": {"updates": 80, "global_batch": 8, "lr": 2e-3, "lr_decay": "cosine", "warmup_updates": 5,
             "full_finetune": False, "lora_r": 16, "lora_alpha": 32,
             "pool_k": 3, "n_per_domain": 30, "train_sample": 260, "test_limit": 24, "group_episodes": True,
             "eval_turns": 6, "max_new_tokens": 256},
}


#: ``data.max_length`` of the trained variants per harness (DemoConfig.max_length's default): a smolagents request
#: carries its own long system prompt (tool rendering and examples): on the built-in benchmark its T/I/R rows reach
#: ~2.7k/3.2k/3.1k SmolLM2 tokens (Pi's: ~1.3k/1.8k/1.6k), so 2048 would skip most of them
HARNESS_MAX_LENGTH = {"pi": 2048, "smolagents": 4096}
#: where the DPO baseline starts (``--dpo-start``): the base model, or the cell's SFT adapter (its reference then)
DPO_STARTS = ("base", "sft")

#: fields :meth:`DemoConfig.to_record` leaves out at this value, so that the record (and the config hash) of a run
#: that keeps it is the one of runs made before the field existed; a record without the field has this value
OMITTED_AT_DEFAULT = {"harness": "pi", "dpo_start": "base"}


class _PerModel:
    """The default of a :class:`DemoConfig` field that depends on the model: its row of :data:`MODEL_DEFAULTS`."""

    def __repr__(self) -> str:
        return "PER_MODEL"


PER_MODEL: Any = _PerModel()


@dataclass
class DemoConfig:
    """Every knob of one demo cell (recorded in ``manifest.json``). A field marked ``PER_MODEL`` that is not given
    takes the value of ``model``'s row of :data:`MODEL_DEFAULTS` (:func:`config_for_model`: the same, with None
    meaning "the default")."""

    out: Path = Path("runs/demo")
    seed: int = 0
    data: Path | None = None              # None: generate the built-in benchmark
    n_per_domain: int = PER_MODEL         # built-in benchmark size (per domain and kind)
    defect_rate: float = 0.12             # share of train boundaries with a defective reference (built-in only)
    model: str = DEFAULT_MODEL            # "tiny" | "smollm2" | a local model folder (see config_for_model)
    size: str = "xs"                      # tiny model size (hpd.policy.tiny)
    pool_k: int = PER_MODEL               # tools shown per episode (gold + seeded distractors)
    updates: int = PER_MODEL              # optimizer updates per trained variant (same budget for all)
    global_batch: int = PER_MODEL
    lr: float = PER_MODEL
    lr_decay: str = PER_MODEL             # constant (paper) | linear | cosine after the warm-up (hpd.train.lr)
    warmup_updates: int = PER_MODEL       # linear LR warm-up (paper: none)
    full_finetune: bool = PER_MODEL       # tiny random base: LoRA barely moves the loss (see module doc)
    lora_r: int = PER_MODEL
    lora_alpha: int = PER_MODEL
    group_episodes: bool = PER_MODEL      # batches hold whole episodes (shared-prefix batching)
    max_length: int | None = None         # None: HARNESS_MAX_LENGTH of the harness
    dtype: str = "auto"                   # auto | float32 | bfloat16 (hpd.policy.dtype): training, teacher, evaluation
    backend: str = "auto"                 # generation engine of the teacher and evaluations: auto | hf | vllm (BACKENDS)
    teacher: str = "auto"                 # auto | base-doc | i-warm | oracle (TEACHERS; module doc)
    teach_attempts: int = 5               # paper: 5
    teach_k: int = 2                      # paper: 2
    teach_temperature: float = 1.0        # paper: 1.0, full vocabulary
    teach_privilege: str = "oracle"
    warm_updates: int | None = None       # I-view warm-up of the i-warm teacher (None: a quarter of updates)
    n_probe: int = 48                     # boundaries on which teacher candidates are compared
    max_new_tokens: int = PER_MODEL
    max_turns: int | None = None          # None: the replay's auto budget (reference turns + 2)
    eval_turns: int | None = PER_MODEL    # turn budget of evaluated episodes (None: max_turns or DEFAULT_EVAL_TURNS)
    train_limit: int | None = None        # cap on train tasks (None: all)
    train_sample: int | None = PER_MODEL  # seeded sample of this many train tasks (seed 0: every cell the same)
    test_limit: int | None = PER_MODEL    # cap on held-out tasks, spread by held_out() (None: all)
    variants: tuple[str, ...] = VARIANTS  # rows; with baselines, the baselines it names (none named: all four)
    baselines: bool = False               # also train + evaluate DPO, GRPO, GSPO, GiGPO (hpd.methods.baselines)
    baseline_updates: int | None = None   # their optimizer updates (None: the same as SFT / HPD)
    dpo_start: str = "base"               # DPO starts from: base (the study's start) | sft (the DPO paper's SFT reference)
    probe_examples: int = 8               # per view: examples scored before/after training (train metrics)
    progress: bool = True                 # training progress bars (real models); off in parallel study lanes
    skip_bad: bool = False                # --data: skip malformed entries instead of stopping (hpd.bench.entries)
    strict_catalog: bool = False          # --data: a step whose tool is missing from the catalog is malformed
    harness: str = "pi"                   # hpd.harnesses.registry: replay, documents, teacher verification, eval

    def __post_init__(self) -> None:
        for k, v in MODEL_DEFAULTS[model_kind(self.model)].items():
            if getattr(self, k) is PER_MODEL:
                setattr(self, k, v)
        from hpd.harnesses.registry import get_harness

        get_harness(self.harness)          # ValueError naming the harnesses
        if self.dpo_start not in DPO_STARTS:
            raise ValueError(f"dpo_start {self.dpo_start!r}: choose from {', '.join(DPO_STARTS)}")
        if self.max_length is None:
            self.max_length = HARNESS_MAX_LENGTH[self.harness]

    def to_record(self) -> dict:
        d = asdict(self)
        d["out"] = str(self.out)
        d["data"] = str(self.data) if self.data else None
        d["variants"] = list(self.variants)
        return {k: v for k, v in d.items() if k not in OMITTED_AT_DEFAULT or v != OMITTED_AT_DEFAULT[k]}


def full_record(record: dict) -> dict:
    """A config record with the fields :data:`OMITTED_AT_DEFAULT` leaves out filled in: what two records are
    compared as (a Pi run's folder is then never resumed by another harness's run)."""
    return {**OMITTED_AT_DEFAULT, **record}


@dataclass
class DemoPaths:
    """Where a cell's stages live: ``root`` holds what no seed or defect rate changes (base model, its
    evaluation), ``rate`` what one defect rate fixes (data, split, boundaries), ``cell`` the rest. A single
    run has all three equal to ``--out``."""

    root: Path
    rate: Path
    cell: Path

    @classmethod
    def single(cls, out: Path) -> "DemoPaths":
        return cls(Path(out), Path(out), Path(out))


def model_kind(model: str) -> str:
    """``tiny`` for the tiny random model, ``real`` for SmolLM2 or a local model folder."""
    return "tiny" if model == "tiny" else "real"


def config_for_model(model: str = DEFAULT_MODEL, **overrides) -> DemoConfig:
    """A :class:`DemoConfig` with the defaults of ``model``'s kind (:data:`MODEL_DEFAULTS`); ``overrides``
    that are ``None`` keep the default (as the ``hpd demo`` options that are not given)."""
    return DemoConfig(model=model, **{k: v for k, v in overrides.items() if v is not None})


def model_defaults_text(key: str, show: Callable[[Any], str] = str) -> str:
    """``Default: 500 (tiny), 80 (real model).`` (or ``Default: 8.`` when both kinds agree) for a field of
    :data:`MODEL_DEFAULTS`, each value written by ``show``: the `hpd demo` help of the per-model options."""
    tiny, real = (show(MODEL_DEFAULTS[kind][key]) for kind in ("tiny", "real"))
    return f"Default: {tiny}." if tiny == real else f"Default: {tiny} (tiny), {real} (real model)."


#: config fields a run folder may be resumed with a different value of: where it lives, and which rows the
#: table shows (they add stages, they change none that finished)
RESUME_FREE = ("out", "variants", "baselines", "progress")


def baselines_asked(cfg: DemoConfig) -> tuple[str, ...]:
    """The baselines a run adds to its table: none without ``--baselines``; with it, those ``--variants`` names
    (``hpd study run`` asks for one baseline cell at a time), else all four."""
    if not cfg.baselines:
        return ()
    return tuple(b for b in BASELINE_VARIANTS if b in cfg.variants) or BASELINE_VARIANTS


def registry_config(cfg: DemoConfig, variant: str) -> dict:
    """What decides one variant's result, hashed as its identity in the results registry
    (:mod:`hpd.report.registry`): the cell's config without the fields a run folder may be resumed with another
    value of (:data:`RESUME_FREE`), plus the variant."""
    rec = json.loads(dumps(cfg.to_record()))
    return {**{k: v for k, v in rec.items() if k not in RESUME_FREE}, "variant": variant}


def check_same_config(out: Path, record: dict) -> None:
    """Refuse to resume a folder that a demo of another config made (one-line :class:`RunFolderError`
    naming the fields that differ); fields absent from the older manifest are not compared."""
    old = read_manifest(out)
    if old is None:
        return
    prev, new = full_record(old.get("config") or {}), full_record(json.loads(dumps(record)))
    diff = [k for k in new if k not in RESUME_FREE and k in prev and prev[k] != new[k]]
    if diff:
        what = ", ".join(f"{k} {prev[k]!r} (asked: {new[k]!r})" for k in diff)
        raise RunFolderError(f"{out} holds a demo run of another config: {what}; use another --out, or the "
                             "same options to resume it")


def _done(path: Path) -> dict | None:
    f = path / "done.json"
    if f.is_file():
        try:
            return json.loads(f.read_text())
        except json.JSONDecodeError:
            return None
    return None


def _mark(path: Path, info: dict) -> None:
    write_json(path / "done.json", info, sort_keys=True)


def stage_times(level: Path) -> dict[str, float]:
    """Seconds each stage took when it ran, stored in ``<level>/timings.json`` ({} when absent)."""
    f = Path(level) / "timings.json"
    try:
        return json.loads(f.read_text()) if f.is_file() else {}
    except json.JSONDecodeError:
        return {}


def save_stage_time(level: Path, name: str, seconds: float) -> None:
    write_json(Path(level) / "timings.json", {**stage_times(level), name: seconds}, sort_keys=True)


def replay_config(cfg: DemoConfig):
    from hpd.boundary import ReplayConfig

    return ReplayConfig(pool_k=cfg.pool_k, max_turns=cfg.max_turns if cfg.max_turns else "auto", harness=cfg.harness)


def train_config(cfg: DemoConfig, name: str, views: dict[str, int], target: str, base: Path,
                 updates: int | None = None) -> dict:
    """The trainer config of one variant: identical budget, only views/targets differ."""
    n = updates or cfg.updates
    return {
        "name": name,
        "seed": cfg.seed,
        "model": {"path": str(base), "precision": precision_name(cfg.dtype)},
        "lora": {"enabled": not cfg.full_finetune, "r": cfg.lora_r, "alpha": cfg.lora_alpha, "dropout": 0.0},
        "optim": {"lr": cfg.lr, "decay": cfg.lr_decay, "warmup_updates": min(cfg.warmup_updates, n - 1)},
        "batch": {"global_batch": cfg.global_batch, "micro_batch_tokens": max(4096, cfg.max_length)},
        "data": {"max_length": cfg.max_length, "target": target, "group_episodes": cfg.group_episodes},
        "schedule": {"phases": [{"views": views, "updates": n}]},
        "checkpoint": {"every": max(1, min(n // 3, CHECKPOINT_EVERY))},
        "logging": {"probe_examples": cfg.probe_examples, "progress": cfg.progress and model_kind(cfg.model) == "real",
                    "tensorboard": False},
    }


def _same_action(a: dict | None, b: dict | None) -> bool:
    """Same tool calls (names + arguments, in order) and same text: ids and metadata ignored."""
    if a is None or b is None:
        return False

    def key(m: dict) -> list:
        return [(c.get("type"), c.get("name"), json.dumps(c.get("arguments"), sort_keys=True), c.get("text"))
                for c in m.get("content", []) if c.get("type") in ("toolCall", "text")]

    return key(a) == key(b)


def _spread_domain(tasks: list) -> list:
    """One domain's held-out tasks of one kind, reordered so that a capped evaluation sees as many distinct
    trajectories as it can: parallel simple/hard twins (the same trajectory phrased two ways) come after every
    trajectory of the domain has one task in, and the first tasks alternate hard and simple phrasing; split
    order otherwise."""
    if not tasks or tasks[0].kind != "parallel":
        return list(tasks)
    groups: dict[int, list] = {}
    for t in tasks:
        groups.setdefault(t.index, []).append(t)
    first, rest = [], []
    for k, (_, twins) in enumerate(sorted(groups.items())):
        want = "simple" if k % 2 else "hard"
        twins = sorted(twins, key=lambda t: (want not in t.path, t.uid))
        first.append(twins[0])
        rest.extend(twins[1:])
    return first + rest


def round_robin(queues: list[list], limit: int | None = None) -> list:
    """The queues' items taken in turn (first of each, then second of each, ...), at most ``limit``."""
    queues = [list(q) for q in queues]
    out: list = []
    while any(queues) and (limit is None or len(out) < limit):
        for q in queues:
            if q and (limit is None or len(out) < limit):
                out.append(q.pop(0))
    return out


def held_out(tasks: list, limit: int | None) -> list:
    """The first ``limit`` held-out tasks, spread over what the split holds: kinds alternate (parallel,
    sequential, ...), within a kind the domains take turns, and within a domain distinct trajectories come
    before twins (:func:`_spread_domain`); all of them in split order when ``limit`` is None."""
    if limit is None or limit >= len(tasks):
        return list(tasks)
    strata: dict[str, dict[str, list]] = {}
    for t in tasks:
        strata.setdefault(t.kind, {}).setdefault(t.domain, []).append(t)
    kinds = [round_robin([_spread_domain(v) for _, v in sorted(domains.items())])
             for _, domains in sorted(strata.items())]
    return round_robin(kinds, limit)


def resolve_backend(cfg: "DemoConfig") -> str:
    """The engine that generates for the teacher and the evaluations: ``hf`` or ``vllm``
    (:class:`hpd.demo_engine.Engines`). ``auto`` is ``vllm`` for a real model where vLLM runs (on the CPU: over
    merged adapters; measured 2.9x the hf backend on the demo's teacher and 1.75x on its evaluation episodes, both
    in bf16, docs/ml-stack.md section 7), and ``hf`` for the tiny model (an engine start per variant would cost
    more than its whole evaluation) or where vLLM is missing."""
    if cfg.backend not in BACKENDS:
        raise ValueError(f"unknown backend {cfg.backend!r}; choose from {', '.join(BACKENDS)}")
    if cfg.backend != "auto":
        return cfg.backend
    if model_kind(cfg.model) == "tiny":
        return "hf"
    from hpd.policy import backends

    return backends.resolve_backend("auto")


class Demo:
    """The pipeline of one (defect rate, seed) cell, one method per stage; ``log`` receives one-line
    progress messages."""

    def __init__(self, cfg: DemoConfig, log: Callable[[str], None] = print, paths: DemoPaths | None = None,
                 registry=None, on_progress: Callable | None = None, estimate: bool = True):
        self.cfg = cfg
        self.paths = paths or DemoPaths.single(cfg.out)
        self.out = self.paths.cell
        self.log = log
        self.registry = registry           # hpd.report.registry.Registry: finished variants go there (--registry)
        self.registered: dict[str, dict] = {}   # variant -> metrics found in the registry (not run again)
        self.timings: dict[str, float] = {}
        self.resumed: list[str] = []       # stages found finished (their time is the stored one)
        self._engines = None               # hpd.demo_engine.Engines: the generators, built on first use
        # the time estimate and progress (hpd.demo_estimate): ``on_progress(tracker)`` at every stage (a terminal
        # line), else one log line per stage when cfg.progress; ``estimate=False``: no calibration, no estimate
        self.on_progress, self.want_estimate = on_progress, estimate
        self.tracker = None
        self._calibration = None
        self.estimate: dict = {}           # results.json["estimate"]: calibration, work, stages {name: seconds}

    # ----------------------------------------------------------------------------- helpers
    def _stage(self, name: str, fn, done: Path | None = None, level: Path | None = None):
        """Run one stage and time it. ``done`` is the stage's output (a folder with ``done.json``, or a
        file); when it is already there the stage is resumed, and its time is the one stored in
        ``<level>/timings.json`` when it ran (``level``: the folder the output lives in, default the cell),
        so a resumed run still reports what each stage cost."""
        level = level or self.out
        finished = done is not None and (done.is_file() or _done(done) is not None)
        t0 = time.perf_counter()
        self.log(f"> {name} ...")
        self._tick(name)
        r = fn()
        took = round(time.perf_counter() - t0, 1)
        if finished:
            stored = stage_times(level).get(name)
            self.timings[name] = took if stored is None else stored
            self.resumed.append(name)
            self.log(f"  {name}: already done (took {self.timings[name]:.1f}s when it ran)")
        else:
            self.timings[name] = took
            save_stage_time(level, name, took)
            self.log(f"  {name}: done in {took:.1f}s")
        self._tick(name, self.timings[name], finished)
        return r

    def _tick(self, name: str, seconds: float | None = None, resumed: bool = False) -> None:
        """Tell the progress tracker a stage started (``seconds`` None) or ended; show the progress line."""
        if self.tracker is None:
            return
        if seconds is None:
            self.tracker.start(name)
        else:
            self.tracker.finish(name, seconds, resumed)
        if self.on_progress is not None:
            self.on_progress(self.tracker)
        elif seconds is None and self.cfg.progress:
            self.log(f"  progress {self.tracker.line()}")

    def _progress(self, what: str, total: int, every: float = 0.1, unit: str = "boundaries", track: bool = True):
        """An ``on_wave(done, total)`` callback that logs each further tenth of the work and, with ``track``, gives
        the tracker the stage's fraction done (not for an evaluation: its episodes end together near the end of a
        chunk, and Action-Acc follows them, so the fraction of episodes done says little of the time left)."""
        last = [0.0]

        def on_wave(done: int, n: int) -> None:
            if track and self.tracker is not None:
                self.tracker.within(done, n)
            if n and (done / n - last[0] >= every or done == n):
                last[0] = done / n
                self.log(f"    {what}: {done}/{n} {unit}")
        return on_wave

    # ----------------------------------------------------------------------------- stages
    def data(self) -> Path:
        if self.cfg.data is not None:
            return Path(self.cfg.data)
        d = self.paths.rate / "data"
        if not _done(d):
            from hpd.bench.builtin import generate

            generate(d, seed=0, n_per_domain=self.cfg.n_per_domain, defect_rate=self.cfg.defect_rate)
            _mark(d, {"generator": "hpd.bench.builtin", "seed": 0, "n_per_domain": self.cfg.n_per_domain,
                      "defect_rate": self.cfg.defect_rate})
        return d

    def split(self, bench) -> dict:
        f = self.paths.rate / "split.json"
        if f.is_file():
            return json.loads(f.read_text())
        from hpd.bench.split import make_split

        sp = make_split(bench.tasks, seed=0)
        if any(sp["leakage"].values()):
            raise RuntimeError(f"split leaks: {sp['leakage']}")
        write_json(f, sp, sort_keys=True)
        return sp

    def base(self, data_dir: Path) -> Path:
        """The base model folder: built into ``<root>/base/`` (tiny, smollm2) or the given local folder."""
        model = self.cfg.model
        if model not in BUILT_MODELS:
            d = Path(model)
            if not (d / "config.json").is_file():
                raise ValueError(f"--model {model}: not tiny, smollm2 or a model folder (no config.json)")
            return d
        d = self.paths.root / "base"
        done = _done(d)
        if done is not None and done.get("model", "tiny") != model:
            raise ValueError(f"{d} holds the {done.get('model', 'tiny')} base model, not {model}; "
                             "use another --out")
        if done is None:
            if model == "tiny":
                from hpd.policy.tiny import build_tiny

                build_tiny(d, size=self.cfg.size, seed=self.cfg.seed, data_dir=data_dir)
                _mark(d, {"model": "tiny", "size": self.cfg.size, "seed": self.cfg.seed})
            else:
                from hpd.policy.smollm2 import build_smollm2

                build_smollm2(d)
                _mark(d, {**json.loads((d / "hpd_model.json").read_text())["hpd_model"], "model": model})
        return d

    def boundaries(self, data_dir: Path, bench, tokenizer_path: Path) -> list:
        from hpd.boundary import load_boundaries, run_replay
        from hpd.report.inspector import write_inspector

        d = self.boundaries_dir()
        if not _done(d):
            run_replay(data_dir, d, replay_config(self.cfg), split_file=self.paths.rate / "split.json",
                       split="train", limit=self.cfg.train_limit, sample=self.cfg.train_sample, seed=0,
                       bench=bench, overwrite=True,
                       tokenizer_path=str(tokenizer_path), command="hpd demo (replay)")
            write_inspector(d, d / "inspector.html", max_tasks=500)
            _mark(d, {})
        return load_boundaries(d)

    def boundaries_dir(self) -> Path:
        """The reference replay + documents of this defect rate, one folder per harness (Pi's: ``boundaries``)."""
        from hpd.harnesses.registry import harness_folder

        return self.paths.rate / harness_folder("boundaries", self.cfg.harness)

    def records(self, bds: list, target_of: dict | None = None) -> list[dict]:
        """Trainer records; ``target_of`` maps boundary uid -> teacher target (None: the reference)."""
        from hpd.views.records import make_record

        priv = self.cfg.teach_privilege
        out = []
        for b in bds:
            tgt = b.reference if target_of is None else target_of.get(b.uid)
            if tgt is None:
                continue
            out.append(make_record(b.uid, b.context, tgt, reference=b.reference, document=b.document_text(priv),
                                   document_privilege=priv))
        return out

    def train(self, name: str, records: list[dict], views: dict[str, int], target: str, base: Path,
              updates: int | None = None) -> Path:
        from hpd.train import train

        d = self.out / "train" / name
        if not _done(d):
            from hpd.train.checkpoint import resume_or_clear

            resume = resume_or_clear(d)   # an unfinished run resumes from its newest checkpoint
            train(records, train_config(self.cfg, name, views, target, base, updates), d, resume=resume,
                  command=f"hpd demo (variant {name})")
            _mark(d, {"views": views, "target": target, "updates": updates or self.cfg.updates})
        return d / ("model" if self.cfg.full_finetune else "adapter")

    # ----------------------------------------------------------------------------- the teacher
    def _teach_config(self):
        from hpd.teacher.run import TeachConfig

        return TeachConfig(k=self.cfg.teach_k, attempts=self.cfg.teach_attempts, fallback="reference",
                           privilege=self.cfg.teach_privilege, seed=self.cfg.seed, batch_boundaries=32)

    def generator(self, base: Path, trained: Path | None):
        """The generation backend of a teacher or an evaluation (:func:`resolve_backend`): the hf backend, or the
        cell's vLLM engine over the variant's merged weights (:class:`hpd.demo_engine.Engines`)."""
        if self._engines is None:
            import torch

            self._engines = Engines(resolve_backend(self.cfg), self.cfg.dtype, self.cfg.seed, self.out / "merged",
                                    threads=torch.get_num_threads(), log=self.log)
        return self._engines.generator(base, trained)

    def close_engine(self) -> None:
        """Stop the cell's vLLM engine, if one was started."""
        if self._engines is not None:
            self._engines.close()

    def _model_teacher(self, base: Path, adapter: Path | None, name: str):
        from hpd.teacher.proposal import PolicyTeacher

        policy = self.generator(base, adapter)
        return PolicyTeacher(policy, policy.tokenizer, privilege=self.cfg.teach_privilege,
                             max_new_tokens=self.cfg.max_new_tokens, temperature=self.cfg.teach_temperature,
                             name=name)

    def _warm_teacher(self, bds: list, base: Path) -> Path:
        """The i-warm teacher's adapter: the base model after a short I-view warm-up on the references."""
        return self._stage("train teacher warm-up (I view)", lambda: self.train(
            "teacher-warm", self.records(bds), {"I": 1}, "reference", base,
            updates=self.cfg.warm_updates or max(1, round(self.cfg.updates / 4))),
            done=self.out / "train" / "teacher-warm")

    def choose_teacher(self, items: list, bds: list, base: Path) -> tuple[object, dict | None]:
        """The teacher to run: ``oracle``; ``base-doc`` / ``i-warm`` as asked; ``auto`` = both probed."""
        kind = self.cfg.teacher
        if kind == "oracle":
            from hpd.teacher.factory import build_teacher

            return build_teacher("oracle"), None
        if kind == "base-doc":
            return self._model_teacher(base, None, "base-doc"), None
        warm = self._warm_teacher(bds, base)
        if kind == "i-warm":
            return self._model_teacher(base, warm, "i-warm"), None
        from hpd.teacher.choose import choose_teacher

        makers = {"base-doc": lambda: self._model_teacher(base, None, "base-doc"),
                  "i-warm": lambda: self._model_teacher(base, warm, "i-warm")}
        chosen, report = self._stage("choose teacher", lambda: choose_teacher(
            makers, items, self._teach_config(), self.out / "teach-choice", n_probe=self.cfg.n_probe,
            manifest={"command": "hpd demo (teacher probe)", "seed": self.cfg.seed}),
            done=self.out / "teach-choice" / "teacher_choice.json")
        return makers[chosen](), report

    def teach(self, bds: list, bench, base: Path) -> dict:
        from hpd.teacher.boundaries import items_from_boundaries
        from hpd.teacher.run import teach

        d = self.out / "teach"
        items = items_from_boundaries(bds, bench, replay_config(self.cfg))
        if _done(d) is not None:   # finished, or restored from an archive: no teacher (nor its warm-up) again
            teacher, choice = self._finished_teacher(d)
        else:
            teacher, choice = self.choose_teacher(items, bds, base)
        res = self._stage("teach", lambda: teach(items, teacher, self._teach_config(), d, manifest={
            "command": "hpd demo (teach)", "seed": self.cfg.seed,
            "dtype": getattr(getattr(teacher, "policy", None), "dtype", None)},
            on_wave=self._progress("teach", len(items))),
            done=d)
        targets = {r["boundary_id"]: (r["target"] or {}).get("message") for r in res.records}
        same = sum(1 for b in bds if _same_action(targets.get(b.uid), b.reference))
        diag = dict(res.diagnostics, teacher=teacher.name, targets_equal_reference=same, n_targets=len(targets))
        _mark(d, {"n": len(targets)})
        return {"targets": targets, "records": {r["boundary_id"]: r for r in res.records}, "diagnostics": diag,
                "choice": choice}

    def _finished_teacher(self, d: Path) -> tuple[object, dict | None]:
        """A finished teach folder's teacher (by name) and the stored choice report; the teacher stages it skips
        keep the times stored when they ran (``timings.json``), as resumed stages do."""
        from hpd.teacher.run import FinishedTeacher

        stored = stage_times(self.out)
        for name in ("train teacher warm-up (I view)", "choose teacher"):
            if name in stored:
                self.timings[name] = stored[name]
                self.resumed.append(name)
        f = self.out / "teach-choice" / "teacher_choice.json"
        return FinishedTeacher(d), read_json(f, "teacher choice") if f.is_file() else None

    def train_baselines(self, base: Path, sft: Path | None) -> dict[str, Path]:
        """DPO (from the teach folder) and GRPO / GSPO / GiGPO (online RL from the SFT model), each with its
        shipped config under this cell's paths and budget (:mod:`hpd.methods.baselines`)."""
        todo = self.baselines_to_run()
        if sft is None and set(todo) - ({"DPO"} if self.cfg.dpo_start == "base" else set()):
            raise ValueError("--baselines: GRPO, GSPO and GiGPO (and DPO with --dpo-start sft) start from the SFT "
                             "stage, which did not run")
        if "DPO" in todo and not (self.out / "teach" / "done.json").is_file():
            raise ValueError("--baselines: DPO's pairs come from the teach stage, which did not run")
        if self.cfg.harness != "pi":
            raise ValueError(f"--baselines runs in Pi only (the RL baselines' rollouts), not in {self.cfg.harness}")
        paths = dict(base=base, sft=sft, data_dir=Path(self.data()), split_file=self.paths.rate / "split.json",
                     teach_dir=self.out / "teach", boundaries_dir=self.boundaries_dir())
        out = {}
        for name in todo:
            d = self.out / "train" / name.lower()
            out[name] = self._stage(f"train {name}", lambda name=name, d=d: self._baseline(name, d, paths), done=d)
        return out

    def _baseline(self, name: str, d: Path, paths: dict) -> Path:
        from hpd.methods.baselines import train_baseline

        done = _done(d)
        if done is not None:
            return Path(done["trained"])
        trained = train_baseline(name, self.cfg, d, kind=model_kind(self.cfg.model),
                                 command=f"hpd demo (baseline {name})", engine=resolve_backend(self.cfg), **paths)
        _mark(d, {"trained": str(trained)})
        return trained

    # ----------------------------------------------------------------------------- evaluation
    def evaluate(self, name: str, bench, tasks: list, base: Path, adapter: Path | None, d: Path,
                 label: str | None = None) -> dict:
        """Native rollouts + Action-Acc at the gold-history boundaries into ``d``: the recipe of ``hpd eval``
        (:func:`hpd.eval.variant.evaluate_variant`) with the demo's settings, in the config's harness; the log
        counts the episodes as ``eval <label>: done/total episodes``."""
        from hpd.eval.variant import evaluate_variant, make_episode_policy

        done = _done(d)
        if done:
            return done
        model, adapter_ = model_and_adapter(base, adapter)
        engine = self.generator(base, adapter) if resolve_backend(self.cfg) == "vllm" else None
        pol = make_episode_policy("model", model=model, adapter=adapter_, temperature=0.0,
                                  max_new_tokens=self.cfg.max_new_tokens, seed=self.cfg.seed, batch_size=64,
                                  dtype=self.cfg.dtype, generator=engine)
        adapter = adapter_
        summary = evaluate_variant(bench, tasks, pol, d, pool_k=self.cfg.pool_k,
                                   max_turns=self.cfg.eval_turns or self.cfg.max_turns or DEFAULT_EVAL_TURNS,
                                   batch_size=64, action_batch_size=64,
                                   config={"variant": name, "model": model, "adapter": adapter},
                                   command=f"hpd demo (eval {name})", harness=self.cfg.harness,
                                   on_episode=self._progress(f"eval {label or name}", len(tasks), unit="episodes",
                                                             track=False))
        metrics = {k: float(summary.get(k) or 0.0) for k in METRIC_KEYS}
        metrics["Action-Acc_calls"] = float(summary["Action-Acc_calls"])    # tool-call boundaries only
        metrics["n_tasks"] = len(tasks)
        metrics["n_boundaries"] = summary["n_boundaries"]
        _mark(d, metrics)
        return metrics

    def eval_stage(self, variant: str, bench, tasks: list, base: Path, adapter: Path | None) -> dict:
        """The timed, resumable ``eval <variant>`` stage (Base lives at the root, the others in the cell)."""
        where = self.eval_dirs()[variant]
        return self._stage(f"eval {variant}", lambda: self.evaluate(variant.lower(), bench, tasks, base, adapter,
                                                                    where, label=variant),
                           done=where, level=where.parent.parent)

    def variant_names(self) -> list[str]:
        """The table's rows in order: Base, SFT, the baselines asked for (:func:`baselines_asked`), HPD-T, HPD."""
        extra = baselines_asked(self.cfg)
        return [v for v in ("Base", "SFT", *extra, "HPD-T", "HPD") if v in self.cfg.variants or v in extra]

    def eval_dirs(self) -> dict[str, Path]:
        """Variant -> its evaluation folder: the untrained Base's is shared by every cell (no seed or defect rate
        changes it), ``<root>/eval/base`` (one per harness, :func:`hpd.harnesses.registry.harness_folder`), the
        others are the cell's ``eval/<variant>``."""
        from hpd.harnesses.registry import harness_folder

        base = self.paths.root / "eval" / harness_folder("base", self.cfg.harness)
        return {v: base if v == "Base" else self.out / "eval" / v.lower() for v in self.variant_names()}

    # ----------------------------------------------------------------------------- time estimate and progress
    def planned_stages(self) -> dict[str, bool]:
        """The stages :meth:`run` goes through, in order, each with whether it is finished already: the plan of
        the time estimate (it follows :meth:`prepare`, :meth:`train_variants`, :meth:`choose_teacher` and the
        evaluations)."""
        cfg, out, rate = self.cfg, self.out, self.paths.rate

        def fin(p: Path | None) -> bool:
            return p is not None and (p.is_file() or _done(p) is not None)

        plan = {"data": fin(None if cfg.data else rate / "data"), "split": fin(rate / "split.json"),
                "base model": cfg.model in BUILT_MODELS and fin(self.paths.root / "base"),
                "replay + documents": fin(self.boundaries_dir())}
        want = set(cfg.variants) - set(self.registered)
        sft, teach = self.stages_needed()
        if sft:
            plan["train SFT"] = fin(out / "train" / "sft")
        if teach:
            taught = fin(out / "teach")     # a finished teach stage skips the teacher's (Demo._finished_teacher)
            if cfg.teacher in ("auto", "i-warm"):
                plan["train teacher warm-up (I view)"] = taught or fin(out / "train" / "teacher-warm")
            if cfg.teacher == "auto":
                plan["choose teacher"] = taught or fin(out / "teach-choice" / "teacher_choice.json")
            plan["teach"] = taught
            for v in ("HPD-T", "HPD"):
                if v in want:
                    plan[f"train {v}"] = fin(out / "train" / v.lower())
        for b in self.baselines_to_run():
            plan[f"train {b}"] = fin(out / "train" / b.lower())
        for v, d in self.eval_dirs().items():
            if v not in self.registered:
                plan[f"eval {v}"] = fin(d)
        return plan

    def start_estimate(self) -> None:
        """Before the first stage: time this machine on the base model's architecture, estimate every stage still
        to run (:mod:`hpd.demo_estimate`) and log the total; a failure costs only the estimate (one line)."""
        if not self.want_estimate:
            return
        from hpd import demo_estimate as de

        plan = self.planned_stages()
        done = [s for s, f in plan.items() if f]
        if len(done) == len(plan):
            return
        base = self.paths.root / "base" if self.cfg.model in BUILT_MODELS else Path(self.cfg.model)
        try:
            self._calibration = de.calibrate(de.model_config(self.cfg.model, self.cfg.size, base),
                                             full_finetune=self.cfg.full_finetune,
                                             dtype=getattr(self.cfg, "dtype", "float32"),
                                             cache_key=(self.cfg.model, self.cfg.size, str(base)))
        except Exception as exc:  # no estimate, the demo runs on
            self.log(f"  no time estimate ({type(exc).__name__}: {exc})")
            return
        work = de.predict_work(self.cfg)
        est = de.estimate(plan, self.cfg, work, self._calibration)
        self.estimate = {"calibration": self._calibration.to_record(), "work": asdict(work), "stages": est,
                         "initial_total_s": round(de.total(est, done), 1), "done_before": done}
        self.tracker = de.Tracker(est, done=done)
        self.log(de.headline(est, self._calibration, done))

    def refine_estimate(self, bds: list, test_tasks: list, base: Path) -> None:
        """After the replay: the real counts and token lengths, and the stages still to run estimated again."""
        if self.tracker is None:
            return
        from hpd import demo_estimate as de

        try:
            work = de.measure_work(self.cfg, bds, test_tasks, base)
        except Exception as exc:  # the first estimate stays
            self.log(f"  estimate not refined ({type(exc).__name__}: {exc})")
            return
        self.tracker.update(de.estimate(self.tracker.estimate, self.cfg, work, self._calibration))
        self.estimate.update(work=asdict(work), stages=dict(self.tracker.estimate))
        self.log(f"  estimated again from {work.train_boundaries} train boundaries and {work.test_tasks} held-out "
                 f"tasks: {de.minutes(self.tracker.left())} left")

    def stage_report(self) -> None:
        """At the end: each stage's seconds (or the time it took when it ran) with its estimate beside it."""
        from hpd.report.results import stage_table, text_table

        if self.timings:
            self.log("time by stage:")
            for line in text_table(stage_table(self.timings, self.resumed, self.estimate.get("stages"))):
                self.log(f"  {line}")

    def committed(self) -> dict:
        """The study results committed to the repository (:mod:`hpd.report.committed`) for the report."""
        from hpd.report.committed import committed_results, results_root

        try:
            return committed_results()
        except Exception as exc:  # a broken registry must not cost the run its report
            return {"root": str(results_root()), "studies": [], "error": f"{type(exc).__name__}: {exc}"}

    # ----------------------------------------------------------------------------- the whole run
    def prepare(self):
        """Data, split, base model and boundaries; returns ``(bench, test tasks, base, boundaries)``."""
        data_dir, bench, test_tasks, base = self.eval_inputs()
        bds = self._stage("replay + documents", lambda: self.boundaries(data_dir, bench, base),
                          done=self.boundaries_dir(), level=self.paths.rate)
        self.log(f"    {len(bds)} train boundaries; {len(test_tasks)} held-out tasks")
        return bench, test_tasks, base, bds

    def eval_inputs(self):
        """Data, split and base model (what an evaluation needs); returns ``(data folder, bench, test tasks,
        base)``."""
        from hpd.bench.entries import skipped_lines
        from hpd.bench.loader import load_bench
        from hpd.bench.split import select

        cfg = self.cfg
        data_dir = self._stage("data", self.data, done=None if cfg.data else self.paths.rate / "data",
                               level=self.paths.rate)
        bench = load_bench(data_dir, skip_bad=cfg.skip_bad, strict_catalog=cfg.strict_catalog)
        for line in skipped_lines(bench.bad):
            self.log(f"    {line}")
        sp = self._stage("split", lambda: self.split(bench), done=self.paths.rate / "split.json",
                         level=self.paths.rate)
        test_tasks = held_out(select(bench.tasks, sp, "test"), cfg.test_limit)
        if not test_tasks:
            raise ValueError(f"the split of {data_dir} holds no test tasks ({len(bench.tasks)} tasks); "
                             "use a larger benchmark (--n-per-domain)")
        base = self._stage("base model", lambda: self.base(data_dir), level=self.paths.root,
                           done=self.paths.root / "base" if cfg.model in BUILT_MODELS else None)
        return data_dir, bench, test_tasks, base

    def baselines_to_run(self) -> list[str]:
        """The baselines this run trains: those it asks for (:func:`baselines_asked`), less those the registry
        holds."""
        return [b for b in baselines_asked(self.cfg) if b not in self.registered]

    def stages_needed(self) -> tuple[bool, bool]:
        """``(SFT, teach)``: whether the variants and baselines still to run need the SFT stage and the teach
        stage. HPD-T and HPD need both (SFT is their baseline row); DPO needs the teach stage (its pairs), and
        SFT only with ``--dpo-start sft``; the RL baselines need SFT (their start). With a registry, a registered
        SFT is not trained again unless a baseline starts from it."""
        want = set(self.cfg.variants) - set(self.registered)
        todo = set(self.baselines_to_run())
        sft_rows = {"SFT"} if self.registry is not None else {"SFT", "HPD-T", "HPD"}
        from_sft = todo - ({"DPO"} if self.cfg.dpo_start == "base" else set())
        return bool(want & sft_rows or from_sft), bool(want & {"HPD-T", "HPD"}) or "DPO" in todo

    def train_variants(self, bench, base: Path, bds: list) -> tuple[dict, dict | None]:
        """SFT, the teacher, HPD-T and HPD; returns ``(variant -> adapter, teach output)``."""
        want = set(self.cfg.variants) - set(self.registered)
        adapters: dict[str, Path | None] = {"Base": None}
        sft_needed, teach_needed = self.stages_needed()
        if sft_needed:
            adapters["SFT"] = self._stage("train SFT", lambda: self.train(
                "sft", self.records(bds), {"T": 1}, "reference", base), done=self.out / "train" / "sft")
        teach_out = None
        if teach_needed:
            teach_out = self.teach(bds, bench, base)
            self.close_engine()    # the teacher's vLLM engine (GBs) would idle through the trainings below
            recs = self.records(bds, teach_out["targets"])
            if "HPD-T" in want:
                adapters["HPD-T"] = self._stage("train HPD-T", lambda: self.train(
                    "hpd-t", recs, {"T": 1}, "teacher", base), done=self.out / "train" / "hpd-t")
            if "HPD" in want:
                adapters["HPD"] = self._stage("train HPD", lambda: self.train(
                    "hpd", recs, {"T": 1, "I": 1, "R": 1}, "teacher", base), done=self.out / "train" / "hpd")
        return adapters, teach_out

    def run(self) -> dict:
        """Every stage in order (each resumes from its output); the cell's vLLM engine is stopped however the run
        ends (a finished run, an error, Ctrl-C, or SIGTERM, which ``hpd demo`` turns into Ctrl-C), so no engine
        process outlives it."""
        try:
            return self._run()
        finally:
            self.close_engine()

    def _run(self) -> dict:
        from hpd.bench.loader import data_checksum

        cfg = self.cfg
        prepare_out(self.out)
        check_same_config(self.out, cfg.to_record())
        man = new_manifest("hpd demo", cfg.to_record(), seed=cfg.seed,
                           inputs={"data": data_checksum(cfg.data)} if cfg.data else None,
                           dtype=resolve_dtype_name(cfg.dtype))   # what every stage computes in
        write_json(self.out / "manifest.json", man)
        self.registered = self.from_registry()
        if self.registered and len(self.registered) == len(self.variant_names()):
            return self.registry_run(man)
        self.start_estimate()
        bench, test_tasks, base, bds = self.prepare()
        self.refine_estimate(bds, test_tasks, base)
        adapters, teach_out = self.train_variants(bench, base, bds)
        if cfg.baselines:
            adapters.update(self.train_baselines(base, adapters.get("SFT")))
        results = {}
        evidence = teacher_evidence(teach_out, bds)     # the results' teacher keys, and each HPD cell's teacher.json
        for v in self.variant_names():
            if v in self.registered:
                results[v] = self.registered[v]
                continue
            results[v] = self.eval_stage(v, bench, test_tasks, base, adapters.get(v))
            self.register(v, results[v], teacher=evidence if v in TEACHER_VARIANTS else None)
        self.close_engine()
        results_doc = self.results_doc(results, evidence, base)
        if self.registry is not None:
            results_doc["from_registry"] = [v for v in results if v in self.registered]
        results_doc["estimate"] = self.estimate or None
        results_doc["committed"] = self.committed()
        from hpd.report.results import write_results_report
        from hpd.report.runs import RESULTS_FILE

        write_json(self.out / RESULTS_FILE, results_doc)   # variants in pipeline order; hpd.report.runs reads it

        write_results_report(self.out, results_doc, eval_dirs=self.eval_dirs())
        write_json(self.out / "manifest.json", finish_manifest(
            man, timings=self.timings, model=results_doc["model"],
            teacher=(results_doc["teacher"] or {}).get("teacher"),
            bad_entries=[e.to_record() for e in bench.bad]))
        self.stage_report()
        return results_doc

    # ----------------------------------------------------------------------------- the results registry
    def registry_cell(self, variant: str) -> str:
        return self.registry.cell(self.cfg.defect_rate, self.cfg.seed, variant)

    def from_registry(self) -> dict[str, dict]:
        """Variant -> metrics of the variants the registry holds with this cell's config (they are not trained
        or evaluated again); a one-line error when it holds one with another config."""
        if self.registry is None:
            return {}
        from hpd.runfolder import config_hash

        found = {}
        for v in self.variant_names():
            m = self.registry.lookup(self.registry_cell(v), config_hash(registry_config(self.cfg, v)))
            if m is not None:
                found[v] = m
                self.log(f"  {v}: in the registry ({self.registry.folder(self.registry_cell(v))}), not run again")
        return found

    def register(self, variant: str, metrics: dict, config: dict | None = None, teacher: dict | None = None) -> None:
        """Copy a variant's finished evaluation into the registry (with ``--registry``), right after it ends;
        ``config``: what decides it (default: :func:`registry_config` of the cell's config); ``teacher``: what
        the teacher did for it (:func:`teacher_evidence`), kept as the cell's ``teacher.json``."""
        if self.registry is None:
            return
        own = {k: t for k, t in self.timings.items() if k in (f"train {variant}", f"eval {variant}")}
        asked = getattr(self.cfg, "dtype", "float32")      # demos before --dtype computed in float32
        try:
            from hpd.policy.dtype import resolve_dtype_name

            resolved = resolve_dtype_name(asked)
        except ImportError:
            resolved = asked
        config = config or registry_config(self.cfg, variant)
        dest = self.registry.write(
            self.registry_cell(variant), self.eval_dirs()[variant], config=config,
            metrics=metrics, dtype=resolved, wall_s=sum(own.values()), seed=self.cfg.seed,
            timings=dict(self.timings),
            extra={"variant": variant, "dtype_asked": asked, "run_folder": str(self.out), "model": self.cfg.model},
            teacher=teacher if teacher and teacher.get("teacher") else None)
        self.log(f"  {variant}: registered in {dest}")

    def registry_run(self, man: dict) -> dict:
        """A cell whose every variant is in the registry: its results document from there, nothing run."""
        self.log("  every variant of this cell is in the registry: nothing to train or evaluate")
        from hpd.report.results import write_results_report
        from hpd.report.runs import RESULTS_FILE

        variants = {v: self.registered[v] for v in self.variant_names()}
        doc = {"variants": variants, "metric_keys": list(METRIC_KEYS), "seed": self.cfg.seed,
               "model": {"arg": self.cfg.model, "path": None, "name": Path(self.cfg.model).name},
               "teacher": None, "teacher_choice": None, "defects": None,
               "document_privilege": self.cfg.teach_privilege, "timings": {}, "resumed_stages": [],
               "from_registry": list(variants), "config": self.cfg.to_record(), "committed": self.committed()}
        write_json(self.out / RESULTS_FILE, doc)
        write_results_report(self.out, doc)
        write_json(self.out / "manifest.json", finish_manifest(man, timings={}, from_registry=list(variants)))
        return doc

    def results_doc(self, results: dict, evidence: dict, base: Path) -> dict:
        """The run's results document; ``evidence``: :func:`teacher_evidence` of the run."""
        model = json.loads((Path(base) / "hpd_model.json").read_text()).get("hpd_model", {}) \
            if (Path(base) / "hpd_model.json").is_file() else {}
        return {"variants": results, "metric_keys": list(METRIC_KEYS), "seed": self.cfg.seed,
                "model": {"arg": self.cfg.model, "path": str(base), "name": model.get("name", Path(base).name)},
                **evidence,
                "document_privilege": self.cfg.teach_privilege, "timings": dict(self.timings),
                "resumed_stages": list(self.resumed),
                "config": self.cfg.to_record()}


def teacher_evidence(teach_out: dict | None, bds: list) -> dict:
    """What the teacher did for a cell: ``teacher`` (its Table 3 diagnostics), ``teacher_choice`` and ``defects``
    (:func:`hpd.bench.builtin.defects.defect_accounting`: which defective references it replaced, which fell
    back); the results document's keys, and a registry cell's ``teacher.json``."""
    from hpd.bench.builtin.defects import defect_accounting

    teach_out = teach_out or {}
    return {"teacher": teach_out.get("diagnostics"), "teacher_choice": teach_out.get("choice"),
            "defects": defect_accounting(bds, teach_out.get("records"))}


def results_table(results: dict) -> list[list[str]]:
    rows = [["variant", *METRIC_KEYS]]
    for v, m in results["variants"].items():
        rows.append([v, *(f"{m[k]:.3f}" for k in METRIC_KEYS)])
    return rows


def setup_threads() -> None:
    """Offline, quiet library defaults for a CPU run."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:  # transformers missing is reported by the stage that needs it
        pass
