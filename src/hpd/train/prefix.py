"""Shared-prefix micro-batches: a prefix that several examples share is computed once.

The examples of a micro-batch become a compressed prefix trie over their full id sequences (prompt +
completion). Every trie node is one forward pass over its segment that continues its parent's
key/value cache (a fork of it, so siblings never see each other) at the right positions. The loss is
read at the supervised positions of every example that passes through the node; a position that
several examples supervise with the same target is computed once and weighted by their count.

Same math as computing each example alone: every token sees exactly the tokens before it in its own
sequence, at the same positions, and every (example, completion token) pair contributes one
cross-entropy term to the sum. Only the floating-point summation order differs
(tests/train/test_prefix.py compares loss and gradients with the padded path).

Where it pays: the boundaries of one episode extend the same context (boundary k+1's prompt starts
with boundary k's prompt up to the assistant header), and episodes that show the same tool list share
the system prompt. Padding is gone too (each segment is one unpadded row). It needs the key/value
cache during training, so it cannot run under gradient checkpointing (the config refuses that).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from hpd.policy.batching import budget_batches
from hpd.views.examples import ViewExample


@dataclass
class TrieNode:
    """A segment ``ids`` at absolute positions ``[depth, depth + len(ids))`` of every member sequence."""

    depth: int
    ids: list[int]
    members: list[int]                      # indices into the micro-batch's sequences
    children: list["TrieNode"] = field(default_factory=list)


def _lcp(a: list[int], b: list[int], start: int, limit: int) -> int:
    n = start
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def build_trie(seqs: list[list[int]], members: list[int] | None = None, depth: int = 0) -> list[TrieNode]:
    """Compressed trie nodes of ``seqs[members]`` from ``depth`` on (members grouped by their next token)."""
    members = list(range(len(seqs))) if members is None else members
    groups: dict[int, list[int]] = defaultdict(list)
    for m in members:
        if len(seqs[m]) > depth:
            groups[seqs[m][depth]].append(m)
    nodes = []
    for group in groups.values():
        first = seqs[group[0]]
        end = min(len(seqs[m]) for m in group)
        for m in group[1:]:
            end = _lcp(first, seqs[m], depth, end)
        node = TrieNode(depth, first[depth:end], group)
        node.children = build_trie(seqs, group, end)
        nodes.append(node)
    return nodes


@dataclass
class PrefixBatch:
    """A micro-batch in shared-prefix form: the sequences, their prompt lengths and the trie."""

    seqs: list[list[int]]
    prompt_lens: list[int]
    roots: list[TrieNode]
    n_tokens: int           # tokens of the examples (what they would cost unshared)
    n_computed: int         # tokens actually run through the model

    def to(self, device) -> "PrefixBatch":
        return self


def collate_prefix(row: list[ViewExample]) -> PrefixBatch:
    seqs = [e.input_ids for e in row]
    roots = build_trie(seqs)
    return PrefixBatch(seqs, [len(e.prompt_ids) for e in row], roots, sum(len(s) for s in seqs), _computed(roots))


def _computed(nodes: list[TrieNode]) -> int:
    return sum(len(n.ids) + _computed(n.children) for n in nodes)


def group_prefix(examples: list[ViewExample], budget: int) -> list[list[ViewExample]]:
    """Micro-batches of at most ``budget`` computed tokens, with examples in id order so that the ones
    sharing a prefix land in the same micro-batch (an over-budget example gets its own)."""
    order = sorted(examples, key=lambda e: e.input_ids)
    ids = [ex.input_ids for ex in order]
    # in id order an example's tokens already computed in its batch are its common prefix with the one before it
    shared = [0] + [_lcp(a, b, 0, min(len(a), len(b))) for a, b in zip(ids, ids[1:])]
    return [[order[i] for i in b] for b in budget_batches([len(x) for x in ids], budget, shared=shared)]


def _targets(node: TrieNode, batch: PrefixBatch) -> dict[tuple[int, int], int]:
    """``(local position, target id) -> weight`` for the supervised next tokens predicted in ``node``."""
    out: dict[tuple[int, int], int] = defaultdict(int)
    lo, hi = node.depth, node.depth + len(node.ids)      # positions whose logits this node computes
    for m in node.members:
        seq, p = batch.seqs[m], batch.prompt_lens[m]
        for t in range(max(p, lo + 1), min(len(seq), hi + 1)):
            out[(t - 1 - lo, seq[t])] += 1
    return out


def _fork(cache):
    from transformers import DynamicCache

    if cache is None:
        return None
    return DynamicCache(ddp_cache_data=[(layer.keys, layer.values) for layer in cache.layers])


def _node_loss(model, node: TrieNode, batch: PrefixBatch, cache, device) -> torch.Tensor:
    ids = torch.tensor([node.ids], device=device)
    pos = torch.arange(node.depth, node.depth + len(node.ids), device=device).unsqueeze(0)
    tg = _targets(node, batch)
    keep = sorted({p for p, _ in tg}) or [len(node.ids) - 1]
    out = model(input_ids=ids, position_ids=pos, past_key_values=_fork(cache), use_cache=bool(node.children),
                logits_to_keep=torch.tensor(keep, device=device))
    total = torch.zeros((), device=device)
    if tg:
        row = {p: i for i, p in enumerate(keep)}
        pairs = list(tg.items())
        logits = out.logits[0, [row[p] for (p, _), _ in pairs]].float()
        targets = torch.tensor([t for (_, t), _ in pairs], device=device)
        weights = torch.tensor([w for _, w in pairs], dtype=logits.dtype, device=device)
        total = (F.cross_entropy(logits, targets, reduction="none") * weights).sum()
    for child in node.children:
        total = total + _node_loss(model, child, batch, out.past_key_values, device)
    return total


def prefix_loss_sum(model, batch: PrefixBatch) -> torch.Tensor:
    """Sum of the completion-token cross-entropies of every example in ``batch`` (see module doc)."""
    device = next(model.parameters()).device
    total = torch.zeros((), device=device)
    for root in batch.roots:
        total = total + _node_loss(model, root, batch, None, device)
    return total
