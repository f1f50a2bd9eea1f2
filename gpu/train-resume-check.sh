#!/usr/bin/env bash
# GPU checkpoint/resume, SIGINT and the S/A norms of the one training loop (docs/gpu.md, "GPU training"),
# on a CUDA machine in one command:
#   build (Release, sm_90) -> tests/gpu/test_gpu_train.cpp ([gpu-train], [gpu-resume], gradient parity,
#   loss curve, concurrent runs) -> compute-sanitizer memcheck over [gpu-resume] -> `vla train --device cuda`:
#   --stop-after + `--resume` (device read from the checkpoint) and a SIGINT stop + resume, each log.csv
#   compared with `cmp` against an uninterrupted run -> the CPU refusing a GPU checkpoint -> `vla train
#   --device cuda --seeds --mixers`: many runs stopped and resumed, against the same runs uninterrupted.
# Uses the carried dependencies and source snapshot of gpu/device-env.sh (.device-carry/).
# usage: bash gpu/train-resume-check.sh        exit status non-zero if a build, test, sanitizer or cmp step failed
set -uo pipefail
cd "$(dirname "$0")/.."
source gpu/device-env.sh
device_build test_gpu vla

T="$BUILD/bin/test_gpu"
V="$BUILD/bin/vla"
step "tests (test_gpu_train.cpp)"
"$T" "[gpu-train],[gpu-resume],[train-curve],GPU batch gradient equals the CPU model's (loss and every parameter gradient)" > "$OUT/tests.log" 2>&1 || status=1
grep -E "S/A norms|step-1|passed|failed|FAILED" "$OUT/tests.log" | sed 's/^ *//' | head -30
grep -q FAILED "$OUT/tests.log" && grep -B4 -A14 FAILED "$OUT/tests.log" | head -80
step "compute-sanitizer memcheck ([gpu-resume])"
sanitize memcheck "[gpu-resume]" "$OUT/sanitizer.log"

R="$OUT/runs"; mkdir -p "$R"
args="--task mqar --pairs 8 --mixer vla --steps 400 --batch 64 --eval-every 100 --eval-batches 2 --seed 0 --checkpoint-every 50"
same() { if cmp "$1" "$2"; then echo "cmp: $1 == $2"; else echo "cmp: DIFFERENT $1 $2"; status=1; fi; }
step "vla train --device cuda: uninterrupted, --stop-after 130 + --resume (device from the checkpoint), SIGINT + --resume"
"$V" train --device cuda $args --out "$R/full" 2>/dev/null || status=1
"$V" train --device cuda $args --stop-after 130 --out "$R/part" 2>/dev/null || status=1
"$V" train --resume "$R/part" 2>/dev/null || status=1
same "$R/full/log.csv" "$R/part/log.csv"
"$V" train --device cuda $args --out "$R/sig" 2>/dev/null & pid=$!
while [ ! -f "$R/sig/checkpoint.bin" ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done
sleep 0.3; kill -INT $pid; wait $pid || status=1
grep -o '"steps_done": [0-9]*' "$R/sig/summary.json"
"$V" train --resume "$R/sig" --device cuda 2>/dev/null || status=1
same "$R/full/log.csv" "$R/sig/log.csv"
head -c 300 "$R/full/log.csv"; echo; tail -1 "$R/full/log.csv"
step "the CPU refuses the GPU checkpoint (must fail naming --device)"
if "$V" train --resume "$R/part" --device cpu > "$OUT/refuse.log" 2>&1; then echo "NOT REFUSED"; status=1; fi
grep -- "--device" "$OUT/refuse.log" | head -2
step "vla train --device cuda: 2 seeds x 2 mixers, --stop-after 80 + --resume vs uninterrupted"
many="--task mqar --pairs 8 --steps 200 --batch 64 --eval-batches 1 --seeds 0,1 --mixers vla,deltanet"
"$V" train --device cuda $many --out "$R/many_full" 2>/dev/null | tail -1 || status=1
"$V" train --device cuda $many --stop-after 80 --out "$R/many_part" 2>/dev/null | tail -1 || status=1
"$V" train --resume "$R/many_part" 2>/dev/null | tail -1 || status=1
for d in "$R"/many_full/*; do same "$d/log.csv" "$R/many_part/$(basename "$d")/log.csv"; done
rm -rf "$R"  # keep $OUT within the files that come back
echo "train-resume-check status $status"
exit $status
