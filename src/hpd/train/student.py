"""Base model + tokenizer loading (local dirs only) and LoRA wrapping; the completion-only loss.

The loss of a packed row asks the model for logits ONLY at supervised positions (``logits_to_keep``
as an index tensor), so the (vocab x tokens) LM-head product and its softmax are never computed for
prompt tokens. The row loss is the SUM of token cross-entropies; the trainer divides by the number
of supervised tokens in the global batch (token-mean over the global batch, like TRL's
``num_items_in_batch`` normalisation).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn.functional as F

from .config import TrainConfig
from .data import PackedRow, PaddedBatch
from .prefix import PrefixBatch, prefix_loss_sum


def resolve_dtype(precision: str) -> torch.dtype:
    """``model.precision`` (``fp32`` | ``bf16`` | ``auto``) -> the base weights' dtype on the training device,
    by hpd's one rule (:func:`hpd.policy.dtype.resolve_dtype`: ``auto`` = bf16 on a CUDA GPU with bf16 support
    or a CPU with AVX512-BF16 / AMX-BF16, else fp32)."""
    from hpd.policy.dtype import resolve_dtype as resolve

    return resolve(precision)


def resolve_model_path(cfg: TrainConfig, work_dir: Path, is_main: bool) -> Path:
    """A local model dir: ``cfg.model.path`` itself, or the tiny factory's output for ``tiny:<size>``."""
    p = cfg.model.path
    if p.startswith("tiny:"):
        size = p.split(":", 1)[1]
        d = work_dir / f"base-tiny-{size}"
        if is_main and not (d / "config.json").is_file():
            try:
                from hpd.policy.tiny import build_tiny
            except ImportError as exc:
                raise RuntimeError(f"model.path={p!r} needs hpd.policy.tiny.build_tiny: {exc}") from exc
            build_tiny(d, size=size, seed=cfg.seed)
        return d
    path = Path(os.path.expanduser(p))
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"model.path {p!r} is not a local Hugging Face model dir (no config.json); "
                                "nothing is downloaded")
    return path


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def load_start_adapter(cfg: TrainConfig, path: Path, adapter: str | Path, dtype: torch.dtype | None = None):
    """Base model in the configured dtype with a trained PEFT adapter on it, trainable (a run that starts from an
    SFT run's ``<out>/adapter``: DPO, the RL methods); the adapter keeps its own rank and targets. Raises OSError
    or ValueError when ``adapter`` is not a loadable adapter of this model."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    if not (Path(adapter) / "adapter_config.json").is_file():
        raise ValueError("not a PEFT adapter dir (no adapter_config.json)")
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype or resolve_dtype(cfg.model.precision),
                                                 local_files_only=True,
                                                 attn_implementation=cfg.model.attn_implementation)
    model.config.use_cache = False
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return PeftModel.from_pretrained(model, str(adapter), is_trainable=True)


def load_lora_model(cfg: TrainConfig, path: Path, dtype: torch.dtype | None = None):
    """Base model in the configured dtype (``dtype``: one resolved already, e.g. a resumed run's) with a fresh
    LoRA adapter (seeded by ``cfg.seed``; peft keeps the adapter fp32 on a bf16 base), or the plain model for full
    fine-tuning when ``cfg.lora.enabled`` is False: then every weight trains, so it stays fp32 (the master weights
    AdamW updates) and bf16 is the autocast's compute dtype only."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    dtype = (dtype or resolve_dtype(cfg.model.precision)) if cfg.lora.enabled else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, local_files_only=True,
                                                 attn_implementation=cfg.model.attn_implementation)
    model.config.use_cache = False
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    torch.manual_seed(cfg.seed)
    if not cfg.lora.enabled:   # full fine-tuning (tiny CPU path): every parameter trains
        return model
    targets, layers = cfg.lora.target_modules, {}
    if cfg.lora.top_layers:
        n = model.config.get_text_config().num_hidden_layers
        if cfg.lora.top_layers > n:
            raise ValueError(f"lora.top_layers={cfg.lora.top_layers}: the model has {n} decoder layers")
        layers = {"layers_to_transform": list(range(n - cfg.lora.top_layers, n)), "layers_pattern": "layers"}
        if targets == "all-linear":   # PEFT takes layers_to_transform with a list of module names only
            targets = sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules()
                              if isinstance(m, torch.nn.Linear) and ".layers." in name})
    lcfg = LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, lora_dropout=cfg.lora.dropout,
                      target_modules=targets, task_type="CAUSAL_LM", **layers)
    return get_peft_model(model, lcfg)


def row_loss_sum(model, row: PackedRow | PaddedBatch | PrefixBatch) -> torch.Tensor:
    """Sum of next-token cross-entropies over the supervised (completion) tokens of a micro-batch.

    Packed row (padding-free): no attention mask; ``position_ids`` restart per example and
    transformers builds the block-diagonal causal mask (varlen kernels under flash attention).
    Padded batch: left padding, logits only for the last ``max completion + 1`` positions.
    Prefix batch: :func:`hpd.train.prefix.prefix_loss_sum` (shared prefixes computed once).
    """
    if isinstance(row, PrefixBatch):
        return prefix_loss_sum(model, row)
    if isinstance(row, PaddedBatch):
        out = model(input_ids=row.input_ids, attention_mask=row.attention_mask, position_ids=row.position_ids,
                    use_cache=False, logits_to_keep=row.keep)
        logits = out.logits[:, :-1].float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), row.targets.reshape(-1),
                               ignore_index=-100, reduction="sum")
    out = model(input_ids=row.input_ids, position_ids=row.position_ids, use_cache=False, logits_to_keep=row.keep)
    logits = out.logits[0].float()
    return F.cross_entropy(logits, row.targets, reduction="sum")


def batching_mode(cfg: TrainConfig) -> str:
    """``packed`` under flash attention (varlen kernels make packing free); else ``prefix`` (shared prefixes once,
    no padding) unless gradient checkpointing is on, which disables the cache it needs; else ``padded``
    (sdpa/eager would compute the full block-diagonal L x L product of a packed row)."""
    if cfg.batch.batching != "auto":
        return cfg.batch.batching
    if cfg.model.attn_implementation.startswith("flash"):
        return "packed"
    return "padded" if cfg.model.gradient_checkpointing else "prefix"
