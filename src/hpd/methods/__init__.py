"""Training methods beside the three-view distillation: the paper's Table 1 baselines.

``hpd train --method NAME --config FILE --out DIR`` dispatches here. ``sft`` and ``hpd`` are the three-view
trainer (:mod:`hpd.train`: SFT is its T view on the reference actions); every other method is one module
that exposes

* ``Config``: a pydantic model of its settings (every field documented, the source of each default named);
* ``load_config(path, overrides, update=None) -> Config`` (``overrides``: the user's ``KEY=VALUE`` strings;
  ``update``: a nested mapping that code writes over the file, :func:`hpd.train.config.merge`);
* ``run(cfg, out, *, resume=False, command=None) -> Path``: train, write ``out/adapter`` (or ``out/model``),
  ``metrics.json`` and ``manifest.json``, and return the adapter folder.

Each method subclasses the recipe :class:`hpd.train.trainer.Trainer` (setup / step / checkpoint / save), so
accelerate, the optimizer, checkpoints and exact resume are shared.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# method -> module (imported lazily: they pull torch)
METHODS = {
    "dpo": "hpd.methods.dpo",
    "grpo": "hpd.methods.rl.grpo",
    "gspo": "hpd.methods.rl.gspo",
    "gigpo": "hpd.methods.rl.gigpo",
}
TRAINER_METHODS = ("sft", "hpd")     # the three-view trainer (hpd.train)


def method_module(name: str) -> ModuleType:
    """The module implementing ``name``; a one-line ``ValueError`` for an unknown method."""
    if name not in METHODS:
        known = ", ".join((*TRAINER_METHODS, *METHODS))
        raise ValueError(f"unknown method {name!r}; one of: {known}")
    return importlib.import_module(METHODS[name])
