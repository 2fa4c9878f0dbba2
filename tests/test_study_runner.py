"""The study's cell runner (docs/experiments/2026-12-04-issue35-study/run-cell.sh), run for real against a throwaway
repository whose ``.venv/bin/python`` is a fake ``hpd study run``: it records what it was started with, and in the
vLLM phase it writes the teacher's ``done.json`` and then waits to be stopped. Checked: the snapshot clone at
CODE_REV, the results seed, the shim that hides vllm on ENGINE=hf, STOP_AFTER's SIGTERM, ENGINE=teach-vllm's two
phases, and the skip when the stage is done already."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "docs/experiments/2026-12-04-issue35-study/run-cell.sh"
FAKE_PYTHON = """#!/usr/bin/env bash
echo "start|${PYTHONPATH}|$*" >> "$FAKE_LOG"
case "$PYTHONPATH" in *shim-no-vllm*) exit 0 ;; esac
trap 'echo "term" >> "$FAKE_LOG"; exit 0' TERM
mkdir -p "$(dirname "$FAKE_DONE")" && echo '{}' > "$FAKE_DONE"
for _ in $(seq 1200); do sleep 0.1; done
echo "not stopped" >> "$FAKE_LOG"
"""
CELLS = "main/defects-0.12/seed-0/HPD-T,main/defects-0.12/seed-0/HPD"
FAKE_SCRIPT = Path("docs", "experiments", "s", "run-cell.sh")   # three levels below the fake repository


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    (repo / FAKE_SCRIPT).parent.mkdir(parents=True)
    shutil.copy(SCRIPT, repo / FAKE_SCRIPT)
    (repo / "results/issue35").mkdir(parents=True)
    (repo / "results/issue35/cell.json").write_text("{}")
    py = repo / ".venv/bin/python"
    py.parent.mkdir(parents=True)
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "docs", "results"], check=True)
    subprocess.run(git + ["commit", "-qm", "snapshot"], check=True)
    rev = subprocess.run(git + ["rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True)
    return repo, rev.stdout.strip()


def _run(repo: Path, rev: str, tmp_path: Path, stage: str = "teach", cells: str = CELLS,
         **env) -> tuple[subprocess.CompletedProcess, list[str]]:
    runs, log = tmp_path / "runs", tmp_path / "fake.log"
    done = runs / f"study/main/defects-0.12/seed-0/{stage}/done.json"
    full = {**os.environ, "CODE_REV": rev, "HPD_RUNS": str(runs), "POLL_S": "0.2", "FAKE_LOG": str(log),
            "FAKE_DONE": str(done), **env}
    p = subprocess.run(["bash", str(repo / FAKE_SCRIPT), cells], env=full, capture_output=True,
                       text=True, timeout=300)
    return p, (log.read_text().splitlines() if log.exists() else [])


def test_teach_vllm_runs_the_teacher_unshimmed_stops_it_then_runs_the_rest_on_hf(tmp_path):
    repo, rev = _repo(tmp_path)
    p, calls = _run(repo, rev, tmp_path, ENGINE="teach-vllm")
    assert p.returncode == 0, p.stdout + p.stderr
    assert [c.split("|")[0] for c in calls] == ["start", "term", "start"], (calls, p.stdout, p.stderr)
    first, second = calls[0].split("|"), calls[2].split("|")
    code = tmp_path / f"runs/code-{rev}"
    assert "shim-no-vllm" not in first[1] and first[1] == f"{code}/src"
    assert second[1].startswith(f"{tmp_path}/runs/shim-no-vllm:")
    assert f"--cells {CELLS}" in first[2] and "configs/studies/issue35.yaml" in first[2]
    assert (code / ".git").is_dir() and (tmp_path / "runs/results/issue35/cell.json").is_file()
    assert "teach done: stopping" in p.stdout and "stopped issue35" in p.stdout and "rc=0" in p.stdout
    # a second time, the teacher's done.json is there: only the hf phase starts
    again, calls = _run(repo, rev, tmp_path, ENGINE="teach-vllm")
    assert again.returncode == 0 and "teach is done already" in again.stdout
    assert len(calls) == 4 and "shim-no-vllm" in calls[3]


@pytest.mark.parametrize("cells, stage", [("main/defects-0.12/seed-0/GRPO,main/defects-0.12/seed-0/GSPO,"
                                          "main/defects-0.12/seed-0/GiGPO", "train/gigpo"),
                                          ("main/defects-0.12/seed-0/GRPO", "train/grpo")])
def test_rl_vllm_trains_the_rl_baselines_unshimmed_until_the_last_then_evaluates_on_hf(tmp_path, cells, stage):
    """ENGINE=rl-vllm: the first phase (vllm visible: the demo gives the RL rollouts its vLLM engine) is stopped
    once the last named cell's train/<method>/done.json exists (the demo trains GRPO, GSPO, GiGPO in that order),
    the second runs with vllm hidden; a teach done.json does not stop it."""
    repo, rev = _repo(tmp_path)
    p, calls = _run(repo, rev, tmp_path, stage=stage, cells=cells, ENGINE="rl-vllm")
    assert p.returncode == 0, p.stdout + p.stderr
    assert [c.split("|")[0] for c in calls] == ["start", "term", "start"], (calls, p.stdout, p.stderr)
    assert "shim-no-vllm" not in calls[0] and "shim-no-vllm" in calls[2]
    assert f"{stage} done: stopping" in p.stdout and "rc=0" in p.stdout


def test_weights_teach_vllm_runs_both_phases_into_a_registry_of_its_own(tmp_path):
    """ENGINE=weights-teach-vllm: teach-vllm's two phases, each with --registry <runs>/weights-registry, so a cell
    registered in results/ runs again for its weights (BFCL's HPD cell needs seed 0's HPD weights)."""
    repo, rev = _repo(tmp_path)
    p, calls = _run(repo, rev, tmp_path, ENGINE="weights-teach-vllm")
    assert p.returncode == 0, p.stdout + p.stderr
    assert [c.split("|")[0] for c in calls] == ["start", "term", "start"], (calls, p.stdout, p.stderr)
    for c in (calls[0], calls[2]):
        assert f"--registry {tmp_path}/runs/weights-registry --cells {CELLS}" in c.split("|")[2], c
    assert (tmp_path / "runs/weights-registry").is_dir() and "shim-no-vllm" in calls[2]
    _, calls = _run(repo, rev, tmp_path / "again", ENGINE="auto")
    assert f"--registry {tmp_path}/again/runs/results --cells" in calls[0]


def test_a_finished_teach_stage_is_packed_into_the_repository_and_restored_into_a_lost_run_folder(tmp_path):
    """After teach-vllm's first phase, the seed folder's teach/ (with timings.json) is packed into
    results/<spec>/stages/<seed folder>/teach.tar.gz of the repository; a run whose home folder was lost (a fresh
    HPD_RUNS) unpacks it and starts only the hf phase; ARCHIVE_ONLY=1 packs without running anything."""
    repo, rev = _repo(tmp_path)
    seed = tmp_path / "runs/study/main/defects-0.12/seed-0"
    seed.mkdir(parents=True)
    (seed / "timings.json").write_text('{"teach": 12.5}')
    p, calls = _run(repo, rev, tmp_path, ENGINE="teach-vllm")
    arch = repo / "results/issue35/stages/main/defects-0.12/seed-0/teach.tar.gz"
    assert p.returncode == 0 and arch.is_file() and "packed into" in p.stdout, p.stdout + p.stderr
    names = subprocess.run(["tar", "-tzf", str(arch)], capture_output=True, text=True, check=True).stdout.split()
    assert "teach/done.json" in names and "timings.json" in names
    lost = tmp_path / "lost"
    again, calls = _run(repo, rev, lost, ENGINE="teach-vllm")
    assert again.returncode == 0 and "restored from" in again.stdout and "teach is done already" in again.stdout
    assert len(calls) == 1 and "shim-no-vllm" in calls[0], calls
    assert (lost / "runs/study/main/defects-0.12/seed-0/timings.json").read_text() == '{"teach": 12.5}'
    arch.unlink()
    only, after = _run(repo, rev, tmp_path, ARCHIVE_ONLY="1")   # the first run's log: nothing started since
    assert only.returncode == 0 and len(after) == 3 and arch.is_file()
    missing, _ = _run(repo, rev, tmp_path / "none", ARCHIVE_ONLY="1", STAGES=str(tmp_path / "stages"))
    assert missing.returncode == 1 and "no finished teach stage" in missing.stdout


def test_stop_after_a_stage_that_is_done_starts_nothing(tmp_path):
    repo, rev = _repo(tmp_path)
    done = tmp_path / "runs/study/main/defects-0.12/seed-0/teach/done.json"
    done.parent.mkdir(parents=True)
    done.write_text("{}")
    p, calls = _run(repo, rev, tmp_path, ENGINE="auto", STOP_AFTER="teach")
    assert p.returncode == 0 and calls == [] and "done already" in p.stdout


def test_the_queue_names_real_cells_and_forgets_none():
    """Every queued cell exists in its spec, no cell is queued twice, and every cell of the two specs is
    registered in results/ or queued."""
    from hpd.report.registry import load_study
    from hpd.report.studyplan import load_spec

    root = SCRIPT.parents[3]
    out = subprocess.run(["bash", str(SCRIPT.parent / "queue.sh"), "--list"], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    named: dict[str, list[str]] = {}
    for line in filter(None, out):
        lane, spec, engine, cells, *rev = line.split()
        assert lane in ("A", "B") and engine in ("hf", "teach-vllm", "weights-teach-vllm", "rl-vllm"), line
        assert len(rev) <= 1 and all(subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{r}^{{commit}}"])
                                     .returncode == 0 for r in rev), f"an item's code revision is not a commit: {line}"
        for c in cells.split(","):
            named.setdefault(spec, []).append(c)
    for spec, cells in named.items():
        assert len(cells) == len(set(cells)), f"{spec}: a cell queued twice"
        ids = {c.id for c in load_spec(root / f"configs/studies/{spec}.yaml").cells()}
        assert set(cells) <= ids, f"{spec}: not in the spec: {sorted(set(cells) - ids)}"
        left = ids - set(load_study(root / "results" / spec)) - set(cells)
        assert not left, f"{spec}: neither registered nor queued: {sorted(left)}"


def test_a_lane_runs_its_items_in_order_waits_for_a_busy_cell_and_resumes_an_oom_killed_one(tmp_path):
    """Lane A with a fake run-cell.sh that is SIGKILLed (137) on its first call and fails (3) on its third, while a
    process that runs the second item's cells lives for a few seconds: the first item runs again, the second waits
    for that process, the failed one is logged and the lane goes on; every item runs once more, in order."""
    fake, log, count = tmp_path / "run-cell.sh", tmp_path / "calls.log", tmp_path / "n"
    fake.write_text('n=$(( $(cat "$N" 2>/dev/null || echo 0) + 1 )); echo $n > "$N"\n'
                    'echo "$SPEC $ENGINE $1" >> "$LOG"; echo "$1 $CODE_REV" >> "$LOG.rev"\n'
                    '[ $n -eq 1 ] && exit 137; [ $n -eq 3 ] && exit 3; exit 0\n')
    items = [" ".join(line.split()[1:4]) for line in subprocess.run(     # SPEC ENGINE CELLS, without a REV
        ["bash", str(SCRIPT.parent / "queue.sh"), "--list"], capture_output=True, text=True).stdout.splitlines()
        if line.startswith("A ")]
    tag = f"hpd-queue-test-{os.getpid()}"
    other = subprocess.Popen(["bash", "-c", "sleep 4; true", tag, items[1].split()[-1]])   # its command line ends so
    env = {**os.environ, "RUN_CELL": str(fake), "LOG": str(log), "N": str(count), "QUEUE_BUSY": tag, "POLL_S": "0.5"}
    try:
        p = subprocess.run(["bash", str(SCRIPT.parent / "queue.sh"), "A"], env=env, capture_output=True, text=True,
                           timeout=60)
    finally:
        other.kill()
    assert p.returncode == 0 and log.read_text().splitlines() == [items[0]] + items, p.stdout
    assert f"waiting for the process that runs {items[1].split()[-1]}" in p.stdout and other.poll() is not None
    assert "try 2" in p.stdout and "rc=3" in p.stdout and p.stdout.rstrip().endswith("lane A: end")
    revs = dict(line.split() for line in Path(f"{log}.rev").read_text().splitlines())
    for line in filter(None, subprocess.run(["bash", str(SCRIPT.parent / "queue.sh"), "--list"], capture_output=True,
                                            text=True).stdout.splitlines()):
        lane, spec, _, cells, *own = line.split()
        if lane == "A":      # an item's own revision, else its spec's snapshot (equal-rows: 67ba3f4)
            assert revs[cells] == (own[0] if own else "67ba3f4" if spec == "equal-rows" else "2f76a1f"), line


def test_memguard_stops_the_largest_study_process_when_memory_runs_low():
    """With MemAvailable under MIN_MB (here: any amount), memguard.sh sends SIGTERM to the largest process that
    matches the pattern (a Python holding ~200 MB against one holding nothing), and the other lives on."""
    tag = f"hpd-memguard-test-{os.getpid()}"
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(7)); b = bytearray({n}); time.sleep(60)"
    big, small = (subprocess.Popen([sys.executable, "-c", code.format(n=n), tag]) for n in (200 << 20, 0))
    try:
        time.sleep(1.5)                                   # both have started (the big one has its 200 MB)
        env = {**os.environ, "MIN_MB": str(1 << 40), "PATTERN": tag, "ONCE": "1", "POLL_S": "0.2"}
        p = subprocess.run(["bash", str(SCRIPT.parent / "memguard.sh")], env=env, capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 0 and f"SIGTERM to {big.pid}" in p.stdout and f"{big.pid} ended" in p.stdout, p.stdout
        assert big.wait(timeout=5) == 7 and small.poll() is None
    finally:
        big.kill(), small.kill()
