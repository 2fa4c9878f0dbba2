"""The LR schedule (hpd.train.lr): hand-computed multipliers, and the scheduler the trainers build from a config."""

import math

import pytest
import torch

from hpd.train.config import OptimConfig
from hpd.train.lr import lr_factor, make_scheduler


def test_constant_with_warmup_is_the_papers_schedule():
    assert [lr_factor(s, 4, 10) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert [lr_factor(s, 0, 10) for s in (0, 9)] == [1.0, 1.0]


def test_linear_and_cosine_decay_by_hand():
    # 2 warm-up steps, 10 in all: the decay spans steps 2..9 over 8 steps and would reach the floor at step 10
    assert [lr_factor(s, 2, 10, "linear") for s in (0, 1, 2, 6, 9)] == [0.5, 1.0, 1.0, 0.5, 0.125]
    assert lr_factor(6, 2, 10, "cosine") == pytest.approx(0.5)
    assert lr_factor(4, 2, 10, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_factor(9, 2, 10, "cosine", floor=0.1) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 7 / 8)))
    assert lr_factor(9, 0, 10, "linear") > 0      # no update is taken at a zero LR


def test_scheduler_from_config_follows_the_factor_and_validates_the_field():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.2)
    sched = make_scheduler(opt, OptimConfig(lr=0.2, decay="linear", warmup_updates=1), total=5)
    seen = []
    for _ in range(5):
        seen.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.2, 0.2, 0.15, 0.1, 0.05])
    with pytest.raises(ValueError):
        OptimConfig(decay="exponential")
