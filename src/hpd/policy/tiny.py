"""Tiny local Qwen3 models: a tokenizer trained here + a random-weight ``Qwen3ForCausalLM``.

Recipe (``docs/ml-stack.md`` section 2, measured on the CPU machines): byte-level BPE trained with
``tokenizers`` using Qwen2/Qwen3's split regex (GPT-2's regex tokenizes ``</think>\\n\\n|Item``
differently in prompt vs prompt+completion), specials ``<|endoftext|>`` (pad), ``<|im_start|>``,
``<|im_end|>`` (eos) and the added tokens ``<tool_call> </tool_call> <tool_response> </tool_response>
<think> </think>`` as in Qwen3; chat template = TRL's ``qwen3.jinja`` verbatim (TRL then recognises
it exactly as it recognises the real Qwen3 tokenizer). Weights: ``torch.manual_seed(seed)`` then a
fresh ``Qwen3ForCausalLM``. The output folder is a normal Hugging Face model directory
(``config.json``, ``generation_config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``, ``chat_template.jinja``) plus ``hpd_tiny.json`` (how it was built).

Sizes: ``xs`` = hidden 64, 2 layers (185,088 parameters); ``s`` = hidden 256, 4 layers (3,493,888).
Deterministic: the same ``seed`` and texts give byte-identical files (the built-in corpus has a fixed
seed of its own, so only the weights depend on ``seed``). ``generation_config.json`` sets no sampling
defaults (do_sample/temperature/top_k/top_p), so nothing silently overrides full-vocabulary sampling.

:func:`sft_tiny` is a minimal completion-only SFT loop (plain torch) used by tests, the bench and
the serve demo to teach a tiny model to emit tool calls in seconds; real training lives in hpd.train.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: the file that marks a folder as a tiny model (how it was built)
TINY_MARKER = "hpd_tiny.json"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


@dataclass(frozen=True)
class TinySize:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int = 4096          # BPE vocabulary before the 6 added tokens
    max_position_embeddings: int = 32768


SIZES: dict[str, TinySize] = {
    "xs": TinySize(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=32),
    "s": TinySize(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64),
}


def bpe_tokenizer(texts: Iterable[str], vocab_size: int = 4096, *, normalized_added: bool = True):
    """:func:`train_tokenizer` without its chat template (which comes from trl, slow to import): byte-level BPE,
    NFC, Qwen's split pattern, Qwen3's special tokens and its added tokens (``normalized_added`` as they are
    added; ``True`` is ``add_tokens``' own default)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(texts), trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 padding_side="left")
    hf.add_tokens([AddedToken(t, normalized=normalized_added, special=False) for t in ADDED_TOKENS])
    return hf


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096):
    """A Qwen3-style fast tokenizer (see module doc) trained on ``texts``, with Qwen3's chat template."""
    from trl.chat_template_utils import qwen3_chat_template

    hf = bpe_tokenizer(texts, vocab_size)
    hf.chat_template = qwen3_chat_template
    return hf


def build_tiny(out_dir: str | Path, size: str = "xs", seed: int = 0, texts: Sequence[str] | None = None,
               *, data_dir: str | Path | None = None) -> Path:
    """Build a tiny Qwen3 model directory at ``out_dir`` and return its path.

    ``texts`` (or the string leaves of ``data_dir``'s JSON files, see :func:`hpd.policy.corpus.data_texts`)
    train the tokenizer, always together with the built-in synthetic tool-chat corpus so the template's
    structure is learnt; with neither, the built-in corpus alone is used.
    """
    if size not in SIZES:
        raise ValueError(f"unknown tiny size {size!r} (expected one of {sorted(SIZES)})")
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    from hpd.policy.corpus import builtin_corpus, data_texts

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    spec = SIZES[size]
    corpus = builtin_corpus()
    source = "builtin"
    if data_dir is not None:
        corpus = corpus + data_texts(data_dir)
        source = f"builtin+data:{Path(data_dir).name}"
    if texts is not None:
        corpus = corpus + list(texts)
        source += "+texts"
    tok = train_tokenizer(corpus, vocab_size=spec.vocab_size)
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
    cfg = Qwen3Config(
        vocab_size=len(tok), hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers, num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads, head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings, tie_word_embeddings=True,
        eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None, torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg)
    model.generation_config = GenerationConfig(eos_token_id=[eos_id, pad_id], pad_token_id=pad_id)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    meta = {"hpd_tiny": {"size": size, "seed": seed, "corpus": source, "n_params": n_params, **asdict(spec),
                         "vocab_total": len(tok)}}
    (out / TINY_MARKER).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out


# --------------------------------------------------------------------------- minimal SFT (tests, demos)

def sft_tiny(model_dir: str | Path, examples: Sequence[tuple[str, str]], *, steps: int = 100, lr: float = 3e-3,
             batch_size: int = 8, seed: int = 0, out_dir: str | Path | None = None) -> dict:
    """Completion-only SFT of a tiny model on ``(prompt, completion)`` text pairs; saves to ``out_dir``
    (default: in place). Pairs are encoded with :func:`hpd.policy.chat.encode_example` (the same ids the
    served model sees). Returns ``{"loss": final mean loss, "steps": steps}``. CPU, full fine-tune, AdamW.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hpd.policy.chat import encode_example

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    rows = []
    for p, c in examples:
        pi, ci = encode_example(tok, p, c)
        rows.append((pi + ci, [-100] * len(pi) + ci))
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / max(1, steps))
    pad = tok.pad_token_id
    last = []
    for step in range(steps):
        idx = torch.randint(len(rows), (min(batch_size, len(rows)),), generator=g).tolist()
        batch = [rows[i] for i in idx]
        L = max(len(r[0]) for r in batch)
        ids = torch.full((len(batch), L), pad, dtype=torch.long)
        labels = torch.full((len(batch), L), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), L), dtype=torch.long)
        for b, (x, y) in enumerate(batch):
            ids[b, : len(x)] = torch.tensor(x)
            labels[b, : len(y)] = torch.tensor(y)
            mask[b, : len(x)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        last.append(float(loss.detach()))
    model.eval()
    dest = Path(out_dir) if out_dir is not None else Path(model_dir)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    tail = last[-10:] or [float("nan")]
    return {"loss": sum(tail) / len(tail), "steps": steps}
