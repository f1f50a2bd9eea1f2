#!/usr/bin/env python3
"""Peers of `vla bench attention` on the same shapes, on the device (PyTorch is installed there):
torch scaled_dot_product_attention (bf16 and fp32, causal; forward, and forward+backward against the
fused VLA forward+backward) and a PyTorch loop of the VLA paper's
Algorithm 1 (fp32, vectorised over batch and heads, one Python iteration per token: the paper's
"VLA-Python"). Reads the CSV that `vla bench attention --csv` wrote, prints one table with ratios, and
adds its own times to that CSV as columns (sdpa_bf16_ms, sdpa_fp32_ms, py_loop_ms; with a fwd+bwd column
there, sdpa_bf16_fwdbwd_ms and sdpa_fp32_fwdbwd_ms; nan where not run), written to a temporary file and
renamed over it, so that `vla report` reads numbers, not this printout.
With --fla PATH (a source tree of flash-linear-attention: the folder holding fla/, importable with the
device's torch, triton and einops), fla's kernels on the same shapes in the same call, the reference points
of docs/chunkwise-vla-gpu.md: its chunked delta rule in bf16 (forward: fla_chunk_delta_bf16_ms; forward and
backward: fla_chunk_delta_bf16_fwdbwd_ms), its chunked identity-plus-low-rank rule in fp32 (the S-recurrence
of VLA once alpha_hat is known: fla_chunk_iplr_fp32_ms) and its fused recurrent delta rule in fp32
(fla_recurrent_delta_fp32_ms). fla's layout is (B, T, H, D); keys L2-normalised, beta = sigmoid(normal).
Times are CUDA-event medians after warm-up (fla's Triton kernels autotune in their first calls, which the
warm-up absorbs); fla's are the fastest of three such medians: its Python-launched kernels are bound by
their launches at T <= 16384, where medians of 20 runs varied 2x from one round to the next on one H100
(fwd+bwd 2.26-4.92 ms at T = 16384), and the fastest is the conservative side to compare against.
Inputs random normal (never zeros).

usage: python3 gpu/bench_torch.py --csv bench.csv [--loop-max-T 4096] [--reps 5] [--fla PATH]
"""
import argparse
import csv
import math
import os
import sys

import torch


def time_ms(fn, reps, warmup=2):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    times.sort()
    return times[len(times) // 2]


def sdpa_ms(B, H, T, D, dtype, reps):
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dtype) for _ in range(3))
    return time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), reps)


def sdpa_fwdbwd_ms(B, H, T, D, dtype, reps):
    """Forward then backward of causal SDPA with a random dL/do (gradients w.r.t. q, k, v)."""
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    g = torch.randn(B, H, T, D, device="cuda", dtype=dtype)

    def step():
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(g)
        q.grad = k.grad = v.grad = None

    return time_ms(step, reps)


def vla_loop(q, k, v, u_raw, lam0=0.1, eps=1e-4, period=20, eta=1e-3):
    """Algorithm 1 over (B, H, T, D) fp32 tensors; returns o (B, H, T, D)."""
    B, H, T, D = q.shape
    phi = lambda x: torch.nn.functional.elu(x) + 1.0
    A = torch.eye(D, device=q.device).expand(B, H, D, D).clone() / lam0
    S = torch.zeros(B, H, D, D, device=q.device)
    z = torch.zeros(B, H, D, device=q.device)
    out = torch.empty_like(q)
    eye = torch.eye(D, device=q.device)
    for t in range(T):
        kf = phi(k[:, :, t])
        k_hat = kf / kf.norm(dim=-1, keepdim=True)
        u = torch.nn.functional.normalize(u_raw[:, :, t], dim=-1) / math.sqrt(D)
        zz = torch.einsum("bhij,bhj->bhi", A, u)
        delta = (1.0 + (u * zz).sum(-1)).clamp_min(eps)
        A = A - torch.einsum("bhi,bhj->bhij", zz, zz) / delta[..., None, None]
        if (t + 1) % period == 0:
            A = A + eta * eye
        alpha = torch.nn.functional.normalize(torch.einsum("bhij,bhj->bhi", A, k_hat), dim=-1)
        e = v[:, :, t] - torch.einsum("bhij,bhj->bhi", S, k_hat)
        S = S + torch.einsum("bhi,bhj->bhij", e, alpha)
        z = z + kf
        qf = phi(q[:, :, t])
        den = (qf * z).sum(-1).clamp_min(eps)
        out[:, :, t] = torch.einsum("bhij,bhj->bhi", S, qf) / den[..., None]
    return out


def loop_ms(B, H, T, D):
    q, k, v, u = (torch.randn(B, H, T, D, device="cuda") for _ in range(4))
    vla_loop(q[:, :, :32], k[:, :, :32], v[:, :, :32], u[:, :, :32])  # warm-up (kernels, allocator)
    return time_ms(lambda: vla_loop(q, k, v, u), reps=1, warmup=0)


def fla_ops(path):
    """fla's kernels from the source tree at `path`, or None (saying why) where they do not import."""
    sys.path.insert(0, path)
    try:
        from fla.ops.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule
        from fla.ops.generalized_delta_rule import chunk_iplr_delta_rule
    except Exception as e:  # a missing dependency or an incompatible torch/triton: the columns are left out
        print(f"fla: not importable from {path} ({type(e).__name__}: {e}); its columns are left out")
        return None
    return chunk_delta_rule, fused_recurrent_delta_rule, chunk_iplr_delta_rule


def fla_ms(ops, B, H, T, D, reps):
    """fla's forward times (ms) and its chunked delta rule's forward + backward, at (B, H, T, D)."""
    chunk_delta, recurrent_delta, chunk_iplr = ops
    unit = lambda x: torch.nn.functional.normalize(x, p=2, dim=-1)
    best = lambda fn: min(time_ms(fn, reps, warmup=3) for _ in range(3))  # the fastest of three medians

    def delta_inputs(dtype, grad=False):
        q = torch.randn(B, T, H, D, device="cuda", dtype=dtype)
        k = unit(torch.randn(B, T, H, D, device="cuda")).to(dtype)
        v = torch.randn(B, T, H, D, device="cuda", dtype=dtype)
        beta = torch.randn(B, T, H, device="cuda").sigmoid().to(dtype)
        return [x.requires_grad_(grad) for x in (q, k, v, beta)]

    q, k, v, beta = delta_inputs(torch.bfloat16)
    r = {"fla_chunk_delta_bf16_ms": best(lambda: chunk_delta(q, k, v, beta))}
    qg, kg, vg, bg = delta_inputs(torch.bfloat16, grad=True)
    g = torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16)

    def step():
        o, _ = chunk_delta(qg, kg, vg, bg)
        o.backward(g)
        for x in (qg, kg, vg, bg):
            x.grad = None

    r["fla_chunk_delta_bf16_fwdbwd_ms"] = best(step)
    q, k, v, beta = delta_inputs(torch.float32)
    r["fla_recurrent_delta_fp32_ms"] = best(lambda: recurrent_delta(q, k, v, beta))
    # VLA's write S_t = S_{t-1} (I - k_hat alpha_hat^T) + v alpha_hat^T as IPLR: a = -k_hat, b = alpha_hat.
    a_, b_ = -unit(torch.randn(B, T, H, D, device="cuda")), unit(torch.randn(B, T, H, D, device="cuda"))
    r["fla_chunk_iplr_fp32_ms"] = best(lambda: chunk_iplr(q, k, v, a_, b_))
    return r


def crossover(Ts, ours, theirs):
    """Smallest T where ours < theirs, log-log interpolated between measured points; None if never."""
    for i in range(len(Ts)):
        if ours[i] < theirs[i]:
            if i == 0:
                return f"<= {Ts[0]}"
            r0, r1 = math.log(ours[i - 1] / theirs[i - 1]), math.log(ours[i] / theirs[i])
            x = math.log(Ts[i - 1]) + (math.log(Ts[i]) - math.log(Ts[i - 1])) * r0 / (r0 - r1)
            return f"~{math.exp(x):.0f}"
    return f"> {Ts[-1]} (not reached)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--loop-max-T", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fla", default="", help="a flash-linear-attention source tree (the folder holding fla/)")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    hdr = ["T", "vla ms", "linear ms", "deltanet ms", "sdpa bf16 ms", "sdpa fp32 ms", "py loop ms",
           "sdpa bf16/vla", "sdpa fp32/vla", "py loop/vla"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + " --- |" * len(hdr))
    Ts, vla, bf, fp = [], [], [], []
    for r in rows:
        B, H, D, T = int(r["B"]), int(r["H"]), int(r["d"]), int(r["T"])
        v = float(r["vla_ms"])
        s16 = sdpa_ms(B, H, T, D, torch.bfloat16, a.reps)
        s32 = sdpa_ms(B, H, T, D, torch.float32, a.reps if T <= 16384 else 2)
        lp = loop_ms(B, H, T, D) if T <= a.loop_max_T else float("nan")
        Ts.append(T); vla.append(v); bf.append(s16); fp.append(s32)
        r.update(sdpa_bf16_ms=s16, sdpa_fp32_ms=s32, py_loop_ms=lp)
        f = lambda x: "—" if math.isnan(x) else f"{x:.4g}"
        print(f"| {T} | {f(v)} | {f(float(r['linear_ms']))} | {f(float(r['deltanet_ms']))} | {f(s16)} | {f(s32)} | {f(lp)} "
              f"| {f(s16 / v)} | {f(s32 / v)} | {f(lp / v)} |", flush=True)
    print(f"B={B} H={H} D={D}: fused VLA forward crosses below SDPA fp32 at T {crossover(Ts, vla, fp)}, "
          f"below SDPA bf16 at T {crossover(Ts, vla, bf)}")

    ops = fla_ops(a.fla) if a.fla else None
    if ops:
        hdr = ["T", "chunked VLA ms", "fla chunk delta bf16", "fla chunk iplr fp32", "fla recurrent delta fp32",
               "chunked VLA fwd+bwd (fastest)", "fla chunk delta bf16 fwd+bwd", "chunked/fla fwd", "chunked/fla fwd+bwd"]
        print("| " + " | ".join(hdr) + " |")
        print("|" + " --- |" * len(hdr))
        for r in rows:
            B, H, D, T = int(r["B"]), int(r["H"]), int(r["d"]), int(r["T"])
            r.update(fla_ms(ops, B, H, T, D, a.reps))
            c = float(r.get("vla_chunked_ms", "nan"))
            cfb = min((x for x in (float(r.get("vla_chunked_fwdbwd_ms", "nan")), float(r.get("vla_chunkform_fwdbwd_ms", "nan")))
                       if not math.isnan(x)), default=float("nan"))
            f = lambda x: "—" if math.isnan(x) else f"{x:.4g}"
            print(f"| {T} | {f(c)} | {f(r['fla_chunk_delta_bf16_ms'])} | {f(r['fla_chunk_iplr_fp32_ms'])} "
                  f"| {f(r['fla_recurrent_delta_fp32_ms'])} | {f(cfb)} | {f(r['fla_chunk_delta_bf16_fwdbwd_ms'])} "
                  f"| {f(c / r['fla_chunk_delta_bf16_ms'])} | {f(cfb / r['fla_chunk_delta_bf16_fwdbwd_ms'])} |", flush=True)

    # Forward + backward (training step of the mixer alone), where the CSV has the VLA column.
    rows_fb = [r for r in rows if "vla_fwdbwd_ms" in r and not math.isnan(float(r["vla_fwdbwd_ms"]))]
    if not rows_fb:
        write_csv(a.csv, rows)
        return
    hdr = ["T", "vla fwd+bwd ms", "linear fwd+bwd ms", "deltanet fwd+bwd ms", "sdpa bf16 fwd+bwd ms",
           "sdpa fp32 fwd+bwd ms", "sdpa bf16/vla", "sdpa fp32/vla"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + " --- |" * len(hdr))
    Ts, vla, bf, fp = [], [], [], []
    for r in rows_fb:
        B, H, D, T = int(r["B"]), int(r["H"]), int(r["d"]), int(r["T"])
        v = float(r["vla_fwdbwd_ms"])
        s16 = sdpa_fwdbwd_ms(B, H, T, D, torch.bfloat16, a.reps)
        s32 = sdpa_fwdbwd_ms(B, H, T, D, torch.float32, a.reps if T <= 16384 else 1)
        Ts.append(T); vla.append(v); bf.append(s16); fp.append(s32)
        r.update(sdpa_bf16_fwdbwd_ms=s16, sdpa_fp32_fwdbwd_ms=s32)
        lin, dn = float(r.get("linear_fwdbwd_ms", "nan")), float(r.get("deltanet_fwdbwd_ms", "nan"))
        print(f"| {T} | {v:.4g} | {lin:.4g} | {dn:.4g} | {s16:.4g} | {s32:.4g} | {s16 / v:.4g} | {s32 / v:.4g} |", flush=True)
    print(f"B={B} H={H} D={D}: fused VLA fwd+bwd crosses below SDPA fp32 fwd+bwd at T {crossover(Ts, vla, fp)}, "
          f"below SDPA bf16 fwd+bwd at T {crossover(Ts, vla, bf)}")
    write_csv(a.csv, rows)


def write_csv(path, rows):
    """The benchmark's rows with this script's columns added (nan in a row that did not get one)."""
    fields = list(rows[0].keys())
    for r in rows:
        fields += [k for k in r if k not in fields]
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="nan", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
