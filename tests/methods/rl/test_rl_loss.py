"""The clipped losses, GSPO's sequence ratio and the KL estimate against numbers worked out by hand; per-token
log-probs of the shared-prefix path against a plain forward of each sequence."""

import math

import pytest
import torch

from hpd.methods.rl.loss import (Seq, k3_kl, micro_batches, sequence_clip_loss, sequence_logprobs, sequence_ratio,
                                 token_clip_loss)


def test_gspo_sequence_ratio_by_hand():
    logp = torch.tensor([-1.0, -2.0, -0.5])
    old = torch.tensor([-1.2, -1.5, -0.5])
    # log-ratios 0.2, -0.5, 0 -> mean -0.1 -> s = exp(-0.1) = 0.904837...
    assert float(sequence_ratio(logp, old)) == pytest.approx(math.exp(-0.1)) == pytest.approx(0.9048374)


def test_gspo_clipped_loss_by_hand():
    old = torch.tensor([-1.2, -1.5, -0.5])
    # A = +1: s = 0.9048 < 1 - 3e-4 -> clip(s) = 0.9997; min(s, 0.9997) = s (unclipped): loss -s, gradient flows
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    loss, st = sequence_clip_loss(logp, old, 1.0, 3e-4, 4e-4)
    assert float(loss.detach()) == pytest.approx(-math.exp(-0.1)) and st["clipped"] == 0.0
    loss.backward()
    # d(-s)/d logp_t = -s / |y| for every token
    assert logp.grad.tolist() == pytest.approx([-math.exp(-0.1) / 3] * 3)
    # A = -1: min(-s, -0.9997) = -0.9997 (the clipped branch): loss 0.9997, no gradient
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    loss, st = sequence_clip_loss(logp, old, -1.0, 3e-4, 4e-4)
    assert float(loss.detach()) == pytest.approx(1 - 3e-4) and st["clipped"] == 1.0
    loss.backward()
    assert logp.grad.abs().sum() == 0


def test_grpo_token_clipped_loss_by_hand():
    old = torch.zeros(3)
    logp = torch.log(torch.tensor([1.0, 1.5, 0.5])).requires_grad_()     # token ratios 1.0, 1.5, 0.5
    # A = 2, eps 0.2: clip -> 1.0, 1.2, 0.8; r*A = 2, 3, 1; clip*A = 2, 2.4, 1.6; min = 2, 2.4, 1
    loss, st = token_clip_loss(logp, old, 2.0, 0.2, 0.2)
    assert float(loss.detach()) == pytest.approx(-(2 + 2.4 + 1) / 3) and st["clipped"] == pytest.approx(1 / 3)
    assert st["ratio"] == pytest.approx(1.0)
    loss.backward()
    # token 1: d(-r A / 3)/d logp = -r A / 3 = -2/3; token 2 clipped: 0; token 3: -0.5 * 2 / 3
    assert logp.grad.tolist() == pytest.approx([-2 / 3, 0.0, -1 / 3])
    # A = -2: r*A = -2, -3, -1; clip*A = -2, -2.4, -1.6; min = -2, -3, -1.6 -> loss (2 + 3 + 1.6) / 3
    loss, st = token_clip_loss(logp.detach(), old, -2.0, 0.2, 0.2)
    assert float(loss) == pytest.approx((2 + 3 + 1.6) / 3) and st["clipped"] == pytest.approx(1 / 3)


def test_on_policy_ratio_is_one_and_gradient_is_policy_gradient():
    logp = torch.tensor([-0.3, -2.0], requires_grad=True)
    loss, _ = token_clip_loss(logp, logp.detach(), 0.5, 0.2, 0.2)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(-0.5) and logp.grad.tolist() == pytest.approx([-0.25, -0.25])


def test_k3_kl_by_hand():
    # ref - logp = -0.5: exp(-0.5) + 0.5 - 1 = 0.1065307
    assert float(k3_kl(torch.tensor(-1.0), torch.tensor(-1.5))) == pytest.approx(math.exp(-0.5) - 0.5)
    assert float(k3_kl(torch.tensor(-1.0), torch.tensor(-1.0))) == 0.0


def _seqs():
    p = [5, 6, 7, 8, 9, 10, 11]
    return [Seq(p, [12, 13, 14], 1.0), Seq(p, [12, 15], -1.0), Seq(p[:4], [20, 21], 0.5),
            Seq(p + [12, 13, 14, 30], [31, 32], 0.0), Seq([40, 41], [42], 0.0)]


def _plain(model, s: Seq) -> torch.Tensor:
    ids = torch.tensor([s.input_ids])
    logits = model(input_ids=ids).logits[0, len(s.prompt_ids) - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(s.completion_ids)[:, None])[:, 0]


@pytest.mark.parametrize("mode", ["prefix", "padded"])
def test_sequence_logprobs_equal_a_plain_forward(tiny_dir, mode):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()
    seqs = _seqs()
    with torch.no_grad():
        got = sequence_logprobs(model, seqs, mode, "cpu")
        for s, g in zip(seqs, got):
            assert g.shape == (len(s.completion_ids),)
            assert torch.allclose(g, _plain(model, s), atol=1e-5)


def test_micro_batches_cover_every_sequence_within_budget():
    seqs = _seqs()
    for mode in ("prefix", "padded"):
        rows = micro_batches(seqs, mode, 12)
        assert sorted(i for r in rows for i in r) == list(range(len(seqs)))
    # prefix mode counts a shared prefix once: sequences 0, 3, 1 cost 10 + 3 + 1 = 14 tokens, not 10 + 13 + 9
    assert [0, 3, 1] in micro_batches(seqs, "prefix", 14)
