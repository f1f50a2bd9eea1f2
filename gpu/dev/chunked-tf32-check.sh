#!/usr/bin/env bash
# The chunked VLA forward's one-pass TF32 products (gpu/chunked_vla_forward.cu, core/product_operands.hpp)
# on a CUDA machine, in one command:
#   build -> the [chunked] GPU tests (the one-pass kernel against the CPU emulation of that pass, its errors
#   printed beside the emulation's; the fused and chunk-form backwards' cases too) -> compute-sanitizer
#   memcheck over the one-pass case -> the development driver's `tf32` mode (its error against the driver's own Algorithm 1 in double
#   at the check shapes; full and tf32 forward times alternated in one run, (8, 4, T, 32), T = 4K, 16K, 64K)
#   -> `vla bench attention` at B, H, d = 8, 4, 32 (its vla_chunked_tf32_ms column; CT_REPS timed runs).
# usage: bash gpu/dev/chunked-tf32-check.sh     logs in $OUT; exit status non-zero if a build, test or sanitizer failed
set -uo pipefail
cd "$(dirname "$0")/../.."
source gpu/device-env.sh
device_build test_gpu vla
TG="$BUILD/bin/test_gpu"
# The driver builds while the tests run.
nvcc -std=c++17 -O3 -arch=sm_90 -I. gpu/dev/chunked_vla_forward_check.cu gpu/chunked_vla_forward.cu gpu/recurrent_forward.cu \
  -o /tmp/cvla_check > "$OUT/driver-build.log" 2>&1 &
driver=$!

step "chunked tests"
"$TG" "[chunked]" -s -r compact > "$OUT/chunked-tests.log" 2>&1 || { status=1; echo "chunked tests FAILED"; grep -B3 -A14 FAILED "$OUT/chunked-tests.log" | head -80; }
grep -E "passed|failed" "$OUT/chunked-tests.log" | tail -1
grep -ho "tf32 products C=.*CPU emulation [0-9.e+-]*" "$OUT/chunked-tests.log" | sort -u | tee "$OUT/tf32-relerr.log"

step "memcheck"
sanitize memcheck "chunked VLA forward with one-pass TF32*" "$OUT/memcheck.log"

step "driver: tf32 errors and times"
wait $driver || { status=1; echo "driver build FAILED"; tail -20 "$OUT/driver-build.log"; }
[ -x /tmp/cvla_check ] && { /tmp/cvla_check "${CT_REPS:-20}" tf32 2>&1 | tee "$OUT/driver-tf32.log" || status=1; }

step "benchmark"
bench_attention 8 4 32 "4096,16384,65536" "${CT_REPS:-10}" "$OUT/chunked-tf32-bench-8-4-32.csv"
step "done (status $status)"
exit $status
