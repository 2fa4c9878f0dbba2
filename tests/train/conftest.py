import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")   # 2 shared cores: more threads thrash under a loaded machine

import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """The tiny factory's xs model (random Qwen3 + locally trained tokenizer); nothing downloaded."""
    from hpd.policy.tiny import build_tiny
    return build_tiny(tmp_path_factory.mktemp("tiny") / "xs", size="xs", seed=0)


@pytest.fixture(scope="session")
def tiny_tok(tiny_dir):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(tiny_dir), local_files_only=True)
