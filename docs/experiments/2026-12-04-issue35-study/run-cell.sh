#!/usr/bin/env bash
# Runs one cell of a study from a frozen code snapshot outside the work tree (the note beside this folder says why):
#   CODE_REV=<commit> ENGINE=hf|auto|teach-vllm|rl-vllm OMP_NUM_THREADS=1 SPEC=issue35 [STOP_AFTER=teach] bash run-cell.sh CELL[,CELL...]
# The first call builds what a lost home folder takes with it: the snapshot ~/hpd-runs/code-<rev> (a clone of
# this repository at CODE_REV), the shim that hides vllm (ENGINE=hf: --backend auto then resolves to hpd's hf
# engine, as for seed 0's Base and SFT) and ~/hpd-runs/results, seeded from the repository's results/.
# STOP_AFTER=STAGE stops the cell (SIGTERM, which the demo turns into a clean stop that resumes) once the stage's
# folder in the cell's seed folder holds done.json. ENGINE=teach-vllm is the main cells' recipe (the note's
# "Engines"): the teacher stages on vLLM (auto, STOP_AFTER=teach), then the rest on hf. ENGINE=rl-vllm does the same
# for the RL baselines (GRPO, GSPO, GiGPO): their trainings with vllm visible, so that the demo gives their rollouts
# the vLLM engine (hpd.methods.baselines, from 2026-12-06's thirteenth session), until the last named cell's
# method is trained (train/gigpo for GRPO,GSPO,GiGPO, which the demo trains in that order; train/grpo for GRPO alone),
# then their evaluations on hf. ENGINE=weights-teach-vllm
# runs the same with REGISTRY=~/hpd-runs/weights-registry, a registry of its own (default: ~/hpd-runs/results), so a
# cell registered in results/ trains (and evaluates) again in the run root: BFCL's HPD cell needs seed 0's HPD
# weights, which a lost home folder took with it, while the registered HPD cell stays the one of results/.
# The teach stage outlives a lost home folder in the repository (from 2026-12-06's fourteenth session, when one was
# lost again): once a first phase (teach-vllm, weights-teach-vllm, rl-vllm) leaves the seed folder's teach/done.json,
# its teach/, teach-choice/teacher_choice.json and timings.json are packed into
# results/<spec>/stages/<seed folder>/teach.tar.gz (STAGES= another folder; commit it); a run whose seed folder has
# no finished teach stage unpacks that archive first, and the demo then skips the teacher's warm-up and choice
# (hpd.demo.Demo._finished_teacher, from that commit: run such cells from it or later). ARCHIVE_ONLY=1 packs a
# finished teach stage and exits (a cell started before this runner could pack it).
# POLL_S (default 20) is how often it looks for that done.json. When the cell's process ends (stopped, killed or
# finished), vLLM engine processes left without a parent are stopped: the snapshot's `hpd study run` died on SIGTERM
# without stopping its teacher's engine, which then held 4.4 GB under the trainings that followed (2026-12-06).
# Runs it with the repository's .venv. Output: the study's own log lines; commit a registered cell's
# ~/hpd-runs/results/<study>/... into results/ as soon as it appears.
set -u
CELL="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ "${ENGINE:-auto}" = weights-teach-vllm ]; then   # a registered cell trained again for its weights (above)
  mkdir -p "${HPD_RUNS:-$HOME/hpd-runs}/weights-registry"
  exec env ENGINE=teach-vllm REGISTRY="${HPD_RUNS:-$HOME/hpd-runs}/weights-registry" bash "$HERE/run-cell.sh" "$CELL"
fi
REPO="$(cd "$HERE/../../.." && pwd)"
RUNS="${HPD_RUNS:-$HOME/hpd-runs}"
SPEC="${SPEC:-issue35}"
ROOT="${ROOT:-$RUNS/study}"
FIRST="${CELL%%,*}"   # CELL may be a comma list of cells of one seed folder (e.g. its HPD-T and HPD)
SEED="$ROOT/$(dirname "$FIRST")"
ARCH="${STAGES:-$REPO/results/$SPEC/stages}/$(dirname "$FIRST")/teach.tar.gz"
archive_teach() {  # pack a finished teach stage into the repository once (above)
  [ -f "$SEED/teach/done.json" ] && [ ! -f "$ARCH" ] || return 0
  local extra=()
  for f in teach-choice/teacher_choice.json timings.json; do [ -f "$SEED/$f" ] && extra+=("$f"); done
  mkdir -p "$(dirname "$ARCH")" && tar -czf "$ARCH.tmp" -C "$SEED" teach "${extra[@]}" && mv "$ARCH.tmp" "$ARCH" &&
    echo "[$(date -u +%FT%TZ)] $SPEC $CELL: teach stage packed into $ARCH ($(du -k "$ARCH" | cut -f1) kB): commit it"
}
restore_teach() {  # unpack it where the seed folder has no finished teach stage
  [ ! -f "$SEED/teach/done.json" ] && [ -f "$ARCH" ] || return 0
  rm -rf "$SEED/teach" && mkdir -p "$SEED" && tar -xzf "$ARCH" -C "$SEED" &&
    echo "[$(date -u +%FT%TZ)] $SPEC $CELL: teach stage restored from $ARCH"
}
if [ -n "${ARCHIVE_ONLY:-}" ]; then
  archive_teach; [ -f "$ARCH" ] || { echo "no finished teach stage in $SEED"; exit 1; }; exit 0
fi
restore_teach || exit 2
case "${ENGINE:-auto}" in   # a first phase with vllm visible until a stage is done, then the rest on hf
  teach-vllm) UNTIL=teach ;;
  rl-vllm) last="${CELL##*/}"; UNTIL="train/${last,,}" ;;   # the RL baselines' rollouts on vLLM until the last
                                                           # cell's method is trained, their evaluations on hf
  *) UNTIL= ;;
esac
if [ -n "$UNTIL" ]; then
  ENGINE=auto STOP_AFTER="$UNTIL" bash "$HERE/run-cell.sh" "$CELL" || exit $?
  archive_teach
  # the demo may start the method's evaluation on vLLM within the POLL_S before the stop (GSPO, 2026-12-07: a folder
  # with only a "running" manifest, which the hf phase then refused as another config): an evaluation the first
  # phase left unfinished is removed, so the hf phase evaluates from scratch
  if [ "${ENGINE:-auto}" = rl-vllm ] && [ ! -f "$SEED/eval/${last,,}/done.json" ] && [ -d "$SEED/eval/${last,,}" ]; then
    echo "[$(date -u +%FT%TZ)] $SPEC $CELL: removing the unfinished first-phase evaluation $SEED/eval/${last,,}"
    rm -rf "$SEED/eval/${last,,}"
  fi
  exec env ENGINE=hf STOP_AFTER= bash "$HERE/run-cell.sh" "$CELL"
fi
REV="${CODE_REV:-$(git -C "$REPO" rev-parse --short HEAD)}"
CODE="$RUNS/code-$REV"
STOP="${STOP_AFTER:+$ROOT/$(dirname "$FIRST")/$STOP_AFTER/done.json}"
mkdir -p "$RUNS"
[ -d "$CODE" ] || git clone -q "$REPO" "$CODE" || exit 2
# checkout only when the snapshot is elsewhere: two lanes checking out at once raced on .git/index.lock
[ "$(git -C "$CODE" rev-parse --short HEAD)" = "$REV" ] || git -C "$CODE" checkout -q "$REV" || exit 2
if [ ! -d "$RUNS/results" ]; then mkdir -p "$RUNS/results" && cp -r "$REPO/results/." "$RUNS/results/"; fi
PP="$CODE/src"
if [ "${ENGINE:-auto}" = hf ]; then
  mkdir -p "$RUNS/shim-no-vllm/vllm"
  echo 'raise ImportError("vllm hidden: the study'"'"'s evaluations are pinned to the hf engine")' \
    > "$RUNS/shim-no-vllm/vllm/__init__.py"
  PP="$RUNS/shim-no-vllm:$PP"
fi
if [ -n "$STOP" ] && [ -f "$STOP" ]; then
  echo "[$(date -u +%FT%TZ)] $SPEC $CELL: $STOP_AFTER is done already ($STOP)"; exit 0
fi
orphans() {  # vLLM engines whose cell is gone (PPID 1): the snapshot's `hpd study run` leaves its engine on SIGTERM
  for pid in $(ps -eo pid=,ppid=,args= | awk '$2 == 1 && $3 ~ /^VLLM::/ {print $1}'); do
    echo "[$(date -u +%FT%TZ)] stopping the orphaned vLLM engine $pid and its worker"
    pkill -9 -P "$pid"; kill -9 "$pid"
  done
}
cd "$CODE" || exit 2
echo "[$(date -u +%FT%TZ)] start $SPEC $CELL code=$REV engine=${ENGINE:-auto} threads=${OMP_NUM_THREADS:-?}${STOP:+ until $STOP_AFTER}"
PYTHONPATH="$PP" HF_HUB_OFFLINE=1 "$REPO/.venv/bin/python" -c "from hpd.cli import app; app()" \
  study run "configs/studies/$SPEC.yaml" --root "$ROOT" --registry "${REGISTRY:-$RUNS/results}" --cells "$CELL" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null' TERM INT
while [ -n "$STOP" ] && kill -0 $pid 2>/dev/null; do
  if [ -f "$STOP" ]; then
    echo "[$(date -u +%FT%TZ)] $STOP_AFTER done: stopping $CELL"; kill -TERM $pid; wait $pid; orphans
    echo "[$(date -u +%FT%TZ)] stopped $SPEC $CELL after $STOP_AFTER"; exit 0
  fi
  sleep "${POLL_S:-20}"
done
wait $pid
rc=$?
orphans   # after a SIGKILL (the OOM killer) too
echo "[$(date -u +%FT%TZ)] end $SPEC $CELL rc=$rc"
exit $rc
