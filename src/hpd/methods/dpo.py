"""DPO baseline (Rafailov et al. 2023, "Direct Preference Optimization"): ``hpd train --method dpo``.

Data: preference pairs from a finished teach run (:mod:`hpd.methods.pairs`): chosen = the top-ranked verified
candidate (or the verified reference), rejected = each candidate the harness rejected, with its reason code.
Both are T-view examples (native context -> action), rendered and tokenized by THE renderer
(:mod:`hpd.policy.chat`), prompt and completion each on their own, exactly as SFT and HPD train and as
``hpd serve`` serves.

Loss (the DPO paper's eq. 7; TRL's ``loss_type="sigmoid"``, ``f_divergence_type="reverse_kl"``): with
``logp`` the summed completion log-probability, per pair

    L = -log sigmoid( beta * [(logp_pi(c) - logp_ref(c)) - (logp_pi(r) - logp_ref(r))] ),

averaged over the pairs of each update's global batch. The reference is the model the run starts from: the
base model with the LoRA adapter disabled (peft ``disable_adapter()``), or, under full fine-tuning or from a
start adapter (``model.adapter``, e.g. an SFT run's: the DPO paper's SFT reference), the initial weights. Its
log-probs are computed once at setup, in eval mode, before any checkpoint is restored, and kept in the run folder
(``reference_logps.pt``, with a key over the model settings and every pair's ids), so a resumed run loads exactly
the values of an uninterrupted one instead of computing them again.

Why not TRL's ``DPOTrainer`` (trl 1.16): its ``_prepare_dataset`` always re-tokenizes the text, jointly
(``prompt + chosen``) and then splits at the common prefix with the prompt's ids, through the tokenizer's own
chat template or plain concatenation; it has no path for pre-tokenized ids. hpd tokenizes prompt and
completion separately through the Qwen3 template for every model, so TRL's ids would differ from the ids hpd
trains SFT/HPD on and serves with, whenever tokens merge across the boundary or the tokenizer's template
differs (SmolLM2's drops tools). With SmolLM2's tokenizer most distinct (prompt, completion) texts of the
built-in benchmark tokenize differently jointly (the prompt's closing newlines merge with the completion's first
characters; the count: docs/experiments/2026-12-01-baselines.md), so equality cannot be had by construction. Its
``max_length`` truncation (``keep_start``) also cuts rows where hpd's length policy omits whole old tool
outputs. So the loss is written here, in a subclass of the recipe
:class:`hpd.train.trainer.Trainer` that replaces ``load_data`` (pairs), ``update_loss`` (DPO) and ``summary``
(pair metrics); accelerate, the optimizer, checkpoints and exact resume stay shared.

Departures from the DPO paper (also in the manifest, :data:`DEPARTURES`) are listed there, one line each.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpd.runfolder import checksum, config_hash, new_manifest, write_json
from hpd.train import memory
from hpd.train.config import (Batching, BatchConfig, CheckpointConfig, DataConfig, LoggingConfig, LoraSettings,
                              OptimConfig, StartModelConfig, TrainConfig, config_dict)
from hpd.train.data import collate, collate_padded
from hpd.train.logger import read_csv
from hpd.train.ranks import accumulate, one_forward_mode, zero_loss
from hpd.train.trainer import Trainer, TrainError

from .pairs import DEFAULT_EXCLUDED, PairExample, build_pairs, encode_pairs

REFERENCE_FILE = "reference_logps.pt"     # the reference table of a run folder (DPOTrainer.cached_reference)

NO_SFT_FIRST = ("No SFT stage first: the reference policy is the model the run starts from, model.path (with a fresh "
                "LoRA adapter disabled): the base model, the student's start as for SFT and HPD, unless model.path "
                "is an SFT model (hpd demo --dpo-start sft under full fine-tuning); the paper fine-tunes on the "
                "preferred completions first when no SFT model exists.")
FROM_SFT_ADAPTER = ("The reference policy is the SFT adapter the run starts from (model.adapter; the paper's SFT "
                    "reference), and that adapter is trained further (the paper fine-tunes the whole SFT model).")
DEPARTURES = [
    "Preferences come from the harness, not from people: chosen = the top-ranked verified teacher candidate (or "
    "the verified reference), rejected = each candidate the harness rejected; one chosen is shared by all the "
    "rejected candidates of a boundary.",
    NO_SFT_FIRST,
    "Optimizer: the shared recipe's AdamW (paper: RMSprop); lr 1e-6, batch 64, 150 warm-up updates, beta 0.1 as "
    "in the paper; LoRA on all linear layers (paper: full fine-tuning).",
    "Completions are re-rendered from the parsed candidate messages by the one renderer: a truncated candidate "
    "gets the end-of-turn token it did not generate; unparsed tool-call markup stays as text.",
    "Over-long pairs: the oldest tool outputs of the shared prompt are omitted (hpd's length policy), else the "
    "pair is skipped; counted in length_report.json.",
    "Dropout off in the policy (TRL's disable_dropout default; the paper is silent), reference log-probs "
    "precomputed once (TRL's precompute_ref_log_probs; same values).",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DPOSettings(_Strict):
    beta: float = Field(0.1, gt=0, description="KL strength of the implicit reward (DPO paper, App. B: beta=0.1 "
                                               "unless noted; TRL DPOConfig.beta default 0.1).")
    disable_dropout: bool = Field(True, description="Set every dropout in the policy to 0, so policy and reference "
                                                    "log-probs are computed alike (TRL DPOConfig.disable_dropout "
                                                    "default True; the paper is silent).")


class PairData(_Strict):
    teach: str = Field(..., description="A finished `hpd teach` output folder (shards/, targets.jsonl, "
                                        "manifest.json), read by hpd.teacher.read.read_teach_run.")
    boundaries: str | None = Field(None, description="The `hpd replay` folder the teach run read, to verify the "
                                                     "reference where no candidate was verified. Default: the teach "
                                                     "manifest's inputs.boundaries.path; without one those "
                                                     "boundaries stay unpaired (reference_unchecked).")
    reference_chosen: bool = Field(True, description="Where no candidate was verified, use the reference as the "
                                                     "chosen action if it verifies (issue 15).")
    exclude_reasons: list[str] = Field(list(DEFAULT_EXCLUDED), description="Rejected candidates whose first reason "
                                       "is one of these are not paired (default: teacher_error, a failed teacher "
                                       "call, not an action).")
    max_rejected_per_boundary: int | None = Field(None, gt=0, description="At most this many rejected candidates "
                                                  "per boundary, in (attempt, index) order; null = all (the paper "
                                                  "trains on every pair of its dataset).")
    held_out_tasks: int = Field(0, ge=0, description="Tasks whose pairs are held out of training and scored before "
                                                     "and after (metrics.json held_out); chosen by sha256 of the task "
                                                     "uid, the same for every seed. Ours.")
    max_length: int = Field(4096, gt=8, description="Max tokens of prompt + the longer completion of a pair "
                                                    "(hpd.train.config.DataConfig default).")
    length_policy: Literal["drop_oldest_tool_outputs", "skip"] = Field(
        "drop_oldest_tool_outputs", description="Over-long pairs: omit the oldest tool outputs of the shared prompt, "
                                                "or skip the pair (hpd.views.length_policy).")
    shuffle: bool = Field(True, description="Reshuffle the pairs every epoch (seeded; exact on resume).")

    @field_validator("exclude_reasons")
    @classmethod
    def _reasons(cls, v: list[str]) -> list[str]:
        from hpd.teacher.types import REASONS

        bad = [r for r in v if r not in REASONS]
        if bad:
            raise ValueError(f"unknown reason codes {bad}; use {list(REASONS)}")
        return v


class DPOOptim(OptimConfig):
    lr: float = Field(1e-6, gt=0, description="Constant LR after warm-up (DPO paper, App. B: 1e-6; TRL DPOConfig "
                                              "learning_rate default 1e-6).")
    warmup_updates: int = Field(150, ge=0, description="Linear warm-up from 0 (DPO paper, App. B: 150 steps).")


class DPOBatch(_Strict):
    global_batch: int = Field(64, gt=0, description="Pairs per optimizer update, all processes together (DPO paper, "
                                                    "App. B: batch size 64).")
    micro_batch_tokens: int = Field(16384, gt=0, description="Token budget of one micro-batch: both sequences "
                                                             "of its pairs (padded: with padding; prefix: a pair's "
                                                             "prompt once); >= 2 * max_length, so every pair fits "
                                                             "one. Ours.")
    batching: Batching = Field(
        "auto", description="packed: padding-free rows (flash attention); padded: length-grouped, left-padded; "
                            "prefix: a prompt shared by several sequences (a pair's chosen and rejected, the pairs "
                            "of one boundary) is computed once (hpd.train.prefix; not with gradient checkpointing). "
                            "auto: as the recipe (hpd.train.student.batching_mode): packed under flash attention, "
                            "else prefix, or padded under gradient checkpointing.")


def departures(cfg: "Config") -> list[str]:
    """:data:`DEPARTURES` of a run: one that starts from an SFT adapter (``model.adapter``) has the paper's SFT
    reference, and trains that adapter further instead of fully fine-tuning the SFT model."""
    if not cfg.model.adapter:
        return DEPARTURES
    return [FROM_SFT_ADAPTER if d == NO_SFT_FIRST else d for d in DEPARTURES]


class Config(_Strict):
    """``hpd train --method dpo`` settings (YAML; every default names its source)."""

    name: str = Field("dpo", description="Run name (progress bar, W&B).")
    seed: int = Field(0, description="Seed of the LoRA init, the pair order and the tiny model.")
    updates: int = Field(..., gt=0, description="Optimizer updates (the paper gives epochs, not updates).")
    model: StartModelConfig = Field(..., description="Base model, and the adapter the run starts from "
                                     "(hpd.train.config.StartModelConfig): none, the base model (the default); an SFT "
                                     "run's adapter, the DPO paper's recipe (`hpd demo --dpo-start sft`).")
    lora: LoraSettings = Field(LoraSettings(), description="LoRA as for SFT/HPD (hpd.train.config.LoraSettings).")
    optim: DPOOptim = Field(DPOOptim(), description="AdamW settings (DPO paper values where it gives them).")
    batch: DPOBatch = Field(DPOBatch(), description="Batch and micro-batch sizes.")
    data: PairData = Field(..., description="Where the pairs come from and how they are tokenized.")
    dpo: DPOSettings = Field(DPOSettings(), description="The DPO loss.")
    checkpoint: CheckpointConfig = Field(CheckpointConfig(), description="Resumable checkpoints (shared recipe).")
    logging: LoggingConfig = Field(LoggingConfig(), description="Logging; probe_examples = training pairs scored "
                                                                "before and after (with every held-out pair).")
    stop_after: int | None = Field(None, description="Stop (as if killed) after this many updates; for tests.")

    @model_validator(mode="after")
    def _check(self) -> "Config":
        if self.batch.micro_batch_tokens < 2 * self.data.max_length:
            raise ValueError(f"batch.micro_batch_tokens ({self.batch.micro_batch_tokens}) must be >= 2 * "
                             f"data.max_length ({self.data.max_length}) so every pair fits one micro-batch")
        self.train_config()       # the recipe's own checks (e.g. prefix batching without gradient checkpointing)
        return self

    def batching_mode(self) -> str:
        from hpd.train.student import batching_mode

        return batching_mode(self.train_config(self.batch.batching))

    def train_config(self, batching: str | None = None) -> TrainConfig:
        """The shared recipe's config: one T phase of ``updates`` updates, the same model, LoRA, optimizer."""
        return TrainConfig(
            name=self.name, seed=self.seed, model=self.model.plain(), lora=self.lora,
            optim=OptimConfig(**self.optim.model_dump()),
            batch=BatchConfig(global_batch=self.batch.global_batch, micro_batch_tokens=self.batch.micro_batch_tokens,
                              batching=batching or self.batching_mode()),
            data=DataConfig(max_length=self.data.max_length, length_policy=self.data.length_policy,
                            shuffle=self.data.shuffle),
            schedule={"phases": [{"views": {"T": 1}, "updates": self.updates}]},
            checkpoint=self.checkpoint, logging=self.logging, stop_after=self.stop_after)


def load_config(path: str | Path, overrides: list[str] | None = None, update: dict | None = None) -> Config:
    """Parse and validate a DPO config file (+ ``a.b=value`` overrides + ``update``, a nested mapping:
    :func:`hpd.train.config.config_dict`); pydantic ValidationError on bad input."""
    return Config.model_validate(config_dict(path, overrides, update))


# ---------------------------------------------------------------------------------------------- the loss
def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-pair DPO sigmoid loss ``-log sigmoid(beta * ((pc - rc) - (pr - rr)))`` and the implicit rewards
    ``beta * (pc - rc)``, ``beta * (pr - rr)`` (detached). Inputs: summed completion log-probs, shape (B,)."""
    chosen = beta * (policy_chosen - ref_chosen)
    rejected = beta * (policy_rejected - ref_rejected)
    return -F.logsigmoid(chosen - rejected), chosen.detach(), rejected.detach()


def sequence_logps(model, examples: list, mode: str, device, pad_id: int = 0) -> torch.Tensor:
    """Summed completion log-probs of ``examples`` (ViewExamples), in input order, from one micro-batch in ``mode``.
    Logits are computed only where a completion token is predicted (as :func:`hpd.train.student.row_loss_sum`)."""
    if mode == "prefix":
        return prefix_logps(model, examples, device)
    if mode == "packed":
        row = collate(examples).to(device)
        out = model(input_ids=row.input_ids, position_ids=row.position_ids, use_cache=False, logits_to_keep=row.keep)
        tok = -F.cross_entropy(out.logits[0].float(), row.targets, reduction="none")
        return torch.stack([t.sum() for t in tok.split([len(e.completion_ids) for e in examples])])
    b = collate_padded(examples, pad_id).to(device)
    out = model(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids,
                use_cache=False, logits_to_keep=b.keep)
    logits = out.logits[:, :-1].float()
    tok = -F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b.targets.reshape(-1), ignore_index=-100,
                           reduction="none")
    return tok.view(len(examples), -1).sum(1)


def prefix_logps(model, examples: list, device) -> torch.Tensor:
    """:func:`sequence_logps` through the shared-prefix trie of :mod:`hpd.train.prefix`: every trie node is one
    forward continuing its parent's key/value cache; a (position, target) that several sequences supervise is
    computed once and added to each of them."""
    from hpd.train.prefix import _fork, build_trie

    seqs, plens = [e.input_ids for e in examples], [len(e.prompt_ids) for e in examples]
    parts: list[torch.Tensor] = []

    def walk(node, cache) -> None:
        lo, hi = node.depth, node.depth + len(node.ids)
        entries: dict[tuple[int, int], list[int]] = {}
        for m in node.members:
            for t in range(max(plens[m], lo + 1), min(len(seqs[m]), hi + 1)):
                entries.setdefault((t - 1 - lo, seqs[m][t]), []).append(m)
        keep = sorted({p for p, _ in entries}) or [len(node.ids) - 1]
        out = model(input_ids=torch.tensor([node.ids], device=device),
                    position_ids=torch.arange(lo, hi, device=device).unsqueeze(0), past_key_values=_fork(cache),
                    use_cache=bool(node.children), logits_to_keep=torch.tensor(keep, device=device))
        if entries:
            row = {p: i for i, p in enumerate(keep)}
            items = list(entries.items())
            lp = -F.cross_entropy(out.logits[0, [row[p] for (p, _), _ in items]].float(),
                                  torch.tensor([t for (_, t), _ in items], device=device), reduction="none")
            who = torch.tensor([(m, j) for j, (_, ms) in enumerate(items) for m in ms], device=device)
            parts.append(torch.zeros(len(seqs), device=device).index_add(0, who[:, 0], lp[who[:, 1]]))
        for child in node.children:
            walk(child, out.past_key_values)

    for root in build_trie(seqs):
        walk(root, None)
    return torch.stack(parts).sum(0) if parts else torch.zeros(len(seqs), device=device)


def pair_groups(pairs: list[PairExample], mode: str, budget: int) -> list[list[PairExample]]:
    """Micro-batches of pairs whose sequences fit ``budget`` tokens (padded: 2 x pairs x longest, longest first;
    packed: the sum; prefix: one prompt and both completions per pair, in order); a pair over budget gets its own."""
    def cost(p: PairExample) -> int:
        if mode == "prefix":
            return p.n_tokens - len(p.chosen.prompt_ids)
        return p.n_tokens

    order = sorted(pairs, key=lambda p: -max(p.chosen.n_tokens, p.rejected.n_tokens)) if mode == "padded" else pairs
    groups, cur, longest, used = [], [], 0, 0
    for p in order:
        n = max(p.chosen.n_tokens, p.rejected.n_tokens)
        need = 2 * (len(cur) + 1) * max(longest, n) if mode == "padded" else used + cost(p)
        if cur and need > budget:
            groups.append(cur)
            cur, longest, used = [], 0, 0
        cur.append(p)
        longest, used = max(longest, n), used + cost(p)
    if cur:
        groups.append(cur)
    return groups


def pair_logps(model, group: list[PairExample], mode: str, device,
               pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) summed log-probs of a micro-batch of pairs, one forward over both."""
    lp = sequence_logps(model, [p.chosen for p in group] + [p.rejected for p in group], mode, device, pad_id)
    return lp[: len(group)], lp[len(group):]


def held_out_task_set(task_uids: list[str], n: int) -> set[str]:
    """The ``n`` tasks held out: smallest sha256 of the uid first (the same for every seed)."""
    return set(sorted(set(task_uids), key=lambda t: hashlib.sha256(t.encode()).hexdigest())[:n])


def pair_figures(pc: torch.Tensor, pr: torch.Tensor, rc: torch.Tensor, rr: torch.Tensor, beta: float) -> dict:
    """Figures of pairs from their summed log-probs (policy pc/pr, reference rc/rr): mean DPO loss, policy margin
    ``logp(c) - logp(r)`` and the reference's, the implicit rewards of the chosen and of the rejected completions
    (``beta * (logp - ref_logp)``, TRL's ``rewards/chosen`` and ``rewards/rejected``: a negative chosen reward means
    training lowered the chosen completions too) and their margin, reward accuracy (reward margin > 0), preference
    accuracy (``logp(c) > logp(r)``). Before training the policy is the reference, so the reward figures there are
    float noise of another micro-batching (|reward margin| ~ 1e-6)."""
    loss, cr, rj = dpo_loss(pc, pr, rc, rr, beta)
    return {"n": len(pc), "loss": float(loss.mean()), "margin": float((pc - pr).mean()),
            "ref_margin": float((rc - rr).mean()), "chosen_reward": float(cr.mean()),
            "rejected_reward": float(rj.mean()), "reward_margin": float((cr - rj).mean()),
            "reward_accuracy": float((cr > rj).double().mean()),
            "preference_accuracy": float((pc > pr).double().mean())}


def held_out_change(before: dict | None, after: dict | None) -> dict | None:
    """The held-out pairs' margin and accuracies before and after training (``metrics.json`` ``held_out``)."""
    if not after:
        return None
    before = before or {}
    return {"n_pairs": after["n"], "margin_before": before.get("margin"), "margin_after": after["margin"],
            "reward_accuracy_after": after["reward_accuracy"],
            "preference_accuracy_before": before.get("preference_accuracy"),
            "preference_accuracy_after": after["preference_accuracy"]}


# ---------------------------------------------------------------------------------------------- trainer
class DPOTrainer(Trainer):
    """The recipe with DPO's data, loss and summary (see the module docstring)."""

    def __init__(self, cfg: Config, out_dir: str | Path, *, resume: bool = False, command: str | None = None):
        super().__init__(None, cfg.train_config(cfg.batch.batching), out_dir, resume=resume, command=command,
                         data_path=cfg.data.teach)
        self.dpo_cfg = cfg
        self.beta = cfg.dpo.beta

    # -------------------------------------------------------------- data
    def load_data(self) -> None:
        """Teach folder -> pairs -> tokenized pairs (train and held-out) -> ``self.examples["T"]``; ``pairs.json``."""
        from hpd.teacher.read import read_teach_run
        from hpd.train.student import load_tokenizer, resolve_model_path
        from hpd.views import Renderer

        d = self.dpo_cfg.data
        run = read_teach_run(d.teach)
        self.teach_run = run
        self.pairset = build_pairs(run.records, run.training, self._items(run), reference_chosen=d.reference_chosen,
                                   exclude_reasons=d.exclude_reasons, max_rejected=d.max_rejected_per_boundary)
        self.schedule = self.cfg.schedule.build()
        self.views = ["T"]
        self.model_path = resolve_model_path(self.cfg, self.out, self.main)
        self.accelerator.wait_for_everyone()
        self.tokenizer = load_tokenizer(self.model_path)
        renderer = Renderer(self.tokenizer, enable_thinking=self.cfg.model.enable_thinking)
        self.all_pairs, self.report = encode_pairs(self.pairset.pairs, renderer, max_length=d.max_length,
                                                   length_policy=d.length_policy)
        held = held_out_task_set([p.pair.task_uid for p in self.all_pairs], d.held_out_tasks)
        self.held_out = [p for p in self.all_pairs if p.pair.task_uid in held]
        self.examples = {"T": [p for p in self.all_pairs if p.pair.task_uid not in held]}
        self.records = [p.uid for p in self.all_pairs]
        if not self.examples["T"]:
            raise TrainError(f"no training pairs from {d.teach}: {self._pairs_line()}")
        if self.main:
            write_json(self.out / "length_report.json", self.report.to_dict())
            write_json(self.out / "pairs.json", self.pairs_summary(details=True))
            print(f"[hpd train dpo] {self._pairs_line()}; {self.report.summary()}", file=sys.stderr)

    def _items(self, run) -> dict | None:
        """Boundary items to verify references on, loaded only when some boundary has no verified candidate."""
        from hpd.teacher.boundaries import load_items

        d = self.dpo_cfg.data
        if not d.reference_chosen or all(any(c["verdict"]["ok"] for c in r["candidates"]) for r in run.records):
            return None
        path = Path(d.boundaries) if d.boundaries else run.boundaries_path
        if path is None or not path.is_dir():
            if d.boundaries:
                raise TrainError(f"data.boundaries: not a replay folder: {path}")
            if self.main:
                print(f"[hpd train dpo] no replay folder to verify references on ({path or 'none recorded'}): "
                      "boundaries without a verified candidate stay unpaired", file=sys.stderr)
            return None
        items, _ = load_items(path, privilege=run.privilege or "plan")
        return {it.id: it for it in items}

    def pairs_summary(self, details: bool = False) -> dict:
        s = self.pairset.summary()
        s.update(n_encoded=len(self.all_pairs), skipped_too_long=s["n_pairs"] - len(self.all_pairs),
                 n_train_pairs=len(self.examples["T"]), n_held_out_pairs=len(self.held_out),
                 held_out_tasks=sorted({p.pair.task_uid for p in self.held_out}), teach=str(self.dpo_cfg.data.teach))
        if details:
            held = {id(p) for p in self.held_out}
            s["pairs"] = [{"uid": p.uid, "chosen_source": p.pair.chosen_source, "reasons": list(p.pair.reasons),
                           "split": "held_out" if id(p) in held else "train"} for p in self.all_pairs]
        return s

    def _pairs_line(self) -> str:
        s = self.pairset.summary()
        return (f"{s['n_pairs']} pairs from {s['n_boundaries_paired']}/{s['n_boundaries']} boundaries; unpaired "
                f"{s['unpaired']}; rejection reasons {s['rejection_reasons']}")

    def _records_input(self) -> dict:
        return {"path": str(self.dpo_cfg.data.teach), "sha256": checksum(self.dpo_cfg.data.teach, "*.jsonl")}

    # -------------------------------------------------------------- model, reference, resume
    def start_adapter(self) -> str | None:
        return self.dpo_cfg.model.adapter

    def _setup_model(self) -> None:
        super()._setup_model()
        try:
            self.mode = one_forward_mode(self.accelerator, self.dpo_cfg.batching_mode(), self.dpo_cfg.batch.batching)
        except ValueError as e:
            raise TrainError(str(e)) from None
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        if self.dpo_cfg.dpo.disable_dropout:
            for m in self.model.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = 0.0

    def _restore(self) -> None:
        """Reference log-probs from the starting model (before any checkpoint is loaded), then the shared resume,
        then the manifest with the whole DPO config."""
        self.ref = self.cached_reference()
        super()._restore()
        if self.probe_initial is None:
            self.probe_initial = self.probe()
        if self.main:
            self.manifest = self._manifest()
            write_json(self.out / "manifest.json", self.manifest)

    def _manifest(self) -> dict:
        """The run folder's manifest: the whole DPO config (its hash), the teach folder's checksum, the pairs."""
        cfg = self.dpo_cfg
        return new_manifest(
            self.command, cfg.model_dump(mode="json"), seed=cfg.seed,
            inputs={"teach": self._records_input(), "base_model": str(self.model_path)},
            method="dpo", n_pairs=len(self.all_pairs), dtype=str(self.dtype).replace("torch.", ""), batching=self.mode,
            distributed={"type": str(self.accelerator.distributed_type), "world_size": self.world},
            length_report=self.report.to_dict(), resumed=self.resumed, pairs=self.pairs_summary(),
            departures_from_paper=departures(cfg))

    def reference_key(self) -> str:
        """What the reference table depends on: the model settings, the batching, the dtype and every pair's ids."""
        h = hashlib.sha256()
        h.update(config_hash({"model": self.dpo_cfg.model.model_dump(mode="json", exclude_none=True), "mode": self.mode,
                              "budget": self.budget, "dtype": str(self.dtype), "lora": self.cfg.lora.enabled}).encode())
        for p in self.all_pairs:
            for ex in (p.chosen, p.rejected):
                h.update(np.asarray(ex.input_ids, dtype=np.int64).tobytes() + b"|")
        return h.hexdigest()[:16]

    def cached_reference(self) -> torch.Tensor:
        """The reference table, computed once per run folder: :data:`REFERENCE_FILE` keeps it with its
        :meth:`reference_key`, and a resumed run with the same key loads it (on SmolLM2 the pass over 730 pairs took
        16 minutes beside another job) instead of computing it again; the loaded floats are the saved ones."""
        f, key = self.out / REFERENCE_FILE, self.reference_key()
        if f.is_file():
            try:
                saved = torch.load(f, weights_only=True)
                if saved.get("key") == key and saved["ref"].shape == (len(self.all_pairs), 2):
                    return saved["ref"]
            except (OSError, RuntimeError, KeyError, AttributeError):
                pass                                   # unreadable or another table: computed again below
        ref = self.reference_logps(self.all_pairs)
        if self.main:
            tmp = f.with_name(f".{f.name}.tmp")
            torch.save({"key": key, "ref": ref}, tmp)
            tmp.replace(f)
        return ref

    @torch.no_grad()
    def reference_logps(self, pairs: list[PairExample]) -> torch.Tensor:
        """``(len(pairs), 2)`` summed log-probs of (chosen, rejected) under the reference, in the order of ``pairs``:
        a fresh LoRA's run with its adapter disabled, else the current weights (full fine-tuning, or a start adapter:
        called before any update or restore, so they are the start's), eval mode, micro-batches fixed by ``pairs``
        alone (so a resumed run gets the same floats)."""
        unwrapped = self.accelerator.unwrap_model(self.model)
        fresh_lora = self.cfg.lora.enabled and not self.start_adapter()
        off = unwrapped.disable_adapter() if fresh_lora else contextlib.nullcontext()
        pos = {p.index: i for i, p in enumerate(pairs)}
        ref = torch.zeros(len(pairs), 2)
        was = self.model.training
        self.model.eval()
        with off:
            for g in pair_groups(pairs, self.mode, self.budget):
                c, r = pair_logps(self.model, g, self.mode, self.device, self.pad_id)
                idx = torch.tensor([pos[p.index] for p in g])
                ref[idx, 0], ref[idx, 1] = c.float().cpu(), r.float().cpu()
        self.model.train(was)
        return ref

    def _ref(self, group: list[PairExample]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.tensor([p.index for p in group])
        return self.ref[idx, 0].to(self.device), self.ref[idx, 1].to(self.device)

    # -------------------------------------------------------------- one update
    def update_loss(self, batch: list[PairExample]) -> tuple[float, int]:
        """DPO loss of one update: the mean over the global batch's pairs; this process's share in micro-batches of
        whole pairs (gradients synced on the last; the same count on every process under sharding). Returns (mean
        loss over all processes, completion tokens)."""
        acc = self.accelerator
        n = len(batch)
        groups = pair_groups(batch[self.rank::self.world], self.mode, self.budget)
        total = torch.zeros((), device=self.device)
        with self.uncast_adapter_inputs():
            for g in accumulate(acc, self.model, groups):
                if g is None:       # sharded: a process with fewer micro-batches matches the others' count
                    acc.backward(zero_loss(self.model, self.device))
                    continue
                pc, pr = pair_logps(self.model, g, self.mode, self.device, self.pad_id)
                losses, _, _ = dpo_loss(pc, pr, *self._ref(g), self.beta)
                acc.backward(losses.sum() * (self.world / n))
                total += losses.detach().sum()
        n_sup = sum(len(p.chosen.completion_ids) + len(p.rejected.completion_ids) for p in batch)
        return float(acc.reduce(total, reduction="sum")) / n, n_sup

    # -------------------------------------------------------------- probes and summary
    @torch.no_grad()
    def pair_metrics(self, pairs: list[PairExample]) -> dict | None:
        """Eval-mode :func:`pair_figures` of ``pairs`` under the current policy (None for no pairs)."""
        if not pairs:
            return None
        was = self.model.training
        self.model.eval()
        cols: list[list[torch.Tensor]] = [[], [], [], []]
        for g in pair_groups(pairs, self.mode, self.budget):
            for col, x in zip(cols, (*pair_logps(self.model, g, self.mode, self.device, self.pad_id), *self._ref(g))):
                col.append(x.float().cpu())
        self.model.train(was)
        return pair_figures(*(torch.cat(c).double() for c in cols), beta=self.beta)

    def probe(self) -> dict:
        """The first ``logging.probe_examples`` training pairs and every held-out pair."""
        n = self.cfg.logging.probe_examples
        return {"train": self.pair_metrics(self.examples["T"][:n]), "held_out": self.pair_metrics(self.held_out)}

    def summary(self, probe_final: dict | None) -> dict:
        """``metrics.json``: DPO losses, pair counts, probes (training pairs, held-out pairs) before and after."""
        probe_final = probe_final or self.probe()
        rows = read_csv(self.out / "metrics.csv")
        losses = [r["loss"] for r in rows]
        tps = [float(r["tokens_per_s"]) for r in rows]
        return {
            "method": "dpo", "beta": self.beta, "updates": self.schedule.total,
            "global_batch": self.cfg.batch.global_batch,
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "final_loss": float(np.mean(losses[-10:])) if losses else None, "final_loss_window": 10,
            "logged_updates": len(losses), "pairs": self.pairs_summary(),
            "probe_initial": self.probe_initial, "probe_final": probe_final,
            "held_out": held_out_change((self.probe_initial or {}).get("held_out"), probe_final.get("held_out")),
            "tokens_per_s_median": float(np.median(tps)) if tps else None, "peak_gb": memory.run_peak(rows),
            "world_size": self.world,
        }

def run(cfg: Config, out: str | Path, *, resume: bool = False, command: str | None = None) -> Path | None:
    """Train DPO per ``cfg`` into ``out``: ``adapter/`` (``model/`` under full fine-tuning), ``metrics.json``,
    ``pairs.json``, ``manifest.json``; returns the adapter folder, or None when ``stop_after`` ended the run early."""
    return DPOTrainer(cfg, out, resume=resume, command=command).run()
