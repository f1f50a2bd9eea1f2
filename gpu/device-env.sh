# Sourced by gpu/device-check.sh and gpu/train-check.sh: what both do before their own steps on a CUDA
# machine. Sets OUT, BUILD, status and step(); unpacks the carried Debian packages (.device-carry/debs,
# fetched beforehand with `apt-get download`, docs/gpu.md) into a private prefix, never into /; moves to
# the carried source snapshot (.device-carry/src.tar, made with `git archive HEAD`) when there is one;
# and defines device_build TARGETS... (configure Release for sm_90, build; logs in $OUT/build.log).
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

# Build the committed snapshot when one is carried: untouched by files others are still editing.
if [ -f .device-carry/src.tar ]; then
  rm -rf /tmp/vla-src && mkdir -p /tmp/vla-src && tar -xf .device-carry/src.tar -C /tmp/vla-src
  cp -r .device-carry /tmp/vla-src/ 2>/dev/null; cd /tmp/vla-src; echo "building the snapshot .device-carry/src.tar"
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
