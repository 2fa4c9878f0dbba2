#!/usr/bin/env bash
# Stops the study's largest process cleanly before the machine runs out of memory (2026-12-07: with 24.09 of 24 GB
# in use the machine went down, and the home folder with every unfinished cell). Every POLL_S (default 10) seconds
# it reads MemAvailable; under MIN_MB (default 2500) it sends SIGTERM to the largest `hpd` study process, which
# finishes its running update and saves a checkpoint there (trainers from 05c9d0c; an older snapshot's demo stops
# at its last checkpoint), then waits for it to end. The queue does not restart a process stopped this way:
# `queue.sh` starts it again next time. Log lines go to stdout. (For the test: PATTERN replaces the processes'
# pattern, ONCE=1 exits after one stop.)
#   setsid nohup bash memguard.sh >> ~/hpd-runs/memguard.log 2>&1 < /dev/null &
set -u
MIN_MB="${MIN_MB:-2500}"
while true; do
  avail=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
  if [ "$avail" -lt "$MIN_MB" ]; then
    pid=$(ps -eo pid=,rss=,args= | awk -v p="${PATTERN:-hpd.cli import app}" '$0 ~ p && !/awk/ {print $2, $1}' | sort -rn | awk 'NR == 1 {print $2}')
    if [ -n "$pid" ]; then
      echo "[$(date -u +%FT%TZ)] MemAvailable ${avail} MB < ${MIN_MB} MB: SIGTERM to $pid ($(ps -o rss= -p "$pid") kB)"
      kill -TERM "$pid"
      while ps -o stat= -p "$pid" | grep -qv "^Z"; do sleep 1; done   # gone, or a zombie its parent will reap
      echo "[$(date -u +%FT%TZ)] $pid ended"
      [ -z "${ONCE:-}" ] || exit 0
    fi
  fi
  sleep "${POLL_S:-10}"
done
