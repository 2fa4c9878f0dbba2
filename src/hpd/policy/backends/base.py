"""The one policy interface every backend implements.

``Policy.generate(prompts, n, temperature, top_k, top_p, max_new_tokens, seed, logprobs)`` takes
rendered prompt *texts* (from :func:`hpd.policy.chat.render_prompt`) and returns, per prompt, ``n``
:class:`Generation` s. ``Policy.act(contexts, ...)`` is the Pi-level convenience used by rollouts and
teachers: render -> generate -> :func:`hpd.policy.chat.parse_action`, one batched call for all
contexts. Backends that speak chat natively (the OpenAI one) override ``act``.

Sampling defaults are full-vocabulary (``top_k=0, top_p=1.0``) and every backend passes them to its
engine explicitly, so no model ``generation_config.json`` can silently truncate the distribution.
``temperature=0`` means greedy. ``seed`` may be an int (the batch is reproducible) or one int per
prompt (each prompt's candidates are reproducible whatever else is in the batch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from hpd.harness.messages import assistant_message
from hpd.policy import chat


@dataclass
class Generation:
    """One sampled completion.

    ``token_ids`` are the generated ids including the end-of-turn token when the model stopped on it
    (so ``prompt_ids + token_ids`` is the served sequence); ``text`` is their decoding up to (not
    including) that token; ``logprobs`` (when asked) are the model's log-probabilities of each generated
    token under the *unmodified* distribution (temperature 1, no truncation; vLLM's ``raw_logprobs``);
    ``finish_reason`` is ``"stop"`` (end-of-turn), ``"length"`` (``max_new_tokens`` or the model's context
    window reached) or ``"error"``: nothing was generated (e.g. the prompt fills the context window) and
    ``error`` says why in one line. ``prompt_token_ids`` (hf backend; ``None`` where a backend does not say) are
    the exact prompt ids the engine generated from, so ``prompt_token_ids + token_ids`` is what an RL update
    trains on (:mod:`hpd.methods.rl`), without re-tokenizing or re-rendering anything.
    """

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    finish_reason: str = "stop"
    error: str | None = None
    prompt_token_ids: list[int] | None = None


@dataclass
class Candidate:
    """A parsed action: the Pi assistant message plus the generation it came from."""

    message: dict
    generation: Generation


def seeds_for(seed: int | Sequence[int] | None, n_prompts: int) -> list[int | None]:
    """Normalise ``seed`` to one entry per prompt (an int seed s gives s, s+1, ... per prompt index)."""
    if seed is None:
        return [None] * n_prompts
    if isinstance(seed, int):
        return [seed + i for i in range(n_prompts)]
    seeds = list(seed)
    if len(seeds) != n_prompts:
        raise ValueError(f"got {len(seeds)} seeds for {n_prompts} prompts")
    return [None if s is None else int(s) for s in seeds]


def encode_request(tokenizer, prompts: list[str], n: int, max_new_tokens: int,
                   seed: int | Sequence[int] | None) -> tuple[list[int | None], list[list[int]]]:
    """What a local backend's ``generate`` starts with: ``n`` and ``max_new_tokens`` checked (``ValueError`` below
    1), one seed per prompt (:func:`seeds_for`) and each prompt's token ids (no special tokens added)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be >= 1")
    return seeds_for(seed, len(prompts)), [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]


class Policy:
    """Base class: subclasses implement :meth:`generate`; :meth:`act` is shared."""

    name: str = "policy"
    tokenizer: Any = None

    def generate(self, prompts: list[str], n: int = 1, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, max_new_tokens: int = 256, seed: int | Sequence[int] | None = None,
                 logprobs: bool = False) -> list[list[Generation]]:
        raise NotImplementedError

    def render(self, ctx: dict, *, document: str | None = None, enable_thinking: bool = False) -> str:
        return chat.render_prompt(self.tokenizer, ctx, document=document, enable_thinking=enable_thinking)

    def act(self, contexts: list[dict], n: int = 1, *, documents: Sequence[str | None] | None = None,
            enable_thinking: bool = False, id_prefixes: Sequence[str] | None = None,
            **sampling: Any) -> list[list[Candidate]]:
        """Pi contexts -> ``n`` parsed assistant messages each, in ONE ``generate`` call."""
        docs = list(documents) if documents is not None else [None] * len(contexts)
        prompts = [self.render(c, document=d, enable_thinking=enable_thinking) for c, d in zip(contexts, docs)]
        gens = self.generate(prompts, n=n, **sampling) if prompts else []
        prefixes = list(id_prefixes) if id_prefixes is not None else ["call"] * len(contexts)
        out: list[list[Candidate]] = []
        for i, per in enumerate(gens):
            row = []
            for j, g in enumerate(per):
                pre = prefixes[i] if n == 1 else f"{prefixes[i]}c{j}"
                if g.finish_reason == "error":   # the engine refused the request: Pi's error message
                    msg = assistant_message([], "error", error_message=g.error or "generation failed",
                                            model=self.name)
                else:
                    msg = chat.parse_action(g.text, id_prefix=pre, finish_reason=g.finish_reason, model=self.name)
                row.append(Candidate(message=msg, generation=g))
            out.append(row)
        return out

    def close(self) -> None:  # pragma: no cover - engines with resources override
        return None
