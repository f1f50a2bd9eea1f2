#!/usr/bin/env bash
# Builds the GPU development drivers here (nvcc, sm_90, static C++ runtime) into .device-carry/pab/LABEL/,
# xz-compressed, for gpu/dev/prebuilt-ab.sh and chunked-fwd-kernel-times.sh to run on the device with no
# build there. From REV (a commit, `git archive`) or, without one, from the working tree.
#   cvla  gpu/dev/chunked_vla_forward_check.cu   (the chunked forward: checks, benchmark, profile)
#   fbb   gpu/dev/fused_backward_bench.cu        (the fused backward: digests, benchmark)
#   cvlab gpu/dev/chunked_vla_backward_check.cu  (the chunk-form backward: checks, digests, benchmark)
# usage: bash gpu/dev/build-prebuilt.sh LABEL [REV] [DRIVERS (default "cvla fbb cvlab")]
set -euo pipefail
cd "$(dirname "$0")/../.."
label=${1:?usage: build-prebuilt.sh LABEL [REV] [DRIVERS]}
rev=${2:-}
drivers=${3:-cvla fbb cvlab}
root=$PWD
out=$root/.device-carry/pab/$label
tree=$root
if [ -n "$rev" ]; then
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  git archive "$rev" | tar -x -C "$tree"
fi
mkdir -p "$out"
cd "$tree"
nv=(nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc)
for d in $drivers; do
  case $d in
    cvla) src=(gpu/dev/chunked_vla_forward_check.cu gpu/chunked_vla_forward.cu gpu/recurrent_forward.cu) ;;
    fbb) src=(gpu/dev/fused_backward_bench.cu gpu/recurrent_forward.cu gpu/recurrent_backward.cu) ;;
    cvlab) src=(gpu/dev/chunked_vla_backward_check.cu gpu/chunked_vla_backward.cu gpu/chunked_vla_forward.cu
                gpu/recurrent_forward.cu gpu/recurrent_backward.cu) ;;
    *) echo "build-prebuilt.sh: unknown driver '$d' (allowed: cvla, fbb, cvlab)" >&2; exit 2 ;;
  esac
  "${nv[@]}" "${src[@]}" -o "$out/$d.tmp"
  xz -T2 -c "$out/$d.tmp" > "$out/$d.xz.tmp" && mv "$out/$d.xz.tmp" "$out/$d.xz" && rm -f "$out/$d.tmp"
  echo "built $out/$d.xz ($(du -h "$out/$d.xz" | cut -f1))"
done
