#!/usr/bin/env bash
# GPU training end to end on a CUDA machine, in one command (docs/gpu.md, "GPU training"):
#   build (Release, sm_90) -> gradient and loss-curve parity tests ([gpu] cases of tests/gpu/test_gpu_train.cpp)
#   -> compute-sanitizer memcheck over the gradient-parity and concurrent-runs cases -> `vla train --device cuda` step times, MQAR n = 8
#   and n = 24, default model (L=2, d=128, H=4, d_h=32), batch 64, each mixer -> many runs sharing the GPU.
# Uses the same carried dependencies and source snapshot as gpu/device-check.sh (.device-carry/).
# usage: bash gpu/train-check.sh        exit status non-zero if a build, test or sanitizer step failed
set -uo pipefail
cd "$(dirname "$0")/.."
source gpu/device-env.sh
device_build test_gpu vla

T="$BUILD/bin/test_gpu"
step "parity tests"
"$T" "[gpu-train]" 2>&1 | tail -2
"$T" "GPU batch gradient equals the CPU model's (loss and every parameter gradient)" -s 2>&1 > "$OUT/grad.log"; rc=$?
grep -E "rel err|worst|passed|failed" "$OUT/grad.log" | sed 's/^ *//' | head -20; [ $rc -ne 0 ] && { status=1; grep -B3 -A12 FAILED "$OUT/grad.log" | head -80; }
"$T" "GPU training follows the CPU loss curve for the same seed" 2>&1 | tee "$OUT/curve.log" | grep -E "step-1|passed|failed|FAILED|with expansion" -A1 | head -30
[ "${PIPESTATUS[0]}" -ne 0 ] && status=1
step "compute-sanitizer memcheck (gradient parity, concurrent runs)"
sanitize memcheck "GPU batch gradient equals the CPU model's (loss and every parameter gradient),concurrent GPU runs equal the same runs alone bit for bit" "$OUT/sanitizer.log"
step "vla train --device cuda step times (default model, batch 64)"
for n in 8 24; do for mixer in vla linear deltanet; do
  "$BUILD/bin/vla" train --device cuda --task mqar --pairs $n --mixer $mixer --steps 100 --batch 64 --eval-batches 1 --seed 0 --out "$OUT/run_${mixer}_$n" 2>/dev/null | sed "s/^/n=$n $mixer: /" || status=1
done; done
step "many runs sharing the GPU: 8 seeds x vla, MQAR n = 8, default model, batch 64, 300 steps (vs one run alone)"
"$T" "concurrent GPU runs equal the same runs alone bit for bit" 2>&1 | tail -2; [ "${PIPESTATUS[0]}" -ne 0 ] && status=1
"$BUILD/bin/vla" train --device cuda --task mqar --pairs 8 --mixer vla --steps 300 --batch 64 --eval-batches 1 --seed 0 --out "$OUT/run_alone" 2>/dev/null || status=1
"$BUILD/bin/vla" train --device cuda --task mqar --pairs 8 --mixer vla --steps 300 --batch 64 --eval-batches 1 --seeds 0,1,2,3,4,5,6,7 --out "$OUT/run_many" 2>/dev/null | tail -2 || status=1
"$BUILD/bin/vla" train --device cuda --task mqar --pairs 8 --mixers vla,linear,deltanet --steps 300 --batch 64 --eval-batches 1 --seeds 0,1,2,3,4,5 --out "$OUT/run_many18" 2>/dev/null | tail -1 || status=1
step "vla train --device cuda MQAR n = 8, vla, 2000 steps (the paper's run length)"
"$BUILD/bin/vla" train --device cuda --task mqar --pairs 8 --mixer vla --steps 2000 --batch 64 --seed 0 --eval-every 500 --out "$OUT/mqar8_vla" 2>&1 | tail -6 || status=1
cp "$OUT/mqar8_vla/log.csv" "$OUT/mqar8_vla_log.csv" 2>/dev/null
for d in "$OUT"/run_* "$OUT"/mqar8_vla; do rm -rf "$d"; done  # keep $OUT within the 8 files that come back
echo "train-check status $status"
exit $status
