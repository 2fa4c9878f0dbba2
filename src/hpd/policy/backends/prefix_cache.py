"""Key/value states of prompt prefixes, kept across generation calls and reused block by block.

An agent's prompts repeat themselves: turn ``t + 1`` of an episode is turn ``t``'s prompt plus the reply and
the tool results, a teacher's second attempt at a boundary is its first attempt's prompt again, and the G
rollouts of one RL task start from the same prompt. :class:`PrefixCache` keeps the key/value states of the
prompts a policy prefilled in a trie of fixed-size token blocks (``block`` tokens each, 128 by default), and a
later prompt whose first blocks are in the trie computes only the rest.

**Every prompt is prefilled block by block, cached or not.** Block ``j`` is one forward pass over tokens
``[j*block, (j+1)*block)`` on top of the states of the blocks before it, and the last, partial block one more.
A block's states are therefore the same computation whether they come from the trie or are computed now, so
the tokens a policy generates do not depend on what it generated before (a resumed evaluation or teach run
meets a cold cache and gives the same outputs as an uninterrupted one). Against one pass over the whole
prompt the states differ by float summation order only (``benchmarks/prefix_cache.py`` compares the two; its
figures are in docs/experiments/2026-11-30-benchmarks.md).

Memory: the trie holds at most ``budget_bytes`` of states (a block costs ``block`` x the model's bytes per
cached token: 5.6 MiB on SmolLM2-135M in fp32); least recently used leaf blocks leave first. The states are
only valid for the weights they were computed with: a policy whose model trains (the RL engine) calls
:meth:`clear` after every optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class _Block:
    kv: list[tuple[Any, Any]]                    # per layer: keys, values of this block only ([1, heads, block, dim])
    parent: "_Block | None"
    key: tuple[int, ...]
    children: dict[tuple[int, ...], "_Block"] = field(default_factory=dict)
    used: int = 0


class PrefixCache:
    """Block trie of prompt key/value states (see module doc)."""

    def __init__(self, block: int = 128, budget_bytes: int | None = 2 ** 30, bytes_per_token: int = 0):
        if block < 1:
            raise ValueError(f"prefix cache block must be >= 1 token, not {block}")
        self.block = int(block)
        self.budget = budget_bytes
        self.block_bytes = int(bytes_per_token) * self.block
        self.root: dict[tuple[int, ...], _Block] = {}
        self.n_blocks = 0
        self.clock = 0
        self.stats = {"prompts": 0, "reused_tokens": 0, "computed_tokens": 0, "evicted_blocks": 0}

    def clear(self) -> None:
        """Forget every block (the weights changed)."""
        self.root, self.n_blocks = {}, 0

    def _walk(self, ids: list[int]) -> list[_Block]:
        """The cached blocks that start ``ids``, in order."""
        path, level, b = [], self.root, self.block
        for j in range(len(ids) // b):
            node = level.get(tuple(ids[j * b:(j + 1) * b]))
            if node is None:
                break
            path.append(node)
            level = node.children
        return path

    def prefill(self, model: Any, ids: list[int], device: Any) -> Any:
        """A ``DynamicCache`` holding the states of ``ids`` (every position), block by block (module doc);
        the new full blocks join the trie."""
        import torch
        from transformers import DynamicCache

        self.clock += 1
        path = self._walk(ids)
        cache = DynamicCache(config=model.config)
        if path:
            for li in range(len(path[0].kv)):
                cache.update(torch.cat([n.kv[li][0] for n in path], dim=2),
                             torch.cat([n.kv[li][1] for n in path], dim=2), li)
        for n in path:
            n.used = self.clock
        parent = path[-1] if path else None
        pos, b = len(path) * self.block, self.block
        self.stats["prompts"] += 1
        self.stats["reused_tokens"] += pos
        self.stats["computed_tokens"] += len(ids) - pos
        while pos < len(ids):
            end = min(pos + b, len(ids))
            cache = model(input_ids=torch.tensor([ids[pos:end]], device=device), past_key_values=cache,
                          use_cache=True, logits_to_keep=1).past_key_values
            if end - pos == b and (self.budget is None or self.block_bytes <= self.budget):
                parent = self._add(parent, tuple(ids[pos:end]),
                                   [(layer.keys[:, :, pos:end].clone(), layer.values[:, :, pos:end].clone())
                                    for layer in cache.layers])
            pos = end
        self._evict()
        return cache

    def _add(self, parent: _Block | None, key: tuple[int, ...], kv: list) -> _Block:
        level = self.root if parent is None else parent.children
        node = _Block(kv=kv, parent=parent, key=key, used=self.clock)
        level[key] = node
        self.n_blocks += 1
        return node

    def _leaves(self) -> list[_Block]:
        out, stack = [], list(self.root.values())
        while stack:
            n = stack.pop()
            if n.children:
                stack.extend(n.children.values())
            else:
                out.append(n)
        return out

    def _evict(self) -> None:
        """Drop least recently used leaf blocks until the trie fits its budget (the blocks just used stay
        when they alone fit)."""
        if self.budget is None or not self.block_bytes:
            return
        while self.n_blocks * self.block_bytes > self.budget:
            leaves = sorted(self._leaves(), key=lambda n: n.used)
            if not leaves:
                return
            victim = leaves[0]
            (self.root if victim.parent is None else victim.parent.children).pop(victim.key, None)
            self.n_blocks -= 1
            self.stats["evicted_blocks"] += 1

    def bytes_used(self) -> int:
        return self.n_blocks * self.block_bytes
