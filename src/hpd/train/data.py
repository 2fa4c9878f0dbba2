"""Per-view example streams with an exact, resumable position, and padding-free packing.

* :class:`ViewStream` yields the examples of one view in epochs. Epoch ``e`` is a permutation
  seeded by ``(seed, view, e)``, so the stream's whole state is ``(epoch, pos)`` and resuming is exact.
  Every process holds the same stream; each update takes the same ``global_batch`` examples on all
  processes and each process trains its share ``batch[rank::world]``.
* :func:`pack` concatenates examples into rows of at most ``budget`` tokens (no padding at all; the greedy cut of
  :func:`hpd.policy.batching.budget_batches`, as every micro-batcher).
  :func:`collate` returns ``input_ids``/``position_ids`` (positions restart at 0 for every
  example: transformers builds the block-diagonal causal mask from them when no attention mask is
  given) and the indices/targets of the supervised positions (completion tokens only).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from hpd.policy.batching import budget_batches
from hpd.views.examples import ViewExample


def episode_of(uid: str) -> str:
    """The episode (task) a boundary uid belongs to: ``<task uid>/b<k>`` -> ``<task uid>``."""
    head, sep, tail = uid.rpartition("/b")
    return head if sep and tail.isdigit() else uid


class ViewStream:
    """``group_episodes``: an epoch shuffles whole episodes and keeps each episode's boundaries adjacent and
    in order, so a batch holds a few episodes whose shared prompt prefix ``batching: prefix`` computes once."""

    def __init__(self, view: str, examples: list[ViewExample], seed: int, shuffle: bool = True,
                 group_episodes: bool = False) -> None:
        if not examples:
            raise ValueError(f"view {view} has no examples (see the length report)")
        self.view, self.examples, self.seed, self.shuffle = view, examples, seed, shuffle
        self.groups = _groups(examples) if group_episodes else [[i] for i in range(len(examples))]
        self.epoch, self.pos = 0, 0
        self._order = self._perm(0)

    def _perm(self, epoch: int) -> list[int]:
        groups = list(self.groups)
        if self.shuffle:
            random.Random(f"{self.seed}/{self.view}/{epoch}").shuffle(groups)
        return [i for g in groups for i in g]

    def take(self, n: int) -> list[ViewExample]:
        out = []
        while len(out) < n:
            if self.pos >= len(self._order):
                self.epoch += 1
                self.pos = 0
                self._order = self._perm(self.epoch)
            out.append(self.examples[self._order[self.pos]])
            self.pos += 1
        return out

    def state(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "n": len(self.examples)}

    def load_state(self, st: dict) -> None:
        if st["n"] != len(self.examples):
            raise ValueError(f"view {self.view}: checkpoint had {st['n']} examples, data has {len(self.examples)}")
        self.epoch, self.pos = int(st["epoch"]), int(st["pos"])
        self._order = self._perm(self.epoch)


def _groups(examples: list[ViewExample]) -> list[list[int]]:
    """Example indices grouped by episode, in first-appearance order."""
    by: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        by.setdefault(episode_of(ex.uid), []).append(i)
    return list(by.values())


def pack(examples: list[ViewExample], budget: int) -> list[list[ViewExample]]:
    """Greedy in-order packing into rows of <= ``budget`` tokens (an over-budget example gets its own row)."""
    return [[examples[i] for i in b] for b in budget_batches([ex.n_tokens for ex in examples], budget)]


@dataclass
class PackedRow:
    input_ids: torch.Tensor     # (1, L)
    position_ids: torch.Tensor  # (1, L)
    keep: torch.Tensor          # (K,) positions whose next token is supervised
    targets: torch.Tensor       # (K,) the supervised next tokens
    n_tokens: int

    def to(self, device) -> "PackedRow":
        return PackedRow(self.input_ids.to(device), self.position_ids.to(device), self.keep.to(device),
                         self.targets.to(device), self.n_tokens)


def collate(row: list[ViewExample]) -> PackedRow:
    ids, pos, keep, tgt = [], [], [], []
    off = 0
    for ex in row:
        p, c = len(ex.prompt_ids), len(ex.completion_ids)
        ids.extend(ex.prompt_ids)
        ids.extend(ex.completion_ids)
        pos.extend(range(p + c))
        keep.extend(range(off + p - 1, off + p + c - 1))
        tgt.extend(ex.completion_ids)
        off += p + c
    return PackedRow(torch.tensor([ids]), torch.tensor([pos]), torch.tensor(keep), torch.tensor(tgt), off)


def group_padded(examples: list[ViewExample], budget: int) -> list[list[ViewExample]]:
    """Length-sorted (longest first) micro-batches with ``rows * longest <= budget`` tokens (padding-minimal)."""
    order = sorted(examples, key=lambda e: -e.n_tokens)
    return [[order[i] for i in b] for b in budget_batches([ex.n_tokens for ex in order], budget, padded=True)]


@dataclass
class PaddedBatch:
    input_ids: torch.Tensor       # (B, L) left-padded
    attention_mask: torch.Tensor  # (B, L)
    position_ids: torch.Tensor    # (B, L) 0 at each row's first real token
    keep: int                     # logits_to_keep = max completion length + 1
    targets: torch.Tensor         # (B, keep - 1) right-aligned completion ids, -100 elsewhere
    n_tokens: int

    def to(self, device) -> "PaddedBatch":
        return PaddedBatch(self.input_ids.to(device), self.attention_mask.to(device), self.position_ids.to(device),
                           self.keep, self.targets.to(device), self.n_tokens)


def collate_padded(row: list[ViewExample], pad_id: int = 0) -> PaddedBatch:
    """Left padding puts every completion at the end of its row, so the logits of the last
    ``max completion + 1`` positions cover every supervised token (prompt logits are never computed)."""
    L = max(e.n_tokens for e in row)
    K = max(len(e.completion_ids) for e in row)
    ids = torch.full((len(row), L), pad_id, dtype=torch.long)
    mask = torch.zeros((len(row), L), dtype=torch.long)
    pos = torch.zeros((len(row), L), dtype=torch.long)
    tgt = torch.full((len(row), K), -100, dtype=torch.long)
    for i, e in enumerate(row):
        n, c = e.n_tokens, len(e.completion_ids)
        ids[i, L - n:] = torch.tensor(e.input_ids)
        mask[i, L - n:] = 1
        pos[i, L - n:] = torch.arange(n)
        tgt[i, K - c:] = torch.tensor(e.completion_ids)
    return PaddedBatch(ids, mask, pos, K + 1, tgt, sum(e.n_tokens for e in row))
