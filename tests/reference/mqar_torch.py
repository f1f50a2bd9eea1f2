#!/usr/bin/env python3
"""Independent PyTorch reference for the MQAR training experiment (paper Sec. 5.2, Tables 3, 6, 8).

Written from the paper (000) and docs/training.md's task layout, not from the C++ engine, so that it
can answer one question the engine cannot answer about itself: when `vla train` plateaus at ~0.17 on
MQAR n = 8 where the paper reports 1.000, is that the engine or the recipe? Same model, same recipe,
but autograd instead of a hand-written backward and PyTorch's AdamW instead of ours; the data follow
the same distribution (not the same bits: NumPy's generator, not the engine's splitmix/mt19937).

Model (Table 3/6): token + learnable positional embedding (N(0, 0.02^2)), L Pre-LN blocks
  x += Wo mixer(LN1 x) + bo;  x += W2 GELU_tanh(W1 LN2 x + b1) + b2;  logits = LNf(x) E^T (tied head),
projections N(0, 1/fan_in), biases 0, LN eps 1e-5.
Mixers, per head (d_h), state reset per sequence:
  vla       Algorithm 1 (VLAv3): lambda0 = 0.1, eps = 1e-4, A += 1e-3 I after steps t = 20, 40, ...;
            u = L2norm(W_u k_raw + b_u) / sqrt(d_h) (line 10);
            read (line 26) o = S phi(q) / max(z^T phi(q), eps), z = sum phi(k)   [--read eq11]
  deltanet  eq. (4): S = beta S + (v - S k_hat) k_hat^T, beta = sigmoid(w_g x + b_g), same read.
  linear    eq. (3): S += v phi(k)^T, same read.
  softmax   eq. (2): causal softmax(q k^T / sqrt(d_h)) v.
  --read unit replaces line 26 by o = S phi(q) / ||phi(q)|| (no running normaliser z): a hypothesis
  test, NOT the paper's algorithm.
Recipe: AdamW (0.9, 0.999), eps 1e-8, weight decay 1e-2 on matrices only, lr with 10% linear warm-up
then cosine to 0, global grad-norm clip 1.0, float32. Loss: mean cross-entropy over query positions.
MQAR tokens: keys {0..63} (n distinct), values {64..126} (with replacement), separator 127;
k1 v1 ... kn vn SEP q1 ... qn, queries the keys shuffled, targets their values; T = 3n + 1.
Eval: 15 batches of 64 from a different seed; exact match per query position; also the in-context
rate: the fraction of predictions that are one of the n values of the sequence (a model that knows
which values are present but not which key they belong to scores ~1/n in accuracy and ~1 here).

Many runs in one process: --seeds, --lrs and --reads take lists, and every combination is one run.
The runs are stacked along a leading run axis R (every parameter is (R, ...), every activation
(R, B, ...)), so one kernel launch serves all of them: the tiny model is bound by launch and Python
overhead, not arithmetic, and R runs cost about as much as one. Runs stay independent: each has its
own parameters, data stream, gradient-norm clip and learning rate (AdamW is written out below,
elementwise, so the learning rate can be a per-run vector); the loss summed over runs has, for each
run's parameters, exactly that run's gradient.

Usage: mqar_torch.py --mixer vla --pairs 8 --steps 2000 --seeds 42,123,999 [--lrs 3e-4,1e-3]
                     [--reads eq11,unit] [--device cuda|cpu] [--eval-every 250] --out FILE.json
"""
import argparse
import itertools
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

KEY_LO, KEY_HI, VAL_LO, VAL_HI, SEP, VOCAB = 0, 63, 64, 126, 127, 128


def mqar_batch(rng, batch, n):
    """(batch, T) tokens and targets (-1 = no target): k1 v1 .. kn vn SEP q1 .. qn, T = 3n + 1."""
    T = 3 * n + 1
    keys = np.argsort(rng.random((batch, KEY_HI - KEY_LO + 1)), axis=1)[:, :n] + KEY_LO  # n distinct keys
    vals = rng.integers(VAL_LO, VAL_HI + 1, size=(batch, n))                              # with replacement
    order = np.argsort(rng.random((batch, n)), axis=1)                                     # shuffled queries
    tok = np.zeros((batch, T), dtype=np.int64)
    tgt = np.full((batch, T), -1, dtype=np.int64)
    tok[:, 0:2 * n:2], tok[:, 1:2 * n:2], tok[:, 2 * n] = keys, vals, SEP
    tok[:, 2 * n + 1:] = np.take_along_axis(keys, order, axis=1)
    tgt[:, 2 * n + 1:] = np.take_along_axis(vals, order, axis=1)
    return tok, tgt


def phi(x):
    return F.elu(x) + 1.0


def layer_norm(x, g, b):  # x (R, B, T, d), g b (R, d): per-run gains
    return F.layer_norm(x, (x.shape[-1],), eps=1e-5) * g[:, None, None] + b[:, None, None]


def linear(x, W, b):  # x (R, B, T, i), W (R, o, i), b (R, o)
    return torch.einsum("rbti,roi->rbto", x, W) + b[:, None, None]


class Model(torch.nn.Module):
    """R independent copies of the model of Tables 3/6, stacked on a leading axis."""

    def __init__(self, mixer, unit_read, seeds, d=128, H=4, dh=32, ffn=256, L=2, max_len=256):
        super().__init__()
        self.mixer, self.H, self.dh = mixer, H, dh
        self.register_buffer("unit_read", torch.tensor(unit_read, dtype=torch.bool))  # (R,)
        gens = [torch.Generator().manual_seed(s) for s in seeds]
        R = len(seeds)
        g = lambda *shape, sd: torch.nn.Parameter(torch.stack([torch.randn(*shape, generator=q) * sd for q in gens]))
        z = lambda *shape: torch.nn.Parameter(torch.zeros(R, *shape))
        o = lambda *shape: torch.nn.Parameter(torch.ones(R, *shape))
        hd = H * dh
        self.tok = g(VOCAB, d, sd=0.02)    # (R, V, d), also the tied output head
        self.pos = g(max_len, d, sd=0.02)  # (R, max_len, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(L):
            p = torch.nn.ParameterDict(dict(
                ln1_g=o(d), ln1_b=z(d),
                Wq=g(hd, d, sd=d ** -0.5), bq=z(hd), Wk=g(hd, d, sd=d ** -0.5), bk=z(hd),
                Wv=g(hd, d, sd=d ** -0.5), bv=z(hd), Wo=g(d, hd, sd=hd ** -0.5), bo=z(d),
                ln2_g=o(d), ln2_b=z(d), W1=g(ffn, d, sd=d ** -0.5), b1=z(ffn), W2=g(d, ffn, sd=ffn ** -0.5), b2=z(d)))
            if mixer == "vla":
                p["Wu"] = g(H, dh, dh, sd=dh ** -0.5)  # per head (d_h, d_h), applied to k_raw (line 10)
                p["bu"] = z(H, dh)
            if mixer == "deltanet":
                p["Wg"] = g(H, d, sd=d ** -0.5)        # beta gate, one scalar per head and token
                p["bg"] = z(H)
            self.blocks.append(p)
        self.lnf_g, self.lnf_b = o(d), z(d)

    def recurrent(self, p, x, q, k, v):
        """q, k, v: (R, B, H, T, dh) -> (R, B, H, T, dh); also the last ||S||_F, ||A||_F per run."""
        R, B, H, T, dh = k.shape
        eps = 1e-4
        S = k.new_zeros(R, B, H, dh, dh)                       # line 3
        zacc = k.new_zeros(R, B, H, dh)                         # line 5
        eye = torch.eye(dh, device=k.device)
        A = (10.0 * eye).expand(R, B, H, dh, dh)                # line 4, lambda0 = 0.1
        if self.mixer == "vla":
            u_all = torch.einsum("rbhtj,rhij->rbhti", k, p["Wu"]) + p["bu"][:, None, :, None, :]
        if self.mixer == "deltanet":
            beta_all = torch.sigmoid(torch.einsum("rbti,rhi->rbht", x, p["Wg"]) + p["bg"][:, None, :, None])
        unit_read = self.unit_read[:, None, None]
        outs = []
        for t in range(T):
            kf = phi(k[..., t, :])                                      # line 8
            kh = kf / kf.norm(dim=-1, keepdim=True)                     # line 9
            vt = v[..., t, :]
            if self.mixer == "vla":
                u = u_all[..., t, :]
                u = u / u.norm(dim=-1, keepdim=True) / math.sqrt(dh)    # line 10
                zsm = (A @ u[..., None])[..., 0]                        # line 12
                delta = torch.clamp(1.0 + (u * zsm).sum(-1), min=eps)  # line 13
                A = A - zsm[..., :, None] * zsm[..., None, :] / delta[..., None, None]  # line 14
                if (t + 1) % 20 == 0:
                    A = A + 1e-3 * eye                                  # lines 15-16
                alpha = (A @ kh[..., None])[..., 0]                     # line 19
                ah = alpha / alpha.norm(dim=-1, keepdim=True)           # line 20
                e = vt - (S @ kh[..., None])[..., 0]                    # line 21
                S = S + e[..., :, None] * ah[..., None, :]              # line 22
            elif self.mixer == "deltanet":
                e = vt - (S @ kh[..., None])[..., 0]
                S = beta_all[..., t][..., None, None] * S + e[..., :, None] * kh[..., None, :]
            else:  # linear
                S = S + vt[..., :, None] * kf[..., None, :]
            qf = phi(q[..., t, :])                                      # line 24
            zacc = zacc + kf                                            # line 25
            num = (S @ qf[..., None])[..., 0]
            den = torch.where(unit_read, qf.norm(dim=-1), torch.clamp((zacc * qf).sum(-1), min=eps))  # line 26
            outs.append(num / den[..., None])
        fro = lambda M: M.flatten(-2).norm(dim=-1).mean(dim=(1, 2))
        self.norms.append((fro(S), fro(A)))
        return torch.stack(outs, dim=3)

    def forward(self, tok):  # tok (R, B, T) -> logits (R, B, T, V)
        R, B, T = tok.shape
        x = self.tok[torch.arange(R, device=tok.device)[:, None, None], tok] + self.pos[:, None, :T]
        self.norms = []
        for p in self.blocks:
            h = layer_norm(x, p["ln1_g"], p["ln1_b"])
            heads = lambda W, b: linear(h, W, b).view(R, B, T, self.H, self.dh).transpose(2, 3)  # (R, B, H, T, dh)
            q, k, v = heads(p["Wq"], p["bq"]), heads(p["Wk"], p["bk"]), heads(p["Wv"], p["bv"])
            if self.mixer == "softmax":
                o = F.scaled_dot_product_attention(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), is_causal=True)
                o = o.view(R, B, self.H, T, self.dh)
            else:
                o = self.recurrent(p, h, q, k, v)
            x = x + linear(o.transpose(2, 3).reshape(R, B, T, -1), p["Wo"], p["bo"])
            h = layer_norm(x, p["ln2_g"], p["ln2_b"])
            x = x + linear(F.gelu(linear(h, p["W1"], p["b1"]), approximate="tanh"), p["W2"], p["b2"])
        x = layer_norm(x, self.lnf_g, self.lnf_b)
        return torch.einsum("rbtd,rvd->rbtv", x, self.tok)


def batches(rngs, batch, n, device):
    tt = [mqar_batch(r, batch, n) for r in rngs]
    tok = torch.from_numpy(np.stack([a for a, _ in tt])).to(device)
    tgt = torch.from_numpy(np.stack([b for _, b in tt])).to(device)
    return tok, tgt


def evaluate(model, n, seeds, device):
    """Per run: exact match per query position and the in-context rate, 15 held-out batches of 64."""
    rngs = [np.random.default_rng(s ^ 0x5EED) for s in seeds]
    hit = inctx = count = 0
    with torch.no_grad():
        for _ in range(15):
            tok, tgt = batches(rngs, 64, n, device)
            pred = model(tok).argmax(-1)
            mask = tgt >= 0
            hit = hit + ((pred == tgt) & mask).sum(dim=(1, 2))
            vals = tok[..., 1:2 * n:2]                                            # (R, B, n)
            present = (pred[..., None] == vals[:, :, None, :]).any(-1) & mask     # (R, B, T)
            inctx = inctx + present.sum(dim=(1, 2))
            count = count + mask.sum(dim=(1, 2))
    return (hit / count).tolist(), (inctx / count).tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mixer", choices=["vla", "deltanet", "linear", "softmax"], required=True)
    ap.add_argument("--reads", default="eq11", help="comma list of eq11 (Alg. 1 line 26) | unit (hypothesis: S phi(q)/||phi(q)||)")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lrs", default="3e-4")
    ap.add_argument("--seeds", default="42")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not 1 <= a.pairs <= 63:
        sys.exit(f"--pairs: must be in 1..63, got {a.pairs}")
    if a.steps < 1:
        sys.exit(f"--steps: must be >= 1, got {a.steps}")
    reads = a.reads.split(",")
    if any(r not in ("eq11", "unit") for r in reads):
        sys.exit(f"--reads: each must be eq11 or unit, got {a.reads}")
    runs = [dict(read=r, lr=float(l), seed=int(s)) for r, l, s in itertools.product(reads, a.lrs.split(","), a.seeds.split(","))]
    R = len(runs)
    seeds = [r["seed"] for r in runs]
    torch.set_num_threads(a.threads)
    dev = a.device
    model = Model(a.mixer, [r["read"] == "unit" for r in runs], seeds).to(dev)
    params = [(n, p) for n, p in model.named_parameters()]
    # Weight decay on matrices only (embeddings and projections; not LN gains, not biases): the
    # stacked tensor of a per-run matrix has 3 or more axes; Wu is (R, H, dh, dh), bu (R, H, dh).
    decays = [(p.dim() >= 3 and not n.split(".")[-1].startswith("b")) for n, p in params]
    lr = torch.tensor([r["lr"] for r in runs], device=dev)
    m = [torch.zeros_like(p) for _, p in params]
    v2 = [torch.zeros_like(p) for _, p in params]
    warm = max(1, a.steps // 10)
    sched = lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, a.steps - warm)))
    rngs = [np.random.default_rng(s) for s in seeds]
    log, t0 = [], time.time()
    for step in range(a.steps):
        tok, tgt = batches(rngs, a.batch, a.pairs, dev)
        logits = model(tok)
        ce = F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1), ignore_index=-1, reduction="none").view(R, -1)
        loss_r = ce.sum(1) / (tgt >= 0).view(R, -1).sum(1)  # per-run mean over query positions
        model.zero_grad(set_to_none=True)
        loss_r.sum().backward()
        with torch.no_grad():
            gn = torch.sqrt(sum(p.grad.pow(2).flatten(1).sum(1) for _, p in params))  # (R,) global norms
            clip = torch.clamp(1.0 / (gn + 1e-6), max=1.0)                            # clip at 1.0
            lr_t = lr * sched(step)
            c1, c2 = 1 - 0.9 ** (step + 1), 1 - 0.999 ** (step + 1)
            for i, (_, p) in enumerate(params):
                shape = (R,) + (1,) * (p.dim() - 1)
                gr = p.grad * clip.view(shape)
                lr_p = lr_t.view(shape)
                if decays[i]:
                    p.mul_(1 - lr_p * 1e-2)                                            # decoupled decay
                m[i].mul_(0.9).add_(gr, alpha=0.1)
                v2[i].mul_(0.999).addcmul_(gr, gr, value=0.001)
                p.sub_(lr_p * (m[i] / c1) / ((v2[i] / c2).sqrt() + 1e-8))
        if not torch.isfinite(loss_r).all():
            sys.exit(f"non-finite loss at step {step + 1}: {loss_r.tolist()}")
        if (a.eval_every and (step + 1) % a.eval_every == 0) or step + 1 == a.steps:
            acc, inctx = evaluate(model, a.pairs, seeds, dev)
            for r in range(R):
                row = dict(mixer=a.mixer, **runs[r], step=step + 1, loss=loss_r[r].item(), grad_norm=gn[r].item(),
                           eval_acc=acc[r], in_context=inctx[r],
                           S_A_fro=[[n[0][r].item(), n[1][r].item()] for n in model.norms], wall_s=round(time.time() - t0, 1))
                log.append(row)
                print(json.dumps(row), flush=True)
    res = dict(config=vars(a), runs=runs, log=log, torch=torch.__version__)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
