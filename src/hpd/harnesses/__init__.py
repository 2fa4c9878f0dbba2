"""``hpd.harnesses``: harnesses other than Pi, each an :class:`hpd.harness.interface.AgentHarness`.

- :mod:`hpd.harnesses.smolagents` smolagents' ``ToolCallingAgent`` (the real package, pinned in
  requirements.txt) driven boundary by boundary: :class:`~hpd.harnesses.smolagents.SmolagentsHarness`.

Pi itself stays in :mod:`hpd.harness` (``Harness``), which satisfies the same Protocol. How to add a harness:
``docs/new-harness.md``. This package sits on the harness floor (``tests/test_layers.py``): it may import
:mod:`hpd.harness` and the foundation, never the benchmark, policy or stages (scoring a harness's episodes
lives in :mod:`hpd.eval.harness_replay`).
"""

HARNESSES = ("pi", "smolagents")
