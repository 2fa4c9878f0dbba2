"""Fixtures of the RL tests: the one-call ``Keys`` benchmark, its SFT start and the start's mean reward."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def keys_dir(tmp_path_factory):
    from keys_bench import keys_bench, split_file

    d = keys_bench(tmp_path_factory.mktemp("keys") / "data")
    split_file(d)
    return d


@pytest.fixture(scope="session")
def keys(keys_dir):
    from hpd.bench.loader import load_bench

    return load_bench(keys_dir)


@pytest.fixture(scope="session")
def keys_start(tmp_path_factory, keys):
    """The SFT start (keys_bench.sft_start: ~25 s on one thread)."""
    import torch

    from keys_bench import sft_start

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return sft_start(tmp_path_factory.mktemp("keys-start") / "model", keys)
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def start_reward(keys_start, keys):
    from rl_helpers import reward_of

    return reward_of(keys_start, keys)
