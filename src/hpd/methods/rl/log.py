"""``rl.csv``, an RL run's log: one row per update (:data:`RL_FIELDS`), written by :class:`RLLog` and read back by
:func:`read_rl_csv` (the run's ``metrics.json`` summary, its curves and ``benchmarks/rl_engine.py``)."""

from __future__ import annotations

import csv
from pathlib import Path

RL_FIELDS = ["update", "reward", "reward_std", "TS", "RC", "Step-SR", "F1", "episodes", "turns", "sequences",
             "completion_tokens", "loss", "clipped", "ratio", "kl", "adv_abs", "flat_groups", "step_group_mean",
             "logprob_gap", "optimizer_steps", "lr", "grad_norm", "rollout_s", "train_s", "episodes_per_s", "elapsed_s",
             "rollout_peak_gb", "train_peak_gb"]


class RLLog:
    """``rl.csv``: one row per update; on resume, rows at or after the resume update are dropped first."""

    def __init__(self, path: Path, start: int):
        self.path = path
        rows = []
        if path.exists():
            with path.open() as f:
                rows = [r for r in csv.DictReader(f) if r.get("elapsed_s") not in (None, "")
                        and r["update"].isdigit() and int(r["update"]) < start]
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=RL_FIELDS)
            w.writeheader()
            w.writerows(rows)

    def log(self, row: dict) -> None:
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=RL_FIELDS).writerow({k: row.get(k, "") for k in RL_FIELDS})


def read_rl_csv(path: Path) -> list[dict]:
    """The rows of ``rl.csv`` with numbers parsed."""
    with Path(path).open() as f:
        return [{k: (float(v) if v not in ("", None) and k != "update" else (int(v) if k == "update" else None))
                 for k, v in r.items()} for r in csv.DictReader(f)]
