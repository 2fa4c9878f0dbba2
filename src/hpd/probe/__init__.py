"""Figure 3's diagnostics (``hpd probe``): control entry, first-token entropy and reference-continuation
probability at every boundary of a replay, per model variant, with KDE plots.

- :mod:`.measures`: the definitions, as pure math on log-probabilities;
- :mod:`.scorer`: one variant (base model, optionally + adapter) scoring boundaries;
- :mod:`.density`: numpy Gaussian KDE and the plots;
- :mod:`.run`: :func:`run_probe`, the command's run folder.
"""

from .run import DEFINITIONS, Variant, adapter_variant, parse_variant, run_probe, summarize
from .scorer import BoundaryScorer, ProbeError, load_variant

__all__ = ["DEFINITIONS", "BoundaryScorer", "ProbeError", "Variant", "adapter_variant", "load_variant",
           "parse_variant", "run_probe", "summarize"]
