#!/usr/bin/env bash
# Builds the chunk-form VLA backward's development driver (gpu/dev/chunked_vla_backward_check.cu) twice into
# DIR (default .device-carry/bin), xz-compressed (~5 MB each; `xz -d` them where they run): cvlab_check with
# the kernel as it is, and cvlab_phases with every barrier of walk_kernel timed (clock64 by thread 0 of the
# middle block of each launch: the cycles since the previous barrier, summed per barrier line, printed by
# `cvlab_phases phases T` against the source line). Needs nvcc only, no GPU: build here, carry DIR, run on
# the device (both link the C++ runtime statically, so the device's older one does not matter).
# With ONLY_CHECK=1, cvlab_check alone (a variant to A/B: DIR=.device-carry/bin/variants/NAME, which
# gpu/dev/chunk-bwd-dev.sh's `ab` step times beside the others).
# usage: bash gpu/dev/chunk-bwd-drivers.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.device-carry/bin}
mkdir -p "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
NVCC=(nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc)
OTHERS=(gpu/chunked_vla_forward.cu gpu/recurrent_forward.cu gpu/recurrent_backward.cu)

# The instrumented copy: CVLA_SYNC(line) for every __syncthreads() of walk_kernel (line: the original's).
mkdir -p "$TMP/gpu"
LINES=$(( $(wc -l < gpu/chunked_vla_backward.cu) + 1 ))  # the clock tables' rows: one per source line
awk -v LINES="$LINES" '
  /^#include <algorithm>/ && !pre { print; print "#include <cstdio>";
    print "constexpr int kLines = " LINES ";";
    print "__device__ unsigned long long cvla_cycles[3][kLines];";
    print "__device__ unsigned cvla_hits[3][kLines];";
    print "#define CVLA_SYNC(line) do { __syncthreads(); if (threadIdx.x == 0 && blockIdx.x == gridDim.x / 2) { \\";
    print "    const long long now_ = clock64(); cvla_cycles[int(W)][line] += now_ - cvla_t; ++cvla_hits[int(W)][line]; cvla_t = now_; } } while (0)";
    pre = 1; next }
  /walk_kernel\(const RecurrentTensors x/ { inside = 1 }
  /cudaError_t launch_walk/ { inside = 0 }
  inside && /Smem& s = \*reinterpret_cast/ { print; print "  long long cvla_t = clock64();"; next }
  inside { gsub(/__syncthreads\(\);/, "CVLA_SYNC(" NR ");") }
  { print }
  END {
    print "extern \"C\" void cvla_phase_report() {";
    print "  static unsigned long long c[3][kLines]; static unsigned h[3][kLines];";
    print "  if (cudaMemcpyFromSymbol(c, cvla_cycles, sizeof c) != cudaSuccess || cudaMemcpyFromSymbol(h, cvla_hits, sizeof h) != cudaSuccess) { std::printf(\"phase report: copy failed\\n\"); return; }";
    print "  for (int w = 0; w < 3; ++w) {";
    print "    unsigned long long total = 0; unsigned chunks = 0;";
    print "    for (int l = 0; l < kLines; ++l) { total += c[w][l]; chunks = h[w][l] > chunks ? h[w][l] : chunks; }";
    print "    std::printf(\"walk B%d: %u chunks in the probed block, %.0f cycles per chunk\\n\", w + 1, chunks, chunks ? double(total) / chunks : 0.0);";
    print "    for (int l = 0; l < kLines; ++l) if (h[w][l]) std::printf(\"  B%d line %4d  %6.0f cycles per chunk  %5.1f%%\\n\", w + 1, l, double(c[w][l]) / chunks, 100.0 * c[w][l] / total);";
    print "  }";
    print "}";
  }' gpu/chunked_vla_backward.cu > "$TMP/gpu/chunked_vla_backward.cu"
grep -q "CVLA_SYNC(" "$TMP/gpu/chunked_vla_backward.cu" || { echo "chunk-bwd-drivers: no barrier of walk_kernel found to time"; exit 1; }

"${NVCC[@]}" gpu/dev/chunked_vla_backward_check.cu gpu/chunked_vla_backward.cu "${OTHERS[@]}" -o "$TMP/cvlab_check" 2> "$TMP/check.log" &
BINS=(cvlab_check)
if [ -z "${ONLY_CHECK:-}" ]; then
  "${NVCC[@]}" gpu/dev/chunked_vla_backward_check.cu "$TMP/gpu/chunked_vla_backward.cu" "${OTHERS[@]}" -o "$TMP/cvlab_phases" 2> "$TMP/phases.log" &
  BINS+=(cvlab_phases)
fi
for job in $(jobs -p); do wait "$job" || { grep -i -B2 -A6 error "$TMP"/*.log | head -40; exit 1; }; done
for b in "${BINS[@]}"; do strip "$TMP/$b" && xz -T2 -c "$TMP/$b" > "$DIR/$b.xz.tmp" && mv "$DIR/$b.xz.tmp" "$DIR/$b.xz"; done
ls -la "$DIR"/*.xz
