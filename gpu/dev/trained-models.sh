#!/usr/bin/env bash
# Trains the VLA models whose heads docs/chunkwise-vla.md's "On a trained model's inputs" reads
# (`vla bench chunked-vla --checkpoint`), concurrently on one GPU, and brings back their folders
# (checkpoint.bin, summary.json, log.csv) as $OUT/trained-models.tgz, in parts of 9 MB when larger (the
# device tool's limit per file; `cat trained-models.tgz.part-* | tar -xz` puts them together):
#   mqar-n8:      MQAR n = 8 (T = 25), lr 1e-3, 10000 steps, seeds 0 and 1 (the recipe study's cell where
#                 every VLA seed leaves the plateau);
#   mqar-n8-t256: MQAR n = 8 with 231 filler tokens (--seq-len 256), lr 1e-3, 10000 steps, seed 0;
#   mqar-n32:     MQAR n = 32 (T = 97), lr 1e-3, 10000 steps, seed 0 (a run that stays on the plateau).
# The default model (d_model 128, 4 heads of 32, 2 blocks), batch 64, Algorithm 1's refresh.
# A run cut by the call's time limit leaves its last checkpoint (every 500 steps); running the script again
# on the same machine resumes it (`vla train --resume`).
# Uses the carried Debian packages and source snapshot of gpu/device-env.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
source gpu/device-env.sh
device_build vla
V="$BUILD/bin/vla"
W=/tmp/trained-models
mkdir -p $W
run() {  # run NAME OPTIONS...
  local name=$1; shift
  if [ -d "$W/$name" ]; then
    "$V" train --resume "$W/$name" > "$W/$name.log" 2>&1
  else
    "$V" train --device cuda --task mqar --mixer vla --lr 1e-3 --steps 10000 --batch 64 --eval-every 1000 \
      --checkpoint-every 500 --out "$W/$name" "$@" > "$W/$name.log" 2>&1
  fi
  echo "$name: rc $?; $(tail -1 "$W/$name.log")"
}
step "training (concurrently)"
run mqar-n8 --pairs 8 --seeds 0,1 &
run mqar-n8-t256 --pairs 8 --seq-len 256 --seed 0 &
run mqar-n32 --pairs 32 --seed 0 &
wait
step "done"
tar -czf "$OUT/trained-models.tgz" -C $W . || status=1
if [ "$(stat -c %s "$OUT/trained-models.tgz")" -gt 15000000 ]; then
  split -b 9M "$OUT/trained-models.tgz" "$OUT/trained-models.tgz.part-" && rm "$OUT/trained-models.tgz"
fi
ls -la "$OUT"
exit $status
