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
