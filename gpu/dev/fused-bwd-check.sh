#!/usr/bin/env bash
# The fused sequential backward (gpu/recurrent_backward.cu) on a CUDA machine, in one command:
#   build -> the [bwd] GPU tests but the chunk form's (the fused token walk against the double reference,
#   launch shapes, refusals; the group walks) and the training gradient tests -> compute-sanitizer memcheck
#   and racecheck over the fused kernels' small-shape cases, memcheck over the training gradient -> where .device-carry/fbb/fbb_*.xz are carried
#   (gpu/dev/fused_backward_bench.cu built here with nvcc, e.g. a baseline and a variant), each one's
#   `shapes` (times and the gradients' digest: builds that should compute the same numbers must print the
#   same digests), alternated in FBB_ROUNDS rounds (default 2).
# usage: [FBB_ROUNDS=2] [RACECHECK=spec] bash gpu/dev/fused-bwd-check.sh
#        logs in $OUT; exit status non-zero if a build, test or sanitizer failed
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
source gpu/device-env.sh
device_build test_gpu vla
TG="$BUILD/bin/test_gpu"

step "backward and training tests"
"$TG" "[bwd]~[chunk-bwd]" -r compact > "$OUT/bwd-tests.log" 2>&1 || { status=1; echo "bwd tests FAILED"; grep -B3 -A14 FAILED "$OUT/bwd-tests.log" | head -60; }
grep -iE "passed|failed" "$OUT/bwd-tests.log" | tail -1
"$TG" "GPU batch gradient*" -r compact > "$OUT/train-grad-tests.log" 2>&1 || { status=1; echo "training gradient tests FAILED"; grep -B3 -A14 FAILED "$OUT/train-grad-tests.log" | head -60; }
grep -iE "passed|failed" "$OUT/train-grad-tests.log" | tail -1

step "sanitizers"
# By tag: Catch2 splits a name filter at its commas. The fused kernels' small-shape, launch-shape and refusal
# cases, and the training gradient through them.
sanitize memcheck "[bwd]~[bwd-full]~[chunk-bwd]~[group-bwd]" "$OUT/memcheck.log"
sanitize memcheck "GPU batch gradient equals*" "$OUT/memcheck.log"
# racecheck over those six cases takes ~7 minutes on an H100: RACECHECK="a narrower test spec" for a call
# that must leave time for more (a name's comma escaped as \, ; a space does not separate terms in a name).
sanitize racecheck "${RACECHECK:-[bwd]~[bwd-full]~[chunk-bwd]~[group-bwd]}" "$OUT/racecheck.log"

if compgen -G "$REPO/.device-carry/fbb/fbb_*.xz" > /dev/null; then
  step "development driver"
  mkdir -p /tmp/fbb
  for f in "$REPO"/.device-carry/fbb/fbb_*.xz; do b=$(basename "$f" .xz); xz -dc "$f" > "/tmp/fbb/$b" && chmod +x "/tmp/fbb/$b"; done
  for round in $(seq "${FBB_ROUNDS:-2}"); do
    for b in /tmp/fbb/fbb_*; do echo "-- $(basename "$b") round $round"; "$b" shapes 20 || status=1; done
  done
fi
step "done (status $status)"
exit $status
