#!/usr/bin/env bash
# The MQAR n = 8 sweep of docs/training.md ("the plateau") with the independent PyTorch reference
# tests/reference/mqar_torch.py: one process per mixer, each running all its (read, lr, seed)
# combinations stacked in one model (see the script's docstring), all processes at once on one GPU.
# usage: bash tests/reference/mqar_torch_sweep.sh [STEPS]
#        results: $OUT/mqar-torch-<mixer>.json and $OUT/run-<mixer>.log (one JSON line per run and evaluation)
#        LIMIT=S stops each process after S seconds (its log keeps the evaluations made so far)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mqar-torch}; mkdir -p "$OUT"
STEPS=${1:-2000}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
PY="python3 tests/reference/mqar_torch.py --pairs 8 --steps $STEPS --seeds 42,123,999 --device cuda"
echo "== probe: 20 steps of 12 stacked VLA runs"
TIMEFORMAT="%R s wall"
{ time $PY --mixer vla --reads eq11,unit --lrs 3e-4,1e-3 --steps 20 --eval-every 0 --out /tmp/probe.json > /tmp/probe.log 2>&1; } 2>&1
tail -1 /tmp/probe.log | cut -c1-400
echo "== sweep: $STEPS steps"
timeout "${LIMIT:-0}" $PY --mixer vla --reads eq11,unit --lrs 3e-4,1e-3 --out "$OUT/mqar-torch-vla.json" > "$OUT/run-vla.log" 2>&1 &
timeout "${LIMIT:-0}" $PY --mixer deltanet --reads eq11,unit --out "$OUT/mqar-torch-deltanet.json" > "$OUT/run-deltanet.log" 2>&1 &
timeout "${LIMIT:-0}" $PY --mixer linear --reads eq11,unit --out "$OUT/mqar-torch-linear.json" > "$OUT/run-linear.log" 2>&1 &
timeout "${LIMIT:-0}" $PY --mixer softmax --out "$OUT/mqar-torch-softmax.json" > "$OUT/run-softmax.log" 2>&1 &
wait

echo "== final evaluations"
grep -h "\"step\": $STEPS," "$OUT"/run-*.log | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print("%-9s %-5s lr %.0e seed %4d: eval %.3f  in-context %.3f  loss %.3f" % (r["mixer"], r["read"], r["lr"], r["seed"], r["eval_acc"], r["in_context"], r["loss"]))'
