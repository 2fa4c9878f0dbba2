"""No network at run time: the demo's stages (tiny model) run with every IP connection and name lookup
refused by an audit hook, inside a network-less namespace (`unshare --net`) where the machine allows one,
and finish with nothing attempted. The hook is shown to work on a command that does try to connect."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kill_helpers import TINY_DEMO, hpd_cmd

from hpd.bfcl.sandbox import namespaces_available

REPO = Path(__file__).resolve().parents[2]
#: loaded by every Python process of the run (PYTHONPATH): logs and refuses IP connects and name lookups
HOOK = '''
import os, socket, sys

def _deny(what):
    with open(os.environ["HPD_NET_LOG"], "a") as f:
        f.write(what + "\\n")
    raise OSError("network blocked by the test: " + what)

def _hook(event, args):
    if event == "socket.connect" and args[0].family in (socket.AF_INET, socket.AF_INET6):
        _deny(f"connect {args[1]!r}")
    elif event in ("socket.getaddrinfo", "socket.gethostbyname") and args[0] not in (None, b"", ""):
        _deny(f"{event} {args[0]!r}")

sys.addaudithook(_hook)
'''


def _offline(cmd: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    log = tmp_path / "network.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")]),
               HPD_NET_LOG=str(log), OMP_NUM_THREADS="1")
    env.pop("HF_HUB_OFFLINE", None)       # the command must be offline by itself
    wrap = ["unshare", "--user", "--map-root-user", "--net"] if namespaces_available() else []
    r = subprocess.run([*wrap, *cmd], capture_output=True, text=True, env=env, cwd=REPO, timeout=900)
    return r, log.read_text().splitlines() if log.is_file() else []


def test_the_hook_refuses_a_connection(tmp_path):
    code = ("import socket\n"
            "for f in (lambda: socket.socket().connect(('127.0.0.1', 9)), lambda: socket.getaddrinfo('example.org', 80)):\n"
            "    try:\n        f()\n    except OSError as e:\n        print(e)\n")
    r, tried = _offline([sys.executable, "-c", code], tmp_path)
    assert r.stdout.count("network blocked by the test") == 2, r.stdout + r.stderr
    assert tried == ["connect ('127.0.0.1', 9)", "socket.getaddrinfo 'example.org'"]


@pytest.mark.slow
def test_demo_stages_run_without_network(tmp_path):
    out = tmp_path / "demo"
    r, tried = _offline(hpd_cmd("demo", *TINY_DEMO, "--out", out), tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert tried == [], tried
    res = json.loads((out / "results.json").read_text())
    assert list(res["variants"]) == ["Base", "SFT", "HPD-T", "HPD"]
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
