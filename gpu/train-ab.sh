#!/usr/bin/env bash
# A/B of GPU training step time on one machine in one call: `vla train --device cuda` built from the snapshot (B) and
# with the AB_FILE files swapped for their baselines in .device-carry/ab/ (A: device-env.sh's build_ab), run
# alternately, so that the comparison is not drowned by the 10-20% spread between runs and machines (docs/gpu.md,
# GPU training).
# usage: AB_FILE="gpu/train/model.cpp ..." [AB_REPS=5] [AB_STEPS=200] bash gpu/train-ab.sh
#   Each rep runs MQAR n = 8 and 24, vla and deltanet, default model, batch 64, once per binary; prints
#   every run's ms/step, then per case the medians and B/A. Uses .device-carry as gpu/device-check.sh does.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
: "${AB_FILE:?AB_FILE: the repository paths of the files to swap, e.g. gpu/train/model.cpp}"
REPS=${AB_REPS:-5}
STEPS=${AB_STEPS:-200}
source gpu/device-env.sh
build_ab "$REPO" $AB_FILE
step "A/B step times, $REPS reps of $STEPS steps"
for rep in $(seq "$REPS"); do for n in 8 24; do for mixer in vla deltanet; do for v in A B; do
  ms=$(/tmp/vla-$v train --device cuda --task mqar --pairs $n --mixer $mixer --steps "$STEPS" --batch 64 --eval-batches 1 \
         --seed 0 --out /tmp/ab_run 2>/dev/null | grep -o "[0-9.]* ms/step" | cut -d' ' -f1)
  echo "rep=$rep n=$n $mixer $v: ${ms:-FAILED} ms/step"
done; done; done; done | tee "$OUT/ab.log"
python3 - "$OUT/ab.log" <<'PY'
import collections, re, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r'rep=\d+ (n=\d+) (\w+) ([AB]): ([\d.]+)', line)
    if m: v[m[1], m[2], m[3]].append(float(m[4]))
for (n, mixer) in sorted({k[:2] for k in v}):
    a, b = statistics.median(v[n, mixer, 'A']), statistics.median(v[n, mixer, 'B'])
    print(f"median of {len(v[n, mixer, 'A'])}, {n} {mixer}: A {a:.3f}, B {b:.3f} ms/step, B/A {b / a:.3f}")
PY
