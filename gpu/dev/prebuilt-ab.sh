#!/usr/bin/env bash
# A/B of whole builds of the GPU development drivers on a CUDA machine with no build there. Each build is a
# folder .device-carry/pab/LABEL/ holding any of cvla.xz (gpu/dev/chunked_vla_forward_check.cu), fbb.xz
# (gpu/dev/fused_backward_bench.cu) and cvlab.xz (gpu/dev/chunked_vla_backward_check.cu), each built here
# from one tree by gpu/dev/build-prebuilt.sh (so a change to a shared header, core/phi.hpp say, is compared
# as a whole). First each build's checks and bit digests (the chunked forward's `check` against
# Algorithm 1 in double; the fused and chunk-form backwards' gradient digests, which builds that should
# compute the same numbers must print alike; the chunked forward's output digest too, where its driver has the
# mode), then ROUNDS rounds of the benchmarks with the builds
# interleaved within each round, so that clock or thermal drift falls on all of them alike.
# usage: [ROUNDS=2] [REPS=20] [LABELS="base new"] bash gpu/dev/prebuilt-ab.sh      exit status non-zero if a check failed
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=/tmp/pab
status=0
LABELS=${LABELS:-$(ls .device-carry/pab)}
source gpu/dev/carried-builds.sh
for l in $LABELS; do unpack_carried "$BIN/$l" .device-carry/pab/"$l"/*.xz; done
nvidia-smi -L
for l in $LABELS; do
  echo "== $l: checks and digests [${SECONDS} s]"
  if [ -x "$BIN/$l/cvla" ]; then
    "$BIN/$l/cvla" 1 check > "/tmp/pab-check-$l.log" 2>&1 || status=1
    echo "chunked forward checks ok: $(grep -cE ' ok$' "/tmp/pab-check-$l.log")"; grep -E "FAIL|error" "/tmp/pab-check-$l.log"
    # The outputs' bit digest, where the build has the mode (an older build would run its `all` mode instead).
    if [ -n "$(cvla_parts "$BIN/$l/cvla" 4096 5)" ]; then "$BIN/$l/cvla" 1 digest | grep '^digest' || status=1; fi
  fi
  [ -x "$BIN/$l/fbb" ] && { "$BIN/$l/fbb" shapes 3 || status=1; }
  [ -x "$BIN/$l/cvlab" ] && { "$BIN/$l/cvlab" digest || status=1; }
done
for r in $(seq "${ROUNDS:-2}"); do
  for l in $LABELS; do
    echo "== round $r $l [${SECONDS} s]"
    [ -x "$BIN/$l/cvla" ] && echo "chunked forward $("$BIN/$l/cvla" "${REPS:-20}" ab | tail -1)"
    [ -x "$BIN/$l/cvla" ] && echo "chunked forward tf32 $(CVLA_PRODUCTS=tf32 "$BIN/$l/cvla" "${REPS:-20}" ab | tail -1)"
    if [ -x "$BIN/$l/fbb" ]; then
      "$BIN/$l/fbb" shapes "${REPS:-20}" | tail -n +3 | cut -d'|' -f1-2
      "$BIN/$l/fbb" streams 16 25 "${REPS:-20}"; "$BIN/$l/fbb" streams 16 97 "${REPS:-20}"
    fi
    [ -x "$BIN/$l/cvlab" ] && "$BIN/$l/cvlab" bench 4096,16384,65536 10 | tail -n +2
  done
done
echo "== done (status $status) [${SECONDS} s]"
exit $status
