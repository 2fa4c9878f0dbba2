"""The suite's own rules (``tests/conftest.py``), run on a scratch suite in a child pytest: under ``CI`` a skip of
any kind fails; without it a skip stays a skip. (The scratch suite uses this conftest, copied.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRATCH = '''
import pytest

def test_skips():
    pytest.skip("a prerequisite is missing")

@pytest.mark.skipif(True, reason="a condition")
def test_skipped_by_mark():
    pass

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False

def test_passes():
    pass
'''


def _run(tmp_path: Path, ci: bool) -> str:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_scratch.py").write_text(SCRATCH)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci:
        env["CI"] = "1"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return p.stdout


def test_a_skip_under_ci_fails(tmp_path):
    out = _run(tmp_path, ci=True)
    assert "FAILED test_scratch.py::test_skips - skipped under CI" in out, out
    assert "ERROR test_scratch.py::test_skipped_by_mark - skipped under CI" in out, out
    assert "1 failed, 1 passed, 1 xfailed, 1 error" in out, out


def test_a_skip_outside_ci_stays_a_skip(tmp_path):
    out = _run(tmp_path, ci=False)
    assert "1 passed, 2 skipped, 1 xfailed" in out, out
