#!/usr/bin/env bash
# What bounds GPU training throughput, in one call (docs/gpu.md, "Training throughput"):
#   1. the kernels of one training step: ncu's GPU time of every kernel of a run of S1 and of S2 steps
#      (MQAR n = 8 and 32, VLA, default model, batch 64); their difference over S2 - S1 is one step's
#      kernels (launch count, GPU time by kernel name), without the set-up and the evaluation;
#   2. the rate: wall time of R concurrent runs of STEPS steps (R = 1, 4, 16, and 32 where the host has
#      the cores), per run-step, at n = 8 and 32; the walls include each run's set-up (~1-1.5 s on an H100),
#      which gpu/dev/batch-probe.sh's rates (two step counts, differenced) leave out.
# One step's GPU time against the per-run-step rate of many runs says how far the runs overlap on the GPU;
# the rates alone decide whether a change helps a sweep (docs/gpu.md: fewer launches did not). With AB_FILE="F ...", both for the snapshot (B) and for it with those files
# swapped for their baselines in .device-carry/ab/ (A: device-env.sh's build_ab), the rates alternating A, B.
# CONNECTIONS=K adds the snapshot's rates with CUDA_DEVICE_MAX_CONNECTIONS=K (the hardware queues the
# streams of concurrent runs share; the driver's default is 8). FORMS="fused chunked" runs both parts once
# per `--recurrent-form` instead of once with the default (auto); RUNS picks the concurrent run counts;
# NCU=0 skips part 1. SEQ_LEN=T trains MQAR at T tokens (the long-context layout, --seq-len; the positional
# table at least T rows) instead of 3n + 1.
# Uses .device-carry as gpu/device-check.sh does.
# usage: [AB_FILE="gpu/train/kernels.cu ..."] [CONNECTIONS=32] [STEPS=300] [PAIRS="8 32"] [FORMS="fused chunked"]
#        [RUNS="1 4 16 32"] [NCU=0] [SEQ_LEN=512] bash gpu/train-throughput.sh
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
STEPS=${STEPS:-300}
PAIRS=${PAIRS:-"8 32"}
FORMS=${FORMS:-auto}
RUNS=${RUNS:-"1 4 16 32"}
source gpu/device-env.sh
if [ -n "${AB_FILE:-}" ]; then
  build_ab "$REPO" $AB_FILE; BINS="A B"
else
  device_build vla && cp "$BUILD/bin/vla" /tmp/vla-B; BINS="B"
fi
LONG=()
[ -n "${SEQ_LEN:-}" ] && LONG=(--seq-len "$SEQ_LEN" --max-len "$(( SEQ_LEN > 256 ? SEQ_LEN : 256 ))")
train() {  # train BIN PAIRS STEPS OUTDIR [more options]: one MQAR run (or several, with --seeds) of VLA
  local v=$1 n=$2 s=$3 dir=$4; shift 4
  rm -rf "$dir"
  /tmp/vla-$v train --device cuda --task mqar --pairs "$n" --steps "$s" --batch 64 --eval-batches 1 --checkpoint-every 100000 \
    "${LONG[@]}" --out "$dir" "$@" > /dev/null 2>&1
}

if [ "${NCU:-1}" = 0 ]; then
  echo "NCU=0: kernel breakdown skipped"
elif command -v ncu > /dev/null; then
  v=B  # the snapshot only: kernel times do not drift between runs as rates do
  for n in $PAIRS; do
   for form in $FORMS; do
    step "$v, ncu: the kernels of one training step at n = $n, --recurrent-form $form (runs of 4 and 8 steps)"
    for s in 4 8; do
      rm -rf /tmp/ncu_run
      ncu --csv --metrics gpu__time_duration.sum /tmp/vla-$v train --device cuda --task mqar --pairs "$n" --mixer vla --steps $s \
        --batch 64 --eval-batches 1 --checkpoint-every 100000 --seed 0 --recurrent-form "$form" --out /tmp/ncu_run \
        > "$OUT/ncu-$v-$form-n$n-s$s.csv" 2> "$OUT/ncu.err" || { status=1; echo "ncu failed"; tail -5 "$OUT/ncu.err"; }
    done
    python3 - "$OUT/ncu-$v-$form-n$n-s4.csv" "$OUT/ncu-$v-$form-n$n-s8.csv" <<'PY'
import collections, csv, re, sys
def kernels(path):
    rows = [l for l in open(path) if l.startswith('"')]
    c, t = collections.Counter(), collections.Counter()
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum": continue
        name = re.sub(r"\(.*", "", r["Kernel Name"])[:70]
        unit = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[r["Metric Unit"]]
        t[name] += float(r["Metric Value"].replace(",", "")) * unit
        c[name] += 1
    return c, t
(c4, t4), (c8, t8) = kernels(sys.argv[1]), kernels(sys.argv[2])
names = sorted(set(c8) | set(c4), key=lambda k: -(t8[k] - t4[k]))
n = sum(c8.values()) - sum(c4.values()); us = sum(t8.values()) - sum(t4.values())
print(f"per step: {n / 4:.1f} kernel launches, {us / 4:.1f} us of GPU time (kernels back to back)")
for k in names:
    dc, dt = (c8[k] - c4[k]) / 4, (t8[k] - t4[k]) / 4
    if dc: print(f"  {dc:6.1f} x {k:70s} {dt:8.1f} us")
PY
   done
  done
else
  echo "ncu not found: kernel breakdown skipped"
fi

for n in $PAIRS; do
  for R in $RUNS; do
    [ "$R" -gt "$(nproc)" ] && continue
    seeds=$(seq -s, 0 $((R - 1)))
    for v in $BINS ${CONNECTIONS:+B:$CONNECTIONS}; do
     for form in $FORMS; do
      t0=$(date +%s.%N)
      if [ "$v" = "B:${CONNECTIONS:-}" ]; then
        CUDA_DEVICE_MAX_CONNECTIONS=$CONNECTIONS train B "$n" "$STEPS" /tmp/tp_run --seeds "$seeds" --mixers vla --recurrent-form "$form"
      else
        train $v "$n" "$STEPS" /tmp/tp_run --seeds "$seeds" --mixers vla --recurrent-form "$form"
      fi || { status=1; echo "train failed: $v, $form, n = $n, R = $R"; }
      t1=$(date +%s.%N)
      python3 -c "w = $t1 - $t0; print(f'$v ($form): n = $n${SEQ_LEN:+, T = $SEQ_LEN}, {$R:2d} concurrent runs of $STEPS steps: wall {w:6.2f} s, per run-step {1e3 * w / ($R * $STEPS):.3f} ms')"
     done
    done
  done
done > >(tee "$OUT/throughput.log")
exit $status
