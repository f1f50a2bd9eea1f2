#!/usr/bin/env bash
# Training through the chunked VLA pair (chunked_vla_forward + chunked_vla_backward, gpu/train/model.cpp) on a
# CUDA machine, in one command:
#   build -> the chunk-form backward's tests and the GPU training gradient tests (the chunked pair against the
#   CPU model in double) -> compute-sanitizer memcheck over the chunked pair's gradient test -> `vla bench
#   attention` at the training shapes (d = 32, H = 4; batch 64 and 1024 at T = 25, 97, 256, batch 8 at 32 .. 128: MQAR n = 8, 32
#   and longer): fused pair against chunked fwd + chunk form -> the training rates of gpu/train-throughput.sh
#   with --recurrent-form fused and chunked (CT_RUNS concurrent runs, default "1 16"; CT_NCU=1 adds its
#   per-step kernel breakdown).
# usage: bash gpu/dev/chunk-train-check.sh     logs in $OUT; exit status non-zero if a build, test or sanitizer failed
set -uo pipefail
cd "$(dirname "$0")/../.."
source gpu/device-env.sh
device_build test_gpu vla
TG="$BUILD/bin/test_gpu"

step "tests"
"$TG" "[chunk-bwd]" -r compact > "$OUT/chunk-bwd-tests.log" 2>&1 || { status=1; echo "chunk-bwd tests FAILED"; grep -B3 -A14 FAILED "$OUT/chunk-bwd-tests.log" | head -60; }
tail -1 "$OUT/chunk-bwd-tests.log"
"$TG" "GPU batch gradient*" -s -r compact > "$OUT/train-grad-tests.log" 2>&1 || { status=1; echo "training gradient tests FAILED"; grep -B3 -A14 FAILED "$OUT/train-grad-tests.log" | head -60; }
grep -E "chunked pair.*loss rel err|worst gradient" "$OUT/train-grad-tests.log" | sed "s/^.*warning: '//; s/'$//"
tail -1 "$OUT/train-grad-tests.log"

step "sanitizer"
sanitize memcheck "GPU batch gradient through the chunked VLA pair*" "$OUT/memcheck.log"

step "benchmark at training shapes"
bench_attention 64 4 32 25,97,256 5 "$OUT/train-shapes-64-4-32.csv"
bench_attention 1024 4 32 25,97 5 "$OUT/train-shapes-1024-4-32.csv"
bench_attention 8 4 32 32,64,128 5 "$OUT/train-shapes-8-4-32.csv"

step "training rates"
NCU=${CT_NCU:-0} FORMS="fused chunked" RUNS="${CT_RUNS:-1 16}" STEPS=${CT_STEPS:-300} bash gpu/train-throughput.sh || status=1
step "done (status $status)"
exit $status
