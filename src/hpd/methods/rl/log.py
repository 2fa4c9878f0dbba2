"""An RL run's two logs, written by :class:`RLLog` and read back by :func:`read_rl_csv`:

* ``rl.csv``: one row per update (:data:`RL_FIELDS`; the run's ``metrics.json`` summary, its curves and
  ``benchmarks/rl_engine.py`` read it);
* ``episodes.csv``: one row per rollout episode (:data:`EPISODE_FIELDS`): its task group (``slot``), reward, TS,
  compliance and the advantage its turns got, so what the groups looked like can be read update by update (for
  instance which groups had TS 0 in every rollout, where the reward is compliance alone).
"""

from __future__ import annotations

import csv
from pathlib import Path

RL_FIELDS = ["update", "reward", "reward_std", "TS", "RC", "Step-SR", "F1", "episodes", "turns", "sequences",
             "completion_tokens", "loss", "clipped", "ratio", "kl", "adv_abs", "flat_groups", "fail_groups",
             "fail_adv_share", "step_group_mean", "logprob_gap", "optimizer_steps", "lr", "grad_norm", "rollout_s",
             "train_s", "episodes_per_s", "elapsed_s", "rollout_peak_gb", "train_peak_gb"]
EPISODE_FIELDS = ["update", "slot", "g", "uid", "reward", "TS", "RC", "turns", "adv_mean", "adv_abs"]


class RLLog:
    """A CSV log with one ``fields`` row per call of :meth:`log`. On resume, rows at or after the resume update are
    dropped first, and so are rows without ``complete`` (a row cut short by a kill)."""

    def __init__(self, path: Path, start: int, fields: list[str] = RL_FIELDS, complete: str = "elapsed_s"):
        self.path, self.fields = path, fields
        rows = []
        if path.exists():
            with path.open() as f:
                rows = [r for r in csv.DictReader(f) if r.get(complete) not in (None, "")
                        and (r.get("update") or "").isdigit() and int(r["update"]) < start]
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)

    def log(self, *rows: dict) -> None:
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.fields).writerows({k: r.get(k, "") for k in self.fields} for r in rows)


def episode_log(path: Path, start: int) -> RLLog:
    """``episodes.csv`` (:data:`EPISODE_FIELDS`), resumed like ``rl.csv``."""
    return RLLog(path, start, EPISODE_FIELDS, complete="adv_abs")


def read_rl_csv(path: Path) -> list[dict]:
    """The rows of ``rl.csv`` (or ``episodes.csv``) with numbers parsed (``uid`` stays text)."""
    def value(k, v):
        if v in ("", None):
            return None
        return int(float(v)) if k in ("update", "slot", "g", "turns") else v if k == "uid" else float(v)
    with Path(path).open() as f:
        return [{k: value(k, v) for k, v in r.items()} for r in csv.DictReader(f)]
