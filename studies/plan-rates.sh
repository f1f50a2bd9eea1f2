#!/usr/bin/env bash
# The rate `vla study plan` assumes for a CUDA sweep (studies/sweep.cpp, estimated_seconds), measured on this
# machine in one call: sweeps of 16 concurrent runs of the default model at batch 64 mixing the four mixers
# as the recipe studies do (--mixers vla,deltanet,linear,softmax x 4 seeds), at MQAR n = 8, 16, 24, 32
# (T = 25 .. 97) and at n = 8 with --seq-len 256 (the long-context study's longest), each at two step counts;
# prints the wall of each sweep, its ms per run-step, and the marginal ms per run-step between the two
# step counts (the set-up differenced out). The plan's line is fitted to these (docs/studies.md).
# Uses the carried Debian packages and source snapshot of gpu/device-env.sh.
# usage: [PAIRS="8 16 24 32"] [STEPS="1000 2000"] [LONG_STEPS="300 600"] bash studies/plan-rates.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PAIRS=${PAIRS:-"8 16 24 32"}
STEPS=${STEPS:-"1000 2000"}
LONG_STEPS=${LONG_STEPS:-"300 600"}
source gpu/device-env.sh
device_build vla
V="$BUILD/bin/vla"
sweep() {  # sweep STEPS OPTIONS...: prints "wall_s"
  local s=$1; shift
  rm -rf /tmp/plan_rates
  local t0=$(date +%s.%N)
  "$V" train --device cuda --task mqar --steps "$s" --batch 64 --eval-batches 1 --checkpoint-every 100000 \
    --mixers vla,deltanet,linear,softmax --seeds 0,1,2,3 --out /tmp/plan_rates "$@" > /tmp/plan_rates.log 2>&1 ||
    { status=1; echo "sweep failed: $*" >&2; tail -5 /tmp/plan_rates.log >&2; }
  python3 -c "print($(date +%s.%N) - $t0)"
}
measure() {  # measure T STEP_COUNTS OPTIONS...
  local T=$1 counts=$2; shift 2
  local walls=() s
  for s in $counts; do walls+=("$(sweep "$s" "$@")"); done
  python3 - "$T" "$counts" "${walls[@]}" <<'PY'
import sys
T = int(sys.argv[1]); counts = [int(c) for c in sys.argv[2].split()]; walls = [float(w) for w in sys.argv[3:]]
rates = "  ".join(f"{c} steps: wall {w:6.2f} s, {1e3 * w / (16 * c):.3f} ms/run-step" for c, w in zip(counts, walls))
marg = 1e3 * (walls[-1] - walls[0]) / (16 * (counts[-1] - counts[0]))
print(f"T = {T:3d}: {rates}  marginal {marg:.3f} ms/run-step")
PY
}
step "16 concurrent runs (vla, deltanet, linear, softmax x seeds 0-3), batch 64, default model"
for n in $PAIRS; do measure $((3 * n + 1)) "$STEPS" --pairs "$n"; done | tee "$OUT/plan-rates.log"
measure 256 "$LONG_STEPS" --pairs 8 --seq-len 256 | tee -a "$OUT/plan-rates.log"
exit $status
