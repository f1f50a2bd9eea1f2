# Sourced by the gpu/*-check.sh scripts: what each does before its own steps on a CUDA
# machine. Sets OUT, BUILD, status and step(); unpacks the carried Debian packages (.device-carry/debs,
# fetched beforehand with `apt-get download`, docs/gpu.md) into a private prefix, never into /; moves to
# the carried source snapshot (.device-carry/src.tar, made with `git archive HEAD`) when there is one;
# and defines device_build TARGETS... (configure Release for sm_90, build; logs in $OUT/build.log), build_ab,
# sanitize TOOL SPEC LOG and bench_attention B H D TLIST REPS CSV [torch] (below), which every check script uses.
OUT=${OUT:-/tmp/vla-device-out}
BUILD=${BUILD:-build-device}
mkdir -p "$OUT"
status=0
step() { echo "== $* [${SECONDS} s]"; }  # with the seconds since the script started

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

# Build the committed snapshot when one is carried: untouched by files others are still editing.
# The same snapshot already unpacked (a second call on a still-warm machine) is kept as it is, so that its
# build folder is up to date and nothing is rebuilt.
if [ -f .device-carry/src.tar ]; then
  sum=$(sha256sum .device-carry/src.tar | cut -c1-64)
  if [ "$(cat /tmp/vla-src/.src.sha256 2>/dev/null)" != "$sum" ]; then
    rm -rf /tmp/vla-src && mkdir -p /tmp/vla-src && tar -xf .device-carry/src.tar -C /tmp/vla-src
    cp -r .device-carry /tmp/vla-src/ 2>/dev/null; echo "$sum" > /tmp/vla-src/.src.sha256
  fi
  cd /tmp/vla-src; echo "building the snapshot .device-carry/src.tar (sha256 ${sum:0:12})"
fi

# device_build TARGET...: exits the script when the build fails, printing the errors.
device_build() {
  step "configure + build"
  local gen=""; command -v ninja > /dev/null && gen="-G Ninja"
  { cmake -S . -B "$BUILD" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 ${PKGCONF_ARG:-} &&
    cmake --build "$BUILD" -j "$(nproc)" --target "$@"; } > "$OUT/build.log" 2>&1
  local rc=$?; tail -3 "$OUT/build.log"
  grep -E "registers|spill" "$OUT/build.log" | grep -v " 0 bytes spill" | head -5
  if [ $rc -ne 0 ]; then echo "BUILD FAILED (see build.log)"; grep -B2 -A8 -E "error" "$OUT/build.log" | head -60; exit 1; fi
}

# build_ab REPO FILE...: `vla` from the snapshot as it is (B, copied to /tmp/vla-B) and with each FILE
# (a repository path) replaced by its baseline REPO/.device-carry/ab/FILE (A, /tmp/vla-A; prepare them here
# with `mkdir -p .device-carry/ab/$(dirname F) && git show REV:F > .device-carry/ab/F`). The snapshot's
# files are put back afterwards, so a later build is B again. For A/B timings taken in one call.
build_ab() {
  local repo=$1 f; shift
  for f in "$@"; do [ -f "$repo/.device-carry/ab/$f" ] || { echo "build_ab: .device-carry/ab/$f not found"; exit 2; }; done
  device_build vla && cp "$BUILD/bin/vla" /tmp/vla-B
  for f in "$@"; do mkdir -p "/tmp/ab-B/$(dirname "$f")" && cp "$f" "/tmp/ab-B/$f" && cp "$repo/.device-carry/ab/$f" "$f"; done
  device_build vla && cp "$BUILD/bin/vla" /tmp/vla-A
  for f in "$@"; do cp "/tmp/ab-B/$f" "$f"; done
}

# sanitize TOOL SPEC LOG: compute-sanitizer TOOL (memcheck, racecheck) over test_gpu's Catch2 test SPEC,
# appending to LOG. An error found, or a test failing under the tool, sets status=1 and is said.
sanitize() {
  compute-sanitizer --tool "$1" --error-exitcode 3 "$BUILD/bin/test_gpu" "$2" >> "$3" 2>&1 || { status=1; echo "$1 FAILED over $2"; }
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|All tests passed|failed" "$3" | tail -2
}

# bench_attention B H D TLIST REPS CSV [torch]: `vla bench attention` at one shape, its table into CSV and
# its printout onto $OUT/bench.log; with "torch", gpu/bench_torch.py then times PyTorch (SDPA bf16/fp32,
# the loop of Algorithm 1) on the same shapes, and fla's kernels where FLA_PATH names a flash-linear-attention
# source tree (default .device-carry/fla when carried: `git archive HEAD fla` of fla-org/flash-linear-attention),
# prints ratios and adds its times to the CSV as columns (what `vla report` reads). Sets status=1 on failure.
[ -z "${FLA_PATH:-}" ] && [ -d .device-carry/fla/fla ] && FLA_PATH=$PWD/.device-carry/fla
bench_attention() {
  "$BUILD/bin/vla" bench attention --device cuda --T "$4" --batch "$1" --heads "$2" --d-head "$3" --reps "$5" --csv "$6" \
    2>&1 | tee -a "$OUT/bench.log" || status=1
  if [ "${7:-}" = torch ]; then
    PYTHONUNBUFFERED=1 python3 gpu/bench_torch.py --csv "$6" ${FLA_PATH:+--fla "$FLA_PATH"} 2>&1 | tee -a "$OUT/bench.log" || status=1
  fi
}
