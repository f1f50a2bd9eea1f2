#!/usr/bin/env bash
# Where the fused VLA backward's warps wait, per source line, on a CUDA machine with no build there: carry
# .device-carry/fbb/fbb_*.xz (gpu/dev/fused_backward_bench.cu built here with nvcc -lineinfo, static C++
# runtime; see that file's header). For each build and each shape in FBS_SHAPES (default "32 1024" -- one
# warp per SM, the per-step chain alone -- and "4096 25", the device full as 16 runs fill it), Nsight Compute
# times one backward launch with warp-state sampling (gpu/dev/ncu-stalls.sh: the headline numbers here, the
# details, every SASS instruction's metrics and their summary per source line and per opcode in $OUT, tagged
# build-BHxT).
# usage: [FBS_SHAPES="32 1024;4096 25"] bash gpu/dev/fused-bwd-stalls.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
nvidia-smi -L
source gpu/dev/carried-builds.sh
unpack_carried /tmp/fbb/bin .device-carry/fbb/fbb_*.xz
IFS=';' read -r -a SHAPES <<< "${FBS_SHAPES:-32 1024;4096 25}"
for b in /tmp/fbb/bin/fbb_*; do
  name=$(basename "$b")
  for sh in "${SHAPES[@]}"; do
    read -r BH T <<< "$sh"
    tag="$name-${BH}x${T}"
    echo "== $tag [${SECONDS} s]"
    "$b" shapes 5 32 "$BH" "$T" || status=1
    # The driver runs forward x 6, backward x 6 (median of 5 after one): profile the third backward.
    SKIP=2 bash gpu/dev/ncu-stalls.sh "$tag" vla_backward_kernel "$b" shapes 5 32 "$BH" "$T" || status=1
  done
done
echo "== done (status $status) [${SECONDS} s]"
exit $status
