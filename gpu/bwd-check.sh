#!/usr/bin/env bash
# The fused backward kernels alone on a CUDA machine, in one command (docs/gpu.md, "Backward kernels"):
#   build -> the backward [gpu] tests ([bwd]; worst relative error per rule, gradient and d) ->
#   `vla bench attention` forward and forward+backward at B,H,d = 8,4,32 / 4,16,64 / 2,8,128 ->
#   the baselines (below) -> compute-sanitizer memcheck over [bwd] and racecheck over [bwd]~[bwd-full].
# Optional: BWD_BASELINE="FILE..." (other gpu/recurrent_backward.cu variants) also rebuilds `vla`
# with each file in turn (last, so the build's `vla` ends as the last baseline's) and times it at d = 32
# and 64, T = BWD_BASE_T (default 4096): a before/after on one machine in one run. BWD_T: the bench's T list
# (default 1024,4096,16384); BWD_REPS: timed runs per point, median reported (default 10).
# usage: bash gpu/bwd-check.sh     logs in $OUT; exit status non-zero if a build, test or sanitizer failed
set -uo pipefail
cd "$(dirname "$0")/.."
BASELINE=""; for f in ${BWD_BASELINE:-}; do BASELINE="$BASELINE $(realpath "$f")"; done
BENCH_T=${BWD_T:-1024,4096,16384}
REPS=${BWD_REPS:-10}
source gpu/device-env.sh
device_build test_gpu vla
TG="$BUILD/bin/test_gpu"
VLA="$BUILD/bin/vla"

step "backward tests"
"$TG" "[bwd]" -s -r compact > "$OUT/bwd-tests.log" 2>&1 || { status=1; echo "backward tests FAILED"; grep -B3 -A12 FAILED "$OUT/bwd-tests.log" | head -60; }
grep -E "passed|failed" "$OUT/bwd-tests.log" | tail -1
# Worst relative error per (rule, gradient, d) over the shapes; each line's bound is T d 2^-24.
grep "rel err" "$OUT/bwd-tests.log" | sed "s/.*message: '//; s/'.*//" |
  awk '{ k = $1 " " $3 " " $4; if ($8 + 0 >= m[k] + 0) { m[k] = $8; w[k] = $0 } } END { for (k in w) print w[k] }' | sort | tee "$OUT/bwd-relerr.log"

step "benchmark (forward, forward+backward)"
for shape in "8 4 32" "4 16 64" "2 8 128"; do
  set -- $shape
  bench_attention $1 $2 $3 "$BENCH_T" "$REPS" "$OUT/bwd-bench-$1-$2-$3.csv"
done

for base in $BASELINE; do
  step "baseline: vla rebuilt with $base"
  cp gpu/recurrent_backward.cu "$OUT/recurrent_backward.new.cu"
  cp "$base" gpu/recurrent_backward.cu
  cmake --build "$BUILD" -j "$(nproc)" --target vla >> "$OUT/build.log" 2>&1 || { echo "baseline BUILD FAILED"; status=1; }
  for shape in "8 4 32" "4 16 64"; do
    set -- $shape
    "$VLA" bench attention --device cuda --T "${BWD_BASE_T:-4096}" --batch $1 --heads $2 --d-head $3 --reps "$REPS" 2>&1 |
      tee -a "$OUT/bwd-baseline.log" || status=1
  done
  cp "$OUT/recurrent_backward.new.cu" gpu/recurrent_backward.cu
done

step "compute-sanitizer memcheck + racecheck"
sanitize memcheck "[bwd]" "$OUT/bwd-memcheck.log"
sanitize racecheck "[bwd]~[bwd-full]" "$OUT/bwd-racecheck.log"
echo "bwd-check status $status"
exit $status
