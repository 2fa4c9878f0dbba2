"""hpd.train.memory: a phase's peak resident memory, reset between phases (Linux VmHWM and clear_refs)."""

import sys

import pytest

from hpd.train import memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")


def test_peak_follows_an_allocation_and_forgets_it_after_a_reset():
    memory.reset_peak()
    before = memory.peak_gb()
    block = bytearray(400_000_000)          # 0.4 GB, touched (bytearray zero-fills)
    during = memory.peak_gb()
    del block
    assert during - before > 0.35, (before, during)
    # a high-water mark: freeing does not lower it (the kernel's RSS counters are per-CPU and read approximately,
    # so two reads may differ by a few pages: a 5 GB test process once read 5.127 after 5.128)
    assert memory.peak_gb() >= during - 0.01
    memory.reset_peak()
    assert memory.peak_gb() < during - 0.3  # the next phase starts from the current resident set


def test_run_peak_is_the_largest_logged_value_and_none_without_any():
    rows = [{"peak_gb": "1.5"}, {"peak_gb": ""}, {"peak_gb": 2.25}, {}]
    assert memory.run_peak(rows) == 2.25
    assert memory.run_peak([{"peak_gb": ""}, {}]) is None
    assert memory.run_peak([{"train_peak_gb": 5.05}], "train_peak_gb") == 5.05
