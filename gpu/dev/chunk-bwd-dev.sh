#!/usr/bin/env bash
# Runs the chunk-form VLA backward's development drivers on a CUDA machine with no build there: build them
# beforehand (bash gpu/dev/chunk-bwd-drivers.sh, nvcc only) and carry .device-carry/bin. STEPS (default
# "check bench phases"): check = the driver's checks (central differences of Algorithm 1 in double, the
# fused backward); bench = forward and backward alone at (8, 4, 32) and CB_T (default 4096,16384,65536),
# CB_REPS runs (default 10); phases = the instrumented build's cycles per chunk, barrier by barrier, at
# T = CB_PHASE_T (default 16384), each line beside its source; memcheck = compute-sanitizer over the checks;
# ab = the bench of a baseline build carried as .device-carry/bin/base/cvlab_check.xz (copy the current one
# there before rebuilding), of this one and of every .device-carry/bin/variants/NAME/cvlab_check.xz, in turn,
# twice: A/B ratios taken in one call (and each build's `digest` of its gradients' bits, in the first round).
# usage: bash gpu/dev/chunk-bwd-dev.sh      exit status non-zero if a check or the sanitizer failed
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=/tmp/cvlab-bin
mkdir -p "$BIN"
BUILDS=()
for f in .device-carry/bin/cvlab_check.xz .device-carry/bin/cvlab_phases.xz .device-carry/bin/base/cvlab_check.xz .device-carry/bin/variants/*/cvlab_check.xz; do
  [ -f "$f" ] || continue
  b=${f#.device-carry/bin/}; b=${b%.xz}
  mkdir -p "$(dirname "$BIN/$b")" && xz -dc "$f" > "$BIN/$b" && chmod +x "$BIN/$b"
  [ "$b" != cvlab_phases ] && BUILDS+=("$b")
done
nvidia-smi -L
status=0
for s in ${STEPS:-check bench phases}; do
  echo "== $s [${SECONDS} s]"
  case $s in
    check) "$BIN/cvlab_check" check || status=1 ;;
    bench) "$BIN/cvlab_check" bench "${CB_T:-4096,16384,65536}" "${CB_REPS:-10}" || status=1 ;;
    phases)
      "$BIN/cvlab_phases" phases "${CB_PHASE_T:-16384}" | while IFS= read -r line; do
        if [[ $line =~ line\ +([0-9]+) ]]; then
          echo "$line  | $(sed -n "${BASH_REMATCH[1]}p" gpu/chunked_vla_backward.cu | sed 's/^ *//' | cut -c1-90)"
        else echo "$line"; fi
      done ;;
    ab) for round in 1 2; do for b in "${BUILDS[@]}"; do
          echo "-- $b (round $round)"; [ $round = 1 ] && "$BIN/$b" digest | tail -n +2; "$BIN/$b" bench "${CB_T:-4096,16384,65536}" "${CB_REPS:-10}" | tail -n +3 || status=1
        done; done ;;
    memcheck) compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN/cvlab_check" check 2>&1 | tail -4 || status=1 ;;
    *) echo "unknown step $s"; status=2 ;;
  esac
done
echo "== done (status $status) [${SECONDS} s]"
exit $status
