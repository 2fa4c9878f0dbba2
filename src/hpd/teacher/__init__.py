"""``hpd.teacher``: teacher proposals -> harness verification -> ranking -> Targets (``hpd teach``).

- :mod:`.item` TeachItem (what a boundary gives the teacher); :mod:`.boundaries` builds them from
  ``hpd.boundary`` records (``items_from_boundaries`` in memory, ``load_items`` from a replay folder);
- :mod:`.proposal` teachers (PolicyTeacher over any backend; oracle / reference / reference-perturbed /
  garbage scripted ones) and per-(seed, boundary, attempt) seeding; :mod:`.factory` builds them by name;
- :mod:`.verify` Verdicts on a fork of the boundary harness; :mod:`.rank` similarity to the reference;
- :mod:`.run` the batched, restartable loop ``teach(items, teacher, TeachConfig, out_dir)``;
  :mod:`.shards` append-only storage; :mod:`.diagnostics` Table-3 figures + plot; :mod:`.inspect` inspector;
- :mod:`.read` the one reader of a finished teach folder (``read_teach_run``; used by ``hpd.methods.dpo``).
"""

from .item import TeachItem
from .run import TeachConfig, TeachResult, teach
from .types import Proposal, Target, Verdict

__all__ = ["TeachItem", "TeachConfig", "TeachResult", "teach", "Proposal", "Target", "Verdict"]
