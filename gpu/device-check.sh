#!/usr/bin/env bash
# The GPU path end to end on a CUDA machine, in one command (see docs/gpu.md):
#   configure + build (Release, sm_90) -> GPU tests (forward and backward) -> compute-sanitizer memcheck
#   and racecheck over them
#   -> `vla bench attention` and gpu/bench_torch.py at the anchor shapes (B,H,D = 8,4,32 and 4,16,64).
# Logs go to $OUT (default /tmp/vla-device-out). Where the machine lacks the Debian dev packages the
# build needs, it uses .device-carry/debs/*.deb (fetched beforehand with `apt-get download`, see
# docs/gpu.md), unpacked into a private prefix, never into /.
# usage: [BENCH_REPS=n] bash gpu/device-check.sh    exit status: non-zero if a build, test or sanitizer step failed
#        BENCH_REPS: timed repetitions per bench point (default 10; 3 keeps the whole script under ~10 min)
set -uo pipefail
cd "$(dirname "$0")/.."
source gpu/device-env.sh
device_build test_gpu

step "GPU tests"
T="$BUILD/bin/test_gpu"
ctest --test-dir "$BUILD" -L gpu --output-on-failure > "$OUT/tests.log" 2>&1 || status=1
tail -3 "$OUT/tests.log"
"$T" "[gpu-reference]" >> "$OUT/tests.log" 2>&1 || { status=1; echo "reference backward vs finite differences FAILED"; }
"$T" "[gpu]" -s -r compact 2>&1 | grep -E "rel err" | sed 's/.*warning: //' > "$OUT/relerr.log"
grep -v backward "$OUT/relerr.log" | head -12
# Each backward's worst relative error per gradient over all shapes (each line's bound: T d 2^-24).
grep backward "$OUT/relerr.log" | sed "s/.*message: '//" | awk '{ k = $1 " " $3; if ($8 + 0 > m[k] + 0) { m[k] = $8; w[k] = $0 } } END { for (k in w) print w[k] }' | sort

step "compute-sanitizer memcheck + racecheck"
# racecheck instruments every shared-memory access, which makes it slow: it runs the backward on its
# small-shape case (and the launch-shape case), not on [bwd-full], and the training kernels through the
# one-batch gradient test, not through the multi-step runs of [train-curve] (the same kernels, many
# times). memcheck runs everything. (With [train-curve] included, racecheck did not finish within a
# 10-minute call on 2026-11-22.)
sanitize memcheck "[gpu]" "$OUT/sanitizer.log"
sanitize racecheck "[gpu]~[bwd-full]~[train-curve]" "$OUT/sanitizer.log"

step "benchmark"
cmake --build "$BUILD" -j "$(nproc)" --target vla >> "$OUT/build.log" 2>&1 || { echo "vla BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
for shape in "8 4 32" "4 16 64"; do
  set -- $shape
  bench_attention $1 $2 $3 1024,4096,16384,65536 "${BENCH_REPS:-10}" "$OUT/bench-$1-$2-$3.csv" torch
done
echo "device-check status $status"
exit $status
