#!/usr/bin/env bash
# The committed report against the code that writes it. Every study whose runs reports/run-archive/ keeps
# is summarised again from its archive (`vla study run --from-store`: nothing is trained, the CPU build
# reads the GPU sweep's store), and the CPU studies that train nothing and time nothing (fig4-state-norms,
# table2-jacobian: a few seconds) are run again. Each section.md and data/comparison.csv is compared with
# reports/<id>/, the section's two provenance lines ("- Training:", "- Produced by") aside. A difference means
# that a study's summary, its verdict rule or the numerics under it changed after the committed section was
# made, so the report no longer says what the code computes: regenerate the section (the command is printed)
# and `vla report`, or find out why the numbers moved. Not covered: fig2a-latency and fig3-throughput, whose
# sections are timings.
# Usage: report_from_archive.sh VLA REPO WORK   (VLA: the vla executable; WORK: a scratch folder, emptied)
set -uo pipefail
vla=$1 repo=$2 work=$3
rm -rf "$work" && mkdir -p "$work/out" || exit 2
# OUT starts from the committed study folders: recipe-capacity reads recipe-sensitivity's best recipes there.
for d in "$repo"/reports/*/; do
  [ -f "$d/section.md" ] && cp -r "$d" "$work/out/"
done
status=0

# compare ID FROM REGENERATE: the study's new section against the committed one.
compare() {
  local id=$1 from=$2 regenerate=$3 new="$work/out/$1" old="$repo/reports/$1"
  if ! diff <(grep -v -e '^- Training:' -e '^- Produced by' "$old/section.md") \
            <(grep -v -e '^- Training:' -e '^- Produced by' "$new/section.md") > "$work/$id.diff" ||
     ! cmp -s "$old/data/comparison.csv" "$new/data/comparison.csv"; then
    echo "FAIL: $id: the committed section.md or data/comparison.csv differs from its summary $from:"
    head -20 "$work/$id.diff"
    cmp "$old/data/comparison.csv" "$new/data/comparison.csv"
    echo "  to regenerate: $regenerate && vla report"
    status=1
  else
    echo "ok: $id equals its summary $from"
  fi
}

# archive:study ids[:the options its committed sections were made with]
archives=(
  "fig6-mqar-long-context.tgz:fig6-mqar-long-context"
  "paper-studies.tgz:fig5-mqar-capacity table9-per-seed table12-steps-effect fig8-overload fig9-ood table10-capacity-boundary table11-capacity-curve"
  "recipe-sensitivity.tgz:recipe-sensitivity:--pairs 8,16,24,32"
  "recipe-capacity.tgz:recipe-capacity"
  "table4-ablation.tgz:table4-ablation"
  "penalty-selectivity.tgz:penalty-selectivity"
  "curve-studies.tgz:fig7-copy table8-vla-training-logs"
)
for entry in "${archives[@]}"; do
  IFS=: read -r archive ids opts <<< "$entry"
  store="$work/${archive%.tgz}"
  mkdir -p "$store" && tar -xzf "$repo/reports/run-archive/$archive" -C "$store" || { echo "FAIL: cannot unpack $archive"; exit 2; }
  # shellcheck disable=SC2086  # ids, opts: one word each
  if ! "$vla" study run $ids $opts --device cuda --from-store --store "$store/runs" --out "$work/out" > "$store/run.log" 2>&1; then
    echo "FAIL: vla study run $ids --from-store ($archive):"; tail -5 "$store/run.log"; status=1; continue
  fi
  for id in $ids; do
    compare "$id" "from reports/run-archive/$archive" \
      "tar -xzf reports/run-archive/$archive -C DIR && vla study run $id${opts:+ $opts} --device cuda --from-store --store DIR/runs --out reports"
  done
done

cpu_ids="fig4-state-norms table2-jacobian"
# shellcheck disable=SC2086
if ! "$vla" study run $cpu_ids --device cpu --out "$work/out" > "$work/cpu.log" 2>&1; then
  echo "FAIL: vla study run $cpu_ids --device cpu:"; tail -5 "$work/cpu.log"; status=1
else
  for id in $cpu_ids; do compare "$id" "run again on the CPU" "vla study run $id --device cpu --out reports"; done
fi
exit $status
