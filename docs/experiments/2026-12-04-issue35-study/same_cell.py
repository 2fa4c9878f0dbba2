"""Two runs of one cell, paired by task: how far a cell run again lands from itself.

    python same_cell.py RUN_A RUN_B      # each a registry cell folder (metrics.json, tasks.jsonl)

Prints one JSON: each run's metrics, the paired difference A - B per metric with its 95 % bootstrap interval
(hpd.report.studystats, as `hpd report --study` computes HPD - SFT), McNemar's test on TS, and how many tasks
have the same TS and end reason in both runs.
"""
import json
import sys
from pathlib import Path

from hpd.report.registry import read_cell, read_tasks
from hpd.report.studystats import PAIRED, mcnemar_ts, paired_difference


def main(a: Path, b: Path) -> dict:
    ra, rb = ({r["uid"]: r for r in read_tasks(f)} for f in (a, b))
    pairs = [(u, ra[u], rb[u]) for u in sorted(ra.keys() & rb.keys())]
    ma, mb = (read_cell(f)["metrics"] for f in (a, b))
    return {
        "a": str(a), "b": str(b), "n_paired": len(pairs),
        "metrics": {k: [ma.get(k), mb.get(k)] for k in (*PAIRED, "Action-Acc")},
        "a_minus_b": {k: paired_difference(pairs, k) for k in PAIRED},
        "mcnemar_ts": mcnemar_ts(pairs),
        "same_ts": sum(x["TS"] == y["TS"] for _, x, y in pairs),
        "same_end_reason": sum(x["end_reason"] == y["end_reason"] for _, x, y in pairs),
        "end_reasons": [{r: sum(x["end_reason"] == r for x in side.values()) for r in ("natural", "max_turns")}
                        for side in (ra, rb)],
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2])), indent=1))
