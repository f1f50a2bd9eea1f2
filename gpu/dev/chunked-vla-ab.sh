#!/usr/bin/env bash
# On a CUDA machine: A/B timings of versions of gpu/chunked_vla_forward.cu in one call. Builds the
# development driver once per version, runs each version's checks (against Algorithm 1 in double), then
# ROUNDS rounds of the `ab` benchmark line, the versions interleaved within each round so that clock or
# thermal drift falls on all of them alike. VERSIONS: label=path pairs (default: base = the baseline kept in
# .device-carry/ab/gpu/chunked_vla_forward.cu, prepared with `git show REV:gpu/chunked_vla_forward.cu`, and
# new = the tree's). Logs into $OUT (default /tmp/cvla-ab-out).
set -u
OUT=${OUT:-/tmp/cvla-ab-out}; REPS=${REPS:-20}; ROUNDS=${ROUNDS:-3}
VERSIONS=${VERSIONS:-"base=.device-carry/ab/gpu/chunked_vla_forward.cu new=gpu/chunked_vla_forward.cu"}
mkdir -p "$OUT"; status=0
nvidia-smi -L; nvcc --version | tail -1
labels=()
for v in $VERSIONS; do
  label=${v%%=*} src=${v#*=}
  [ -f "$src" ] || { echo "chunked-vla-ab: $src (version $label) not found"; exit 2; }
  nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. -Xptxas -v gpu/dev/chunked_vla_forward_check.cu "$src" \
    gpu/recurrent_forward.cu -o "/tmp/cvla_$label" > "$OUT/build-$label.log" 2>&1 &
  labels+=("$label")
done
wait
for label in "${labels[@]}"; do
  [ -x "/tmp/cvla_$label" ] || { echo "build of $label failed"; cat "$OUT/build-$label.log"; exit 1; }
  echo "== $label: registers (spills) per kernel"
  awk '/Compiling entry function/ { match($0, /[a-z_]+_kernel(ILi[0-9]+(ELb[01])?)?/); n = substr($0, RSTART, RLENGTH);
         sub(/ILi/, "<", n); sub(/ELb0/, ", outputs", n); sub(/ELb1/, ", maps", n); if (n ~ /</) n = n ">" }
       /spill stores/ { sp = $5 } /Used [0-9]+ registers/ { print "  " n, $5, "registers,", sp, "bytes spilled" }' \
    "$OUT/build-$label.log"
  echo "== $label: checks"
  "/tmp/cvla_$label" 1 check > "$OUT/check-$label.log" 2>&1 || status=1
  grep -cE " ok$" "$OUT/check-$label.log" | sed 's/^/checks ok: /'; grep -E "FAIL|error" "$OUT/check-$label.log"
done
for r in $(seq "$ROUNDS"); do
  for label in "${labels[@]}"; do echo "round $r $label $("/tmp/cvla_$label" "$REPS" ab | tail -1)"; done
done | tee "$OUT/ab.log"
echo "== done [$SECONDS s] status $status"
exit $status
