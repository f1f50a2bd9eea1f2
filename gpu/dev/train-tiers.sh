#!/usr/bin/env bash
# The measurement behind gpu/train/model.hpp's kChunkedTrainTiers, on a CUDA machine in one command: build
# `vla`, then `vla bench attention` at the sequence counts (B H, H = 4, d = 32) and lengths a training run
# has (MQAR n = 8 .. 63: T = 3 n + 1; the copy task; longer), and a table of the fused pair's fwd+bwd against
# the chunk form's (chunked forward + chunk-form backward), ms, with the faster marked. TT_TRAIN="B:n ..." then
# trains VLA on MQAR n at batch B (B H = 4 B sequences of 3 n + 1 tokens) for TT_STEPS steps (default 300) with
# --recurrent-form fused and chunked, two rounds alternating, and prints each run's ms per training step: the
# whole step (projections, GEMMs, AdamW) around the pair the tiers choose.
# usage: [TT_REPS=5] [TT_TRAIN="8:16 48:32"] [TT_STEPS=300] bash gpu/dev/train-tiers.sh
#        CSVs and bench.log in $OUT; exit status non-zero if the build, a bench or a training run failed
set -uo pipefail
cd "$(dirname "$0")/../.."
source gpu/device-env.sh
device_build vla
step "benchmark"
for shape in "8 25,32,49,64,97,128,256" "16 25,49,97,190,256" "32 25,49,97,130,190,256" "48 25,49,97,190,256" "64 25,49,73,97,145,190,256"; do
  set -- $shape
  bench_attention "$1" 4 32 "$2" "${TT_REPS:-5}" "$OUT/tiers-$1-4-32.csv" > /dev/null
done
step "fused pair / chunk form, fwd+bwd ms"
python3 - "$OUT" <<'PY'
import csv, glob, sys
rows = []
for f in glob.glob(sys.argv[1] + "/tiers-*-4-32.csv"):
    for r in csv.DictReader(open(f)):
        rows.append((int(r["B"]) * int(r["H"]), int(r["T"]), float(r["vla_fwdbwd_ms"]), float(r["vla_chunkform_fwdbwd_ms"])))
for seqs, T, fused, chunk in sorted(rows):
    print(f"B H = {seqs:4d}  T = {T:4d}  fused {fused:7.3f}  chunk form {chunk:7.3f}  {'chunk form' if chunk < fused else 'fused'} faster ({max(fused, chunk) / min(fused, chunk):.2f}x)")
PY
if [ -n "${TT_TRAIN:-}" ]; then
  step "training steps, ms per step (vla train, MQAR, ${TT_STEPS:-300} steps)"
  for bn in $TT_TRAIN; do
    for form in fused chunked fused chunked; do
      line=$("$BUILD/bin/vla" train --device cuda --task mqar --mixer vla --pairs "${bn#*:}" --batch "${bn%:*}" \
        --steps "${TT_STEPS:-300}" --eval-batches 1 --checkpoint-every 100000 --recurrent-form "$form" --out "/tmp/tt-train-$form" 2>/dev/null) || status=1
      echo "batch ${bn%:*} n ${bn#*:} ($(( 4 * ${bn%:*} )) sequences of $(( 3 * ${bn#*:} + 1 )) tokens) $form: $(grep -o '[0-9.]* ms/step' <<< "$line")"
    done
  done
fi
step "done (status $status)"
exit $status
