#!/usr/bin/env bash
# Data-parallel training and sweeps over the GPUs of one host (docs/parallel.md), in one command on a
# machine with two or more GPUs (nvidia-h100-x2 / nvidia-h200-x2):
#   build (Release, sm_90, NCCL from the CUDA toolkit or PyTorch's nvidia-nccl wheel) -> the [gpu-dp]
#   tests (gradient against float64, loss curve against one GPU, replicas equal, determinism, resume) and
#   the concurrent-runs test (runs spread over the GPUs compute what each computes alone) -> memcheck over
#   the data-parallel gradient test -> `vla bench data-parallel` (the wide model: d_model 512, 8 layers,
#   T = 4096; 1 and 2 GPUs; $OUT/data-parallel.csv and .log, which reports/gpu-bench/ keeps for `vla report`) -> optionally a study sweep over both GPUs
#   (STUDIES=..., studies/run-gpu.sh) for what is left of DEADLINE.
# Settings (environment): STEPS (default test,memcheck,bench), STUDIES (default none), DEADLINE=580 (s
# since the start by which the study sweep must have written its tarballs), CONCURRENT (default 16 per
# GPU). The logs come back as $OUT/logs.tgz.
# Uses the carried Debian packages and source snapshot of gpu/device-env.sh (.device-carry/, docs/gpu.md).
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on shared hosts (device tool's KINDS.md)
if [ -z "${NCCL_ROOT:-}" ] && [ ! -f /usr/local/cuda/include/nccl.h ]; then
  NCCL_ROOT=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null) && export NCCL_ROOT
  export LD_LIBRARY_PATH=$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}
fi
HERE=$PWD
source gpu/device-env.sh
echo "NCCL: ${NCCL_ROOT:-/usr/local/cuda}"
device_build test_gpu vla
grep "NCCL" "$BUILD/CMakeCache.txt" | grep -E "^NCCL_(LIBRARY|INCLUDE_DIR)" | head -2
STEPS=${STEPS:-test,memcheck,bench}
T="$BUILD/bin/test_gpu"

if [[ $STEPS == *test* ]]; then
  step "tests: [gpu-dp], concurrent runs over the GPUs, [gpu-train]"
  "$T" "[gpu-dp]" -s > "$OUT/dp-test.log" 2>&1; rc=$?
  grep -E "worst tensor|step-1 rel|passed|failed" "$OUT/dp-test.log" | sed 's/^ *//' | head -20
  [ $rc -ne 0 ] && { status=1; grep -B3 -A12 FAILED "$OUT/dp-test.log" | head -80; }
  "$T" "concurrent GPU runs equal the same runs alone bit for bit,[gpu-train]" 2>&1 | tail -2; [ "${PIPESTATUS[0]}" -ne 0 ] && status=1
fi
if [[ $STEPS == *memcheck* ]]; then
  # API errors are not reported here: NCCL's initialisation probes and meets expected ones (peer access
  # already enabled, no kernel image for the archs its library was not built for) that are not ours;
  # memcheck's memory-access checks of every kernel, ours and NCCL's, stay on.
  step "compute-sanitizer memcheck: the data-parallel gradient test"
  timeout 180 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 "$T" "a data-parallel step's gradient over 2 GPUs meets the one-GPU bound against float64" \
    > "$OUT/sanitizer.log" 2>&1 || { status=1; echo "memcheck FAILED (or ran past 180 s)"; }
  grep -E "ERROR SUMMARY|All tests passed|failed" "$OUT/sanitizer.log" | tail -2
fi
if [[ $STEPS == *bench* ]]; then
  step "vla bench data-parallel (wide model, T = 4096)"
  "$BUILD/bin/vla" bench data-parallel --batches 16,32 --gpus 1,2 --reps 3 --csv "$OUT/data-parallel.csv" 2>&1 | tee "$OUT/data-parallel.log" || status=1
fi
if [ -n "${STUDIES:-}" ]; then
  L=$(( ${DEADLINE:-580} - 45 - (SECONDS - T0) ))
  step "studies over $(nvidia-smi -L | wc -l) GPUs: $STUDIES, LIMIT_S=$L"
  if [ "$L" -ge 60 ]; then
    (cd "$HERE" && STUDIES="$STUDIES" BENCH=0 LIMIT_S=$L CONCURRENT=${CONCURRENT:-$((16 * $(nvidia-smi -L | wc -l)))} OUT=$OUT \
       bash studies/run-gpu.sh) || status=1
  else
    echo "no time left for the studies"
  fi
fi
# The device tool brings back at most 8 files: the logs travel as one tarball.
(cd "$OUT" && ls *.log > /dev/null 2>&1 && tar -czf logs.tgz *.log && rm -f *.log)
echo "multi-gpu-check status $status [$((SECONDS - T0)) s]"
exit $status
