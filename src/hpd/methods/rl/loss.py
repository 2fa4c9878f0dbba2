"""Per-token log-probabilities of sampled completions, and the clipped policy losses of GRPO and GSPO.

**Log-probs.** A *sequence* is one model turn: the exact prompt ids the backend generated from plus the sampled
completion ids. :func:`micro_batches` groups sequences within a token budget and :func:`sequence_logprobs`
returns, per sequence, ``log pi(y_t | x, y_<t)`` for every completion token (a tensor with grad when grad is
on). ``prefix`` mode builds the compressed trie of :mod:`hpd.train.prefix` over the micro-batch, so the prompt
that all ``G`` rollouts of a task start from (and any later shared history) is computed once; ``padded`` mode
left-pads the rows (for gradient checkpointing, which disables the cache the trie needs). Both read logits only
at completion positions (``logits_to_keep``) and compute ``logit[y] - logsumexp(logits)`` in float32.

**Losses** (per sequence; the trainer averages over the sequences of a mini-batch, i.e. DeepSeekMath's
``1/G sum_i 1/|o_i| sum_t`` with each model turn an ``o_i``, TRL ``loss_type="grpo"``):

* :func:`token_clip_loss` (GRPO, GiGPO): ``mean_t -min(r_t A, clip(r_t, 1-eps_low, 1+eps_high) A)`` with the
  token ratio ``r_t = exp(logp_t - old_t)`` (PPO's clipped surrogate as GRPO uses it; TRL ``_compute_loss``
  with ``importance_sampling_level="token"``);
* :func:`sequence_clip_loss` (GSPO): ``-min(s A, clip(s, 1-eps_low, 1+eps_high) A)`` with the length-normalised
  sequence ratio ``s = (pi/pi_old)^(1/|y|) = exp(mean_t (logp_t - old_t))`` (GSPO's s_i; TRL
  ``importance_sampling_level="sequence"``, whose ``(B, 1)`` ratio under ``loss_type="grpo"`` gives exactly this);
* :func:`k3_kl`: the per-token KL estimate ``exp(ref - logp) - (ref - logp) - 1`` (DeepSeekMath Eq. 4, TRL), added
  as ``beta * mean_t kl`` when ``beta > 0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hpd.train.prefix import _fork, build_trie


@dataclass
class Seq:
    """One training sequence (a model turn) with its advantage; ``old``/``ref`` are filled before the update."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    episode: int = 0
    sampler: list[float] | None = None    # the backend's log-probs of the sampled tokens (diagnostic)
    old: torch.Tensor | None = None
    ref: torch.Tensor | None = None
    gap: float | None = None

    @property
    def input_ids(self) -> list[int]:
        return list(self.prompt_ids) + list(self.completion_ids)

    @property
    def n_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


# --------------------------------------------------------------------------------------------- micro-batches
def micro_batches(seqs: list[Seq], mode: str, budget: int) -> list[list[int]]:
    """Indices of ``seqs`` grouped into micro-batches of at most ``budget`` tokens computed (an over-budget
    sequence gets its own). ``prefix``: in id order so sequences sharing a prefix land together and the shared
    part counts once; ``padded``: longest first, ``rows * longest <= budget``."""
    if mode == "prefix":
        order = sorted(range(len(seqs)), key=lambda i: seqs[i].input_ids)
        rows, cur, cost, prev = [], [], 0, None
        for i in order:
            ids = seqs[i].input_ids
            shared = _lcp(prev, ids) if prev is not None else 0
            if cur and cost + len(ids) - shared > budget:
                rows.append(cur)
                cur, cost, shared = [], 0, 0
            cur.append(i)
            cost += len(ids) - shared
            prev = ids
        return rows + ([cur] if cur else [])
    order = sorted(range(len(seqs)), key=lambda i: -seqs[i].n_tokens)
    rows, cur = [], []
    for i in order:
        if cur and (len(cur) + 1) * seqs[cur[0]].n_tokens > budget:
            rows.append(cur)
            cur = []
        cur.append(i)
    return rows + ([cur] if cur else [])


def _lcp(a: list[int], b: list[int]) -> int:
    n, m = 0, min(len(a), len(b))
    while n < m and a[n] == b[n]:
        n += 1
    return n


def sequence_logprobs(model, seqs: list[Seq], mode: str, device, pad_id: int = 0) -> list[torch.Tensor]:
    """Per sequence, the log-probs of its completion tokens (one forward over the micro-batch ``seqs``)."""
    if mode == "prefix":
        return _trie_logprobs(model, seqs, device)
    return _padded_logprobs(model, seqs, device, pad_id)


def _gather(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = logits.float()
    return logits.gather(-1, targets[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)


def _trie_logprobs(model, seqs: list[Seq], device) -> list[torch.Tensor]:
    full = [s.input_ids for s in seqs]
    plen = [len(s.prompt_ids) for s in seqs]
    pieces: list[list[torch.Tensor]] = [[] for _ in seqs]

    def visit(node, cache) -> None:
        lo, hi = node.depth, node.depth + len(node.ids)
        want = {m: [t for t in range(max(plen[m], lo + 1), min(len(full[m]), hi + 1))] for m in node.members}
        keep = sorted({t - 1 - lo for ts in want.values() for t in ts}) or [len(node.ids) - 1]
        out = model(input_ids=torch.tensor([node.ids], device=device),
                    position_ids=torch.arange(lo, hi, device=device).unsqueeze(0), past_key_values=_fork(cache),
                    use_cache=bool(node.children), logits_to_keep=torch.tensor(keep, device=device))
        row = {p: i for i, p in enumerate(keep)}
        for m, ts in want.items():
            if ts:
                idx = torch.tensor([row[t - 1 - lo] for t in ts], device=device)
                tgt = torch.tensor([full[m][t] for t in ts], device=device)
                pieces[m].append(_gather(out.logits[0, idx], tgt))
        for child in node.children:
            visit(child, out.past_key_values)

    for root in build_trie(full):
        visit(root, None)
    return [torch.cat(p) if p else torch.zeros(0, device=device) for p in pieces]


def _padded_logprobs(model, seqs: list[Seq], device, pad_id: int) -> list[torch.Tensor]:
    L = max(s.n_tokens for s in seqs)
    K = max(len(s.completion_ids) for s in seqs)
    ids = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    pos = torch.zeros((len(seqs), L), dtype=torch.long)
    for i, s in enumerate(seqs):
        n = s.n_tokens
        ids[i, L - n:] = torch.tensor(s.input_ids)
        mask[i, L - n:] = 1
        pos[i, L - n:] = torch.arange(n)
    out = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device),
                use_cache=False, logits_to_keep=K + 1)
    logits = out.logits[:, :-1]           # position j of the last K+1 predicts token L-K+j
    res = []
    for i, s in enumerate(seqs):
        c = len(s.completion_ids)
        res.append(_gather(logits[i, K - c:], torch.tensor(s.completion_ids, device=device)))
    return res


# --------------------------------------------------------------------------------------------- losses
def k3_kl(logp: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per-token ``exp(ref - logp) - (ref - logp) - 1`` (DeepSeekMath Eq. 4; >= 0, 0 iff equal)."""
    d = ref - logp
    return torch.exp(d) - d - 1


def token_clip_loss(logp: torch.Tensor, old: torch.Tensor, adv: float, clip_low: float,
                    clip_high: float) -> tuple[torch.Tensor, dict]:
    """GRPO's clipped surrogate of one sequence, token-mean (module doc); stats: clipped share, mean ratio."""
    ratio = torch.exp(logp - old)
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    is_clipped = (ratio * adv > clipped * adv).float()   # the clipped branch is the active minimum
    return per_token.mean(), {"clipped": float(is_clipped.mean()), "ratio": float(ratio.detach().mean())}


def sequence_ratio(logp: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """GSPO's ``s = (pi(y|x) / pi_old(y|x))^(1/|y|) = exp(mean_t (logp_t - old_t))``."""
    return torch.exp((logp - old).mean())


def sequence_clip_loss(logp: torch.Tensor, old: torch.Tensor, adv: float, clip_low: float,
                       clip_high: float) -> tuple[torch.Tensor, dict]:
    """GSPO's clipped surrogate of one sequence (module doc); stats: clipped (0/1), the ratio."""
    s = sequence_ratio(logp, old)
    clipped = torch.clamp(s, 1 - clip_low, 1 + clip_high)
    loss = -torch.min(s * adv, clipped * adv)
    return loss, {"clipped": float(s * adv > clipped * adv), "ratio": float(s.detach())}
