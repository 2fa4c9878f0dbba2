"""The Figure 3 measures and the KDE on hand-made numbers (every expected value worked out by hand)."""

import math

import numpy as np
import pytest
import torch

from hpd.probe.density import MIN_BANDWIDTH, bandwidth, curves, gaussian_kde
from hpd.probe.measures import boundary_measures, continuation, control_entry, entropy

LOG = torch.log(torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64))


def test_entropy_of_a_four_token_distribution():
    # 0.1 ln 10 + 0.2 ln 5 + 0.3 ln(10/3) + 0.4 ln 2.5 = 0.230259 + 0.321888 + 0.361192 + 0.366516
    assert entropy(LOG) == pytest.approx(1.279854, abs=1e-6)
    assert entropy(torch.tensor([0.0, -math.inf, -math.inf])) == 0.0        # a certain token: no entropy
    assert entropy(torch.log(torch.full((8,), 1 / 8))) == pytest.approx(math.log(8))


def test_control_entry_one_and_two_token_openings():
    one = control_entry(LOG, [3], LOG[3:])                                     # o_1 = token 3, at 0.4
    assert one["p_call"] == pytest.approx(0.4) and one["p_finish"] == pytest.approx(0.6)   # 0.1 + 0.2 + 0.3
    assert one["entry_log_odds"] == pytest.approx(math.log(0.4 / 0.6))
    two = control_entry(LOG, [1, 3], torch.tensor([math.log(0.2), math.log(0.5)]))  # o_1 at 0.2, then o_2 at 0.5
    assert two["p_call"] == pytest.approx(0.1) and two["p_finish"] == pytest.approx(0.8)   # 0.1 left to "other"
    # a near-certain call: 1 - P(o_1) = 1e-30 is not lost to rounding (float32 log-probs round it to 0)
    tight = torch.tensor([0.0, math.log(1e-30)], dtype=torch.float32)
    assert control_entry(tight, [0], tight[:1])["entry_log_odds"] == pytest.approx(math.log(1e30), rel=1e-6)
    over = torch.log(torch.tensor([0.5, 0.5 + 1e-5, 0.0]))      # the other tokens sum to 1 + 1e-5 (rounding)
    assert control_entry(over, [2], over[2:])["p_finish"] == 1.0                 # capped at 1
    sure = control_entry(torch.tensor([0.0, -math.inf]), [0], torch.tensor([0.0]))
    assert sure["p_call"] == 1.0 and sure["p_finish"] == 0.0 and sure["entry_log_odds"] is None


def test_continuation_geometric_mean():
    c = continuation(torch.log(torch.tensor([0.4, 0.5], dtype=torch.float64)))
    assert c["geo_mean"] == pytest.approx(math.sqrt(0.2)) and c["n_continuation"] == 2
    assert c["log_p_continuation"] == pytest.approx(math.log(0.2))
    m = boundary_measures(LOG, [3], LOG[3:], torch.log(torch.tensor([0.4, 0.5, 0.25])))
    assert m["p_call"] == pytest.approx(0.4) and m["entropy"] == pytest.approx(1.279854, abs=1e-6)
    assert m["geo_mean"] == pytest.approx(0.05 ** (1 / 3))


def test_kde_by_hand():
    # two points 0 and 1: s = 0.707107, h = s * 2^-0.2 = 0.615572;
    # f(0.5) = phi(0.5 / h) / h = phi(0.812252) / h = 0.286845 / 0.615572 = 0.465980
    assert bandwidth([0, 1]) == pytest.approx(0.615572, abs=1e-6)
    assert gaussian_kde([0, 1], [0.5])[0] == pytest.approx(0.465980, abs=1e-6)
    x = np.linspace(-6, 7, 4001)
    assert np.trapezoid(gaussian_kde([0, 1], x), x) == pytest.approx(1.0, abs=1e-4)
    assert bandwidth([0.3, 0.3]) == bandwidth([0.3]) == MIN_BANDWIDTH                # no spread: a spike
    c = curves({"a": [0.2, 0.4], "b": []}, 0.0, 1.0)
    assert len(c["x"]) == len(c["a"]) == 101 and c["x"][0] == 0.0 and c["x"][-1] == 1.0 and c["b"] is None
    free = curves({"a": [0, 1]})                     # free ends: widened by 3 h = 3 * 0.615572
    assert free["x"][0] == pytest.approx(-1.846717) and free["x"][-1] == pytest.approx(2.846717)
