"""hpd.runfolder: atomic writes, the config hash, checksums, the shard log, refusing to mix runs, and the one
manifest schema, checked on the manifest of every stage's command."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpd import runfolder as R
from hpd.cli import app

runner = CliRunner()


def test_atomic_writes_leave_no_partial_file(tmp_path):
    p = R.write_json(tmp_path / "a" / "x.json", {"b": 1, "a": [1, "é"]})
    assert json.loads(p.read_text(encoding="utf-8")) == {"b": 1, "a": [1, "é"]} and "é" in p.read_text(encoding="utf-8")
    assert p.read_text().startswith("{\n  ")                     # indented, keys in insertion order
    with pytest.raises(RuntimeError):
        with R.AtomicLines(p) as f:
            f.write("half")
            raise RuntimeError("killed")
    assert json.loads(p.read_text()) == {"b": 1, "a": [1, "é"]} and not list(tmp_path.rglob("*.tmp"))
    sha = R.write_jsonl(tmp_path / "r.jsonl", [{"x": 1}, {"y": [2]}])
    assert (tmp_path / "r.jsonl").read_text() == '{"x":1}\n{"y":[2]}\n' and sha == R.checksum(tmp_path / "r.jsonl")


def test_config_hash_and_checksums(tmp_path):
    assert R.config_hash({"a": 1, "b": [1, 2]}) == R.config_hash({"b": [1, 2], "a": 1}) != R.config_hash({"a": 2})
    assert len(R.config_hash({})) == 16
    (tmp_path / "d" / "s").mkdir(parents=True)
    (tmp_path / "d" / "s" / "f.json").write_text("[]")
    (tmp_path / "d" / "g.txt").write_text("x")
    full, js = R.checksum(tmp_path / "d"), R.checksum(tmp_path / "d", "*.json")
    assert full != js and len(full) == 64
    (tmp_path / "d" / "g.txt").write_text("y")
    assert R.checksum(tmp_path / "d") != full and R.checksum(tmp_path / "d", "*.json") == js
    assert R.checksum(tmp_path / "nope") is None and R.input_entry(None) == {"path": None, "sha256": None}
    big = tmp_path / "big.bin"
    with big.open("wb") as f:                     # sparse: size above the sampling threshold, cheap on disk
        f.truncate(R.SAMPLE_ABOVE + 5)
    a = R.checksum(big)
    with big.open("r+b") as f:
        f.seek(R.SAMPLE_ABOVE)
        f.write(b"z")                             # inside the last MiB: seen
    assert R.checksum(big) != a


def test_shard_log_resume_repair_first_wins(tmp_path):
    log = R.ShardLog(tmp_path / "s", key="id")
    log.append([{"id": "a", "v": 1}, {"id": "b", "v": 1}])
    log.close()
    part0 = tmp_path / "s" / "part-00000.jsonl"
    with part0.open("a") as f:
        f.write('{"id": "c", "v"')                 # a write cut by a kill
    again = R.ShardLog(tmp_path / "s", key="id")
    assert again.read() == {"a": {"id": "a", "v": 1}, "b": {"id": "b", "v": 1}}
    assert part0.read_text().endswith("}\n")        # the torn line is gone
    again.append([{"id": "a", "v": 2}, {"id": "c", "v": 2}], sync=False)
    again.close()
    assert [p.name for p in again.parts()] == ["part-00000.jsonl", "part-00001.jsonl"]   # a new part per session
    assert R.ShardLog(tmp_path / "s", key="id").read()["a"]["v"] == 1                     # first record wins
    again.clear()
    assert again.parts() == [] and again.read() == {}


def test_manifest_schema_and_refusing_to_mix(tmp_path):
    (tmp_path / "in.txt").write_text("data")
    m = R.new_manifest("hpd x", {"k": 1}, inputs={"file": tmp_path / "in.txt", "absent": None}, seed=3, extra=5)
    assert set(R.MANIFEST_FIELDS) <= set(m) and m["extra"] == 5 and set(m["inputs"]) == {"file"}
    assert R.validate_manifest(m) == [] and m["status"] == "running" and m["wall_s"] is None
    R.write_json(tmp_path / "manifest.json", m)
    assert R.check_run(tmp_path, m, what="a test") == []
    other = R.new_manifest("hpd x", {"k": 2})
    with pytest.raises(R.RunFolderError, match="different config_hash"):
        R.check_run(tmp_path, other, what="a test")
    assert R.check_run(tmp_path, other, what="a test", overwrite=True) == ["config_hash"]
    done = R.finish_manifest(m, n=4)
    assert R.validate_manifest(done) == [] and done["wall_s"] >= 0 and done["n"] == 4
    with pytest.raises(ValueError):
        R.new_manifest("hpd x", {}, status="bad")               # extras cannot overwrite schema keys
    bad = {**done, "hpd_version": "0", "config_hash": "x", "inputs": {"d": {"path": "p"}}}
    del bad["pi_version"]
    problems = R.validate_manifest(bad)
    assert "missing pi_version" in problems and "legacy key hpd_version" in problems
    assert R.validate_manifest({**done, "config_hash": "0" * 16}) == ["config_hash is not config_hash(config)"]
    assert R.validate_manifest({**done, "status": "running"}) == ["wall_s must be None exactly while running"]


@pytest.mark.slow
def test_every_stage_command_writes_the_schema(builtin_dir, tiny_dir, tmp_path):
    """data stats, data split, replay, teach, train, eval (reference and model) and model tiny, run small; the
    harness conformance manifest is checked in tests/harness, the demo's (all stages) in tests/test_demo.py,
    data fetch's in tests/bench/test_fetch.py."""
    out = {k: tmp_path / k for k in ("stats", "split", "replay", "teach", "train", "eval", "evalm", "tiny")}
    cmds = [
        ["data", "stats", "--data", str(builtin_dir), "--out", str(out["stats"])],
        ["data", "split", "--data", str(builtin_dir), "--out", str(out["split"])],
        ["replay", "--data", str(builtin_dir), "--out", str(out["replay"]), "--limit", "4", "--quiet",
         "--split-file", str(out["split"] / "split.json"), "--split", "train"],
        ["teach", "--boundaries", str(out["replay"]), "--out", str(out["teach"]), "--teacher", "oracle"],
        ["train", "--config", "configs/tiny-cpu-hpd-t.yaml", "--data", str(out["teach"] / "targets.jsonl"),
         "--out", str(out["train"]), f"model.path={tiny_dir}", "schedule.phases.0.updates=1",
         "logging.progress=false", "logging.probe_examples=0"],
        ["eval", "--data", str(builtin_dir), "--out", str(out["eval"]), "--split-file", str(out["split"] / "split.json"),
         "--split", "test", "--limit", "3"],
        ["eval", "--data", str(builtin_dir), "--out", str(out["evalm"]), "--model", str(tiny_dir), "--limit", "1",
         "--max-new-tokens", "4", "--max-turns", "1"],
        ["model", "tiny", "--out", str(out["tiny"]), "--seed", "1"],
    ]
    cwd = os.getcwd()
    os.chdir(Path(__file__).resolve().parents[1])      # the train config path is relative to the repo
    try:
        for c in cmds:
            r = runner.invoke(app, c)
            assert r.exit_code == 0, (c, r.output)
    finally:
        os.chdir(cwd)
    for name, d in out.items():
        man = json.loads((d / "manifest.json").read_text())
        assert R.validate_manifest(man) == [], (name, R.validate_manifest(man))
        assert man["status"] == "complete" and man["command"].startswith("hpd"), name
    ins = {k: json.loads((d / "manifest.json").read_text())["inputs"] for k, d in out.items()}
    data_sha = ins["stats"]["data"]["sha256"]
    assert ins["split"]["data"]["sha256"] == ins["replay"]["data"]["sha256"] == ins["eval"]["data"]["sha256"] == data_sha
    assert ins["replay"]["split_file"]["sha256"] == R.checksum(out["split"] / "split.json")
    assert ins["teach"]["boundaries"]["sha256"] == R.checksum(out["replay"] / "boundaries", "*.jsonl")
    assert ins["train"]["records"]["sha256"] == R.checksum(out["teach"] / "targets.jsonl")
    assert ins["evalm"]["model"]["sha256"] == R.checksum(tiny_dir)


def _write_many(path: str, tag: str, n: int) -> None:
    from hpd.runfolder import write_json

    for i in range(n):
        write_json(path, {"writer": tag, "i": i, "pad": "x" * 2000})


def test_two_processes_writing_one_file_never_collide(tmp_path):
    """Two processes write the same file 300 times each. With one fixed ``<name>.tmp`` they rename each other's
    temporary file away (FileNotFoundError) or interleave it; with a temporary name per writer each write lands
    whole, the last one wins, and no temporary file is left behind."""
    import multiprocessing

    target = tmp_path / "shared.json"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(str(target), tag, 300)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    doc = json.loads(target.read_text())
    assert doc["writer"] in ("a", "b") and doc["i"] == 299 and len(doc["pad"]) == 2000
    assert [p.name for p in tmp_path.iterdir()] == ["shared.json"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    import os

    old = os.umask(0)
    os.umask(old)
    return old
