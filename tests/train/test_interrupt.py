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
