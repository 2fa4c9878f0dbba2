"""BFCL v4 (Berkeley Function-Calling Leaderboard) transfer evaluation, offline, with bfcl-eval's own checkers.

``hpd bfcl`` renders every BFCL entry with hpd's renderer (Qwen3 function calling, the student's training format),
parses replies with hpd's parser, writes BFCL's result files, scores them with bfcl-eval==2026.3.23's AST checker
and multi-turn executor, and reports per-category accuracy plus BFCL's own aggregates. Modules:

* :mod:`~hpd.bfcl.lib` the one door to ``bfcl_eval`` (project root, model-registry stub, version);
* :mod:`~hpd.bfcl.data` categories (scored / skipped with reasons), loading, the seeded sample;
* :mod:`~hpd.bfcl.prompt` function docs -> tools, rendering, replies -> BFCL result values;
* :mod:`~hpd.bfcl.run` generation (single-turn, BFCL's multi-turn loop), batched across entries;
* :mod:`~hpd.bfcl.sandbox` where model-produced code runs (subprocess, namespaces, audit hook, timeout);
* :mod:`~hpd.bfcl.score` BFCL's checkers per entry, score files, BFCL's leaderboard aggregates;
* :mod:`~hpd.bfcl.official` the cross-check with bfcl-eval's own evaluation runner;
* :mod:`~hpd.bfcl.pipeline` the run folder end to end (:func:`run_bfcl`); :mod:`~hpd.bfcl.report` markdown, plot.

What is scored how, what is skipped and why, and every departure from BFCL's pipeline: docs/bfcl.md.
"""

from hpd.bfcl.data import SCORED, SKIPPED
from hpd.bfcl.pipeline import BFCLError, run_bfcl
from hpd.bfcl.run import GenConfig

__all__ = ["BFCLError", "GenConfig", "SCORED", "SKIPPED", "run_bfcl"]
