"""Replay -> Boundary records (one per provider boundary), sharded storage, restore.

- :class:`Boundary` (:mod:`.record`): uid, task uid, index, kind, native context, runtime-state
  snapshot, reference action (+ meta), control documents, restore recipe, optional later-stage slots.
- :func:`replay_task` (:mod:`.replay`): drive one task's reference through ``hpd.harness.Harness`` +
  ``hpd.bench`` ``ReplayEnv``; :class:`ReplayConfig` holds the grouping / budget / pool choices.
- :func:`restore`: a live Harness parked at a stored boundary (re-driven deterministically);
  :class:`Restorer`: the same with a per-task cache of forks (what the teacher uses).
- :func:`run_replay` (:mod:`.run`): the ``hpd replay`` stage (shards, manifest, stats);
  :func:`open_run`: a finished replay folder for later stages (config, boundaries, restorer).
- :func:`load_boundaries` / :func:`iter_records` (:mod:`.store`): read a replay output folder.
"""

from .record import Boundary
from .replay import DEFAULT_SYSTEM_PROMPT, ReplayConfig, Restorer, plan_task, replay_task, restore, start_replay
from .run import ReplayRun, load_run_config, open_run, run_replay, select_tasks
from .store import StoreError, iter_records, load_boundaries

__all__ = [
    "DEFAULT_SYSTEM_PROMPT", "Boundary", "ReplayConfig", "ReplayRun", "Restorer", "StoreError", "iter_records",
    "load_boundaries", "load_run_config", "open_run", "plan_task", "replay_task", "restore", "run_replay",
    "select_tasks", "start_replay",
]
