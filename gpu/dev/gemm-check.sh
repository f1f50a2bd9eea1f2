#!/usr/bin/env bash
# One device call for the fused 3xTF32 GEMM (gpu/gemm_3xtf32.{hpp,cuh,cu}) and the training step that uses
# it: the build of the carried snapshot (gpu/device-env.sh), the whole GPU suite (ctest -L gpu), memcheck over
# the GEMM's tests and the training gradient test, racecheck over the GEMM's tests; then, when
# .device-carry/gemm/gemm_probe.xz is carried, gpu/dev/gemm-probe.sh (timings against cuBLAS SGEMM).
# usage: bash gpu/dev/gemm-check.sh   (carry .device-carry/debs, .device-carry/src.tar [, .device-carry/gemm])
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
source gpu/device-env.sh
device_build test_gpu vla
step "ctest -L gpu"
ctest --test-dir "$BUILD" -L gpu --output-on-failure > "$OUT/tests.log" 2>&1 || { status=1; echo "GPU tests FAILED"; }
grep -E "tests passed|FAILED|Failed" "$OUT/tests.log" | tail -5
step "memcheck"
sanitize memcheck "3xTF32 GEMM*" "$OUT/memcheck.log"
sanitize memcheck "GPU batch gradient equals*" "$OUT/memcheck.log"
step "racecheck"
sanitize racecheck "3xTF32 GEMM*" "$OUT/racecheck.log"
if [ -f "$REPO/.device-carry/gemm/gemm_probe.xz" ]; then
  step "probe"
  (cd "$REPO" && OUT=$OUT STREAMS="${STREAMS:-16}" bash gpu/dev/gemm-probe.sh) || status=1
fi
step "done, status $status"
exit $status
