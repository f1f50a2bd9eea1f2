#!/usr/bin/env bash
# One device call for gpu/dev/gemm_3xtf32_probe.cu (built here with nvcc and carried xz'd:
#   nvcc -std=c++17 -O3 -arch=sm_90 -I. -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
#        gpu/dev/gemm_3xtf32_probe.cu gpu/gemm_3xtf32.cu -lcublas -o gemm_probe && strip gemm_probe
#   mkdir -p .device-carry/gemm && xz -c gemm_probe > .device-carry/gemm/gemm_probe.xz
# then carry .device-carry/gemm): memcheck over one run's shapes, the timings and errors at every shape,
# and R concurrent launches on R streams (STREAMS, default "4 16"). Logs in $OUT (or /tmp/gemm-out).
set -u
OUT=${OUT:-/tmp/gemm-out}; mkdir -p "$OUT"
nvidia-smi -L
# PROBES="gemm_probe_base gemm_probe": several builds carried side by side (.device-carry/gemm/NAME.xz), their
# `shapes` timings alternated in ROUNDS rounds (default 2) for an A/B in one call; memcheck and `streams` run the
# last one only.
PROBES=${PROBES:-gemm_probe}
for p in $PROBES; do xz -dc ".device-carry/gemm/$p.xz" > "/tmp/$p" && chmod +x "/tmp/$p"; done
last=${PROBES##* }
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib; do
  [ -e "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-} && break
done
status=0
compute-sanitizer --tool memcheck --error-exitcode 3 "/tmp/$last" shapes 2 1600 > "$OUT/memcheck.log" 2>&1 || status=$?
tail -3 "$OUT/memcheck.log"
rounds=1; [ "$PROBES" != "$last" ] && rounds=${ROUNDS:-2}
for r in $(seq "$rounds"); do
  for p in $PROBES; do
    echo "== $p, round $r"
    "/tmp/$p" shapes "${REPS:-50}" 2>&1 | tee "$OUT/shapes-$p-$r.log"; s=${PIPESTATUS[0]}; [ "$s" = 0 ] || status=$s
  done
done
for r in ${STREAMS:-4 16}; do "/tmp/$last" streams "$r" 20 2>&1 | tee "$OUT/streams-$r.log"; done
echo "status $status"
exit $status
