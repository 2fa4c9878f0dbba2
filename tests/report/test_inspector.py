"""The boundary inspector: data model, and the page itself in headless Chromium."""

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpd.boundary import iter_records, run_replay
from hpd.report.inspector import inspector_data, write_inspector

CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


@pytest.fixture(scope="module")
def replay_out(tmp_path_factory, builtin_bench):
    bench = builtin_bench
    out = tmp_path_factory.mktemp("replay")
    seq = next(t for t in bench.tasks if t.kind == "sequential")
    par = [t for t in bench.tasks if t.kind == "parallel"][:24]
    split = out / "split.json"
    split.write_text(json.dumps([t.uid for t in par] + [seq.uid]))
    run_replay(None, out / "run", split_file=split, bench=bench)
    return out / "run"


def _augmented_records(out):
    recs = list(iter_records(out))
    recs[0]["candidates"] = [{"text": "cand-A"}, {"text": "cand-B"}]
    recs[0]["verdicts"] = [{"ok": True, "reasons": []}, {"ok": False, "reasons": ["unknown_tool"]}]
    recs[0]["target"] = {"source": "teacher", "attempt": 1, "message": recs[0]["reference"]}
    return recs


def test_inspector_data_model(replay_out):
    recs = _augmented_records(replay_out)
    d = inspector_data(recs, max_tasks=10)
    assert d["n_tasks_total"] == 25 and d["n_tasks_shown"] == 10
    assert d["privileges"] == ["runtime", "plan", "oracle"] and d["privilege"] == "plan"
    t0 = d["tasks"][0]
    assert t0["uid"] == recs[0]["task_uid"] and t0["query"]
    b0, b1 = t0["boundaries"]
    assert "context" not in b0 and b0["n_messages"] == len(recs[0]["context"]["messages"])
    # native context is recoverable exactly from the deduplicated form
    ctx = {"systemPrompt": t0["systemPrompt"], "tools": [d["tools"][i] for i in t0["tools"]],
           "messages": t0["messages"][: b1["n_messages"]]}
    assert ctx == recs[1]["context"]
    assert b0["candidates"][1]["text"] == "cand-B" and b0["target"]["source"] == "teacher"
    assert b0["documents"]["plan"] == recs[0]["documents"]["plan"]["text"]
    # a boundary whose context is not a prefix of its task transcript keeps its own context
    odd = json.loads(json.dumps(recs[:2]))
    odd[0]["context"]["messages"][0]["content"] = "changed"
    d2 = inspector_data(odd)
    assert d2["tasks"][0]["boundaries"][0]["context"]["messages"][0]["content"] == "changed"


def _chromium(url, tmp_path, *extra):
    prof = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    prof.mkdir()
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={prof}", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=5000", *extra, url]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    console = [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln]
    return p, console


@pytest.mark.chromium
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (make chromium)")
def test_inspector_in_chromium(replay_out, tmp_path):
    recs = _augmented_records(replay_out)
    page = write_inspector(replay_out, tmp_path / "inspector.html", records=recs)
    url = page.resolve().as_uri()

    # the console check can fail: a page with an uncaught error is detected
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    _, console = _chromium(bad.resolve().as_uri(), tmp_path, "--dump-dom")
    assert any("boom" in ln for ln in console)

    p, console = _chromium(url, tmp_path, "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    assert console == [], console
    dom = p.stdout
    assert 'data-ready="1"' in dom
    assert len(re.findall(r'<section class="task"', dom)) == 20  # first page of 25 tasks
    assert "page 1 / 2 (25 tasks)" in dom
    first = recs[0]
    assert html.escape(first["task_uid"], quote=False) in dom
    doc_line = first["documents"]["plan"]["text"].split("\n")[1]  # "boundary: initial index=0 ..."
    assert html.escape(doc_line, quote=False) in dom
    assert "control document (privilege plan" in dom
    assert "teacher candidates (2)" in dom and "chosen target" in dom
    assert "b0 · initial" in dom and "b1 · after_tool_batch" in dom

    # search by task uid via the URL hash: only that task is shown
    seq_uid = recs[-1]["task_uid"]
    p, console = _chromium(url + "#" + seq_uid, tmp_path, "--dump-dom")
    assert console == []
    assert len(re.findall(r'<section class="task"', p.stdout)) == 1
    assert f'id="{html.escape(seq_uid)}"' in p.stdout

    art = Path(os.environ.get("HPD_ARTIFACTS") or tmp_path)
    art.mkdir(parents=True, exist_ok=True)
    shot = art / "inspector.png"
    p, console = _chromium(url, tmp_path, f"--screenshot={shot}", "--window-size=1280,1600")
    assert console == []
    assert shot.is_file() and shot.stat().st_size > 10_000


def test_inspector_samples_stored_tasks(replay_out, tmp_path):
    from hpd.report.inspector import sample_uids

    assert sample_uids(list("abcdefghij"), 3) == ["a", "d", "g"] and sample_uids(["a"], 5) == ["a"]
    page = write_inspector(replay_out, tmp_path / "s.html", max_tasks=5)
    text = page.read_text()
    blob = text.split('<script id="hpd-data" type="application/json">', 1)[1].split("</script>", 1)[0]
    d = json.loads(blob)
    uids = [r["task_uid"] for r in iter_records(replay_out)]
    uids = list(dict.fromkeys(uids))
    assert d["n_tasks_total"] == 25 and [t["uid"] for t in d["tasks"]] == sample_uids(uids, 5)
    assert d["tasks"][-1]["uid"] == uids[20]
    assert "<\\/" not in blob and "</" not in blob  # nothing in the data can close the script tag
