"""How an RL baseline's training drifted, and how many calls its evaluation made: the study note's GRPO tables.

    python docs/experiments/2026-12-04-issue35-study/rl_drift.py docs/experiments/2026-12-04-issue35-study/grpo-seed0-rl.csv \
        results/issue35/main/defects-0.12/seed-0/GRPO [EPISODES_CSV]

Prints, per block of 20 updates of the trainer's rl.csv: mean reward, its std within a group, rollout TS, RC,
Step-SR, turns an episode (turns / episodes), the share of groups with one reward and, in a log from 89194b3 on
(GiGPO's), the share of groups with TS 0 in every rollout and the share of the advantage mass they carry (over
the block's updates that have any advantage mass; "-" in older logs); the updates whose rollouts had any success, and the collapse counts from the first update of flat groups only;
the training seconds (the last elapsed_s before each resume, summed); then the cell's episodes by their tool calls.
Given the run's episodes.csv (from 89194b3), it also prints per block, summed over its groups, the fail groups' share
of the advantage mass and of |reward - group mean|: the share they would carry with no std scaling (episode level).
"""
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from hpd.methods.rl.log import read_rl_csv


def _share(values: list) -> str:
    """The mean over the updates that have the value: none in an older log; an update of flat groups only has
    no advantage mass, so no fail_adv_share ("-" when no update of the block has one)."""
    known = [v for v in values if v is not None]
    return f"{sum(known) / len(known):.2f}" if known else "-"


def blocks(rows: list[dict], size: int = 20) -> None:
    print("updates reward reward_std TS RC Step-SR turns_per_episode flat_groups fail_groups fail_adv_share")
    for i in range(0, len(rows), size):
        b = rows[i:i + size]
        mean = lambda k: sum(r[k] for r in b) / len(b)  # noqa: E731
        turns = sum(r["turns"] / r["episodes"] for r in b) / len(b)
        share = lambda k: _share([r.get(k) for r in b])  # noqa: E731
        print(f"{b[0]['update']}-{b[-1]['update']}", *(f"{mean(k):.3f}" for k in
              ("reward", "reward_std", "TS", "RC", "Step-SR")), f"{turns:.2f}", f"{mean('flat_groups'):.2f}",
              share("fail_groups"), share("fail_adv_share"))


def collapse(rows: list[dict]) -> None:
    """The updates with rollout TS > 0 (count, last), and from the first update whose every group had one reward:
    how many of the updates from there had every rollout one turn, every group flat, a gradient norm of 0."""
    won = [r["update"] for r in rows if r["TS"]]
    print("updates_with_TS", len(won), "last", won[-1] if won else "-")
    start = next((i for i, r in enumerate(rows) if r["flat_groups"] == 1.0), None)
    if start is None:
        return
    late = rows[start:]
    print(f"from_update {rows[start]['update']}: updates {len(late)}",
          "one_turn_each", sum(r["turns"] == r["episodes"] for r in late),
          "six_tokens_each", sum(r["turns"] == r["episodes"] and r["completion_tokens"] == 6 * r["episodes"] for r in late),
          "all_flat", sum(r["flat_groups"] == 1.0 for r in late), "grad_norm_0", sum(not r["grad_norm"] for r in late))


def train_seconds(rows: list[dict]) -> float:
    """elapsed_s restarts at a resume: sum the last value of each run."""
    ends = [a["elapsed_s"] for a, b in zip(rows, rows[1:]) if b["elapsed_s"] < a["elapsed_s"]]
    return sum(ends) + rows[-1]["elapsed_s"]


def unscaled_fail_share(episodes: list[dict], size: int = 20) -> None:
    """Per block, over its groups: the fail groups' (TS 0 in every rollout) share of the advantage mass the run
    gave (adv_abs x turns: rl.csv's fail_adv_share, summed over the block) and of sum |reward - group mean| (the
    mass with no std scaling, episode level only)."""
    groups: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for e in episodes:
        groups[e["update"], e["slot"]].append(e)
    mass: dict[int, list[float]] = defaultdict(lambda: [0.0] * 4)   # block -> fail adv, all adv, fail dev, all dev
    for (u, _), es in groups.items():
        fail = not any(e["TS"] for e in es)
        mean = sum(e["reward"] for e in es) / len(es)
        adv, dev = sum(e["adv_abs"] * e["turns"] for e in es), sum(abs(e["reward"] - mean) for e in es)
        mass[u // size] = [a + b for a, b in zip(mass[u // size], (fail * adv, adv, fail * dev, dev))]
    print("updates fail_adv_mass fail_dev_mass")
    for b, m in sorted(mass.items()):
        print(f"{b * size}-{b * size + size - 1}", *(f"{f / t:.2f}" if t else "-" for f, t in (m[:2], m[2:])))


def main(rl_csv: Path, cell: Path, episodes_csv: Path | None = None) -> None:
    rows = read_rl_csv(rl_csv)
    blocks(rows)
    collapse(rows)
    if episodes_csv is not None:
        unscaled_fail_share(read_rl_csv(episodes_csv))
    print("train_seconds", round(train_seconds(rows), 1))
    tasks = [json.loads(line) for line in (cell / "tasks.jsonl").open()]
    print("episodes_by_calls", dict(sorted(Counter(t["n_calls"] for t in tasks).items())))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None)
