#!/usr/bin/env bash
# The group-parallel VLA backward (vla_group_backward, gpu/recurrent_backward.cu) on a CUDA machine:
#   test:     every GPU test (the group backward's, and the sequential backward and forwards it shares code with)
#   sanitize: memcheck over the group backward's tests, racecheck over its small ones ([group-bwd]~[bwd-full])
#   bench:    `vla bench attention` at (B, H, d) = (8, 4, 32): fused and chunked fwd+bwd side by side
# usage: [STEPS=test,sanitize,bench] [BENCH_T=4096,16384,65536] [BENCH_REPS=5] bash gpu/dev/group-bwd-check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-test,sanitize,bench}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
source gpu/device-env.sh
device_build test_gpu vla
grep -A2 "vla_backward_kernel\|vla_group_chain" "$OUT/build.log" | grep -E "registers|spill" | sort | uniq -c | head -12
if has test; then
  step "GPU tests"
  ctest --test-dir "$BUILD" -L gpu --output-on-failure > "$OUT/tests.log" 2>&1 || status=1
  tail -3 "$OUT/tests.log"
  "$BUILD/bin/test_gpu" "[group-bwd]" -s -r compact 2>&1 | grep -E "rel err" | sed "s/.*message: '//" > "$OUT/group-relerr.log"
  cat "$OUT/group-relerr.log" | head -80
fi
if has sanitize; then
  step "memcheck [group-bwd]"
  sanitize memcheck "[group-bwd]" "$OUT/memcheck.log"
  step "racecheck [group-bwd]~[bwd-full]"
  sanitize racecheck "[group-bwd]~[bwd-full]" "$OUT/racecheck.log"
fi
if has bench; then
  step "benchmark"
  bench_attention 8 4 32 "${BENCH_T:-4096,16384,65536}" "${BENCH_REPS:-5}" "$OUT/bench-8-4-32.csv"
fi
step "group-bwd-check status $status"
exit $status
