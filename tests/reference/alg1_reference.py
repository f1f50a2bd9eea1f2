#!/usr/bin/env python3
"""Independent float64 NumPy reference for `vla layer-forward` (single head, batch of one).

Written from the paper (000), not from the C++:
  vla       Algorithm 1 (VLAv3), lines 3-28, with its defaults lambda0 = 0.1, eps = 1e-4,
            refresh every 20 steps by eta = 1e-3, rank-1 penalty u = L2norm(W_u k_raw) / sqrt(d_h).
  linear    eq. (3): S_t = S_{t-1} + v_t phi(k_t)^T, z_t = z_{t-1} + phi(k_t),
            o_t = S_t phi(q_t) / max(phi(q_t)^T z_t, eps)      (phi = ELU + 1).
  deltanet  eq. (4): S_t = beta_t S_{t-1} + (v_t - S_{t-1} k_hat_t) k_hat_t^T with unit keys
            k_hat_t = phi(k_t)/||phi(k_t)||, beta_t = sigmoid(W_g x_t + b_g), and the read of eq. (11)
            (as docs/recurrences.md says the toolkit implements it).
  softmax   eq. (2): o_t = sum_{s<=t} softmax_s(q_t^T k_s / sqrt(d_h)) v_s.
Output y_t = W_o o_t + b_o. Projections carry the optional biases b_q, b_k, b_v, b_u, b_g (absent = 0);
Alg. 1 line 10 applies W_u (and b_u) to k_raw = W_k x_t + b_k.

Usage: alg1_reference.py --mixer vla --params DIR --input X.npy --output Y.npy
                         [--lambda0 0.1 --eps 1e-4 --refresh-period 20 --refresh 1e-3] [--trace T.csv]
"""
import argparse
import os
import sys

import numpy as np


def phi(x):
    """ELU(x) + 1: x + 1 for x > 0, exp(x) otherwise."""
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def load(dirname, name, shape=None):
    path = os.path.join(dirname, name + ".npy")
    if not os.path.exists(path):
        return None if shape is None else np.zeros(shape)
    return np.load(path).astype(np.float64)


def forward(mixer, P, X, lambda0, eps, period, eta):
    T, d_model = X.shape
    Wq, Wk, Wv, Wo = P["Wq"], P["Wk"], P["Wv"], P["Wo"]
    dh = Wq.shape[0]
    bq, bk, bv, bo = P["bq"], P["bk"], P["bv"], P["bo"]
    Y = np.zeros((T, d_model))
    trace = []  # (S_fro, A_fro, delta, e_norm)
    S = np.zeros((dh, dh))                 # line 3
    A = np.eye(dh) / lambda0               # line 4
    z = np.zeros(dh)                       # line 5
    K, V = [], []
    for t in range(1, T + 1):              # line 6
        x = X[t - 1]
        k_raw = Wk @ x + bk                # line 7
        v = Wv @ x + bv
        q_raw = Wq @ x + bq
        A_fro = delta = e_norm = float("nan")
        if mixer == "vla":
            k_feat = phi(k_raw)                                   # line 8
            k_hat = k_feat / np.linalg.norm(k_feat)               # line 9
            w = P["Wu"] @ k_raw + P["bu"]
            u = w / np.linalg.norm(w) / np.sqrt(dh)               # line 10
            z_sm = A @ u                                          # line 12
            delta = 1.0 + u @ z_sm
            A = A - np.outer(z_sm, z_sm) / max(delta, eps)        # lines 13-14
            if period > 0 and t % period == 0:                    # lines 15-17
                A = A + eta * np.eye(dh)
            alpha = A @ k_hat                                     # line 19
            alpha_hat = alpha / np.linalg.norm(alpha)             # line 20
            e = v - S @ k_hat                                     # line 21
            S = S + np.outer(e, alpha_hat)                        # line 22
            q = phi(q_raw)                                        # line 24
            z = z + k_feat                                        # line 25
            o = S @ q / max(z @ q, eps)                           # line 26
            A_fro, e_norm = np.linalg.norm(A), np.linalg.norm(e)
        elif mixer == "linear":
            kf = phi(k_raw)
            S = S + np.outer(v, kf)
            z = z + kf
            q = phi(q_raw)
            o = S @ q / max(z @ q, eps)
            e_norm = np.linalg.norm(v)
        elif mixer == "deltanet":
            kf = phi(k_raw)
            k_hat = kf / np.linalg.norm(kf)
            g = (P["Wg"] @ x + P["bg"])[0]
            beta = 1.0 / (1.0 + np.exp(-g))
            e = v - S @ k_hat
            S = beta * S + np.outer(e, k_hat)
            z = z + kf
            q = phi(q_raw)
            o = S @ q / max(z @ q, eps)
            e_norm = np.linalg.norm(e)
        elif mixer == "softmax":
            K.append(k_raw)
            V.append(v)
            logits = np.array([q_raw @ k for k in K]) / np.sqrt(dh)
            p = np.exp(logits - logits.max())
            o = (p[:, None] * np.array(V)).sum(axis=0) / p.sum()
        else:
            raise SystemExit(f"--mixer: unknown mixer '{mixer}'")
        S_fro = np.linalg.norm(S) if mixer != "softmax" else float("nan")
        trace.append((S_fro, A_fro, delta, e_norm))
        Y[t - 1] = Wo @ o + bo
    return Y, trace


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mixer", default="vla", choices=["vla", "linear", "deltanet", "softmax"])
    ap.add_argument("--params", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--trace")
    ap.add_argument("--lambda0", type=float, default=0.1)
    ap.add_argument("--eps", type=float, default=1e-4)
    ap.add_argument("--refresh-period", type=int, default=20)
    ap.add_argument("--refresh", type=float, default=1e-3)
    a = ap.parse_args()
    X = np.load(a.input).astype(np.float64)
    Wq = load(a.params, "Wq")
    dh, dm = Wq.shape
    P = {"Wq": Wq, "Wk": load(a.params, "Wk"), "Wv": load(a.params, "Wv"), "Wo": load(a.params, "Wo"),
         "bq": load(a.params, "bq", dh), "bk": load(a.params, "bk", dh), "bv": load(a.params, "bv", dh),
         "bo": load(a.params, "bo", dm)}
    if a.mixer == "vla":
        P["Wu"] = load(a.params, "Wu")
        P["bu"] = load(a.params, "bu", dh)
    if a.mixer == "deltanet":
        P["Wg"] = load(a.params, "Wg", (1, dm)).reshape(1, dm)
        P["bg"] = load(a.params, "bg", 1).reshape(1)
    Y, trace = forward(a.mixer, P, X, a.lambda0, a.eps, a.refresh_period, a.refresh)
    np.save(a.output, Y)
    if a.trace:
        with open(a.trace, "w") as f:
            f.write("t,S_fro,A_fro,delta,e_norm\n")
            for t, row in enumerate(trace, 1):
                f.write(",".join([str(t)] + [repr(float(v)) for v in row]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
