#!/usr/bin/env bash
# The chunk-form VLA backward (gpu/chunked_vla_backward.cu) on a CUDA machine, in one command:
#   build -> the [chunked] GPU tests (the chunked forward, both backwards after it; worst relative error of
#   the chunk-form backward per gradient) -> compute-sanitizer memcheck over [chunk-bwd] and racecheck over
#   its launch-shape case -> `vla bench attention` at B, H, d = 8, 4, 32 (CB_T, default 4096,16384,65536;
#   CB_REPS timed runs, default 5): chunked fwd + token-walk group backward against chunked fwd + chunk form.
# usage: bash gpu/dev/chunk-bwd-check.sh     logs in $OUT; exit status non-zero if a build, test or sanitizer failed
set -uo pipefail
cd "$(dirname "$0")/../.."
source gpu/device-env.sh
device_build test_gpu vla
TG="$BUILD/bin/test_gpu"

step "chunked tests"
"$TG" "[chunked]" -s -r compact > "$OUT/chunked-tests.log" 2>&1 || { status=1; echo "chunked tests FAILED"; grep -B3 -A14 FAILED "$OUT/chunked-tests.log" | head -80; }
grep -E "passed|failed" "$OUT/chunked-tests.log" | tail -1
# Worst relative error against the double reference per (backward, gradient) over the runs.
grep -h "rel err" "$OUT/chunked-tests.log" | grep -v "passed\|failed" | sed "s/'$//" |
  awk '{ form = ($0 ~ /chunk form/) ? "chunk-form" : "token-walk"; for (i = 1; i <= NF; ++i) { if ($i == "err") e = $(i + 1); if ($i == "backward") gr = $(i + 1) }
         k = form " " gr; if (e + 0 > m[k] + 0) m[k] = e } END { for (k in m) print k, m[k] }' | sort | tee "$OUT/chunk-bwd-relerr.log"
"$TG" "[chunk-bwd]~[chunked]" -r compact > "$OUT/chunk-bwd-other.log" 2>&1 || { status=1; echo "chunk-bwd tests FAILED"; grep -B3 -A14 FAILED "$OUT/chunk-bwd-other.log" | head -40; }
tail -1 "$OUT/chunk-bwd-other.log"

step "sanitizers"
sanitize memcheck "[chunk-bwd]" "$OUT/memcheck.log"
sanitize racecheck "chunk-form VLA backward is the same function*" "$OUT/racecheck.log"

if [ -n "${CB_NCU:-}" ]; then  # per-kernel time of the chunk-form backward at T = CB_NCU (Nsight Compute, locked clocks)
  step "ncu at T = $CB_NCU"
  ncu --metrics gpu__time_duration.sum -k regex:"walk_kernel|group_chain" --csv "$BUILD/bin/vla" bench attention --device cuda \
    --T "$CB_NCU" --batch 8 --heads 4 --d-head 32 --reps 1 > "$OUT/ncu.csv" 2> "$OUT/ncu.err" || echo "ncu failed (see ncu.err)"
  python3 - "$OUT/ncu.csv" <<'PY'
import csv, sys, re, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value"); u = head.index("Metric Unit")
t = collections.defaultdict(list)
for r in rows[1:]:
    name = r[k].replace("(anonymous namespace)::", "").replace("vla::gpu::", "").replace("group_chain::", "")
    name = re.sub(r"\(.*", "", name).replace("void ", "")
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(r[u], float("nan"))
    t[name].append(float(r[v].replace(",", "")) * scale)
for n, xs in t.items(): print(f"{n:60s} runs {len(xs):3d}  median {sorted(xs)[len(xs)//2]:9.1f} us")
PY
fi

step "benchmark"
bench_attention 8 4 32 "${CB_T:-4096,16384,65536}" "${CB_REPS:-5}" "$OUT/chunk-bwd-bench-8-4-32.csv"
step "done (status $status)"
exit $status
