"""The cross-check: bfcl-eval's own evaluation (``eval_runner.main``, what ``bfcl evaluate`` runs) on hpd's results.

:func:`official_scores` copies ``<out>/result/`` into a scratch BFCL project root and runs, in a sandboxed
subprocess (:func:`hpd.bfcl.sandbox.run_isolated`: the runner ``eval()``s the model's multi-turn calls in process),
``python -m hpd.bfcl.official ROOT CATEGORIES``: that registers the policy in BFCL's model registry with BFCL's own
FC handler (``OpenAICompletionsHandler``: ``json.loads`` decoding, never a request), hardens itself, and calls
``bfcl_eval.eval_checker.eval_runner.main(model=[REGISTRY], test_categories, result_dir, score_dir,
partial_eval=True)``. ``partial_eval`` lets a sample be scored (``--partial-eval``); on a full category it changes
nothing. :func:`crosscheck` compares its score headers and leaderboard CSVs with what ``hpd bfcl`` wrote.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from hpd.bfcl import lib
from hpd.bfcl.score import CSV_FILES, csv_row, group_dir


def official_scores(out: str | Path, categories: list[str], *, timeout: float = 1800.0,
                    use_namespaces: bool | None = None) -> dict:
    """Run BFCL's own evaluation on ``<out>/result`` (module doc) -> ``{"categories": {cat: header},
    "csv": {file: text}, "log": str}``; :class:`RuntimeError` (one line) when it fails."""
    from hpd.bfcl.sandbox import run_isolated

    out = Path(out)
    root = Path(tempfile.mkdtemp(prefix="hpd-bfcl-official-"))
    try:
        shutil.copytree(out / "result", root / "result")
        for d in ("score", ".file_locks"):
            (root / d).mkdir()
        proc = run_isolated([sys.executable, "-m", "hpd.bfcl.official", str(root), ",".join(categories)],
                            writable=root, timeout=timeout, use_namespaces=use_namespaces)
        if proc.returncode != 0:
            tail = " | ".join(proc.stdout.strip().splitlines()[-3:])
            raise RuntimeError(f"bfcl-eval's evaluation failed (exit {proc.returncode}): {tail}")
        score = root / "score" / lib.REGISTRY
        cats = {}
        for cat in categories:
            f = score / group_dir(cat) / f"BFCL_v4_{cat}_score.json"
            if f.is_file():
                cats[cat] = json.loads(f.read_text(encoding="utf-8").splitlines()[0])
        csvs = {n: (root / "score" / n).read_text(encoding="utf-8")
                for n in CSV_FILES if (root / "score" / n).is_file()}
        return {"categories": cats, "csv": csvs, "log": proc.stdout[-4000:]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def crosscheck(out: str | Path, metrics: dict, **kw) -> dict:
    """BFCL's own numbers against ``metrics`` (hpd's ``metrics.json``) and ``<out>/score/*.csv``:
    ``{"match": bool, "differences": [...], "official": {cat: {accuracy, correct_count, total_count}}}``."""
    out = Path(out)
    cats = list(metrics["categories"])
    off = official_scores(out, cats, **kw)
    diffs = []
    for cat, ours in metrics["categories"].items():
        theirs = off["categories"].get(cat)
        mine = {"accuracy": ours["accuracy"], "correct_count": ours["correct"], "total_count": ours["total"]}
        got = None if theirs is None else {k: theirs.get(k) for k in mine}
        if got != mine:
            diffs.append(f"{cat}: hpd {mine} vs bfcl-eval {got}")
    for name in CSV_FILES:
        ours = csv_row((out / "score" / name).read_text(encoding="utf-8"))
        theirs = csv_row(off["csv"].get(name, ""))
        for col in sorted(set(ours) | set(theirs)):
            if ours.get(col) != theirs.get(col):
                diffs.append(f"{name} {col}: hpd {ours.get(col)!r} vs bfcl-eval {theirs.get(col)!r}")
    return {"match": not diffs, "differences": diffs, "official": off["categories"]}


def main(argv: list[str]) -> int:
    """In the sandboxed subprocess: BFCL's own ``eval_runner.main`` on ``ROOT/result`` (module doc)."""
    import contextlib
    import os

    root, categories = Path(argv[0]), [c for c in argv[1].split(",") if c]
    os.environ["BFCL_PROJECT_ROOT"] = str(root)
    os.environ.setdefault("OPENAI_API_KEY", "unused-by-hpd")      # the handler builds a client it never uses
    lib.load()
    import bfcl_eval.constants.model_config as model_config
    from bfcl_eval.eval_checker import eval_runner

    handler_cls = lib.official_handler_class()
    model_config.MODEL_CONFIG_MAPPING[lib.REGISTRY] = lib.policy_config(handler=handler_cls)
    handler = eval_runner.get_handler(lib.REGISTRY)          # built before hardening (its HTTP client imports ssl)
    eval_runner.get_handler = lambda name: handler
    from hpd.bfcl.sandbox import harden

    harden(writable=root)
    with contextlib.redirect_stderr(sys.stdout):
        eval_runner.main([lib.REGISTRY], categories, "result", "score", partial_eval=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
