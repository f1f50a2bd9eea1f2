#!/usr/bin/env bash
# Whether training many runs' sequences per launch would raise a sweep's rate, in one command on a CUDA
# machine: R concurrent VLA runs (MQAR, fused pair) of batch b, for (R, b) from 16 x 64 (a study sweep) to
# 1 x 1024 and 2 x 1024; wall time per 1024 sequences trained (wall / (R steps b / 1024)). One run at batch
# 1024 has its host work (launches, syncs, the batch) between its GPU steps; two such runs overlap one's
# host work with the other's kernels, so 2 x 1024 against 16 x 64 says what the batch-64 kernels cost
# against batch-1024 ones. A throughput probe only: batch size changes what a run learns.
# usage: [PROBE_STEPS=200] [PAIRS="8 32"] bash gpu/dev/batch-probe.sh     logs in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
source gpu/device-env.sh
device_build vla
STEPS=${PROBE_STEPS:-200}
for n in ${PAIRS:-8 32}; do
  for rb in "16 64" "32 64" "8 128" "4 256" "2 512" "1 1024" "2 1024" "4 1024"; do
    set -- $rb
    R=$1; b=$2
    rm -rf /tmp/probe
    t0=$(date +%s.%N)
    "$BUILD/bin/vla" train --device cuda --task mqar --pairs "$n" --steps "$STEPS" --batch "$b" --eval-batches 1 \
      --checkpoint-every 100000 --seeds "$(seq -s, 0 $((R - 1)))" --mixers vla --recurrent-form fused --out /tmp/probe > /dev/null 2>&1 ||
      { status=1; echo "train failed: n = $n, $R x $b"; }
    t1=$(date +%s.%N)
    python3 -c "w = $t1 - $t0; print(f'n = $n: {$R:2d} runs x batch {$b:4d}: wall {w:6.2f} s, per 1024 sequences {1e3 * w / ($R * $STEPS * $b / 1024):6.2f} ms')"
  done
done | tee "$OUT/batch-probe.log"
step "done (status $status)"
exit $status
