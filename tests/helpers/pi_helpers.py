"""Real-Pi test material: the bridge check, and the transcript comparison of Python-harness vs real-Pi runs
(:func:`hpd.eval.pi_rollout.comparable_transcript`, re-exported as ``normalized``)."""

from __future__ import annotations

import os
import shutil

import pytest

from hpd.eval.pi_rollout import comparable_transcript as normalized  # noqa: F401  (the tests' name)


def bridge_or_fail() -> None:
    """Node and the bridge packages: a missing ``node`` skips locally and fails when ``CI`` is set; missing
    bridge packages always fail (``make bridge``)."""
    if shutil.which("node") is None:
        reason = "node is not installed; the real-Pi tests need Node >= 20 and `make bridge`"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set)", pytrace=False)
        pytest.skip(reason)
    from hpd.harness.bridge import check_bridge

    check_bridge()
