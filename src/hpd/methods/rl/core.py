"""The shared online-RL recipe of GRPO, GSPO and GiGPO: :class:`RLTrainer`, a :class:`hpd.train.trainer.Trainer`.

One **update** ``u`` (the unit of the schedule, checkpoints and logs):

1. the update's tasks (:func:`hpd.methods.rl.rollout.update_slots`; this process takes slots ``rank::world``),
   ``G`` episodes each, sampled by the CURRENT policy inside hpd's harness through the batched engine
   (:func:`hpd.methods.rl.rollout.run_groups`; the hf backend over the training model's own weights);
2. rewards from the harness transcript and hpd's metrics, and advantages (:meth:`RLTrainer.advantages`: GRPO's
   group-normalised episode reward here, GiGPO's two-level one in :mod:`hpd.methods.rl.gigpo`);
3. every model turn with a non-empty completion becomes one training sequence (exact prompt ids + sampled ids);
   ``algo.ppo_epochs`` passes over them, each split into ``algo.minibatches`` seeded mini-batches, one optimizer
   step per mini-batch. The loss of a mini-batch is the mean over its sequences of :meth:`RLTrainer.sequence_loss`
   (token-level clipped ratio here, GSPO's sequence ratio in :mod:`hpd.methods.rl.gspo`) plus
   ``beta * mean_t KL`` when ``algo.beta > 0``. With one epoch and one mini-batch the old log-probs ARE the
   current ones (TRL: ``per_token_logps.detach()``), else one no-grad pass computes them before the first step.

Shared with the three-view trainer (the :class:`~hpd.train.trainer.Trainer` recipe): accelerate (DDP; bf16 mixed
precision), AdamW(foreach=False) + the LR schedule of :mod:`hpd.train.lr` (optional warm-up, then constant or
decaying) over the optimizer steps, grad-norm clipping, checkpoints with model, optimizer, scheduler and RNG state,
exact resume, ``metrics.csv`` / TensorBoard, the run-folder manifest. A resumed run continues at the next update;
since update ``u``'s tasks and every sampling seed are functions of ``(seed, u)`` and the weights are restored
exactly, it regenerates the same groups and logs the same numbers.

Outputs in ``--out``: ``adapter/`` (or ``model/`` under full fine-tuning), ``metrics.json``, ``rl.csv`` (one row
per update: reward, TS, RC, loss, clipped share, ratio, KL, the mean LR of its optimizer steps, timings and
the peak memory of the rollout and of the training pass, :mod:`hpd.train.memory`), ``metrics.csv``,
``curves.json`` / ``curves.png`` (:mod:`hpd.methods.rl.curves`), ``manifest.json``, ``checkpoints/``, ``split.json``
(when the split is computed) and ``bench/`` (when the built-in benchmark is generated).

Why not TRL's ``GRPOTrainer``: its multi-turn paths (``tools=``, ``environment_factory``) run their own tool
loop and render each trajectory as ONE growing sequence through the tokenizer's template (TRL swaps in its
``qwen3_training.jinja``), so neither hpd's Pi harness (validation, error texts, turn budget) nor hpd's renderer
(``hpd.policy.chat``, the official Qwen3 template for every model) would produce the tokens; ``rollout_func`` hands
the whole agent loop to the caller and expects ``num_generations`` completions per prompt, one sequence each, so
per-turn prompts and GiGPO's per-step advantages would still be ours. The loss itself follows TRL's
``_compute_loss`` (``loss_type="grpo"``) line by line.
"""

from __future__ import annotations

import contextlib
import math
import random
import sys
import time
from pathlib import Path

import torch

from hpd.runfolder import config_hash, new_manifest, write_json
from hpd.train import memory
from hpd.train.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from hpd.train.lr import make_scheduler
from hpd.train.ranks import accumulate, sharded, zero_loss
from hpd.train.trainer import Trainer, TrainError

from . import advantage as A
from .config import RLConfig
from .curves import write_rl_curves
from .log import RLLog, episode_log, read_rl_csv
from .loss import Seq, k3_kl, micro_batches, sequence_logprobs, token_clip_loss
from .rollout import Episode, RecordingPolicy, load_tasks, run_groups, update_slots

COMMON_DEPARTURES = [
    "Multi-turn: every model turn is one sequence (its exact prompt ids + sampled ids); an episode's advantage "
    "applies to all its turns and the loss averages over sequences (turns), so longer episodes weigh more "
    "(as verl-agent, whose rows are steps).",
    "Reward: R = ts*TS + rc*RC_ep + step_sr*Step-SR + f1*F1 from hpd.eval.metrics (ours; the papers' rewards are "
    "task-specific).",
    "Rollouts run on the training model through hpd's hf backend (rollout.engine=hf, the default) or on an "
    "in-process vLLM engine given the training model's merged weights before each update (rollout.engine=vllm; "
    "auto: vllm for a real model where vLLM runs; the manifest's rollout_engine says which ran).",
]


class _Updates:
    """What the shared Trainer reads from a schedule: the number of updates."""

    def __init__(self, total: int):
        self.total = total

    def describe(self) -> list[dict]:
        return [{"updates": self.total, "unit": "one rollout batch (tasks x group_size episodes)"}]


class RLTrainer(Trainer):
    """The RL recipe (module doc). Methods override :meth:`advantages` and/or :meth:`sequence_loss`."""

    method = "rl"
    departures: list[str] = []

    def __init__(self, config: RLConfig, out_dir: str | Path, *, resume: bool = False, command: str | None = None):
        # Trainer.__init__ parses a TrainConfig; the RL config is its own, so the same fields are set here.
        if not isinstance(config, RLConfig):
            raise TypeError(f"expected an RLConfig, got {type(config).__name__}")
        self.cfg = config
        self.out = Path(out_dir)
        self.ckpt_root = self.out / "checkpoints"
        self.records, self.resume, self.renderer_module = None, resume, None
        self.command, self.data_path = command, None
        self.start, self.probe_initial, self.resumed = 0, None, False
        self.last_loss: dict[str, float] = {}
        self.t_run = 0.0

    # ------------------------------------------------------------------ the method's parts
    def advantages(self, episodes: list[Episode]) -> list[list[float]]:
        """Per episode, per turn: GRPO's episode reward normalised within its task group (``algo.scale_rewards``)."""
        adv = A.grpo_advantages([e.reward for e in episodes], [e.slot for e in episodes], eps=self.cfg.algo.adv_eps,
                                scale=self.cfg.algo.scale_rewards)
        return [[a] * len(e.turns) for a, e in zip(adv, episodes)]

    def sequence_loss(self, logp: torch.Tensor, old: torch.Tensor, adv: float) -> tuple[torch.Tensor, dict]:
        """One sequence's policy loss: the token-level clipped surrogate (GRPO)."""
        return token_clip_loss(logp, old, adv, self.cfg.algo.clip_low, self.cfg.algo.clip_high)

    # ------------------------------------------------------------------ setup
    def load_data(self) -> None:
        """The training tasks (one split part), the tokenizer and the update count."""
        from hpd.train.student import load_tokenizer, resolve_model_path

        if sharded(self.accelerator):
            raise TrainError("RL does not run under FSDP / DeepSpeed: its rollouts and log-prob passes run a "
                             "data-dependent number of forward passes on each process, which hangs sharded "
                             "parameters; launch it with configs/accelerate/ddp.yaml")
        cfg = self.cfg
        try:
            self.bench, self.tasks, self.data_info = load_tasks(cfg.data, self.out, is_main=self.main,
                                                                barrier=self.accelerator.wait_for_everyone)
        except (FileNotFoundError, ValueError) as exc:
            raise TrainError(str(exc)) from None
        self.schedule = _Updates(cfg.updates)
        self.views = ["rl"]
        self.model_path = resolve_model_path(cfg, self.out, self.main)
        self.accelerator.wait_for_everyone()
        self.tokenizer = load_tokenizer(self.model_path)

    def _setup_model(self) -> None:
        from hpd.policy.backends.hf import HFPolicy

        cfg = self.cfg
        model = self.load_model()
        if cfg.algo.disable_dropout:
            for m in model.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = 0.0
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, betas=tuple(cfg.optim.betas), eps=cfg.optim.eps,
                                      weight_decay=cfg.optim.weight_decay, foreach=False)
        self.scheduler = make_scheduler(optimizer, cfg.optim,
                                        cfg.total_updates * cfg.algo.ppo_epochs * cfg.algo.minibatches)
        self.ref_model = self._reference(model) if cfg.algo.beta > 0 else None
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.model.train()
        self.device = self.accelerator.device
        self.unwrapped = self.accelerator.unwrap_model(self.model)
        self.mode = cfg.batch.batching if cfg.batch.batching != "auto" else (
            "padded" if cfg.model.gradient_checkpointing else "prefix")
        self.budget = cfg.batch.micro_batch_tokens
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.rollout_engine = self._engine_name()
        self.engine = self._rollout_engine() if self.rollout_engine == "vllm" else HFPolicy(
            str(self.model_path), model=self.unwrapped, tokenizer=self.tokenizer, device=str(self.device),
            batch_size=cfg.rollout.gen_batch, name=cfg.name, cache_gib=cfg.rollout.cache_gib)
        self.unwrapped.train()
        self.streams = {}

    def run(self):
        """The shared recipe (:meth:`hpd.train.trainer.Trainer.run`); a vLLM rollout engine stops however it ends."""
        try:
            return super().run()
        finally:
            if getattr(self, "rollout_engine", None) == "vllm" and getattr(self, "engine", None) is not None:
                self.engine.close()

    def _engine_name(self) -> str:
        """``rollout.engine`` resolved: ``auto`` is ``hf`` under several processes (a vLLM rollout engine takes the
        weights in-process) and otherwise :func:`hpd.policy.backends.resolve_backend`'s rule (hf for the tiny
        model and where vLLM does not run)."""
        from hpd.policy.backends import resolve_backend

        if self.cfg.rollout.engine == "auto" and self.world > 1:
            return "hf"
        return resolve_backend(self.cfg.rollout.engine, str(self.model_path))

    def _rollout_engine(self):
        """``rollout.engine: vllm``: an in-process vLLM engine over the base model in the training dtype, on this
        process's torch threads; :meth:`rollout` writes the training model's merged weights into it first."""
        from hpd.policy.backends.vllm import BackendUnavailable, VLLMPolicy

        if self.world > 1:
            raise TrainError("rollout.engine=vllm runs in one process (its engine takes the weights in-process); "
                             "use rollout.engine=hf with several processes")
        try:
            return VLLMPolicy(str(self.model_path), dtype=str(self.dtype).replace("torch.", ""), seed=self.cfg.seed,
                              cpu_threads=torch.get_num_threads(), name=self.cfg.name,
                              gpu_memory_utilization=self.cfg.rollout.vllm_gpu_memory)
        except BackendUnavailable as exc:
            raise TrainError(f"rollout.engine=vllm: {exc}") from None

    def _reference(self, model):
        """The KL reference = the start policy, frozen. A fresh LoRA's start is the model with its adapter
        disabled (no copy); a start adapter or full fine-tuning needs a frozen copy (twice the base memory)."""
        if not self.cfg.model.adapter and self.cfg.lora.enabled:
            return "disable_adapter"
        import copy

        ref = copy.deepcopy(model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref.to(self.accelerator.device)

    def _restore(self) -> None:
        """Continue from the newest checkpoint (``--resume``) and write the running manifest."""
        ckpts = list_checkpoints(self.ckpt_root)
        self.run_hash = config_hash(self.cfg.model_dump(mode="json", exclude={"stop_after", "logging"}))
        if self.resume and ckpts:
            old = self.out / "manifest.json"
            if old.is_file():
                import json
                prev = json.loads(old.read_text()).get("rl_config_hash")
                if prev is not None and prev != self.run_hash:
                    raise TrainError(f"{self.out} holds a run of another config; resume it with the same config "
                                     "(only stop_after and logging may change) or choose a new --out")
            st = load_checkpoint(ckpts[-1], accelerator=self.accelerator, model=self.model, optimizer=self.optimizer,
                                 scheduler=self.scheduler)
            self.start, self.resumed = int(st["update"]), True
            if self.main:
                print(f"[hpd train] resumed from {ckpts[-1].name}: update {self.start}", file=sys.stderr)
        elif self.resume and self.main:
            print(f"[hpd train] --resume: no checkpoint in {self.ckpt_root}, starting fresh", file=sys.stderr)
        if self.main:
            from hpd.bench.loader import data_checksum

            inputs = {"data": data_checksum(self.data_info["path"]), "base_model": str(self.model_path),
                      "start_adapter": self.cfg.model.adapter}
            self.manifest = new_manifest(
                self.command, self.cfg.model_dump(mode="json"), seed=self.cfg.seed, inputs=inputs,
                method=self.method, rl_config_hash=self.run_hash, tasks=self.data_info, resumed=self.resumed,
                distributed={"type": str(self.accelerator.distributed_type), "world_size": self.world},
                schedule=self.schedule.describe(), batching=self.mode,
                dtype=str(self.dtype).replace("torch.", ""), rollout_dtype=self.engine.dtype,
                rollout_engine=self.rollout_engine,
                departures_from_paper=COMMON_DEPARTURES + list(self.departures))
            write_json(self.out / "manifest.json", self.manifest)
            self.rl_log = RLLog(self.out / "rl.csv", self.start)
            self.episode_log = episode_log(self.out / "episodes.csv", self.start)

    def probe(self):
        """No fixed probe set in RL (the shared ``save`` asks for one)."""
        return None

    # ------------------------------------------------------------------ one update
    def step(self, u: int) -> None:
        """Update ``u``: roll out, score, compute advantages, optimise (module doc), log."""
        t0 = time.perf_counter()
        memory.reset_peak()
        episodes, t_roll = self.rollout(u)
        peaks = {"rollout_peak_gb": memory.peak_gb()}
        self.step_groups: dict[int, int] | None = None    # GiGPO: {anchor group size: count}
        adv = self.advantages(episodes)
        seqs = [Seq(t.prompt_ids, t.completion_ids, a, episode=i, sampler=t.sampler_logprobs)
                for i, (e, advs) in enumerate(zip(episodes, adv)) for t, a in zip(e.turns, advs)
                if t.completion_ids and t.prompt_ids]
        t1 = time.perf_counter()
        memory.reset_peak()
        stats = {**self.optimize(u, seqs, episodes), **peaks, "train_peak_gb": memory.peak_gb()}
        dt = time.perf_counter() - t0
        self.t_run += dt
        self.log_update(u, episodes, seqs, adv, stats, t_roll, time.perf_counter() - t1, dt)

    def slots(self, u: int) -> list[tuple[int, object]]:
        """This process's ``(slot, task)`` pairs of update ``u`` (slots ``rank::world`` of the update)."""
        idx = update_slots(len(self.tasks), u, self.cfg.batch.tasks, self.cfg.seed)
        return [(j, self.tasks[i]) for j, i in enumerate(idx)][self.rank::self.world]

    def rollout(self, u: int) -> tuple[list[Episode], float]:
        cfg = self.cfg
        t0 = time.perf_counter()
        pol = RecordingPolicy(self.engine, seed=cfg.seed, update=u, temperature=cfg.rollout.temperature,
                              max_new_tokens=cfg.rollout.max_new_tokens, enable_thinking=cfg.model.enable_thinking)
        self.unwrapped.eval()
        if self.rollout_engine == "vllm":
            from hpd.policy.merge import merged_weights

            self.engine.load_weights(merged_weights(self.unwrapped))   # the weights changed since the last rollout
        self.engine.clear_prefix_cache()
        try:
            with torch.no_grad(), self._rollout_forward():
                episodes, _ = run_groups(self.bench, self.slots(u), pol, group_size=cfg.batch.group_size,
                                         weights=cfg.reward, env_kwargs={"k": cfg.data.pool_k},
                                         max_turns=cfg.data.max_turns, in_flight=cfg.rollout.episodes_in_flight)
        finally:
            self.model.train()
        return episodes, time.perf_counter() - t0

    @contextlib.contextmanager
    def _rollout_forward(self):
        """What the rollouts run: the training model itself, in the resolved dtype (``model.precision``). With
        LoRA the base weights are that dtype (bf16 or fp32), as in the log-prob passes. Full fine-tuning in bf16
        keeps fp32 master weights that train under bf16 autocast; transformers' key/value caches cannot hold
        what autocast makes of fp32 weights (fp32 keys after the fp32 norms, bf16 values), so its rollouts run
        the weights as they are, in fp32, without accelerate's autocast wrapper (``rollout_dtype`` in the
        manifest says which)."""
        model = self.unwrapped
        plain = model.__dict__.get("_original_forward")
        if self.engine.dtype != "float32" or self.dtype == torch.float32 or plain is None:
            yield
            return
        wrapped = model.__dict__.get("forward")
        model.forward = plain
        try:
            yield
        finally:
            if wrapped is None:
                del model.forward
            else:
                model.forward = wrapped

    @torch.no_grad()
    def _fill(self, seqs: list[Seq], attr: str, model) -> None:
        """``seq.old`` / ``seq.ref``: log-probs under ``model`` (no grad), micro-batch by micro-batch."""
        for row in micro_batches(seqs, self.mode, self.budget):
            part = [seqs[i] for i in row]
            if model == "disable_adapter":
                with self.unwrapped.disable_adapter(), self.accelerator.autocast():
                    lps = sequence_logprobs(self.unwrapped, part, self.mode, self.device, self.pad_id)
            else:
                with self.accelerator.autocast():
                    lps = sequence_logprobs(model, part, self.mode, self.device, self.pad_id)
            for i, lp in zip(row, lps):
                setattr(seqs[i], attr, lp.detach())
                if attr == "old":
                    self._gap(seqs[i], lp)

    def optimize(self, u: int, seqs: list[Seq], episodes: list[Episode]) -> dict:
        """``ppo_epochs`` x ``minibatches`` optimizer steps over ``seqs`` (module doc); returns averaged stats."""
        cfg = self.cfg.algo
        if self.ref_model is not None:
            self._fill(seqs, "ref", self.ref_model)
        if cfg.ppo_epochs > 1 or cfg.minibatches > 1:
            self._fill(seqs, "old", self.model)
        rng = random.Random(f"{self.cfg.seed}/minibatch/{u}/{self.rank}")
        agg: dict[str, list[float]] = {}
        for _ in range(cfg.ppo_epochs):
            order = list(range(len(seqs)))
            if cfg.minibatches > 1:
                rng.shuffle(order)
            for k in range(cfg.minibatches):
                st = self.minibatch_step([seqs[i] for i in order[k::cfg.minibatches]])
                for key, v in st.items():
                    agg.setdefault(key, []).append(v)
        out = {k: (sum(x) / len(x) if (x := [y for y in v if y is not None]) else None) for k, v in agg.items()}
        gaps = [g for s in seqs if (g := s.gap) is not None]
        out["logprob_gap"] = sum(gaps) / len(gaps) if gaps else None
        out["optimizer_steps"] = cfg.ppo_epochs * cfg.minibatches
        return out

    @staticmethod
    def _gap(s: Seq, lp: torch.Tensor) -> None:
        """Mean |trainer log-prob - sampler log-prob| of the sequence's tokens before the update: how far the
        backend's sampling numerics (KV cache, batched decode) are from the training forward."""
        if s.sampler is not None and s.gap is None and len(s.sampler) == lp.numel():
            s.gap = float((lp.detach().float().cpu() - torch.tensor(s.sampler)).abs().mean())

    def minibatch_step(self, mb: list[Seq]) -> dict:
        """One optimizer step on the mini-batch ``mb`` (this process's share): mean sequence loss over the
        mini-batch's sequences on all processes, micro-batched, gradients synced on the last micro-batch."""
        acc, beta = self.accelerator, self.cfg.algo.beta
        n_global = int(acc.reduce(torch.tensor(float(len(mb)), device=self.device), reduction="sum"))
        if n_global == 0:
            return {}
        rows = micro_batches(mb, self.mode, self.budget) or [[]]
        sums = {"loss": 0.0, "clipped": 0.0, "ratio": 0.0, "kl": 0.0}
        with self.uncast_adapter_inputs():
            for row in accumulate(acc, self.model, rows):
                if row is None:     # sharded: a process with fewer micro-batches matches the others' count
                    acc.backward(zero_loss(self.model, self.device))
                    continue
                total = self._row_loss([mb[i] for i in row], sums) if row else \
                    sum(p.sum() * 0.0 for p in self.model.parameters() if p.requires_grad)
                acc.backward(total * (self.world / n_global))
        gn = None
        if self.cfg.optim.max_grad_norm:
            gn = acc.clip_grad_norm_(self.model.parameters(), self.cfg.optim.max_grad_norm)
            gn = float(gn) if gn is not None else None
        lr = self.scheduler.get_last_lr()[0]        # the LR this optimizer step is taken at
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        red = acc.reduce(torch.tensor([sums[k] for k in ("loss", "clipped", "ratio", "kl")], device=self.device),
                         reduction="sum").tolist()
        out = {k: v / n_global for k, v in zip(("loss", "clipped", "ratio", "kl"), red)}
        out["grad_norm"] = gn
        out["lr"] = lr
        return out

    def _row_loss(self, row: list[Seq], sums: dict) -> torch.Tensor:
        lps = sequence_logprobs(self.model, row, self.mode, self.device, self.pad_id)
        total = torch.zeros((), device=self.device)
        for s, lp in zip(row, lps):
            if s.old is None:       # one epoch, one mini-batch: the old policy is this one (TRL's shortcut)
                self._gap(s, lp)
            old = s.old if s.old is not None else lp.detach()
            loss, st = self.sequence_loss(lp, old, s.advantage)
            kl = k3_kl(lp, s.ref).mean() if s.ref is not None else None
            if kl is not None:
                loss = loss + self.cfg.algo.beta * kl
                sums["kl"] += float(kl.detach())
            total = total + loss
            sums["loss"] += float(loss.detach())
            sums["clipped"] += st["clipped"]
            sums["ratio"] += st["ratio"]
        return total

    # ------------------------------------------------------------------ logging and the end
    def _local_sums(self, episodes: list[Episode], seqs: list[Seq], adv: list[list[float]]) -> dict[str, float]:
        """This process's sums for ``rl.csv``, by name (reduced over processes; each process holds whole groups).
        A fail group has TS 0 in every rollout: its rewards differ by compliance alone."""
        flat = [abs(a) for advs in adv for a in advs]
        groups: dict[int, list[Episode]] = {}
        for e in episodes:
            groups.setdefault(e.slot, []).append(e)
        fail = {s for s, es in groups.items() if not any(e.row["TS"] for e in es)}
        flat_groups = sum(1 for es in groups.values() if max(e.reward for e in es) == min(e.reward for e in es))
        fail_adv = sum(abs(a) for e, advs in zip(episodes, adv) if e.slot in fail for a in advs)
        steps = self.step_groups or {}
        return {"reward": sum(e.reward for e in episodes), "reward_sq": sum(e.reward ** 2 for e in episodes),
                "episodes": len(episodes), "TS": sum(e.row["TS"] for e in episodes),
                "valid_turns": sum(sum(t.valid for t in e.turns) for e in episodes),
                "turns": sum(len(e.turns) for e in episodes), "Step-SR": sum(e.row["Step-SR"] for e in episodes),
                "F1": sum(e.row["F1"] for e in episodes), "sequences": len(seqs),
                "completion_tokens": sum(len(s.completion_ids) for s in seqs), "tokens": sum(s.n_tokens for s in seqs),
                "adv_abs": sum(flat), "adv_n": len(flat), "groups": len(groups), "flat_groups": flat_groups,
                "fail_groups": len(fail), "fail_adv": fail_adv,
                "step_group_sum": sum(n * c for n, c in steps.items()), "step_group_n": sum(steps.values())}

    @staticmethod
    def _episode_rows(u: int, episodes: list[Episode], adv: list[list[float]]) -> list[dict]:
        """``episodes.csv`` rows of update ``u`` (:data:`hpd.methods.rl.log.EPISODE_FIELDS`)."""
        return [{"update": u, "slot": e.slot, "g": e.g, "uid": e.uid, "reward": e.reward, "TS": e.row["TS"],
                 "RC": sum(t.valid for t in e.turns) / len(e.turns) if e.turns else None, "turns": len(e.turns),
                 "adv_mean": sum(a) / len(a) if a else 0.0, "adv_abs": sum(map(abs, a)) / len(a) if a else 0.0}
                for e, a in zip(episodes, adv)]

    def log_update(self, u: int, episodes: list[Episode], seqs: list[Seq], adv: list[list[float]], stats: dict,
                   t_roll: float, t_train: float, dt: float) -> None:
        acc = self.accelerator
        local = self._local_sums(episodes, seqs, adv)
        rows = self._episode_rows(u, episodes, adv)
        if self.world > 1:
            from accelerate.utils import gather_object

            rows = gather_object(rows)
        summed = acc.reduce(torch.tensor(list(local.values()), dtype=torch.float64, device=self.device), "sum")
        tot = dict(zip(local, summed.tolist()))
        if not self.main:
            return
        n = max(tot["episodes"], 1.0)
        mean = tot["reward"] / n
        row = {"update": u, "reward": mean, "reward_std": math.sqrt(max(tot["reward_sq"] / n - mean ** 2, 0.0)),
               "TS": tot["TS"] / n, "RC": tot["valid_turns"] / max(tot["turns"], 1.0), "Step-SR": tot["Step-SR"] / n,
               "F1": tot["F1"] / n, "episodes": int(tot["episodes"]), "turns": int(tot["turns"]),
               "sequences": int(tot["sequences"]), "completion_tokens": int(tot["completion_tokens"]),
               "adv_abs": tot["adv_abs"] / max(tot["adv_n"], 1.0),
               "flat_groups": tot["flat_groups"] / max(tot["groups"], 1.0),
               "fail_groups": tot["fail_groups"] / max(tot["groups"], 1.0),
               "fail_adv_share": tot["fail_adv"] / tot["adv_abs"] if tot["adv_abs"] else None,
               "lr": stats.get("lr", self.scheduler.get_last_lr()[0]),   # mean over the update's optimizer steps
               "step_group_mean": tot["step_group_sum"] / tot["step_group_n"] if tot["step_group_n"] else None,
               "rollout_s": round(t_roll, 3), "train_s": round(t_train, 3),
               "episodes_per_s": tot["episodes"] / t_roll if t_roll else None, "elapsed_s": round(self.t_run, 3),
               **{k: stats.get(k) for k in ("loss", "clipped", "ratio", "kl", "grad_norm", "logprob_gap",
                                            "optimizer_steps", "rollout_peak_gb", "train_peak_gb")}}
        self.rl_log.log(row)
        self.episode_log.log(*rows)
        self.last_loss["rl"] = row["loss"] if row["loss"] is not None else float("nan")
        if (u + 1) % self.cfg.logging.every == 0 or u + 1 == self.schedule.total:
            self.logger.log({"update": u, "phase": 0, "view": "rl", "loss": self.last_loss["rl"],
                             "supervised_tokens": int(tot["completion_tokens"]), "tokens": int(tot["tokens"]),
                             "examples": int(tot["sequences"]),
                             "lr": row["lr"], "grad_norm": row["grad_norm"], "tokens_per_s": tot["tokens"] / dt,
                             "elapsed_s": self.t_run,
                             "peak_gb": max(filter(None, (row["rollout_peak_gb"], row["train_peak_gb"])), default=None)})
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix({"R": f"{mean:.3f}", "TS": f"{row['TS']:.2f}", "RC": f"{row['RC']:.2f}"})

    def checkpoint(self, done: int) -> None:
        """Everything exact resume needs after ``done`` updates (model, optimizer, scheduler, RNG); the tasks
        and sampling seeds of later updates are functions of the update index."""
        save_checkpoint(self.ckpt_root, update=done, accelerator=self.accelerator, model=self.model,
                        optimizer=self.optimizer, scheduler=self.scheduler, keep=self.cfg.checkpoint.keep,
                        state={"update": done, "method": self.method})

    def after_checkpoint(self, done: int) -> None:
        """On the main process: rewrite ``curves.json`` / ``curves.png`` from ``rl.csv`` (:mod:`.curves`)."""
        if self.main:
            write_rl_curves(self.out, png=self.cfg.logging.curves_png)
        self.accelerator.wait_for_everyone()

    def summary(self, probe_final) -> dict:
        """``metrics.json``: the reward curve (first/last/best), TS and RC at the start and end, throughput."""
        rows = read_rl_csv(self.out / "rl.csv")
        rew = [r["reward"] for r in rows]
        k = min(3, len(rows))
        eps = [r["episodes_per_s"] for r in rows if r["episodes_per_s"]]
        return {
            "method": self.method, "updates": self.cfg.updates, "n_tasks": len(self.tasks),
            "episodes_per_update": self.cfg.batch.tasks * self.cfg.batch.group_size,
            "reward_first": rew[0] if rew else None, "reward_last": rew[-1] if rew else None,
            "reward_first_mean": sum(rew[:k]) / k if k else None, "reward_last_mean": sum(rew[-k:]) / k if k else None,
            "reward_window": k, "reward_by_update": rew,
            "TS_first": rows[0]["TS"] if rows else None, "TS_last": rows[-1]["TS"] if rows else None,
            "RC_first": rows[0]["RC"] if rows else None, "RC_last": rows[-1]["RC"] if rows else None,
            "episodes_per_s_median": sorted(eps)[len(eps) // 2] if eps else None,
            **{f"{k}_max": memory.run_peak(rows, k) for k in ("rollout_peak_gb", "train_peak_gb")},
            "world_size": self.world,
        }


def train_method(trainer_cls: type[RLTrainer], cfg: RLConfig, out: str | Path, *, resume: bool = False,
                 command: str | None = None) -> Path | None:
    """Run one RL method; returns ``out/adapter`` (or ``out/model``), or None when ``stop_after`` ended it."""
    return trainer_cls(cfg, out, resume=resume, command=command).run()
