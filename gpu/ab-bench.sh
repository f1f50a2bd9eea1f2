#!/usr/bin/env bash
# A/B timing of source files in one run, on one machine (docs/gpu.md, "Running it"): builds `vla` from
# the snapshot as it is (B) and with the AB_FILE files replaced by their copies in .device-carry/ab/ (A:
# device-env.sh's build_ab), then runs
# `vla bench attention` A, B, A, B at one shape, so that the ratio B / A is taken in one run, on one card,
# with the clock drift between runs visible in the two pairs.
# usage: AB_FILE="gpu/recurrent_forward.cu ..." [AB_T=4096] [AB_SHAPE="8 4 32"] [AB_REPS=5] bash gpu/ab-bench.sh
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
: "${AB_FILE:?AB_FILE: the source files to compare (paths inside the repository)}"
source gpu/device-env.sh
set -- ${AB_SHAPE:-8 4 32}
build_ab "$REPO" $AB_FILE
for run in A B A B; do
  step "$run"
  /tmp/vla-$run bench attention --device cuda --T "${AB_T:-4096}" --batch $1 --heads $2 --d-head $3 --reps "${AB_REPS:-5}" \
    --csv "$OUT/ab-$run-$SECONDS.csv" 2>&1 | grep -E "^ +[0-9]" | sed "s/^/$run /" || status=1
done
exit $status
