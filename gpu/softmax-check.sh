#!/usr/bin/env bash
# The GPU softmax attention (gpu/softmax_attention.hpp) end to end on a CUDA machine, in one command
# (docs/gpu.md, "Softmax attention"): build (Release, sm_90) -> its kernel tests and the GPU-training
# parity tests -> compute-sanitizer memcheck and racecheck over the kernel tests -> `vla bench attention`
# (which now times the toolkit softmax too and prints the crossover) and gpu/bench_torch.py at B,H,D = 8,4,32.
# Same carried dependencies and source snapshot as gpu/device-check.sh (.device-carry/).
# usage: bash gpu/softmax-check.sh [REPS]     exit status non-zero if a build, test or sanitizer step failed
set -uo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-10}
source gpu/device-env.sh
device_build test_gpu vla
grep -A3 "softmax_rows" "$OUT/build.log" | grep -E "registers|spill" | head -6

T="$BUILD/bin/test_gpu"
step "softmax attention tests"
"$T" "[softmax-attention]" -s 2>&1 > "$OUT/softmax-tests.log"; rc=$?
grep -E "rel err" "$OUT/softmax-tests.log" | sed 's/^ *//' | head -20
tail -2 "$OUT/softmax-tests.log"; [ $rc -ne 0 ] && { status=1; grep -B3 -A12 FAILED "$OUT/softmax-tests.log" | head -60; }
step "GPU training parity (softmax joins vla, linear, deltanet)"
"$T" "[gpu-train]" 2>&1 | tail -1
"$T" "GPU batch gradient equals the CPU model's (loss and every parameter gradient)" -s 2>&1 > "$OUT/grad.log"; rc=$?
grep -E "rel err|worst" "$OUT/grad.log" | sed 's/^ *//' | head -20; tail -1 "$OUT/grad.log"
[ $rc -ne 0 ] && { status=1; grep -B3 -A12 FAILED "$OUT/grad.log" | head -60; }
"$T" "GPU training follows the CPU loss curve for the same seed" 2>&1 > "$OUT/curve.log"; rc=$?
grep -E "step-1" -A1 "$OUT/curve.log" | sed 's/^ *//' | head -12; tail -1 "$OUT/curve.log"
[ $rc -ne 0 ] && { status=1; grep -B3 -A12 FAILED "$OUT/curve.log" | head -60; }

step "compute-sanitizer memcheck + racecheck (softmax attention tests)"
for tool in memcheck racecheck; do sanitize $tool "[softmax-attention]" "$OUT/sanitizer-$tool.log"; done

step "benchmark"
bench_attention 8 4 32 1024,4096,16384,65536 "$REPS" "$OUT/bench-8-4-32.csv" torch
step "vla train --device cuda step time, softmax (default model, MQAR n = 8 and 24, batch 64)"
for n in 8 24; do
  "$BUILD/bin/vla" train --device cuda --task mqar --pairs $n --mixer softmax --steps 100 --batch 64 --eval-batches 1 --seed 0 --out "$OUT/run_$n" 2>/dev/null | sed "s/^/n=$n softmax: /" || status=1
  rm -rf "$OUT/run_$n"
done
echo "softmax-check status $status"
exit $status
