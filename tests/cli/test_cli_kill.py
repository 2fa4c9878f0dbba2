"""Killed anywhere, resumed to the same numbers: `hpd demo`, `hpd eval` and `hpd replay`, each SIGKILLed at
seeded random points and rerun until it finishes, end with the figures of an uninterrupted run, and no
shard holds a lost or a duplicated record.

Ignored in the comparison, and why: ``timings`` and ``resumed_stages`` of ``results.json`` (wall-clock
seconds, and which stages a resumed run found finished: both depend on where the kills landed); the run
folder's path inside the documents (the killed and the uninterrupted run live in different folders);
``rollout`` of ``hpd eval``'s ``metrics.json`` (the last session's bookkeeping: rows resumed versus run,
waves, seconds, generation counters); ``started`` / ``wall_s`` / ``command`` of the manifests."""

import json
import random
from pathlib import Path

import pytest
from kill_helpers import TINY_DEMO, hpd_cmd, kill_when, run_to_end

from hpd.runfolder import ShardLog
from hpd.train.logger import read_csv

REPO = Path(__file__).resolve().parents[2]
#: the demo's stages in pipeline order (hpd.demo), each a kill target; "start" = during the imports and
#: "report" = after the last evaluation, while results, plots and the report are written
DEMO_POINTS = ["start", "data", "split", "base model", "replay + documents", "train SFT", "teach", "train HPD-T",
               "train HPD", "eval Base", "eval SFT", "eval HPD-T", "eval HPD", "report"]


def _norm(path: Path, out: Path, drop: tuple[str, ...] = ()) -> dict:
    doc = json.loads(path.read_text().replace(str(out), "<out>"))
    return {k: v for k, v in doc.items() if k not in drop}


def _shard_records(run: Path, rel: str, key: str) -> list:
    """Every record of a shard log (duplicates kept) as (key, record), the run folder's path as ``<out>``."""
    return [(r[key], json.loads(json.dumps(r).replace(str(run), "<out>")))
            for r in ShardLog(run / rel, key=key).iter_records()]


def _assert_same_shards(killed: Path, ref: Path, rel: str, key: str) -> None:
    got, want = _shard_records(killed, rel, key), dict(_shard_records(ref, rel, key))
    keys = [k for k, _ in got]
    assert len(keys) == len(set(keys)), f"{rel}: duplicated records"
    assert set(keys) == set(want), f"{rel}: lost records {sorted(set(want) - set(keys))[:5]}"
    for k, r in got:
        assert r == want[k], (rel, k)


def _losses(run: Path) -> list[tuple]:
    """Per update: view, loss, tokens, learning rate and gradient norm (not the wall-clock columns)."""
    keys = ("update", "view", "loss", "supervised_tokens", "tokens", "lr", "grad_norm")
    return [tuple(r[k] for k in keys) for r in read_csv(run / "metrics.csv")]


def _stage_started(point: str):
    if point == "start":
        return lambda lines: True
    if point == "report":
        return lambda lines: any(ln.startswith("  eval HPD:") for ln in lines)
    return lambda lines: any(ln.startswith(f"> {point} ...") for ln in lines)


@pytest.mark.slow
def test_demo_killed_at_every_stage_resumes_to_the_same_results(tmp_path):
    ref, out = tmp_path / "straight", tmp_path / "killed"
    run_to_end(hpd_cmd("demo", *TINY_DEMO, "--out", ref), REPO)
    rng = random.Random(19)
    kills = [p for p in DEMO_POINTS if kill_when(hpd_cmd("demo", *TINY_DEMO, "--out", out), _stage_started(p),
                                                 rng.uniform(0.0, 2.0 if p in ("start", "base model") else 0.6), REPO)]
    assert len(kills) >= 10, f"killed only at {kills}"
    run_to_end(hpd_cmd("demo", *TINY_DEMO, "--out", out), REPO)
    drop = ("timings", "resumed_stages", "estimate")     # the estimate: this machine's speed when each run started
    assert _norm(out / "results.json", out, drop) == _norm(ref / "results.json", ref, drop)
    for rel, key in [("teach/shards", "boundary_id")] + [(f"eval/{v}/shards", "uid")
                                                         for v in ("base", "sft", "hpd-t", "hpd")]:
        _assert_same_shards(out, ref, rel, key)
    for rel in ("boundaries/boundaries/shard-00000.jsonl", "teach/targets.jsonl", "eval/hpd/tasks.jsonl",
                "split.json", "base/model.safetensors"):
        assert (out / rel).read_bytes() == (ref / rel).read_bytes(), rel
    for v in ("sft", "hpd-t", "hpd"):          # every update's loss, and the trained weights, bit for bit
        assert _losses(out / "train" / v) == _losses(ref / "train" / v), v
        assert (out / f"train/{v}/model/model.safetensors").read_bytes() == \
            (ref / f"train/{v}/model/model.safetensors").read_bytes(), v
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


@pytest.fixture(scope="module")
def replay_data(tmp_path_factory):
    from hpd.bench.builtin import generate

    return generate(tmp_path_factory.mktemp("kill") / "data", seed=0, n_per_domain=30)


def _files_done(folder: Path, pattern: str):
    def count() -> int:
        return len(list(folder.glob(pattern))) if folder.is_dir() else 0
    return count


def _kill_loop(cmd: list[str], progress, total: int, n: int, max_delay: float, seed: int) -> int:
    """Kill ``cmd`` ``n`` times: the i-th a random moment after ``progress()`` reached the i-th of ``n``
    seeded random marks in [1, total) (at once, during start-up, when it is already past it)."""
    rng = random.Random(seed)
    marks = sorted(rng.sample(range(1, total), n))
    return sum(kill_when(cmd, lambda lines, m=m: progress() >= m, rng.uniform(0.0, max_delay), REPO) for m in marks)


@pytest.mark.slow
def test_replay_killed_repeatedly_resumes_to_the_same_shards(replay_data, tmp_path):
    ref, out = tmp_path / "straight", tmp_path / "killed"
    args = ["replay", "--data", replay_data, "--shard-tasks", "12", "--quiet"]
    run_to_end(hpd_cmd(*args, "--out", ref), REPO)
    n_shards = len(list((ref / "boundaries").glob("*.meta.json")))
    kills = _kill_loop(hpd_cmd(*args, "--out", out), _files_done(out / "boundaries", "*.meta.json"), n_shards, 10,
                       0.3, 1)
    assert kills >= 10
    run_to_end(hpd_cmd(*args, "--out", out), REPO)
    shards = sorted(p.name for p in (ref / "boundaries").iterdir())
    assert sorted(p.name for p in (out / "boundaries").iterdir()) == shards      # no *.tmp left behind
    for name in shards:
        assert (out / "boundaries" / name).read_bytes() == (ref / "boundaries" / name).read_bytes(), name
    uids = [json.loads(ln)["uid"] for p in sorted((out / "boundaries").glob("*.jsonl")) for ln in p.open()]
    assert len(uids) == len(set(uids)) == json.loads((ref / "manifest.json").read_text())["n_boundaries"]
    drop = ("started", "wall_s", "command")
    assert _norm(out / "manifest.json", out, drop) == _norm(ref / "manifest.json", ref, drop)
    assert (out / "replay_stats.json").read_text() == (ref / "replay_stats.json").read_text()


@pytest.mark.slow
def test_eval_killed_repeatedly_resumes_to_the_same_metrics(replay_data, tiny_dir, tmp_path):
    ref, out = tmp_path / "straight", tmp_path / "killed"
    args = ["eval", "--data", replay_data, "--model", tiny_dir, "--limit", "40", "--shard-size", "2",
            "--batch-size", "2", "--max-new-tokens", "24", "--max-turns", "4", "--pool-k", "3"]
    run_to_end(hpd_cmd(*args, "--out", ref), REPO)

    def rows() -> int:
        d = out / "shards"
        return sum(p.read_bytes().count(b"\n") for p in d.glob("part-*.jsonl")) if d.is_dir() else 0

    kills = _kill_loop(hpd_cmd(*args, "--out", out), rows, 40, 10, 0.3, 2)
    assert kills >= 10
    run_to_end(hpd_cmd(*args, "--out", out), REPO)
    assert len(list((out / "shards").glob("part-*.jsonl"))) >= 2       # several sessions appended their parts
    _assert_same_shards(out, ref, "shards", "uid")
    assert _norm(out / "metrics.json", out, ("rollout",)) == _norm(ref / "metrics.json", ref, ("rollout",))
    assert (out / "tasks.jsonl").read_bytes() == (ref / "tasks.jsonl").read_bytes()
