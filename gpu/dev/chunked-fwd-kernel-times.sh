#!/usr/bin/env bash
# The chunked VLA forward's group kernels one by one, for builds carried as .device-carry/pab/LABEL/cvla.xz
# (gpu/dev/prebuilt-ab.sh says how they are built): Nsight Compute's duration of group_maps, alphas, the
# memory maps and the outputs (in that order; the third of three forwards at (8, 4, T, 32), refresh 20,
# C = 20, the launch's group), at its locked clocks, so that builds compare kernel by kernel without the
# chains and the launch gaps; the builds interleaved within each of ROUNDS rounds.
# usage: [LABELS="base new"] [CKT_T="65536 16384"] [ROUNDS=2] bash gpu/dev/chunked-fwd-kernel-times.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=/tmp/ckt
LABELS=${LABELS:-$(ls .device-carry/pab)}
source gpu/dev/carried-builds.sh
for l in $LABELS; do unpack_carried "$BIN/$l" ".device-carry/pab/$l/cvla.xz"; done
echo "kernel ms (or us): group_maps, alphas, memory maps, outputs"
for T in ${CKT_T:-65536 16384}; do
  for r in $(seq "${ROUNDS:-2}"); do
    for l in $LABELS; do
      # A forward is 7 launches (group_maps, the penalty chain and expansion, alphas, the maps, the memory
      # chain, the outputs); of the four matched here, skip two forwards' eight.
      echo "T=$T round $r $l: $(ncu --kernel-name regex:"group_maps|alphas|memory_kernel" --launch-skip 8 --launch-count 4 \
        --metrics gpu__time_duration.sum "$BIN/$l/cvla" 3 profile "$T" 2>&1 | grep -E "gpu__time" | awk '{printf "%s %s  ", $3, $2}')"
    done
  done
done
