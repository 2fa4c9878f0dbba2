"""vLLM backend (GPU scale): the offline ``vllm.LLM`` engine, LoRA adapters, logprobs.

Import-guarded: importing this module never imports vllm; constructing :class:`VLLMPolicy` does and
raises :class:`BackendUnavailable` with a one-line reason when vllm (pinned ``vllm==0.31.0`` in the
``gpu`` extra) is not installed.

* ``LLM(model=dir, generation_config="vllm", enable_lora=adapter is not None, ...)``: with the default
  ``generation_config="auto"`` vLLM would apply the model's ``generation_config.json`` (Qwen3-8B:
  temperature 0.6, top_k 20, top_p 0.95) to every request that does not override it.
* Prompts are tokenized here (``add_special_tokens=False``) and passed as ``prompt_token_ids`` so the
  ids are exactly the ones :func:`hpd.policy.chat.encode_example` and the hf backend use.
* ``SamplingParams(n, temperature, top_k=-1 for "off", top_p, max_tokens, seed, logprobs=0,
  stop_token_ids=[<|im_end|>, <|endoftext|>], skip_special_tokens=False)``; ``logprobs=0`` returns the
  sampled token's logprob (vLLM's default ``raw_logprobs``: before temperature/truncation), the same
  quantity the hf backend reports. A per-prompt seed list maps to one ``SamplingParams`` per prompt.
* ``adapter=``: a PEFT LoRA directory, applied per request with ``LoRARequest("adapter", 1, path)``.
"""

from __future__ import annotations

from typing import Any, Sequence

from hpd.policy.backends.base import Generation, Policy, seeds_for
from hpd.policy.backends.hf import STOP_TOKENS


class BackendUnavailable(RuntimeError):
    """The engine a backend needs is not installed / has no device here."""


def vllm_available() -> tuple[bool, str]:
    """``(ok, reason)``: whether vllm imports and a CUDA device is visible."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install raising at import
        return False, f"vllm is not installed ({type(exc).__name__}: {exc}); pip install 'hpd[gpu]' on a CUDA machine"
    try:
        import torch

        if not torch.cuda.is_available():
            return False, "vllm is installed but no CUDA device is visible"
    except Exception as exc:  # pragma: no cover
        return False, f"torch check failed: {exc}"
    return True, "ok"


class VLLMPolicy(Policy):
    """``Policy`` over ``vllm.LLM`` (see module doc). Extra ``engine_kwargs`` go to ``LLM``."""

    def __init__(self, model_dir: str, *, adapter: str | None = None, dtype: str = "bfloat16",
                 max_model_len: int | None = None, max_lora_rank: int = 64, seed: int = 0,
                 gpu_memory_utilization: float = 0.85, name: str | None = None, **engine_kwargs: Any):
        try:
            from vllm import LLM
        except Exception as exc:
            raise BackendUnavailable(f"the vllm backend needs vllm (pip install 'hpd[gpu]'): {exc}") from exc
        self.model_dir = str(model_dir)
        self.adapter = adapter
        kw = dict(model=self.model_dir, dtype=dtype, generation_config="vllm", seed=seed,
                  enable_lora=adapter is not None, gpu_memory_utilization=gpu_memory_utilization)
        if adapter is not None:
            kw["max_lora_rank"] = max_lora_rank
        if max_model_len is not None:
            kw["max_model_len"] = max_model_len
        kw.update(engine_kwargs)
        self.llm = LLM(**kw)
        self.tokenizer = self.llm.get_tokenizer()
        self.name = name or (f"{self.model_dir}+{adapter}" if adapter else self.model_dir)
        self.stop_ids = [i for i in (self.tokenizer.convert_tokens_to_ids(t) for t in STOP_TOKENS)
                         if isinstance(i, int) and i >= 0]
        self._lora = None
        if adapter is not None:
            from vllm.lora.request import LoRARequest

            self._lora = LoRARequest("adapter", 1, str(adapter))

    def sampling_params(self, *, n: int, temperature: float, top_k: int, top_p: float, max_new_tokens: int,
                        seed: int | None, logprobs: bool):
        from vllm import SamplingParams

        return SamplingParams(
            n=n, temperature=float(temperature), top_k=(int(top_k) if top_k and top_k > 0 else -1),
            top_p=float(top_p), max_tokens=int(max_new_tokens), seed=seed,
            logprobs=0 if logprobs else None, stop_token_ids=list(self.stop_ids), skip_special_tokens=False,
            include_stop_str_in_output=False,
        )

    def generate(self, prompts: list[str], n: int = 1, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, max_new_tokens: int = 256, seed: int | Sequence[int] | None = None,
                 logprobs: bool = False) -> list[list[Generation]]:
        seeds = seeds_for(seed, len(prompts))
        inputs = [{"prompt_token_ids": self.tokenizer(p, add_special_tokens=False)["input_ids"]} for p in prompts]
        params = [self.sampling_params(n=n, temperature=temperature, top_k=top_k, top_p=top_p,
                                       max_new_tokens=max_new_tokens, seed=s, logprobs=logprobs) for s in seeds]
        outs = self.llm.generate(inputs, params, lora_request=self._lora, use_tqdm=False)
        result: list[list[Generation]] = []
        for o in outs:
            row = []
            for c in o.outputs:
                ids = list(c.token_ids)
                body = ids[:-1] if ids and ids[-1] in self.stop_ids else ids
                text = self.tokenizer.decode(body, skip_special_tokens=False)
                lps = None
                if logprobs and c.logprobs is not None:
                    lps = [float(step[t].logprob) for step, t in zip(c.logprobs, ids)]
                finish = "length" if c.finish_reason == "length" else "stop"
                row.append(Generation(text=text, token_ids=ids, logprobs=lps, finish_reason=finish))
            result.append(row)
        return result
