"""hpd: Harness Policy Distillation, end to end.

Stages (one subpackage each): ``harness`` (the Pi agent loop), ``bench`` (TRAJECT-Bench and the
built-in benchmark: loader, replay environment, split), ``boundary`` (replay -> Boundary records),
``document`` (ControlDocument compile/render/parse), ``policy`` (renderer/parser, models, backends),
``teacher`` (proposals, verification, ranking), ``views`` + ``train`` (three-view LoRA trainer),
``eval`` (rollouts and metrics), ``report`` (tables, plots, the inspector). Every stage writes its run
folder through ``runfolder`` (atomic writes, config hash, the one manifest schema, the shard log).

For Python (notebooks): ``import hpd.api as hpd``, the stages as functions over run folders (:mod:`hpd.api`;
``import hpd`` itself loads nothing more than this file).
"""

__version__ = "0.1.0"

# The Pi version our harness mirrors and is checked against (see hpd.harness and bridge/).
PI_PACKAGE = "@earendil-works/pi-agent-core"
PI_VERSION = "1.6.0"
