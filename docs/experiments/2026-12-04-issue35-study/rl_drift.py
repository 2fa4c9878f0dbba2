"""How an RL baseline's training drifted, and how many calls its evaluation made: the study note's GRPO tables.

    python docs/experiments/2026-12-04-issue35-study/rl_drift.py docs/experiments/2026-12-04-issue35-study/grpo-seed0-rl.csv \
        results/issue35/main/defects-0.12/seed-0/GRPO

Prints, per block of 20 updates of the trainer's rl.csv: mean reward, its std within a group, rollout TS, RC,
Step-SR, turns an episode (turns / episodes), the share of groups with one reward and, in a log from 89194b3 on
(GiGPO's), the share of groups with TS 0 in every rollout and the share of the advantage mass they carry ("-" in
older logs); the training seconds (the last elapsed_s before each resume, summed); then the registry cell's episodes by their number of tool calls.
"""
import json
import sys
from collections import Counter
from pathlib import Path

from hpd.methods.rl.log import read_rl_csv


def blocks(rows: list[dict], size: int = 20) -> None:
    print("updates reward reward_std TS RC Step-SR turns_per_episode flat_groups fail_groups fail_adv_share")
    for i in range(0, len(rows), size):
        b = rows[i:i + size]
        mean = lambda k: sum(r[k] for r in b) / len(b)  # noqa: E731
        turns = sum(r["turns"] / r["episodes"] for r in b) / len(b)
        share = lambda k: f"{mean(k):.2f}" if all(r.get(k) is not None for r in b) else "-"  # noqa: E731
        print(f"{b[0]['update']}-{b[-1]['update']}", *(f"{mean(k):.3f}" for k in
              ("reward", "reward_std", "TS", "RC", "Step-SR")), f"{turns:.2f}", f"{mean('flat_groups'):.2f}",
              share("fail_groups"), share("fail_adv_share"))


def train_seconds(rows: list[dict]) -> float:
    """elapsed_s restarts at a resume: sum the last value of each run."""
    ends = [a["elapsed_s"] for a, b in zip(rows, rows[1:]) if b["elapsed_s"] < a["elapsed_s"]]
    return sum(ends) + rows[-1]["elapsed_s"]


def main(rl_csv: Path, cell: Path) -> None:
    rows = read_rl_csv(rl_csv)
    blocks(rows)
    print("train_seconds", round(train_seconds(rows), 1))
    tasks = [json.loads(line) for line in (cell / "tasks.jsonl").open()]
    print("episodes_by_calls", dict(sorted(Counter(t["n_calls"] for t in tasks).items())))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
