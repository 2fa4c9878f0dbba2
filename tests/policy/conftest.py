"""Session fixtures: a tiny model (built here, seconds) and a tool-taught tiny model (cached per session)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    from hpd.policy.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny") / "xs", size="xs", seed=0)


@pytest.fixture(scope="session")
def tok(tiny_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_dir)


@pytest.fixture(scope="session")
def taught_dir(tmp_path_factory):
    """An xs model fine-tuned (completion-only SFT, plain torch) to play the 'lookup' episode:
    call ``lookup(key="alpha")``, then answer ``Done: value-for-alpha.``."""
    from transformers import AutoTokenizer

    from hpd.policy.tiny import build_tiny, sft_tiny
    from policy_helpers import lookup_training_pairs

    d = build_tiny(tmp_path_factory.mktemp("taught") / "xs", size="xs", seed=0)
    pairs = lookup_training_pairs(AutoTokenizer.from_pretrained(d))
    sft_tiny(d, pairs, steps=60, lr=3e-3, batch_size=2, seed=0)
    return d
