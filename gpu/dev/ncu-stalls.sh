#!/usr/bin/env bash
# Where one kernel launch's warps wait, per source line, on a CUDA machine: Nsight Compute profiles launch
# SKIP + 1 of the kernels matching REGEX in COMMAND with the full section set and warp-state sampling
# (build the command's binary with -lineinfo). Prints the headline numbers (duration, IPC, warps per
# scheduler, occupancy); writes the details page to $OUT/details-TAG.txt, every SASS instruction's metrics
# under its CUDA source lines to $OUT/sass-lines-TAG.csv.gz, and their summary per source line and per
# opcode (gpu/dev/ncu_source_summary.py) to $OUT/stalls-TAG.txt, whose first lines it prints.
# usage: [SKIP=2] bash gpu/dev/ncu-stalls.sh TAG REGEX COMMAND...      exit status non-zero if ncu failed
set -uo pipefail
DEV=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/ncu-stalls}
mkdir -p "$OUT" /tmp/ncu-stalls-reps
tag=$1 regex=$2; shift 2
rep=/tmp/ncu-stalls-reps/$tag
ncu --kernel-name "regex:$regex" --launch-skip "${SKIP:-2}" --launch-count 1 --set full --import-source yes -f -o "$rep" \
  "$@" > "$rep.log" 2>&1 || { echo "ncu failed: $*"; tail -5 "$rep.log"; exit 1; }
ncu -i "$rep.ncu-rep" --page details > "$OUT/details-$tag.txt" 2>&1
grep -E "^  [a-z_:<>, 0-9()]+\(|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Executed Ipc A" \
  "$OUT/details-$tag.txt" | head -12
ncu -i "$rep.ncu-rep" --page source --csv --print-source cuda,sass 2>&1 | gzip > "$OUT/sass-lines-$tag.csv.gz"
python3 "$DEV/ncu_source_summary.py" "$OUT/sass-lines-$tag.csv.gz" 40 > "$OUT/stalls-$tag.txt" 2>&1 || exit 1
head -25 "$OUT/stalls-$tag.txt"
