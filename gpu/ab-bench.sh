#!/usr/bin/env bash
# A/B timing of one source file in one run, on one machine (docs/gpu.md, "Running it"): builds `vla` from
# the snapshot as it is (B) and with AB_FILE replaced by the copy in .device-carry/ab/AB_FILE (A: prepare it
# here with `mkdir -p .device-carry/ab/$(dirname F) && git show REV:F > .device-carry/ab/F`), then runs
# `vla bench attention` A, B, A, B at one shape, so that the ratio B / A is taken in one run, on one card,
# with the clock drift between runs visible in the two pairs.
# usage: AB_FILE=gpu/recurrent_forward.cu [AB_T=4096] [AB_SHAPE="8 4 32"] [AB_REPS=5] bash gpu/ab-bench.sh
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
: "${AB_FILE:?AB_FILE: the source file to compare (a path inside the repository)}"
[ -f "$REPO/.device-carry/ab/$AB_FILE" ] || { echo "AB_FILE: .device-carry/ab/$AB_FILE not found"; exit 2; }
source gpu/device-env.sh
set -- ${AB_SHAPE:-8 4 32}
device_build vla && cp "$BUILD/bin/vla" /tmp/vla-B
cp "$AB_FILE" /tmp/ab-B-source && cp "$REPO/.device-carry/ab/$AB_FILE" "$AB_FILE"
device_build vla && cp "$BUILD/bin/vla" /tmp/vla-A
cp /tmp/ab-B-source "$AB_FILE"  # the snapshot as it was (a later call rebuilds B)
for run in A B A B; do
  step "$run"
  /tmp/vla-$run bench attention --device cuda --T "${AB_T:-4096}" --batch $1 --heads $2 --d-head $3 --reps "${AB_REPS:-5}" \
    --csv "$OUT/ab-$run-$SECONDS.csv" 2>&1 | grep -E "^ +[0-9]" | sed "s/^/$run /" || status=1
done
exit $status
