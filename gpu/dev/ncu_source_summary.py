#!/usr/bin/env python3
"""Summarise an Nsight Compute source page (`ncu -i R --page source --csv --print-source cuda,sass`, gzip'd
or plain): the warp-state samples and executed instructions per CUDA source line (its three largest stall
reasons beside it; an inlined instruction counts under the call's line and the callee's alike) and per SASS
opcode (each instruction once). Which lines a kernel's warps wait at, and which instructions it issues most,
for gpu/dev/fused-bwd-stalls.sh and the like.

usage: ncu_source_summary.py FILE [LINES]     (LINES: how many source lines to list, default 40)
"""
import collections
import csv
import gzip
import re
import sys


def num(text):
    return float((text or "0").replace(",", ""))


def rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        yield from csv.reader(f)


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
    head, fname = None, "?"
    lines, reasons, ops = collections.Counter(), collections.defaultdict(collections.Counter), collections.Counter()
    executed, source, op_samples = collections.Counter(), {}, collections.Counter()
    for r in rows(path):
        if len(r) == 2 and r[0] == "File Path":
            fname = r[1].split("/")[-1]
            continue
        if r and r[0] == "Line No":
            head = r
            col = {}
            for i, c in enumerate(head):
                col.setdefault(c, i)
            samp, inst = col["Warp Stall Sampling (All Samples)"], col["Instructions Executed"]
            stalls = [c for c in head if c.startswith("stall_") and "Not Issued" not in c]
            continue
        if head is None or len(r) != len(head):
            continue
        if r[0]:  # a source line's row: the sums over its instructions
            key = f"{fname}:{r[0]}"
            lines[key] += num(r[samp])
            executed[key] += num(r[inst])
            source[key] = r[1].strip()[:90]
            for c in stalls:
                reasons[key][c[6:]] += num(r[col[c]])
        elif r[2].startswith("0x"):  # a SASS instruction (listed under each line it serves: count it once)
            m = re.match(r"\s*(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", r[3])
            if m:
                ops[(r[2], m.group(1))] = (num(r[inst]), num(r[samp]))
    total = sum(lines.values()) or 1.0
    total_ins = sum(n for n, _ in ops.values()) or 1.0
    print(f"{total:.0f} warp-state samples, {total_ins:.0f} warp instructions executed")
    print(f"{'samples':>8} {'%':>5} {'executed':>11}  line  [largest stall reasons]")
    for k, v in lines.most_common(top):
        why = ", ".join(f"{c} {x:.0f}" for c, x in reasons[k].most_common(3))
        print(f"{v:8.0f} {100 * v / total:5.1f} {executed[k]:11.0f}  {k}  {source[k]}  [{why}]")
    by_op, op_samp = collections.Counter(), collections.Counter()
    for (_, op), (n, s) in ops.items():
        by_op[op] += n
        op_samp[op] += s
    print("\nopcode, executed (% of all), samples")
    for op, n in by_op.most_common(20):
        print(f"  {op:16s} {n:12.0f} {100 * n / total_ins:5.1f}%  {op_samp[op]:8.0f}")


if __name__ == "__main__":
    main()
