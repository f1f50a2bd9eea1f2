#!/usr/bin/env bash
# The full-size study suite on a CUDA machine (one H100), in one resumable command (docs/studies.md):
#   build `vla` (Release, sm_90) -> the GPU latency bench at the paper's T (Fig. 2a / 3) -> every training
#   study through one sweep (`vla study run --device cuda`: runs concurrently on the GPU, the runs it has no
#   kernel for on the host's CPU beside them) -> the report.
# Work happens in WORK (default /tmp/vla-studies: the run store WORK/runs and the study folders
# WORK/reports); on a machine that stays up between calls, running the script again continues where it
# stopped and redoes nothing finished. WORK/reports starts from the committed reports/ (a study that
# reads another's outputs, such as recipe-capacity reading recipe-sensitivity's best recipes, finds them).
# Settings (environment):
#   STUDIES="..."   study ids (default: every study that trains, and the two latency studies' GPU bench)
#   LIMIT_S=N       stop resumably (SIGINT to the sweep) after N seconds of studies: for 10-minute calls
#   CONCURRENT=16   runs at once on the GPU (an H100 gains nothing past ~12: its 16 host cores are the limit)
#   CPU_THREADS=4   threads of each CPU run beside them (the runs the GPU has no kernel for: Table 4's ablations)
#   CPU_CONCURRENT=1  such CPU runs at once (e.g. 3 x 4 threads for Table 4 alone on a 16-core host)
#   GPU_ONLY=1      leave those runs out (reported as not run)
#   PAIRS=8,16      recipe-sensitivity and recipe-capacity at these MQAR n only
#   BENCH=0         skip the latency bench;  REPORT=0  skip `vla report` (run it where the CPU studies are)
#   RUNS_IN=FILE    finished runs to start from (runs.tgz as written below): for a sweep that continues on a
#                   fresh machine; runs with a summary.json are not trained again
#   OUTCOME_LOGS=1  run-outcomes.tgz (below) also keeps each run's log.csv: the archive of a study that reads
#                   a run's curve (fig7-copy, table8-vla-training-logs)
#   At the end WORK/reports goes to $OUT/reports.tgz and the run store without its checkpoints (summary.json,
#   log.csv, key.json: what a finished run is) to $OUT/runs.tgz, so that a sweep cut by the machine going
#   back continues elsewhere. Tarballs, because the device tool does not bring back deep folder trees; a
#   store over 15 MB is split into runs.tgz.part-NN (the tool's limit per file). $OUT/run-outcomes.tgz: the
#   store's outcomes alone (kilobytes; reports/run-archive/README.md).
# Uses the carried Debian packages of gpu/device-env.sh (.device-carry/debs, docs/gpu.md "Running it").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/vla-studies-out}
# The revision the results will carry: the one `git archive` wrote into the snapshot when one is carried
# (gpu/device-env.sh builds that, not the checkout), else the checkout's.
if [ -z "${VLA_GIT_REVISION:-}" ]; then
  if [ -f .device-carry/src.tar ]; then
    VLA_GIT_REVISION=$(git get-tar-commit-id < .device-carry/src.tar | cut -c1-12)
  else
    VLA_GIT_REVISION=$(git rev-parse --short=12 HEAD 2>/dev/null)
  fi
  VLA_GIT_REVISION=${VLA_GIT_REVISION:-unknown}
  export VLA_GIT_REVISION
fi
[ -n "${RUNS_IN:-}" ] && RUNS_IN=$(realpath "$RUNS_IN")  # before device-env.sh changes directory
source gpu/device-env.sh
WORK=${WORK:-/tmp/vla-studies}
if [ -n "${RUNS_IN:-}" ]; then
  mkdir -p "$WORK" && tar -xzkf "$RUNS_IN" -C "$WORK" 2>/dev/null; echo "run store seeded from $RUNS_IN"
fi
STUDIES=${STUDIES:-"fig5-mqar-capacity table9-per-seed table8-vla-training-logs fig6-mqar-long-context fig7-copy
  table11-capacity-curve table10-capacity-boundary fig8-overload table12-steps-effect fig9-ood table4-ablation recipe-sensitivity
  recipe-capacity"}
mkdir -p "$WORK/reports/gpu-bench"
cp -rn reports/. "$WORK/reports/" 2>/dev/null  # the committed study outputs, never over this machine's
device_build vla
V="$BUILD/bin/vla"

if [ "${BENCH:-1}" = 1 ] && [ ! -f "$WORK/reports/gpu-bench/latency-8-4-32.csv" ]; then
  step "latency bench (Fig. 2a, Fig. 3): B = 8, H = 4, d_h = 32, T = 128 .. 65536"
  bench_attention 8 4 32 128,256,512,1024,2048,4096,16384,65536 3 "$WORK/reports/gpu-bench/latency-8-4-32.csv"
fi

OPTS=(--device cuda --out "$WORK/reports" --store "$WORK/runs" --cpu-threads "${CPU_THREADS:-4}" --cpu-concurrent "${CPU_CONCURRENT:-1}")
[ "${GPU_ONLY:-0}" = 1 ] && OPTS+=(--gpu-only)
[ -n "${PAIRS:-}" ] && OPTS+=(--pairs "$PAIRS")
step "studies: $(echo $STUDIES | wc -w) studies, ${CONCURRENT:-16} runs at once on the GPU"
"$V" study plan $STUDIES "${OPTS[@]}"
timeout -s INT "${LIMIT_S:-0}" "$V" study run $STUDIES "${OPTS[@]}" --concurrent "${CONCURRENT:-16}" \
  > "$OUT/studies.log" 2> "$OUT/sweep.log"
rc=$?
grep -E "^sweep: (done|stopped)|^study " "$OUT/sweep.log" | tail -30
tail -25 "$OUT/studies.log"
[ $rc -ne 0 ] && { status=1; echo "study run failed (status $rc): see sweep.log"; tail -20 "$OUT/sweep.log"; }
if grep -q "^stopped" "$OUT/studies.log"; then
  echo "stopped resumably after LIMIT_S=${LIMIT_S:-0} s: run this script again to continue"
elif [ "${REPORT:-1}" = 1 ]; then
  step "report"
  "$V" report --out "$WORK/reports" | tail -1
fi
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT" && tar -czf "$OUT/reports.tgz" -C "$WORK" reports && echo "wrote $OUT/reports.tgz"
  [ -d "$WORK/runs" ] && (cd "$WORK" && find runs -type f ! -name 'checkpoint*' | tar -czf "$OUT/runs.tgz" -T -) &&
    echo "wrote $OUT/runs.tgz (the run store without checkpoints)"
  # The store's outcomes alone (summary.json, key.json, diverged.json: what a study reads of a run that
  # needs no curve), small enough to keep in reports/run-archive/ and seed a later sweep with.
  logs=(); [ "${OUTCOME_LOGS:-0}" = 1 ] && logs=(-o -name log.csv)
  [ -d "$WORK/runs" ] && (cd "$WORK" && find runs -name summary.json -o -name key.json -o -name diverged.json "${logs[@]}" |
    tar -czf "$OUT/run-outcomes.tgz" -T -) && echo "wrote $OUT/run-outcomes.tgz${logs:+ (with the log.csv of every run)}"
  # The device tool brings back files of at most 16 MB: a larger store comes back in parts
  # (`cat runs.tgz.part-* > runs.tgz` puts it together again).
  if [ -f "$OUT/runs.tgz" ] && [ "$(stat -c %s "$OUT/runs.tgz")" -gt 15000000 ]; then
    split -b 15000000 -d "$OUT/runs.tgz" "$OUT/runs.tgz.part-" && rm "$OUT/runs.tgz" && echo "  in parts: $(ls "$OUT"/runs.tgz.part-* | wc -l)"
  fi
fi
echo "run-gpu status $status"
exit $status
