"""A stop signal keeps the running update: SIGTERM to `hpd train` (no checkpoint due for 100 updates) finishes the
update in flight, saves a checkpoint at it, says how to resume and exits 130; the resumed run's per-update losses
equal an uninterrupted run's. The handler itself: a second Ctrl-C stops at once, repeated SIGTERMs are ignored."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpd.train.interrupt import DeferredStop
from hpd.train.logger import read_csv
from hpd.train.trainer import train

REPO = Path(__file__).resolve().parents[2]


def _cfg(tiny_dir) -> dict:
    return {"name": "stop", "seed": 0, "model": {"path": str(tiny_dir), "precision": "fp32"},
            "lora": {"r": 8, "alpha": 16, "dropout": 0.1}, "optim": {"lr": 3e-3},
            "batch": {"global_batch": 4, "micro_batch_tokens": 2048}, "data": {"synthetic_tasks": 5, "max_length": 2048},
            "schedule": {"phases": [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 400}]},
            "checkpoint": {"every": 100, "keep": 2}, "logging": {"probe_examples": 0, "progress": False,
                                                                "tensorboard": False}}


def _term_after_updates(cfg_path: Path, out: Path, n: int, limit_s: float = 300) -> subprocess.CompletedProcess:
    """Start `python -m hpd.train`, SIGTERM it once ``n`` updates are logged, and wait for it to exit."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    p = subprocess.Popen([sys.executable, "-m", "hpd.train", "--config", str(cfg_path), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    csv, t0 = out / "metrics.csv", time.time()
    while not (csv.is_file() and len(csv.read_text().splitlines()) > n):
        assert p.poll() is None, p.stderr.read()[-2000:]
        assert time.time() - t0 < limit_s, f"{n} updates not logged within {limit_s} s"
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=limit_s)
    return subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)


@pytest.mark.slow
def test_sigterm_saves_the_running_update_and_resumes_exactly(tiny_dir, tmp_path):
    cfg = _cfg(tiny_dir)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "stopped"
    r = _term_after_updates(path, out, 2)
    assert r.returncode == 130, r.stderr[-2000:]
    assert "interrupted; resume with: hpd train" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    done = len(read_csv(out / "metrics.csv"))
    assert 2 <= done < 100                                   # stopped long before the first scheduled checkpoint
    ckpts = sorted((out / "checkpoints").glob("update-*"))
    assert [c.name for c in ckpts] == [f"update-{done:08d}"]   # the update it finished, nothing lost
    assert json.loads((ckpts[0] / "state.json").read_text())["update"] == done
    assert json.loads((out / "manifest.json").read_text())["status"] == "stopped"
    end = done + 3
    assert train(None, dict(cfg, stop_after=3), out, resume=True) is None
    assert train(None, dict(cfg, stop_after=end), tmp_path / "straight") is None
    a, b = read_csv(tmp_path / "straight" / "metrics.csv"), read_csv(out / "metrics.csv")
    assert [x["update"] for x in b] == list(range(end)) == [x["update"] for x in a]
    for ra, rb in zip(a, b):
        assert ra["view"] == rb["view"] and abs(ra["loss"] - rb["loss"]) <= 1e-6, (ra, rb)


def test_second_ctrl_c_stops_at_once_and_repeated_sigterms_are_ignored():
    before = signal.getsignal(signal.SIGINT)
    with DeferredStop("t") as stop:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert stop.requested() and stop.signum == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    assert signal.getsignal(signal.SIGINT) is before             # the previous handler is back

    term_before = signal.getsignal(signal.SIGTERM)
    try:
        with DeferredStop("t") as stop:
            for _ in range(3):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
            assert stop.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN   # a stop under way is not cut by another kill
    finally:
        signal.signal(signal.SIGTERM, term_before)


def test_no_signal_leaves_handlers_as_they_were():
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with DeferredStop("t") as stop:
        assert signal.getsignal(signal.SIGINT) == stop._handle
    assert not stop.requested()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(parent: int, rank: int) -> int:
    """The pid of ``torchrun``'s worker of local rank ``rank`` (its environment says LOCAL_RANK)."""
    for pid in subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split():
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"LOCAL_RANK={rank}".encode() in env:
            return int(pid)
    raise AssertionError(f"no worker of rank {rank} under {parent}")


@pytest.mark.slow
def test_a_signal_to_one_of_two_processes_stops_both_after_the_same_update(tiny_dir, tmp_path):
    """Under torchrun (2 gloo processes) a SIGTERM that reaches rank 1 only still stops both processes after the
    same update, with one checkpoint of both ranks: without the all-reduce of the stop flag, rank 0 would wait in
    the next update's collective for a rank that has left (a hang, which the timeout turns into a failure)."""
    import shutil

    cfg = dict(_cfg(tiny_dir), name="ddp-stop")
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "ddp"
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    cmd = [torchrun, "--nproc-per-node", "2", "--master-port", str(_free_port()), "-m", "hpd.train",
           "--config", str(path), "--out", str(out)]
    log = tmp_path / "torchrun.log"          # a file, not a pipe: a full pipe would block the workers
    with log.open("w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
    try:
        csv, t0 = out / "metrics.csv", time.time()
        while not (csv.is_file() and len(csv.read_text().splitlines()) > 2):
            assert p.poll() is None, log.read_text()[-3000:]
            assert time.time() - t0 < 300, "2 updates not logged within 300 s"
            time.sleep(0.05)
        os.kill(_worker(p.pid, 1), signal.SIGTERM)
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the processes did not stop within 120 s of a SIGTERM to rank 1 (a hang)", pytrace=False)
    finally:
        if p.poll() is None:   # torchrun's workers run in sessions of their own: end them by pid, then torchrun
            for pid in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split():
                os.kill(int(pid), signal.SIGKILL)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    stderr = log.read_text()
    done = len(read_csv(out / "metrics.csv"))
    assert p.returncode != 0 and "stopped after update" in stderr, stderr[-3000:]
    ckpts = sorted((out / "checkpoints").glob("update-*"))
    assert [c.name for c in ckpts] == [f"update-{done:08d}"], (ckpts, done)
    state = json.loads((ckpts[0] / "state.json").read_text())
    assert state["update"] == done and state["world_size"] == 2 and (ckpts[0] / "rng-1.pt").is_file()
