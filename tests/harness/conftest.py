import shutil

import pytest


@pytest.fixture(scope="session")
def node_bridge():
    """The Node bridge; skips only when node itself is absent (missing npm packages is a failure)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed; the conformance tests need Node >= 20 and `make bridge`")
    from hpd.harness.bridge import check_bridge

    return check_bridge()
