#!/usr/bin/env bash
# The GPU path end to end on a CUDA machine, in one command (see docs/gpu.md):
#   configure + build (Release, sm_90) -> GPU tests (forward and backward) -> compute-sanitizer memcheck
#   and racecheck over them
#   -> `vla bench attention` and gpu/bench_torch.py at the anchor shapes (B,H,D = 8,4,32 and 4,16,64).
# Logs go to $OUT (default /tmp/vla-device-out). Where the machine lacks the Debian dev packages the
# build needs, it uses .device-carry/debs/*.deb (fetched beforehand with `apt-get download`, see
# docs/gpu.md), unpacked into a private prefix, never into /.
# usage: bash gpu/device-check.sh            exit status: non-zero if a build, test or sanitizer step failed
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/vla-device-out}
BUILD=${BUILD:-build-device}
mkdir -p "$OUT"
status=0
step() { echo "== $*"; }

step "device"
nvidia-smi -L; nvcc --version | tail -1
if compgen -G ".device-carry/debs/*.deb" > /dev/null; then
  PREFIX=/tmp/vla-deps
  mkdir -p $PREFIX
  for f in .device-carry/debs/*.deb; do dpkg -x "$f" $PREFIX; done
  export CMAKE_PREFIX_PATH=$PREFIX/usr
  export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_LIBDIR=$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$PREFIX
  export CPATH=$PREFIX/usr/include/x86_64-linux-gnu  # Debian keeps gmp.h in the multiarch folder
  PKGCONF_ARG=-DPKG_CONFIG_EXECUTABLE=$PREFIX/usr/bin/pkgconf
  echo "carried dependencies unpacked into $PREFIX"
fi

# Build from a snapshot when one is carried (.device-carry/src.tar, made here with
# `git archive HEAD`): the committed tree, untouched by files others are still editing.
if [ -f .device-carry/src.tar ]; then
  rm -rf /tmp/vla-src && mkdir -p /tmp/vla-src && tar -xf .device-carry/src.tar -C /tmp/vla-src
  cp -r .device-carry /tmp/vla-src/ 2>/dev/null; cd /tmp/vla-src; echo "building the snapshot .device-carry/src.tar"
fi

step "configure + build"
GEN=""; command -v ninja > /dev/null && GEN="-G Ninja"
{ cmake -S . -B "$BUILD" $GEN -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 ${PKGCONF_ARG:-} &&
  cmake --build "$BUILD" -j "$(nproc)" --target test_gpu; } > "$OUT/build.log" 2>&1
rc=$?; tail -5 "$OUT/build.log"; grep -E "registers|spill" "$OUT/build.log" | grep -v " 0 bytes spill" | head -5
if [ $rc -ne 0 ]; then echo "BUILD FAILED (see build.log)"; tail -40 "$OUT/build.log"; exit 1; fi

step "GPU tests"
T="$BUILD/bin/test_gpu"
ctest --test-dir "$BUILD" -L gpu --output-on-failure > "$OUT/tests.log" 2>&1 || status=1
tail -3 "$OUT/tests.log"
"$T" "[gpu-reference]" >> "$OUT/tests.log" 2>&1 || { status=1; echo "reference backward vs finite differences FAILED"; }
"$T" "[gpu]" -s -r compact 2>&1 | grep -E "rel err" | sed 's/.*warning: //' > "$OUT/relerr.log"
grep -v backward "$OUT/relerr.log" | head -12
# Each backward's worst relative error per gradient over all shapes (each line's bound: T d 2^-24).
grep backward "$OUT/relerr.log" | sed "s/.*message: '//" | awk '{ k = $1 " " $3; if ($8 + 0 > m[k] + 0) { m[k] = $8; w[k] = $0 } } END { for (k in w) print w[k] }' | sort

step "compute-sanitizer memcheck + racecheck"
# racecheck instruments every shared-memory access: it runs the backward on its small-shape case
# (and the launch-shape case), not on [bwd-full], whose shapes memcheck covers.
for tool in memcheck racecheck; do
  spec="[gpu]"; [ $tool = racecheck ] && spec="[gpu]~[bwd-full]"
  compute-sanitizer --tool $tool --error-exitcode 3 "$T" "$spec" >> "$OUT/sanitizer.log" 2>&1 || { status=1; echo "$tool FAILED"; }
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|All tests passed|failed" "$OUT/sanitizer.log" | tail -2
done

step "benchmark"
cmake --build "$BUILD" -j "$(nproc)" --target vla >> "$OUT/build.log" 2>&1 || { echo "vla BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
for shape in "8 4 32" "4 16 64"; do
  set -- $shape
  csv="$OUT/bench-$1-$2-$3.csv"
  "$BUILD/bin/vla" bench attention --device cuda --T 1024,4096,16384,65536 --batch $1 --heads $2 --d-head $3 --csv "$csv" \
    2>&1 | tee -a "$OUT/bench.log" || status=1
  PYTHONUNBUFFERED=1 python3 gpu/bench_torch.py --csv "$csv" 2>&1 | tee -a "$OUT/bench.log" || status=1
done
echo "device-check status $status"
exit $status
