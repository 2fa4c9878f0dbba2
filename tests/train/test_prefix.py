"""Shared-prefix micro-batches (hpd.train.prefix): the trie is right, and loss and gradients equal the
padded path's on examples that share prefixes (boundaries of one episode, T and I views of one
boundary, a duplicated example, one example that is a prefix of another)."""

import pytest
import torch

from hpd.train.student import row_loss_sum
from hpd.train.prefix import build_trie, collate_prefix, group_prefix
from hpd.train.trainer import micro_batches
from hpd.views import Renderer, ViewExample, build_views, synthetic_records


def _paths(nodes, prefix=()):
    out = []
    for n in nodes:
        here = prefix + tuple(n.ids)
        out.append((here, sorted(n.members)))
        out += _paths(n.children, here)
    return out


def test_trie_shares_exactly_the_common_prefixes():
    seqs = [[1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 2, 3, 4], [1, 2], [7, 8]]
    got = _paths(build_trie(seqs))
    assert got == [((1, 2), [0, 1, 2, 3]), ((1, 2, 3), [0, 1, 2]), ((1, 2, 3, 4), [0, 2]),
                   ((1, 2, 3, 5, 6), [1]), ((7, 8), [4])]


def _examples(tok):
    ex, _ = build_views(synthetic_records(3, seed=1), Renderer(tok), max_length=4096)
    exs = ex["T"][:4] + ex["I"][:2] + [ex["T"][0]]               # episodes' boundaries + a duplicate
    a = ex["T"][1]                                                # a prompt that ends inside another example
    exs.append(ViewExample("T", a.prompt_ids[:-3], a.prompt_ids[-3:], uid="cut"))
    return exs


def _loss_and_grads(model, mbs):
    model.zero_grad(set_to_none=True)
    total = sum(row_loss_sum(model, mb) for mb in mbs)
    total.backward()
    return float(total.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_prefix_loss_and_gradients_equal_padded(tiny_dir, tok):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32)
    model.config.use_cache = False
    model.train()
    exs = _examples(tok)
    ref_loss, ref_grads = _loss_and_grads(model, micro_batches(exs, "padded", 1 << 16))
    for budget in (1 << 16, 700):
        mbs = micro_batches(exs, "prefix", budget)
        assert len(mbs) >= (2 if budget == 700 else 1)
        loss, grads = _loss_and_grads(model, mbs)
        assert loss == pytest.approx(ref_loss, rel=1e-5), budget
        assert grads.keys() == ref_grads.keys()
        for n, g in grads.items():
            err = float((g - ref_grads[n]).abs().max() / ref_grads[n].abs().max())
            assert err < 1e-4, (n, budget, err)


def test_prefix_batches_compute_fewer_tokens(tok):
    exs = _examples(tok)
    [mb] = [collate_prefix(r) for r in group_prefix(exs, 1 << 16)]
    assert mb.n_tokens == sum(e.n_tokens for e in exs)
    assert mb.n_computed < 0.6 * mb.n_tokens, (mb.n_computed, mb.n_tokens)
    assert sorted(sum(group_prefix(exs, 500), []), key=id) == sorted(exs, key=id)   # every example once


def test_prefix_refused_with_gradient_checkpointing():
    from hpd.train.config import TrainConfig

    with pytest.raises(ValueError, match="gradient checkpointing"):
        TrainConfig.model_validate({"model": {"path": "x", "gradient_checkpointing": True},
                                    "batch": {"batching": "prefix"},
                                    "schedule": {"phases": [{"views": {"T": 1}, "updates": 1}]}})
