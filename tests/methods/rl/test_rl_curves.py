"""hpd.methods.rl.curves: an RL run's curves from its rl.csv, including a log written before the memory columns."""

import csv
import json

from hpd.methods.rl.curves import write_rl_curves
from hpd.methods.rl.log import RL_FIELDS

OLD_FIELDS = [f for f in RL_FIELDS if not f.endswith("_peak_gb")]    # rl.csv before 354aa81


def _write(path, fields, rows):
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def test_curves_follow_the_log_and_leave_missing_fields_empty(tmp_path):
    rows = [{"update": u, "reward": 0.1 * u, "reward_std": 0.05, "TS": 0.0, "RC": 0.5, "F1": 0.2, "loss": -0.01,
             "rollout_s": 10.0 + u, "train_s": 5.0, "elapsed_s": 15.0 * (u + 1)} for u in range(3)]
    _write(tmp_path / "rl.csv", OLD_FIELDS, rows)
    doc = write_rl_curves(tmp_path, png=False)
    c = doc["curves"]
    assert c["update"] == [1, 2, 3] and c["reward"] == [0.0, 0.1, 0.2] and c["rollout_s"] == [10.0, 11.0, 12.0]
    assert c["train_peak_gb"] == [None] * 3 and c["kl"] == [None] * 3
    assert doc["png"] is None and json.loads((tmp_path / "curves.json").read_text()) == doc
    assert not (tmp_path / "curves.png").exists()
