#!/usr/bin/env bash
# The GPU path end to end on a CUDA machine, in one command (see docs/gpu.md):
#   configure + build (Release, sm_90) -> GPU tests (forward, backward, layer forward, softmax, training)
#   -> compute-sanitizer memcheck and racecheck over them
#   -> `vla bench attention` and gpu/bench_torch.py at the anchor shapes (B,H,D = 8,4,32 and 4,16,64).
# Logs go to $OUT (default /tmp/vla-device-out). Where the machine lacks the Debian dev packages the
# build needs, it uses .device-carry/debs/*.deb (fetched beforehand with `apt-get download`, see
# docs/gpu.md), unpacked into a private prefix, never into /.
# usage: [BENCH_REPS=n] [STEPS=test,memcheck,racecheck,racecheck-bwd,bench] bash gpu/device-check.sh
#        exit status: non-zero if a build, test or sanitizer step failed
#   BENCH_REPS: timed repetitions per bench point (default 10).
#   STEPS: the parts to run (default all five; the build always). The whole script takes longer than
#   one 10-minute device call (docs/gpu.md, "Running it"): there, split it over calls, e.g.
#   STEPS=test,memcheck then STEPS=racecheck then STEPS=racecheck-bwd then STEPS=bench (a still-warm
#   machine rebuilds nothing).
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-test,memcheck,racecheck,racecheck-bwd,bench}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
source gpu/device-env.sh
targets=""; { has test || has memcheck || has racecheck || has racecheck-bwd; } && targets="test_gpu test_cli vla"; has bench && targets="$targets vla"
device_build $targets
T="$BUILD/bin/test_gpu"

if has test; then
  step "GPU tests"
  ctest --test-dir "$BUILD" -L gpu --output-on-failure > "$OUT/tests.log" 2>&1 || status=1
  tail -3 "$OUT/tests.log"
  "$T" "[gpu]" -s -r compact 2>&1 | grep -E "rel err" | sed 's/.*warning: //' > "$OUT/relerr.log"
  grep -v backward "$OUT/relerr.log" | head -12
  # Each backward's worst relative error per gradient over all shapes (each line's bound: T d 2^-24).
  grep backward "$OUT/relerr.log" | sed "s/.*message: '//" |
    awk '{ k = $1 " " $3; if ($8 + 0 > m[k] + 0) { m[k] = $8; w[k] = $0 } } END { for (k in w) print w[k] }' | sort
fi

# racecheck instruments every shared-memory access, which makes it slow, so it runs in two parts of a
# call each: `racecheck` the forward kernels, softmax attention and the training kernels through the
# one-batch gradient test (not the multi-step runs tagged [train-curve]: loss curves, concurrent runs,
# resume, the same kernels many times), and `racecheck-bwd` the backward on its small-shape cases (not
# [bwd-full]). The chunked VLA forward's cases ([chunked]) are left to its development driver
# (gpu/dev/chunked-vla-check.sh racechecks the same kernels at shapes it can finish). memcheck runs everything.
if has memcheck; then
  step "compute-sanitizer memcheck"
  sanitize memcheck "[gpu]" "$OUT/memcheck.log"
fi
if has racecheck; then
  step "compute-sanitizer racecheck"
  sanitize racecheck "[gpu]~[bwd]~[train-curve]~[chunked]" "$OUT/racecheck.log"
fi
if has racecheck-bwd; then
  step "compute-sanitizer racecheck, backward"
  sanitize racecheck "[gpu][bwd]~[bwd-full]" "$OUT/racecheck-bwd.log"
fi

if has bench; then
  step "benchmark"
  for shape in "8 4 32" "4 16 64"; do
    set -- $shape
    bench_attention $1 $2 $3 1024,4096,16384,65536 "${BENCH_REPS:-10}" "$OUT/bench-$1-$2-$3.csv" torch
  done
fi
step "device-check status $status"
exit $status
