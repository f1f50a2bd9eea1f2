#!/usr/bin/env bash
# Where the chunked VLA forward's warps wait, per source line, on a CUDA machine with no build there: carry
# .device-carry/prof/cvla_*.xz (gpu/dev/chunked_vla_forward_check.cu built here with nvcc -lineinfo, static
# C++ runtime, as its header says). For each build, the driver's `profile` mode runs three forwards at
# (8, 4, T, 32) (refresh 20, C = 20, the launch's group) and Nsight Compute samples the third launch of each
# group kernel (gpu/dev/ncu-stalls.sh: headline numbers here; details, per-instruction metrics and their
# summary per source line and per opcode in $OUT, tagged build-kernel-T).
# usage: [CFS_T=65536] [CFS_KERNELS="alphas maps outputs group_maps" (or chain)] bash gpu/dev/chunked-fwd-stalls.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
nvidia-smi -L
source gpu/dev/carried-builds.sh
unpack_carried /tmp/cfs/bin .device-carry/prof/cvla_*.xz
T=${CFS_T:-65536}
for b in /tmp/cfs/bin/cvla_*; do
  name=$(basename "$b")
  P=$(cvla_parts "$b" "$T")
  P=${P:-1}  # a build older than the parts
  for k in ${CFS_KERNELS:-alphas maps outputs group_maps}; do
    # One forward launches group_maps, penalty_chain, penalty_expand, alphas, the maps, memory_chain, the
    # outputs, each once per part (P): the maps and the outputs are both memory_kernel, the maps first. The
    # third forward's first part is profiled.
    case $k in
      alphas) regex=alphas_kernel skip=2 ;;
      maps) regex=memory_kernel skip=4 ;;
      outputs) regex=memory_kernel skip=5 ;;
      group_maps) regex=group_maps_kernel skip=2 ;;
      chain) regex=penalty_chain_kernel skip=2 ;;
      *) echo "unknown kernel $k"; exit 2 ;;
    esac
    tag="$name-$k-$T"
    echo "== $tag [${SECONDS} s]"
    SKIP=$((skip * P)) bash gpu/dev/ncu-stalls.sh "$tag" "$regex" "$b" 3 profile "$T" || status=1
  done
done
echo "== done (status $status) [${SECONDS} s]"
exit $status
