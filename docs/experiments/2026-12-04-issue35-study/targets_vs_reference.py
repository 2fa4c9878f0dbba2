"""How a teach stage's targets differ from the references they replace: per target source (teacher, reference
fallback), how many targets make the same calls as the reference, answer where it answers, call a strict subset of
its parallel calls, or something else. Reads the packed teach stages of the registry (results/<spec>/stages/...):

    python docs/experiments/2026-12-04-issue35-study/targets_vs_reference.py \
        results/issue35/stages/main/defects-0.00/seed-0/teach.tar.gz results/issue35/stages/main/defects-0.12/seed-0/teach.tar.gz
"""

import json
import sys
import tarfile
from collections import Counter


def calls(message: dict) -> Counter:
    """The multiset of (name, canonical arguments) of a Pi assistant message's tool calls."""
    content = message.get("content") if isinstance(message.get("content"), list) else []
    return Counter((c["name"], json.dumps(c.get("arguments"), sort_keys=True))
                   for c in content if isinstance(c, dict) and c.get("type") == "toolCall")


def relation(target: dict, reference: dict) -> str:
    t, r = calls(target), calls(reference)
    if not t and not r:
        return "both answer"
    if not r or not t:
        return "target calls, reference answers" if t else "target answers, reference calls"
    if t == r:
        return "same calls"
    return "strict subset of the reference's calls" if not (t - r) else "other calls"


def main(paths: list[str]) -> None:
    for path in paths:
        with tarfile.open(path) as tar:
            rows = [json.loads(line) for line in tar.extractfile("teach/targets.jsonl")]
        counts = Counter((r["provenance"]["source"], relation(r["target"], r["reference"])) for r in rows)
        print(f"{path}: {len(rows)} targets, {sum(sum(calls(r['target']).values()) for r in rows)} calls "
              f"(references: {sum(sum(calls(r['reference']).values()) for r in rows)})")
        for (source, rel), n in sorted(counts.items()):
            print(f"  {source:20s} {rel:40s} {n}")


if __name__ == "__main__":
    main(sys.argv[1:])
