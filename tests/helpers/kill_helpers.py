"""A real kill for resume tests: start `python -m hpd.train ...` in a subprocess and SIGKILL it as soon as a
given checkpoint is on disk."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


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
