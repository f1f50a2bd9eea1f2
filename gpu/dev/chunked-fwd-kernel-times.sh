#!/usr/bin/env bash
# The chunked VLA forward's kernels one by one, for builds carried as .device-carry/pab/LABEL/cvla.xz
# (gpu/dev/build-prebuilt.sh builds them): Nsight Compute's duration of each of the forward's seven launches
# (in launch order: group_maps, the penalty chain, its expansion, alphas, the memory maps, the memory chain,
# the outputs; the third of three forwards at (8, 4, T, 32), refresh 20, C = 20, the launch's group; each summed
# over the launch's parts), at its locked clocks, so that builds compare kernel by kernel without the launch
# gaps or the parts' overlap; the builds interleaved within each of ROUNDS rounds.
# usage: [LABELS="base new"] [CKT_T="65536 16384"] [ROUNDS=2] bash gpu/dev/chunked-fwd-kernel-times.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=/tmp/ckt
LABELS=${LABELS:-$(ls .device-carry/pab)}
source gpu/dev/carried-builds.sh
for l in $LABELS; do unpack_carried "$BIN/$l" ".device-carry/pab/$l/cvla.xz"; done
echo "kernel ms (or us): group_maps, penalty chain, penalty expand, alphas, memory maps, memory chain, outputs"
for T in ${CKT_T:-65536 16384}; do
  for r in $(seq "${ROUNDS:-2}"); do
    for l in $LABELS; do
      # A forward is 7 launches per part (the expansion runs where a span holds several groups: at these T it
      # does); skip two forwards and sum each kernel over the parts (ncu runs every launch alone: the sums
      # are the device time of the parts run one after another, the chains' latency counted once per part).
      P=$(cvla_parts "$BIN/$l/cvla" "$T")
      P=${P:-1}  # a build older than the parts
      echo "T=$T round $r $l ($P parts): $(ncu --csv --print-units base --kernel-name regex:"group_maps|penalty_|alphas|memory_" \
        --launch-skip $((14 * P)) --launch-count $((7 * P)) --metrics gpu__time_duration.sum "$BIN/$l/cvla" 3 profile "$T" 2>/dev/null |
        awk -F'","' -v P="$P" '/gpu__time_duration/ {
          if ($5 ~ /group_maps/) k = 1; else if ($5 ~ /penalty_chain/) k = 2; else if ($5 ~ /penalty_expand/) k = 3
          else if ($5 ~ /alphas/) k = 4; else if ($5 ~ /memory_chain/) k = 6
          else k = ++memory <= P ? 5 : 7  # memory_kernel: the parts maps first, in launch order
          v = $NF; gsub(/[",]/, "", v); ns[k] += v
        } END { for (k = 1; k <= 7; ++k) printf "%.2f us  ", ns[k] / 1000 }')"
    done
  done
done
