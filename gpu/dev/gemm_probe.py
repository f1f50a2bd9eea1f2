# The training step's GEMM shapes on the tensor cores: cuBLAS SGEMM against one TF32 pass and three TF32 passes
# over split operands (hi = the leading 11 bits, lo = the rest; lo_hi + hi_lo + hi_hi, the chunked kernels'
# scheme), time (CUDA events, median of 5 rounds of `reps` after warm-up) and error against float64.
# Forward/dX shape: (M, K) @ (K, N); dW shape: (K, M) @ (M, N), the reduction over the M tokens.
import torch, sys

def timed(f, reps=100):
    for _ in range(10): f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps): f()
        e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / reps * 1000)
    return sorted(ts)[2]

def split(x):
    hi = (x.view(torch.int32) & ~0x1fff).view(torch.float32)
    return hi, x - hi

def modes(A, B):
    ref = A.double() @ B.double()
    err = lambda C: ((C.double() - ref).abs().max() / ref.abs().max()).item()
    out = {}
    torch.backends.cuda.matmul.allow_tf32 = False
    out['sgemm'] = (timed(lambda: A @ B), err(A @ B))
    torch.backends.cuda.matmul.allow_tf32 = True
    out['tf32'] = (timed(lambda: A @ B), err(A @ B))
    Ah, Al = split(A); Bh, Bl = split(B)
    def three():
        C = Al @ Bh
        C.addmm_(Ah, Bl); C.addmm_(Ah, Bh)
        return C
    out['3xtf32'] = (timed(three), err(three()))
    torch.backends.cuda.matmul.allow_tf32 = False
    return out

print(torch.cuda.get_device_name(), torch.__version__)
print("shape | sgemm us (err) | tf32 us (err) | 3xtf32 us (err) | sgemm/3x")
for M in (1600, 6208, 25600, 99328):
    for (K, N) in ((128, 128), (128, 256), (256, 128), (128, 384)):
        A = torch.randn(M, K, device='cuda'); B = torch.randn(K, N, device='cuda')
        for name, (X, Y) in (('fwd', (A, B)), ('dW', (A.t().contiguous(), torch.randn(M, N, device='cuda')))):
            r = modes(X, Y)
            s = " | ".join(f"{r[k][0]:.1f} ({r[k][1]:.1e})" for k in ('sgemm', 'tf32', '3xtf32'))
            print(f"{name} {tuple(X.shape)}x{tuple(Y.shape)} | {s} | {r['sgemm'][0] / r['3xtf32'][0]:.2f}")
            sys.stdout.flush()
