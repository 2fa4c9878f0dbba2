"""Real kills for resume tests: start `python -m hpd.train ...` in a subprocess and SIGKILL it as soon as a
given checkpoint is on disk; or start any `hpd` command and SIGKILL it a given time after a condition on its
output (or its files) holds."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

#: `hpd demo` options of the tests' tiny demo (the settings of tests/test_demo.py's SMALL, oracle teacher)
TINY_DEMO = ["--model", "tiny", "--n-per-domain", "10", "--updates", "6", "--global-batch", "4", "--test-limit", "4",
             "--train-limit", "10", "--max-new-tokens", "24", "--teacher", "oracle"]


def kill_after_checkpoint(args: list[str], out: Path, cwd: Path, update: int = 4, limit_s: float = 300) -> None:
    """Run ``python -m hpd.train *args`` and SIGKILL it once ``out/checkpoints/update-<update>`` is complete."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    p = subprocess.Popen([sys.executable, "-m", "hpd.train", *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env, cwd=cwd)
    target, t0 = Path(out) / "checkpoints" / f"update-{update:08d}" / "state.json", time.time()
    while not target.exists():
        assert p.poll() is None, p.stderr.read().decode()[-2000:]
        assert time.time() - t0 < limit_s, f"no checkpoint within {limit_s} s"
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL


def hpd_cmd(*args: str) -> list[str]:
    """The `hpd` command line run by this interpreter (no console script needed)."""
    return [sys.executable, "-c", "from hpd.cli import main; main()", *map(str, args)]


def kill_when(cmd: list[str], ready, delay: float, cwd: Path, limit_s: float = 600) -> bool:
    """Run ``cmd``; once ``ready(lines so far)`` is true (or the process ends), wait ``delay`` seconds and
    SIGKILL it. Returns whether it was killed while running (False: it had already exited, with code 0)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")), daemon=True)
    reader.start()
    t0 = time.time()
    while p.poll() is None and not ready(list(lines)):
        assert time.time() - t0 < limit_s, f"not ready within {limit_s} s: {lines[-5:]}"
        time.sleep(0.02)
    time.sleep(delay)
    killed = p.poll() is None
    if killed:
        os.kill(p.pid, signal.SIGKILL)
    p.wait()
    reader.join(5)
    assert killed or p.returncode == 0, "".join(lines)[-3000:]
    return killed


def run_to_end(cmd: list[str], cwd: Path, limit_s: float = 900) -> str:
    """Run ``cmd`` to its end (it must succeed); returns its output."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=limit_s)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return r.stdout + r.stderr
