#!/usr/bin/env bash
# Where the fused VLA backward's warps wait, per source line, on a CUDA machine with no build there: carry
# .device-carry/fbb/fbb_*.xz (gpu/dev/fused_backward_bench.cu built here with nvcc -lineinfo, static C++
# runtime; see that file's header). For each build and each shape in FBS_SHAPES (default "32 1024" -- one
# warp per SM, the per-step chain alone -- and "4096 25", the device full as 16 runs fill it), Nsight Compute
# times one backward launch with the full section set and warp-state sampling; then `ncu --page source`
# gives the samples per SASS instruction, and the summary below sums them per CUDA source line and stall
# reason (top lines and the totals) into $OUT/stalls-<build>-<BH>x<T>.txt.
# usage: [FBS_SHAPES="32 1024;4096 25"] bash gpu/dev/fused-bwd-stalls.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
mkdir -p /tmp/fbb/bin
status=0
nvidia-smi -L
for f in .device-carry/fbb/fbb_*.xz; do b=$(basename "$f" .xz); xz -dc "$f" > "/tmp/fbb/bin/$b" && chmod +x "/tmp/fbb/bin/$b"; done
IFS=';' read -r -a SHAPES <<< "${FBS_SHAPES:-32 1024;4096 25}"
for b in /tmp/fbb/bin/fbb_*; do
  name=$(basename "$b")
  for sh in "${SHAPES[@]}"; do
    read -r BH T <<< "$sh"
    tag="$name-${BH}x${T}"
    echo "== $tag [${SECONDS} s]"
    "$b" shapes 5 32 "$BH" "$T" || status=1
    # The driver runs forward x 6, backward x 6 (median of 5 after one): profile the third backward.
    ncu --kernel-name regex:vla_backward_kernel --launch-skip 2 --launch-count 1 --set full --import-source yes \
      -f -o "/tmp/fbb/$tag" "$b" shapes 5 32 "$BH" "$T" > "/tmp/fbb/$tag.ncu.log" 2>&1 || { status=1; tail -5 "/tmp/fbb/$tag.ncu.log"; continue; }
    ncu -i "/tmp/fbb/$tag.ncu-rep" --page details > "$OUT/details-$tag.txt" 2>&1
    grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Executed Ipc A" "$OUT/details-$tag.txt" | head -20
    ncu -i "/tmp/fbb/$tag.ncu-rep" --page source --csv --print-source sass > "/tmp/fbb/$tag-sass.csv" 2> "/tmp/fbb/$tag-sass.err" ||
      { echo "ncu --page source failed"; head -5 "/tmp/fbb/$tag-sass.err"; }
    python3 - "/tmp/fbb/$tag-sass.csv" > "$OUT/stalls-$tag.txt" <<'PY'
import csv, sys, collections, re
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = None
for i, r in enumerate(rows):
    if any(c.startswith("Warp Stall Sampling") for c in r) or "Source" in r:
        head, body = r, rows[i + 1:]
        break
if head is None:
    print("no header found; first rows:", rows[:3]); sys.exit(0)
print("columns:", head)
col = {c: i for i, c in enumerate(head)}
samp = next((c for c in head if c.startswith("Warp Stall Sampling (All")), None)
stall_cols = [c for c in head if c.startswith("stall_") or c.startswith("Stall ") or "(stall" in c.lower()]
src = next((c for c in head if c in ("Source", "Address")), head[0])
print("sample column:", samp, "| stall columns:", stall_cols[:40])
by_line = collections.Counter()
by_reason = collections.Counter()
top = []
for r in body:
    if len(r) != len(head): continue
    try: s = float(r[col[samp]].replace(",", "") or 0)
    except (ValueError, KeyError, TypeError): continue
    top.append((s, r[col.get("Source", 0)][:90], r[col["Address"]] if "Address" in col else ""))
    for c in stall_cols:
        try: by_reason[c] += float(r[col[c]].replace(",", "") or 0)
        except ValueError: pass
tot = sum(t[0] for t in top) or 1
print(f"total samples {tot:.0f} over {len(top)} instructions")
for c, v in by_reason.most_common(20): print(f"  {c:50s} {v:10.0f} {100*v/tot:5.1f}%")
print("top instructions:")
for s, txt, a in sorted(top, reverse=True)[:60]: print(f"  {s:8.0f} {100*s/tot:5.1f}%  {a}  {txt}")
PY
    head -40 "$OUT/stalls-$tag.txt"
    # Every SASS instruction with its metrics and CUDA source line, kept whole for reading here.
    ncu -i "/tmp/fbb/$tag.ncu-rep" --page source --csv --print-source cuda,sass 2>&1 | gzip > "$OUT/sass-lines-$tag.csv.gz"
  done
done
echo "== done (status $status) [${SECONDS} s]"
exit $status
