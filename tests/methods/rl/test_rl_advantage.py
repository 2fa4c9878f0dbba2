"""Group-relative advantages against numbers worked out by hand (GRPO groups; GiGPO episode + anchor groups)."""

import math

import pytest

from hpd.methods.rl.advantage import (discounted_returns, gigpo_advantages, group_normalize, grpo_advantages,
                                      step_group_sizes)


def test_grpo_advantages_by_hand():
    # task "a": rewards 1.2, 0.2, 0.2, 0.0 -> mean 0.4, deviations 0.8, -0.2, -0.2, -0.4,
    # squares 0.64 + 0.04 + 0.04 + 0.16 = 0.88, unbiased variance 0.88 / 3, std 0.5416025...
    std = math.sqrt(0.88 / 3)
    eps = 1e-6
    want_a = [0.8 / (std + eps), -0.2 / (std + eps), -0.2 / (std + eps), -0.4 / (std + eps)]
    # task "b": equal rewards -> std 0 -> every advantage 0 (no signal), not a division by zero
    got = grpo_advantages([1.2, 0.2, 1.0, 0.2, 0.0, 1.0], ["a", "a", "b", "a", "a", "b"], eps=eps)
    assert got[0] == pytest.approx(want_a[0]) and got[0] == pytest.approx(1.477095, abs=1e-6)
    assert [got[1], got[3], got[4]] == pytest.approx(want_a[1:])
    assert got[2] == got[5] == 0.0


def test_singleton_group_is_zero_and_mean_norm_skips_std():
    assert group_normalize([5.0], ["x"]) == [0.0]
    assert group_normalize([3.0, 1.0], ["x", "x"], use_std=False) == [1.0, -1.0]


def test_discounted_returns_by_hand():
    # gamma 0.5: R2 = 1.1; R1 = 0.1 + 0.5 * 1.1 = 0.65; R0 = 0 + 0.5 * 0.65 = 0.325
    assert discounted_returns([0.0, 0.1, 1.1], 0.5) == pytest.approx([0.325, 0.65, 1.1])
    assert discounted_returns([], 0.9) == []


def _example():
    """Task 1: three episodes; task 2: two. Anchors: s0 = the initial state, s1 = after the successful call;
    episode 2's failed first call leaves it in s0, so s0 is a step group of FOUR members across time steps."""
    groups = [1, 1, 1, 2, 2]
    rewards = [[0.1, 1.1], [0.2], [0.0, 0.1, 1.1], [1.0], [0.0]]
    anchors = [["s0", "s1"], ["s0"], ["s0", "s0", "s1"], ["s0"], ["s0"]]   # task 2 reuses the name s0
    return groups, rewards, anchors


def test_gigpo_advantages_mean_norm_by_hand():
    groups, rewards, anchors = _example()
    got = gigpo_advantages(groups, rewards, anchors, gamma=0.5, omega=1.0, use_std=False)
    # episode level, task 1: R = 1.2, 0.2, 1.2 -> mean 2.6/3 -> A^E = 1/3, -2/3, 1/3
    # task 2: R = 1.0, 0.0 -> A^E = 0.5, -0.5
    ae = [1 / 3, -2 / 3, 1 / 3, 0.5, -0.5]
    # step returns (gamma 0.5): ep0 [0.1 + 0.5*1.1 = 0.65, 1.1]; ep1 [0.2]; ep2 [0.325, 0.65, 1.1]
    # group (1, s0) = {0.65, 0.2, 0.325, 0.65}: mean 1.825 / 4 = 0.45625; group (1, s1) = {1.1, 1.1}: mean 1.1
    # group (2, s0) = {1.0, 0.0}: mean 0.5 (task 2's s0 is NOT task 1's s0)
    m = 0.45625
    want = [[ae[0] + (0.65 - m), ae[0] + 0.0],
            [ae[1] + (0.2 - m)],
            [ae[2] + (0.325 - m), ae[2] + (0.65 - m), ae[2] + 0.0],
            [ae[3] + 0.5],
            [ae[4] - 0.5]]
    for g, w in zip(got, want):
        assert g == pytest.approx(w)
    assert got[3] == pytest.approx([1.0]) and got[4] == pytest.approx([-1.0])


def test_gigpo_advantages_mean_std_and_omega_by_hand():
    groups, rewards, anchors = _example()
    eps = 1e-6
    got = gigpo_advantages(groups, rewards, anchors, gamma=0.5, omega=0.5, use_std=True, eps=eps)
    # task 1 episode std: R = 1.2, 0.2, 1.2, mean 13/15; squared deviations (1/3)^2 * 2 + (2/3)^2 = 6/9,
    # unbiased variance (6/9) / 2 = 1/3
    se = math.sqrt(1 / 3) + eps
    # group (1, s0): deviations 0.19375, -0.25625, -0.13125, 0.19375; squares sum to 0.15796875; variance / 3
    ss = math.sqrt(0.15796875 / 3) + eps
    # group (1, s1): two equal returns -> 0; task 2: A^E = (+-0.5) / (sqrt(0.5) + eps), A^S the same
    s2 = math.sqrt(0.5) + eps
    want = [[(1 / 3) / se + 0.5 * 0.19375 / ss, (1 / 3) / se],
            [(-2 / 3) / se + 0.5 * -0.25625 / ss],
            [(1 / 3) / se + 0.5 * -0.13125 / ss, (1 / 3) / se + 0.5 * 0.19375 / ss, (1 / 3) / se],
            [0.5 / s2 + 0.5 * 0.5 / s2],
            [-0.5 / s2 + 0.5 * -0.5 / s2]]
    for g, w in zip(got, want):
        assert g == pytest.approx(w)


def test_step_group_sizes_and_shape_check():
    groups, rewards, anchors = _example()
    # task 1: s0 x4, s1 x2; task 2: s0 x2 -> sizes {2: 2, 4: 1}
    assert step_group_sizes(groups, anchors) == {2: 2, 4: 1}
    with pytest.raises(ValueError, match="anchors"):
        gigpo_advantages([1], [[0.1, 0.2]], [["s0"]])


def test_grpo_scale_batch_and_none_by_hand():
    # groups a: 1.2, 0.2 (mean 0.7) and b: 0.2, 0.0 (mean 0.1); centred 0.5, -0.5, 0.1, -0.1
    rewards, groups = [1.2, 0.2, 0.2, 0.0], ["a", "a", "b", "b"]
    assert grpo_advantages(rewards, groups, scale="none") == pytest.approx([0.5, -0.5, 0.1, -0.1])
    # batch: mean 0.4, squares 0.64 + 0.04 + 0.04 + 0.16 = 0.88, unbiased std sqrt(0.88 / 3)
    std = math.sqrt(0.88 / 3)
    assert grpo_advantages(rewards, groups, scale="batch", eps=0.0) == pytest.approx(
        [0.5 / std, -0.5 / std, 0.1 / std, -0.1 / std])
    # group: each group of two scaled to +-0.7071 whatever its spread (a 0.2 gap weighs as much as a 1.0 gap)
    g = grpo_advantages(rewards, groups, eps=0.0)
    assert g[0] == pytest.approx(g[2]) == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError, match="group, batch or none"):
        grpo_advantages(rewards, groups, scale="std")
