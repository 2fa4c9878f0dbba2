"""Train config: a YAML (or TOML) file parsed into :class:`TrainConfig` (pydantic, extra keys forbidden).

Every field has a documented default; shipped files live in ``configs/`` at the repo root (package data,
:mod:`hpd.resources`) and start with a header comment giving the exact command. Overrides on the command line
use dotted keys with YAML values, e.g. ``optim.lr=1e-4 schedule.phases.0.updates=30`` (the user's text, parsed
once here); code puts its own settings on a file as a nested mapping (``update`` of :func:`load_config`,
:func:`merge`), validated once with the rest.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal, get_args

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from hpd.resources import config_file, configs_dir
from hpd.views.examples import VIEWS
from hpd.views.length_policy import POLICIES

from .schedule import Phase, Schedule


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(_Strict):
    path: str = Field(..., description="Local Hugging Face model dir (e.g. a downloaded Qwen/Qwen3-8B), "
                                       "or 'tiny:xs' / 'tiny:s' for the tiny factory hpd.policy.tiny.build_tiny.")
    precision: Literal["fp32", "bf16", "auto"] = Field(
        "auto", description="bf16: base weights bf16 + bf16 autocast, LoRA weights and optimizer fp32. "
                            "auto: bf16 where the device computes it natively (a CUDA GPU with bf16 "
                            "support, a CPU with AVX512-BF16 or AMX-BF16), else fp32 (hpd.policy.dtype). "
                            "`hpd train --dtype` overrides it.")
    attn_implementation: str = Field("sdpa", description="transformers attention backend: sdpa (torch's own kernels; "
                                     "what the shipped configs use), flash_attention_2 (needs the flash-attn "
                                     "package, which no hpd extra installs), eager.")
    gradient_checkpointing: bool = False
    enable_thinking: bool = Field(False, description="Qwen3 thinking flag passed to the renderer (False: empty think block in the prompt).")


class StartModelConfig(ModelConfig):
    """:class:`ModelConfig` plus where training starts (the RL methods and DPO: a trained SFT adapter)."""

    adapter: str | None = Field(None, description="A PEFT adapter dir to start from (e.g. the SFT run's "
                                "<out>/adapter on model.path); it is trained further and saved as <out>/adapter, "
                                "so `hpd eval --model <model.path> --adapter <out>/adapter` evaluates the result. "
                                "None: model.path itself is the start (a base model, or an SFT run's <out>/model "
                                "under full fine-tuning) and a fresh LoRA (or full fine-tuning) is trained.")

    def plain(self) -> ModelConfig:
        """The same settings without ``adapter`` (the shared recipe's :class:`TrainConfig` takes those)."""
        return ModelConfig(**self.model_dump(exclude={"adapter"}))


class LoraSettings(_Strict):
    enabled: bool = Field(True, description="False: full fine-tuning of every parameter, saved as a whole model in "
                                            "<out>/model instead of <out>/adapter. Only for the tiny CPU path: a LoRA "
                                            "adapter on a random-weight base barely moves the loss (hpd demo).")
    r: int = Field(16, gt=0)
    alpha: int = Field(32, gt=0)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: str | list[str] = Field("all-linear", description="PEFT target_modules ('all-linear' excludes the LM head).")
    top_layers: int | None = Field(None, gt=0, description="Adapt only the top N decoder layers (PEFT "
                                   "layers_to_transform); null = every layer, as in the paper. Backward then stops "
                                   "below the lowest adapted layer, so an update costs less (docs/demo.md).")


class OptimConfig(_Strict):
    lr: float = Field(2e-6, gt=0, description="Constant learning rate (paper: 2e-6).")
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW decoupled weight decay (HF Trainer default 0.0; paper silent).")
    max_grad_norm: float | None = Field(1.0, description="Global grad-norm clip (HF Trainer default 1.0; paper silent). null = off.")
    warmup_updates: int = Field(0, ge=0, description="Linear warm-up before the constant LR (paper: none).")
    decay: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="LR after the warm-up: constant (the paper's), or a linear / cosine decay to "
                                "min_lr_ratio x lr at the last update (hpd.train.lr; the real-model demo's departure, "
                                "docs/demo.md).")
    min_lr_ratio: float = Field(0.0, ge=0.0, le=1.0, description="Where a linear / cosine decay ends, as a fraction of lr.")


LR_DECAYS = get_args(OptimConfig.model_fields["decay"].annotation)   # ("constant", "linear", "cosine")


#: How a micro-batch lays out its rows: the ``batch.batching`` of every trainer's config (three-view, DPO, RL; RL
#: refuses ``packed``). The rows themselves are cut by :func:`hpd.policy.batching.budget_batches`.
Batching = Literal["auto", "packed", "padded", "prefix"]


class BatchConfig(_Strict):
    global_batch: int = Field(128, gt=0, description="Examples per optimizer update, summed over all processes (paper: 128).")
    micro_batch_tokens: int = Field(8192, gt=0, description="Token budget of one packed (padding-free) micro-batch "
                                                            "row; the update accumulates as many as it needs.")
    batching: Batching = Field(
        "auto", description="packed: padding-free rows (position_ids restart per example); padded: length-grouped, "
                            "left-padded rows; prefix: a prefix shared by several examples is computed once "
                            "(hpd.train.prefix; same math, no padding; not with gradient checkpointing). auto: packed "
                            "under flash attention, prefix without gradient checkpointing, else padded. All compute "
                            "logits only where a completion token is predicted.")


class DataConfig(_Strict):
    path: str | None = Field(None, description="JSONL of boundary records (hpd.views.records); `--data` overrides.")
    synthetic_tasks: int | None = Field(None, description="If set (and no path): use hpd.views.synthetic with this many tasks.")
    max_length: int = Field(4096, gt=8, description="Max tokens of prompt + completion per example.")
    length_policy: Literal["drop_oldest_tool_outputs", "skip"] = "drop_oldest_tool_outputs"
    target: Literal["teacher", "reference"] = Field("teacher", description="T/I completion: teacher target or reference action (SFT baseline).")
    shuffle: bool = Field(True, description="Reshuffle each view's examples every epoch (seeded; exact on resume).")
    group_episodes: bool = Field(False, description="Shuffle whole episodes: a task's boundaries stay adjacent, so "
                                                    "a batch holds a few episodes and `batching: prefix` computes "
                                                    "their shared prompt once (CPU speed; batches are correlated).")
    teacher_level: Literal["runtime", "plan", "oracle"] | None = Field(
        None, description="Control-document level the teacher read (`hpd teach --privilege`); it is also the I "
                          "view's document. Set: every record's `document_privilege` must equal it (records taught "
                          "at another level are refused). null: whatever the records carry.")
    r_target_level: Literal["runtime", "plan", "oracle"] | None = Field(
        None, description="Control-document level the R view reconstructs, read from each record's `documents` "
                          "map (all levels `hpd teach` found compiled). null: the record's `document` (the "
                          "teacher's level).")

    @field_validator("length_policy")
    @classmethod
    def _pol(cls, v: str) -> str:
        assert v in POLICIES
        return v


class PhaseConfig(_Strict):
    views: dict[str, int] = Field(..., description="Integer cycle weights, e.g. {T: 1, I: 1, R: 1} or {T: 5, I: 1, R: 5}.")
    updates: int = Field(..., gt=0, description="Optimizer updates in this phase.")

    @field_validator("views")
    @classmethod
    def _views(cls, v: dict[str, int]) -> dict[str, int]:
        bad = [k for k in v if k not in VIEWS]
        if bad:
            raise ValueError(f"unknown views {bad}; use {list(VIEWS)}")
        if any(int(x) != x or x < 0 for x in v.values()) or sum(v.values()) <= 0:
            raise ValueError(f"view weights must be non-negative integers with a positive sum, got {v}")
        return v


class ScheduleConfig(_Strict):
    phases: list[PhaseConfig] = Field(..., min_length=1)

    def build(self) -> Schedule:
        return Schedule([Phase(weights=dict(p.views), updates=p.updates) for p in self.phases])


def _update_list(v: list[int]) -> list[int]:
    """Sorted, distinct, positive update counts."""
    if any(x <= 0 for x in v):
        raise ValueError(f"steps must be positive update counts, got {v}")
    return sorted(set(v))


Updates = Annotated[list[int], AfterValidator(_update_list)]


class CheckpointConfig(_Strict):
    every: int = Field(1000, gt=0, description="Save a resumable checkpoint every N updates (and at the end); each "
                                               "holds a loadable `adapter/` (`model/` under full fine-tuning) that "
                                               "`hpd eval --adapter` takes.")
    keep: int = Field(2, gt=0, description="Keep the newest N checkpoints (besides those in eval_steps).")
    eval_steps: Updates = Field([], description="Updates whose checkpoint is always saved and never deleted by "
                                                  "`keep`, e.g. [40000, 60000] for the checkpoint comparison "
                                                  "(steps past the schedule's end never come).")



class EvaluationConfig(_Strict):
    """Native evaluation of checkpoints during training (rank 0; the other processes wait)."""
    steps: Updates = Field([], description="Updates after which the checkpoint is evaluated natively in the "
                                             "harness (TS, F1, ...) into <out>/evals/update-N; empty = never.")
    data: str | None = Field(None, description="TRAJECT-Bench-layout folder (null: $HPD_TRAJECT_DIR, as hpd eval).")
    split_file: str | None = Field(None, description="split.json of `hpd data split`; with `split`.")
    split: str | None = Field("test", description="Part of split_file to evaluate.")
    limit: int | None = Field(None, gt=0, description="Only the first N selected tasks.")
    pool_k: int = Field(20, gt=0, description="Tools per episode (hpd eval --pool-k).")
    max_turns: int = Field(15, gt=0, description="Turn budget per episode (hpd eval --max-turns).")
    max_new_tokens: int = Field(256, gt=0, description="Tokens per turn (hpd eval --max-new-tokens).")
    backend: Literal["hf", "vllm"] = Field("hf", description="Model backend of the evaluation.")



class LoggingConfig(_Strict):
    every: int = Field(1, gt=0, description="Write CSV/TensorBoard rows every N updates.")
    tensorboard: bool = True
    wandb: bool = Field(False, description="Log to Weights & Biases if the package is importable (never required).")
    wandb_project: str = "hpd"
    progress: bool = True
    probe_examples: int = Field(16, ge=0, description="Per view: first N examples scored (no grad) before and after training.")
    curve_window_cycles: int = Field(200, gt=0, description="curves.json / curves.png: per-view running mean and "
                                                            "10-90% band over the last N cycles (paper: 200).")
    curves_png: bool = Field(True, description="Also draw curves.png with matplotlib (curves.json is always written); "
                                               "skipped with a note where matplotlib is not installed.")


class TrainConfig(_Strict):
    name: str = "hpd"
    seed: int = 0
    model: ModelConfig
    lora: LoraSettings = LoraSettings()
    optim: OptimConfig = OptimConfig()
    batch: BatchConfig = BatchConfig()
    data: DataConfig = DataConfig()
    schedule: ScheduleConfig
    checkpoint: CheckpointConfig = CheckpointConfig()
    logging: LoggingConfig = LoggingConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    stop_after: int | None = Field(None, description="Stop (as if killed) after this many updates in this invocation; for tests.")

    @model_validator(mode="after")
    def _check(self) -> "TrainConfig":
        if self.batch.micro_batch_tokens < self.data.max_length:
            raise ValueError(f"batch.micro_batch_tokens ({self.batch.micro_batch_tokens}) must be >= data.max_length "
                             f"({self.data.max_length}) so every example fits one micro-batch")
        if self.batch.batching == "prefix" and self.model.gradient_checkpointing:
            raise ValueError("batch.batching=prefix reuses the key/value cache, which gradient checkpointing "
                             "disables; use batching: padded or packed, or model.gradient_checkpointing: false")
        self.schedule.build()
        return self

    @property
    def saved_steps(self) -> set[int]:
        """Updates whose checkpoint is saved besides every ``checkpoint.every`` and kept whatever ``keep`` says."""
        return set(self.checkpoint.eval_steps) | set(self.evaluation.steps)

    @property
    def total_updates(self) -> int:
        return sum(p.updates for p in self.schedule.phases)


def _parse_value(s: str):
    return yaml.safe_load(s) if s != "" else ""


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply ``a.b.c=value`` overrides (value parsed as YAML; list indices as integers) to a raw config dict."""
    for item in overrides or []:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not KEY=VALUE")
        key, val = item.split("=", 1)
        parts = key.strip().split(".")
        node = raw
        for p in parts[:-1]:
            if isinstance(node, list):
                node = node[int(p)]
            else:
                node = node.setdefault(p, {})
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = _parse_value(val)
        else:
            node[last] = _parse_value(val)
    return raw


def merge(raw: dict, update: dict) -> dict:
    """``raw`` with ``update`` written over it, nested mappings merged key by key (``raw`` itself is not changed)."""
    out = dict(raw)
    for k, v in update.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_raw(path: str | Path) -> dict:
    """The mapping in a YAML or TOML config file; a ``configs/...`` path that is not there is the shipped copy
    (:func:`hpd.resources.config_file`)."""
    p = config_file(path)
    if not p.is_file():
        raise FileNotFoundError(f"config not found: {p}")
    text = p.read_text()
    raw = tomllib.loads(text) if p.suffix == ".toml" else yaml.safe_load(text)
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: top level must be a mapping")
    return raw


def config_dict(path: str | Path, overrides: list[str] | None = None, update: dict | None = None) -> dict:
    """The raw config of ``path``, then the user's ``KEY=VALUE`` ``overrides``, then code's ``update`` (a nested
    mapping, :func:`merge`) on it; not validated yet."""
    return merge(apply_overrides(read_raw(path), overrides or []), update or {})


def load_config(path: str | Path, overrides: list[str] | None = None, update: dict | None = None) -> TrainConfig:
    """Parse and validate a config file (+ overrides, + ``update``: :func:`config_dict`). Raises
    ValueError/pydantic.ValidationError on bad input."""
    return TrainConfig.model_validate(config_dict(path, overrides, update))


def default_configs_dir() -> Path:
    """The shipped ``configs/`` (:func:`hpd.resources.configs_dir`)."""
    return configs_dir()


def config_max_lengths(configs_dir: str | Path | None = None) -> dict[int, list[str]]:
    """``{data.max_length: [config files using it]}`` over ``configs/*.yaml`` and ``configs/ablations/*.yaml``.

    Each file is read with :func:`load_config` (so a file that leaves ``data.max_length`` out counts with the
    config default); a file that does not validate is read raw. ``hpd data stats --tokenizer`` reports which
    shipped configs a measured length fits."""
    d = Path(configs_dir) if configs_dir is not None else default_configs_dir()
    files = sorted(d.glob("*.yaml")) + sorted((d / "ablations").glob("*.yaml"))
    out: dict[int, list[str]] = {}
    for f in files:
        try:
            m = int(load_config(f).data.max_length)
        except Exception:  # noqa: BLE001 - e.g. a partial config; fall back to the raw value
            try:
                raw = read_raw(f)
            except Exception:  # noqa: BLE001
                continue
            m = (raw.get("data") or {}).get("max_length") if isinstance(raw.get("data"), dict) else None
            if not isinstance(m, int):
                continue
        rel = f.relative_to(d.parent).as_posix() if d.parent in f.parents else str(f)
        out.setdefault(m, []).append(rel)
    return dict(sorted(out.items()))
