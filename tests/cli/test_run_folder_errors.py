"""A full disk, an unwritable --out and a run folder made by another config each stop `hpd eval`,
`hpd replay` and `hpd demo` with one clear line (no traceback), and no finished shard is lost: the run
resumes to the figures of an uninterrupted one once the problem is gone."""

import errno
import json
import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from hpd.bfcl.sandbox import namespaces_available
from hpd.cli import app

runner = CliRunner()


def _error_line(r, code: int) -> str:
    assert r.exit_code == code and "Traceback" not in r.output, r.output
    errs = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1, r.output
    return errs[0]


def _commands(data, out):
    return {"eval": ["eval", "--data", str(data), "--out", str(out), "--limit", "3"],
            "replay": ["replay", "--data", str(data), "--out", str(out), "--limit", "3", "--quiet"],
            "demo": ["demo", "--model", "tiny", "--data", str(data), "--out", str(out)]}


@pytest.mark.parametrize("cmd", ["eval", "replay", "demo"])
def test_unwritable_out_is_one_line(builtin_dir, tmp_path, cmd):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    line = _error_line(runner.invoke(app, _commands(builtin_dir, a_file)[cmd]), 2)
    assert f"--out {a_file} is a file, not a folder" in line
    line = _error_line(runner.invoke(app, _commands(builtin_dir, a_file / "sub")[cmd]), 2)
    assert f"--out {a_file / 'sub'} is not writable: Not a directory" in line
    if os.geteuid() != 0:          # root writes through permission bits; the two cases above hold for root too
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        line = _error_line(runner.invoke(app, _commands(builtin_dir, ro)[cmd]), 2)
        assert f"--out {ro} is not writable: Permission denied" in line


def test_folders_of_another_config_are_refused_and_kept(builtin_dir, tmp_path):
    cmds = _commands(builtin_dir, tmp_path / "x")
    for name, extra in (("eval", ["--max-turns", "3"]), ("replay", ["--pool-k", "5"])):
        out = tmp_path / name
        args = [a if a != str(tmp_path / "x") else str(out) for a in cmds[name]]
        assert runner.invoke(app, args).exit_code == 0
        before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
        line = _error_line(runner.invoke(app, args + extra), 2)
        assert f"{out} holds a" in line and "with a different config_hash" in line, line
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    from hpd.demo import DemoConfig
    from hpd.runfolder import new_manifest, write_json

    out = tmp_path / "demo"
    record = DemoConfig(out=out, model="tiny", updates=6).to_record()
    write_json(out / "manifest.json", new_manifest("hpd demo", record))
    line = _error_line(runner.invoke(app, ["demo", "--model", "tiny", "--out", str(out), "--updates", "7"]), 2)
    assert f"{out} holds a demo run of another config: updates 6 (asked: 7)" in line


def _full_after(monkeypatch, n: int) -> None:
    """The disk fills up: the ``n``-th and every later fsync fails with ENOSPC."""
    real, calls = os.fsync, [0]

    def fsync(fd):
        calls[0] += 1
        if calls[0] >= n:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)


def test_eval_on_a_full_disk_keeps_finished_episodes_and_resumes(builtin_dir, tmp_path, monkeypatch):
    args = ["eval", "--data", str(builtin_dir), "--limit", "12", "--shard-size", "1"]
    assert runner.invoke(app, [*args, "--out", str(tmp_path / "ref")]).exit_code == 0
    out = tmp_path / "full"
    with monkeypatch.context() as m:
        _full_after(m, 8)
        line = _error_line(runner.invoke(app, [*args, "--out", str(out)]), 1)
    assert "no space left on the device" in line and "rerun the same command to resume" in line
    rows = [json.loads(ln) for p in (out / "shards").glob("part-*.jsonl") for ln in p.open()]
    assert 0 < len(rows) < 12 and len({r["uid"] for r in rows}) == len(rows)
    assert not (out / "metrics.json").exists()
    assert runner.invoke(app, [*args, "--out", str(out)]).exit_code == 0
    got, ref = (json.loads((d / "metrics.json").read_text()) for d in (out, tmp_path / "ref"))
    assert {k: v for k, v in got.items() if k != "rollout"} == {k: v for k, v in ref.items() if k != "rollout"}
    assert got["rollout"]["resumed_rows"] == len(rows)


@pytest.mark.skipif(not namespaces_available(), reason="needs unprivileged user + mount namespaces (unshare) "
                    "for a real tmpfs; the ENOSPC of test_eval_on_a_full_disk_* runs everywhere")
def test_replay_on_a_real_full_tmpfs_keeps_finished_shards(builtin_dir, tmp_path):
    """`hpd replay` writes into a tmpfs that holds about half its shards: one line, exit 1, the finished
    shards intact; copied to a roomy disk it resumes to byte-identical shards."""
    args = ["replay", "--data", str(builtin_dir), "--shard-tasks", "12", "--quiet"]
    code = "from hpd.cli import main; main()"
    subprocess.run([sys.executable, "-c", code, *args, "--out", str(tmp_path / "ref")], check=True,
                   capture_output=True)
    size = sum(p.stat().st_size for p in (tmp_path / "ref" / "boundaries").glob("*.jsonl"))
    mnt, saved = tmp_path / "mnt", tmp_path / "saved"
    mnt.mkdir()
    script = (f'mount -t tmpfs -o size={size // 2} tmpfs "$1" && "$2" -c "$3" "${{@:4}}" --out "$1/r"; '
              f'echo "rc=$?"; cp -a "$1/r" "{saved}"')
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "bash", "-c", script, "sh", str(mnt),
                        sys.executable, code, *args], capture_output=True, text=True, timeout=300)
    assert "rc=1" in r.stdout and "Traceback" not in r.stderr, r.stdout + r.stderr
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "no space left on the device" in errs[0], r.stderr
    metas = sorted(p.name for p in (saved / "boundaries").glob("*.meta.json"))
    assert 0 < len(metas) < len(list((tmp_path / "ref" / "boundaries").glob("*.meta.json")))
    for m in metas:            # every shard that finished before the disk filled is whole
        shard = m.replace(".meta.json", ".jsonl")
        assert (saved / "boundaries" / shard).read_bytes() == (tmp_path / "ref" / "boundaries" / shard).read_bytes()
    out = tmp_path / "roomy"
    shutil.copytree(saved, out)
    r = subprocess.run([sys.executable, "-c", code, *args, "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for p in sorted((tmp_path / "ref" / "boundaries").iterdir()):
        assert (out / "boundaries" / p.name).read_bytes() == p.read_bytes(), p.name
