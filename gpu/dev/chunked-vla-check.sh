#!/usr/bin/env bash
# On a CUDA machine: builds gpu/dev/chunked_vla_forward_check.cu (the chunked VLA forward, its Algorithm 1
# reference in double, the fused kernel beside it), runs the checks and the benchmark, then the checks under
# compute-sanitizer memcheck and the quick checks under racecheck. Logs into $OUT (default /tmp/cvla-out).
# SRC: the folder holding gpu/ and core/ (default: the working directory). REPS: benchmark repetitions.
set -u
OUT=${OUT:-/tmp/cvla-out}; SRC=${SRC:-.}; REPS=${REPS:-10}
mkdir -p "$OUT"; status=0
nvidia-smi -L; nvcc --version | tail -1
( cd "$SRC" && nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. -Xptxas -v gpu/dev/chunked_vla_forward_check.cu gpu/chunked_vla_forward.cu \
    gpu/recurrent_forward.cu -o /tmp/cvla_check ) > "$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
grep -A2 "Compiling entry" "$OUT/build.log" | grep -E "registers|spill" | head -30
echo "== checks and benchmark [$SECONDS s]"
/tmp/cvla_check "$REPS" all 2>&1 | tee "$OUT/check.log" || status=1
echo "== memcheck [$SECONDS s]"
compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/cvla_check 1 check > "$OUT/memcheck.log" 2>&1 || status=1
tail -3 "$OUT/memcheck.log"
echo "== racecheck [$SECONDS s]"
compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/cvla_check 1 quick > "$OUT/racecheck.log" 2>&1 || status=1
tail -3 "$OUT/racecheck.log"
echo "== done [$SECONDS s] status $status"
exit $status
