#!/usr/bin/env bash
# Whether training many runs' sequences per launch would raise a sweep's rate, in one command on a CUDA
# machine: R concurrent VLA runs (MQAR, fused pair) of batch b, for (R, b) from 16 x 64 (a study sweep) to
# 1 x 1024 and 4 x 1024; time per 1024 sequences trained, from the difference of the walls of runs of S1 and
# S2 steps (set-up and the final evaluation cancel): (w2 - w1) / (R (S2 - S1) b / 1024). One run at batch
# 1024 has its host work (launches, syncs, the batch) between its GPU steps; two or more such runs overlap
# one's host work with another's kernels, so R x 1024 against 16 x 64 says what the batch-64 kernels cost
# against batch-1024 ones. A throughput probe only: batch size changes what a run learns.
# usage: [PROBE_S1=150] [PROBE_S2=450] [PAIRS="8 32"] bash gpu/dev/batch-probe.sh     logs in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
source gpu/device-env.sh
device_build vla
S1=${PROBE_S1:-150}; S2=${PROBE_S2:-450}
wall() {  # wall N R b STEPS: seconds for R concurrent runs of STEPS steps at batch b, MQAR n = N
  rm -rf /tmp/probe
  local t0=$(date +%s.%N)
  "$BUILD/bin/vla" train --device cuda --task mqar --pairs "$1" --steps "$4" --batch "$3" --eval-batches 1 \
    --checkpoint-every 100000 --seeds "$(seq -s, 0 $(($2 - 1)))" --mixers vla --recurrent-form fused --out /tmp/probe > /dev/null 2>&1 ||
    { echo "train failed: n = $1, $2 x $3, $4 steps" >&2; return 1; }
  python3 -c "print($(date +%s.%N) - $t0)"
}
for n in ${PAIRS:-8 32}; do
  for rb in "16 64" "32 64" "8 128" "4 256" "2 512" "1 1024" "2 1024" "4 1024"; do
    set -- $rb
    w1=$(wall "$n" "$1" "$2" "$S1") && w2=$(wall "$n" "$1" "$2" "$S2") || { status=1; continue; }
    python3 -c "d = $w2 - $w1; print(f'n = $n: {$1:2d} runs x batch {$2:4d}: walls {$w1:6.2f} / {$w2:6.2f} s at $S1 / $S2 steps, per 1024 sequences {1e3 * d / ($1 * ($S2 - $S1) * $2 / 1024):6.2f} ms')"
  done
done > >(tee "$OUT/batch-probe.log")
step "done (status $status)"
exit $status
