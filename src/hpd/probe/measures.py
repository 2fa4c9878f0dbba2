"""The three Figure 3 measures of one boundary, from the model's log-probabilities (pure tensor math).

Position: the *first assistant position* of the native prompt, i.e. right after the generation prompt that
:func:`hpd.policy.chat.render_prompt` ends with (``<|im_start|>assistant\\n``, plus the empty
``<think>\\n\\n</think>\\n\\n`` block when thinking is off). ``first`` below is the model's next-token
log-distribution there. Let ``o_1..o_m`` be the token ids of the tool-call opening :data:`TOOL_CALL_OPEN`
(``<tool_call>``) tokenized on its own (one added token on Qwen3 and the tiny models; several on a tokenizer
without it), and ``c_1..c_n`` those of the reference continuation
(:func:`hpd.policy.chat.render_action` of the reference message, ending with ``<|im_end|>``).

- **Control entry**: ``p_call = P(o_1..o_m | prompt) = prod_i P(o_i | prompt, o_<i)``, the mass of opening a
  tool call as the first thing of the turn; ``p_finish = 1 - P(o_1 | prompt)``, the mass of starting the
  turn with anything else (text). Under the Pi contract a message without a call ends the run, so
  ``p_finish`` is the mass of finishing, counted generously: a text preamble followed by a call counts as
  finishing. ``p_call + p_finish <= 1``; the rest (``o_1`` not followed by ``o_2..o_m``) is 0 when the
  opening is one token. ``entry_log_odds = log p_call - log p_finish``; ``log p_finish`` is the log-sum-exp of
  ``first`` over every token but ``o_1`` (exact where ``1 - P(o_1)`` would round to 0).
- **Entropy of the first action token**: ``H = -sum_v p(v) ln p(v)`` over the whole vocabulary of
  ``first``, in nats.
- **Continuation**: the geometric-mean probability of the reference continuation,
  ``exp(mean_j log P(c_j | prompt, c_<j))`` (= 1 / perplexity), with its token count and total log-prob.
"""

from __future__ import annotations

import math

import torch

from hpd.policy.chat import TOOL_CALL_OPEN

MEASURES = ("p_call", "p_finish", "entropy", "geo_mean")


def entropy(logprobs: torch.Tensor) -> float:
    """Entropy in nats of one log-distribution (``-inf`` entries contribute 0)."""
    lp = logprobs.double()
    return float(-(torch.special.xlogy(lp.exp(), lp.exp())).sum())


def control_entry(first: torch.Tensor, opening: list[int], opening_logp: torch.Tensor) -> dict:
    """``p_call``, ``p_finish`` and their log-odds from the first-position log-distribution ``first``, the
    opening's ids and ``log P(o_i | prompt, o_<i)``, i = 1..m."""
    log_call = float(opening_logp.double().sum())
    others = first.double().clone()
    others[opening[0]] = -math.inf
    log_finish = min(0.0, float(torch.logsumexp(others, dim=0)))   # a probability: rounding never lifts it above 1
    odds = log_call - log_finish if math.isfinite(log_call) and math.isfinite(log_finish) else None
    return {"p_call": math.exp(log_call), "p_finish": math.exp(log_finish), "entry_log_odds": odds}


def continuation(cont_logp: torch.Tensor) -> dict:
    """Geometric-mean probability of a continuation from its per-token log-probs."""
    lp = cont_logp.double()
    total = float(lp.sum())
    return {"geo_mean": math.exp(total / len(lp)) if len(lp) else None, "log_p_continuation": total,
            "n_continuation": len(lp)}


def boundary_measures(first: torch.Tensor, opening: list[int], opening_logp: torch.Tensor,
                      cont_logp: torch.Tensor) -> dict:
    """All measures of one boundary: ``first`` = log-distribution at the first assistant position,
    ``opening`` = the opening's ids, ``opening_logp`` / ``cont_logp`` = the log-probs of the opening's / the
    continuation's own tokens."""
    return {**control_entry(first, opening, opening_logp), "entropy": entropy(first), **continuation(cont_logp)}


def opening_ids(tokenizer) -> list[int]:
    """Token ids of :data:`TOOL_CALL_OPEN` tokenized on its own."""
    ids = list(tokenizer(TOOL_CALL_OPEN, add_special_tokens=False)["input_ids"])
    if not ids:
        raise ValueError(f"the tokenizer encodes {TOOL_CALL_OPEN!r} as no tokens")
    return ids
