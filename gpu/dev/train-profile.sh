#!/usr/bin/env bash
# Where a training step's GPU time goes, and what bounds the fused VLA backward at the training shapes, in
# one command on a CUDA machine:
#   build -> every GPU test -> Nsight Compute over the fused VLA backward in `vla bench attention` at batch
#   1024, H 4, d 32, T = 25 and 97 (MQAR n = 8 and 32 with 16 runs' sequences in one launch): time, DRAM
#   bytes read and written, achieved occupancy -> gpu/train-throughput.sh's per-step kernel breakdown and
#   16-run rates (fused pair).
# usage: bash gpu/dev/train-profile.sh     logs in $OUT; exit status non-zero if a build or test failed
set -uo pipefail
cd "$(dirname "$0")/../.."
source gpu/device-env.sh
device_build test_gpu vla

step "GPU tests"
"$BUILD/bin/test_gpu" -r compact > "$OUT/gpu-tests.log" 2>&1 || { status=1; echo "GPU tests FAILED"; grep -B3 -A14 FAILED "$OUT/gpu-tests.log" | head -60; }
tail -1 "$OUT/gpu-tests.log"

step "ncu: the fused VLA backward at training shapes"
ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
  -k regex:vla_backward_kernel "$BUILD/bin/vla" bench attention --device cuda --T 25,97 --batch 1024 --heads 4 --d-head 32 --reps 1 \
  > "$OUT/ncu-backward.csv" 2> "$OUT/ncu-backward.err" || echo "ncu failed (see ncu-backward.err)"
python3 - "$OUT/ncu-backward.csv" <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
by = collections.defaultdict(dict)
for r in csv.DictReader(rows):
    by[r["ID"]][r["Metric Name"]] = (float(r["Metric Value"].replace(",", "")), r["Metric Unit"])
    by[r["ID"]]["name"] = r["Kernel Name"].replace("(anonymous namespace)::", "").replace("vla::gpu::", "")
for i, m in sorted(by.items(), key=lambda kv: int(kv[0])):
    t, tu = m["gpu__time_duration.sum"]; rd, ru = m["dram__bytes_read.sum"]; wr, wu = m["dram__bytes_write.sum"]
    occ = m["sm__warps_active.avg.pct_of_peak_sustained_active"][0]
    scale = {"byte": 1, "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9}
    ts = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3}[tu]
    b = rd * scale[ru] + wr * scale[wu]
    name = m["name"][:60]
    print(f"launch {i} {name}: {t} {tu}, DRAM read {rd} {ru}, write {wr} {wu}: {b / (t * ts) / 1e12:.2f} TB/s; warps active {occ:.1f}% of peak")
PY

step "training step breakdown and rates"
NCU=1 FORMS=fused RUNS=16 STEPS=${TP_STEPS:-300} bash gpu/train-throughput.sh || status=1
step "done (status $status)"
exit $status
