"""The replay stage on disk: manifest counts, resume after a kill, byte-identical shards, no mixing."""

import json
import os

import pytest

from hpd.boundary import ReplayConfig, StoreError, load_boundaries, run_replay
from hpd.bench.split import SplitFileError, read_split
from hpd.document import parse


@pytest.fixture()
def split_file(tmp_path, sample_tasks):
    p = tmp_path / "split.json"
    uids = [t.uid for t in sample_tasks[:10]]
    p.write_text(json.dumps({"train": uids, "test": [sample_tasks[-1].uid]}))
    return p, uids


def _shards(out):
    d = out / "boundaries"
    return {f.name: f.read_bytes() for f in sorted(d.glob("shard-*.jsonl"))}


def test_run_resume_and_determinism(tmp_path, bench, sample_tasks, split_file):
    sf, uids = split_file
    tasks = [t for t in bench.tasks if t.uid in set(uids)]
    d2 = sum(t.n_boundaries for t in tasks)
    out = tmp_path / "a"
    res = run_replay(None, out, split_file=sf, split="train", shard_tasks=3, bench=bench)
    m = json.loads((out / "manifest.json").read_text())
    assert m["n_tasks"] == len(tasks) == 10 and m["n_boundaries"] == d2 == m["n_boundaries_d2"]
    assert m["status"] == "complete" and m["pi_version"].endswith("@1.6.0") and m["config_hash"] == ReplayConfig().hash()
    assert len(m["inputs"]["data"]["sha256"]) == 64 and m["code_version"] and m["inputs"]["split_file"]["sha256"]
    assert res["stats"]["matches_d2"] is True
    first = _shards(out)
    assert len(first) == 4
    assert [b.task_uid for b in load_boundaries(out)][0] == tasks[0].uid

    # simulate a kill during shard 2: its final files are gone and a partial .tmp is left behind
    sd = out / "boundaries"
    (sd / "shard-00002.jsonl").unlink()
    (sd / "shard-00002.meta.json").unlink()
    (sd / "shard-00003.meta.json").unlink()
    (sd / "shard-00002.jsonl.tmp").write_text('{"partial": tru')
    # and a kill inside shard 3's meta write, after its lines were renamed: the writer's own temporary file
    (sd / ".shard-00003.meta.json.k1ll3d.tmp").write_text('{"file": "shard-00')
    kept = (sd / "shard-00000.jsonl").stat().st_mtime_ns
    os.utime(sd / "shard-00000.jsonl", ns=(kept - 10**9, kept - 10**9))
    kept = (sd / "shard-00000.jsonl").stat().st_mtime_ns
    logs = []
    run_replay(None, out, split_file=sf, split="train", shard_tasks=3, bench=bench,
               progress=logs.append)
    assert (sd / "shard-00000.jsonl").stat().st_mtime_ns == kept  # completed shard skipped
    assert sum("skipped" in s for s in logs) == 2
    assert not list(sd.glob("*.tmp"))
    assert _shards(out) == first  # rewritten shards are byte-identical

    # a second, independent run (in two worker processes) writes byte-identical shards
    out2 = tmp_path / "b"
    run_replay(None, out2, split_file=sf, split="train", shard_tasks=3, bench=bench, workers=2)
    assert _shards(out2) == first

    # a stored boundary restores to a live harness with the run's config
    from hpd.boundary import load_run_config, restore

    stored = load_boundaries(out)
    cfg = load_run_config(out)
    assert cfg.hash() == m["config_hash"]
    assert restore(stored[-2], bench, cfg).context() == stored[-2].context

    # every stored document parses back exactly
    for b in stored:
        for p, d in b.documents.items():
            assert parse(d["text"]).privilege == p


def test_refuses_to_mix_configs(tmp_path, bench, split_file):
    sf, _ = split_file
    out = tmp_path / "c"
    run_replay(None, out, limit=2, bench=bench)
    with pytest.raises(StoreError, match="different"):
        run_replay(None, out, ReplayConfig(pool_k=10), limit=2, bench=bench)
    with pytest.raises(StoreError, match="different"):
        run_replay(None, out, limit=3, bench=bench)
    r = run_replay(None, out, ReplayConfig(privileges=("runtime",)), limit=2, bench=bench,
                   overwrite=True)
    assert r["manifest"]["privileges"] == ["runtime"]
    assert set(load_boundaries(out)[0].documents) == {"runtime"}


def test_split_file_forms(tmp_path, bench):
    p = tmp_path / "s.txt"
    p.write_text("a#1\n\n# comment\nb#2\n")
    assert read_split(p, None) == ["a#1", "b#2"]
    p.write_text(json.dumps(["x#0"]))
    assert read_split(p, None) == ["x#0"]
    p.write_text(json.dumps({"train": ["x"], "test": ["y"]}))
    assert read_split(p, "test") == ["y"]
    assert read_split({"splits": {"train": ["x"], "test": ["y"]}}, "train") == ["x"]
    with pytest.raises(SplitFileError, match="several"):
        read_split(p, None)
    with pytest.raises(SplitFileError, match="not found"):
        read_split(tmp_path / "nope.json", None)
    with pytest.raises(SplitFileError, match="'dev' not in"):
        read_split(p, "dev")
    # the replay reports a bad split file as its own one-line error
    from hpd.boundary.run import select_tasks
    with pytest.raises(StoreError, match="not in the data"):
        select_tasks(bench, split_file=p, split="test")


def test_sample_is_seeded_in_load_order_and_mixes_categories(bench):
    from hpd.boundary.run import select_tasks

    every = list(bench.tasks)
    a = select_tasks(bench, sample=40, seed=3)
    assert [t.uid for t in a] == [t.uid for t in select_tasks(bench, sample=40, seed=3)]
    assert [t.uid for t in a] != [t.uid for t in select_tasks(bench, sample=40, seed=4)]
    pos = [every.index(t) for t in a]
    assert len(a) == 40 and pos == sorted(pos)  # a subset, in load order
    if len({(t.kind, t.domain) for t in every}) > 1:  # not only the first category in load order
        assert len({(t.kind, t.domain) for t in a}) > 1
    assert len(select_tasks(bench, sample=40, seed=3, limit=5)) == 5
    with pytest.raises(StoreError, match="--sample"):
        select_tasks(bench, sample=0)
