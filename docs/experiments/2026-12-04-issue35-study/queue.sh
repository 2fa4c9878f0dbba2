#!/usr/bin/env bash
# The studies' remaining cells (issue 35, and issue 37's Figure 4) in one lane of two threads (THREADS), in the order
# of the note's "What is left" table, each item through run-cell.sh beside this file (CODE_REV, default 2f76a1f: the
# snapshot the study's cells run from):
# (for the test: RUN_CELL replaces run-cell.sh, QUEUE_BUSY the pattern before the cells, POLL_S the 60 s poll)
#   bash queue.sh          starts the lanes in the background (setsid nohup); logs ~/hpd-runs/queue-<lane>.log
#   bash queue.sh A        runs lane A in the foreground
#   bash queue.sh --list   prints "LANE SPEC ENGINE CELLS [REV]" per item (tests/test_study_runner.py: every cell of the
#                          two specs is registered or queued)
# The baselines item trains seed 0's SFT again in <root>/main (its weights were lost with the 2026-12-04 home
# folder; the registry keeps metrics, not weights): the baselines start from it and BFCL's SFT cell evaluates it,
# while the registered main SFT cell stays the one evaluated on 2026-12-03 (a registered variant is not run again).
# The lanes held about the same work (~33 core-hours each by the note's estimates) before the RL methods were measured
# (~9 h each, not ~5-6 h: lane A holds more). Replace this file with mv while lanes run: bash reads a script as it goes.
# An item a lane reaches while another process runs the same cells (a lane started twice, a cell started by hand)
# waits for it first; a registered cell returns at once, so a lane restarted next session skips what is done. An
# item killed by SIGKILL (the OOM killer: two trainers take 15-20 GB of 24) resumes from its checkpoint, twice at
# most (run-cell.sh stops a killed cell's orphaned vLLM engine); any other failure is logged and the lane goes on.
# HPD-T and HPD are separate items (from 2026-12-05's sixth session): a demo trains all its variants before it
# evaluates any, so an item of both registered neither until HPD's training (~3-5 h) had ended. The first item
# runs the seed's teacher stages (on vLLM) and HPD-T; the second finds them done and trains HPD.
# 2026-12-06 (tenth session): the home folder was not kept, so every unfinished cell started over; lane B now runs
# seed 2's HPD-T and HPD (HPD-T with its teacher stages ~4.5 h, a main cell) before equal-rows (~6.5 h).
# Seed 0's HPD item (registered 2026-12-05) moved before BFCL's as ENGINE=weights-teach-vllm (run-cell.sh: a registry
# of its own), so that it trains again for BFCL's HPD cell the weights the 2026-12-06 home folder took with it.
# 2026-12-06 (eleventh session): Figure 4's smolagents SFT and HPD (issue 37's last two cells) moved before
# equal-rows, a diagnostic beside the spec that no issue's done-when names.
# 2026-12-06 (twelfth session): the baselines item ran seed 0's teacher stages on hf (ENGINE=hf), 2.9x slower than
# vLLM and not the engine of the registered HPD cells' teach stages. DPO is now an item of its own with ENGINE=teach-vllm
# (the teacher stages on vLLM, DPO on hf), and the three RL methods (~9 h each as measured that day, 80 multi-turn
# updates) come after BFCL's SFT and HPD, which need only seed 0's SFT and HPD weights (two cells for ~5 h).
# 2026-12-06 (thirteenth session): the RL methods' item runs ENGINE=rl-vllm from f471480, the commit that gives the
# demo's RL baselines the cell's engine: their rollouts on vLLM (multi-turn 5.3x hf, updates 1.7-2.6x) and training
# micro-batches of 2,048 tokens (5-7 GB beside lane B's trainer, not >=10.9 GB), then their evaluations on hf.
# The DPO item (its teach stage done that session) runs from fa31b18 too, whose DPO keeps its reference table in the
# run folder: a resumed DPO then loads it instead of a second 16-minute reference pass (the same floats).
# 2026-12-06 (fourteenth session): the home folder was lost again, with DPO at update ~35 of 80, seed 0's teach stage
# and Figure 4's smolagents warm-up. Registered cells left the lists; the sweep's SFT cells (one session each) lead,
# and every item with a teach stage runs from 1bd8ed1, whose runner packs a finished teach stage into
# results/<spec>/stages/ (committed) and whose demo then needs neither the teacher nor its warm-up again: a cell of
# ~3-5 h now survives a lost home folder in two halves (teacher stages; training and evaluation). The RL item
# runs from 1bd8ed1 too (it holds f471480's RL engine).
# A spec's cells run from its code snapshot under its run root (snapshot): issue35 and figure4 from CODE_REV
# (default 2f76a1f) in ~/hpd-runs/study, equal-rows (added 2026-12-05, after the snapshot) from 67ba3f4 in
# ~/hpd-runs/equal-rows.
# 2026-12-07 (nineteenth session): the home folder was lost a third time (the machine went down with DPO at update
# 60 of 80 and seed 0's HPD at 0 % at 45, when the two trainers beside each other held 24.09 of 24 GB). One lane
# now runs one cell at a time on both threads (OMP 2: an HPD update took 30 s alone against 55 s at one thread
# beside DPO, so two threads give 1.8x and two lanes no more work per hour), and DPO's 15 GB never meets another
# trainer. DPO runs from f574203, whose demo trains DPO alone for a DPO cell, without SFT (before it, the demo trained
# all four baselines before it evaluated any: the DPO item held ~18 h of RL on hf). SFT is trained again (for BFCL's
# SFT cell and the RL baselines' start) by an item of its own. The items after DPO run from f574203 too: there a
# SIGTERM (the session's stop, memguard.sh) lets the running update finish and saves a checkpoint at it (05c9d0c),
# where 1bd8ed1's trainer lost every update since its last checkpoint.
# 2026-12-07 (twentieth session): DPO from the base model never calls a tool (the study note's DPO section); the
# diagnostic study dpo-start (configs/studies/dpo-start.yaml, from 824c597: --dpo-start sft) trains seed 0's SFT and
# DPO from its adapter, after the RL item, on issue 35's seed-0 pairs (its packed teach stage, linked): ~2 h.
# 2026-12-07 (twenty-first session): the three RL methods are three items, one cell each: a demo trains every
# baseline it names before it evaluates any, so one item of three registered none until ~9-10 h of training had ended
# (more than three sessions); one cell an item registers GRPO after its own ~3 h.
# 2026-12-07 (twenty-third session): GiGPO runs from 89194b3, whose RL trainer also logs episodes.csv (every rollout:
# its group, reward, TS, compliance, advantage) and rl.csv's fail_groups / fail_adv_share, so that the reading of
# GRPO's drift (compliance-only groups scaled up by the group std) can be checked group by group; its training is
# f574203's at the same defaults (before 89194b3, scale_rewards group was the code's only path).
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
RUNS="${HPD_RUNS:-$HOME/hpd-runs}"
S0=main/defects-0.12/seed-0 S1=main/defects-0.12/seed-1 S2=main/defects-0.12/seed-2
Z=main/defects-0.00/seed-0 Q=main/defects-0.25/seed-0 SM=smolagents/defects-0.12/seed-0 DS=dpo-sft/defects-0.12/seed-0
LANE_A=(
  "issue35 teach-vllm $S0/DPO f574203"
  "issue35 teach-vllm $Q/HPD-T f574203"
  "issue35 teach-vllm $Q/HPD f574203"
  "issue35 weights-teach-vllm $S0/SFT f574203"
  "issue35 hf bfcl/defects-0.12/seed-0/SFT"
  "issue35 rl-vllm $S0/GRPO f574203"
  "issue35 rl-vllm $S0/GSPO f574203"
  "issue35 rl-vllm $S0/GiGPO 89194b3"
  "dpo-start teach-vllm $DS/SFT,$DS/DPO 824c597"
  "equal-rows hf oracle-240/defects-0.12/seed-0/HPD"
)
LANE_B=()

busy() {  # busy CELLS: does a process run these cells (a cell's python, or its run-cell.sh)?
  pgrep -f -- "${QUEUE_BUSY:-(--cells|run-cell\.sh)} $1\$" > /dev/null
}

snapshot() {  # snapshot SPEC: "REV ROOT" of the spec's cells
  case "$1" in
    equal-rows) echo "67ba3f4 $RUNS/equal-rows" ;;
    dpo-start) echo "824c597 $RUNS/dpo-start" ;;
    *) echo "${CODE_REV:-2f76a1f} $RUNS/study" ;;
  esac
}

lane() {  # lane NAME ITEM...
  local name="$1" spec engine cells own rc try rev root
  shift
  for item in "$@"; do
    read -r spec engine cells own <<< "$item"
    read -r rev root <<< "$(snapshot "$spec")"
    rev="${own:-$rev}"   # an item may name its own code revision (its fourth field)
    if busy "$cells"; then
      echo "[$(date -u +%FT%TZ)] lane $name: waiting for the process that runs $cells"
      while busy "$cells"; do sleep "${POLL_S:-60}"; done
    fi
    for try in 1 2 3; do
      echo "[$(date -u +%FT%TZ)] lane $name: $spec $cells ($engine, try $try)"
      SPEC="$spec" ENGINE="$engine" CODE_REV="$rev" ROOT="$root" OMP_NUM_THREADS="${THREADS:-2}" bash "${RUN_CELL:-$HERE/run-cell.sh}" "$cells"
      rc=$?
      [ "$rc" -eq 137 ] || break
    done
    echo "[$(date -u +%FT%TZ)] lane $name: $spec $cells rc=$rc"
  done
  echo "[$(date -u +%FT%TZ)] lane $name: end"
}

case "${1:-all}" in
  --list)
    for i in "${LANE_A[@]}"; do echo "A $i"; done
    for i in "${LANE_B[@]}"; do echo "B $i"; done ;;
  A) lane A "${LANE_A[@]}" ;;
  B) lane B "${LANE_B[@]}" ;;
  all)
    mkdir -p "$RUNS"
    for l in A B; do
      [ "$l" = A ] || [ "${#LANE_B[@]}" -gt 0 ] || continue
      if pgrep -f -- "queue.sh $l\$" > /dev/null; then echo "lane $l runs already"; continue; fi
      (cd "$RUNS" && setsid nohup bash "$HERE/queue.sh" "$l" >> "$RUNS/queue-$l.log" 2>&1 < /dev/null &)
      echo "lane $l started: $RUNS/queue-$l.log"
    done ;;
  *) echo "usage: queue.sh [A|B|--list]" >&2; exit 2 ;;
esac
