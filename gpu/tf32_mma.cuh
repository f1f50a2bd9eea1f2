#pragma once
// TF32 tensor-core products at fp32 accuracy (3xTF32), shared by the chunked VLA kernels
// (gpu/chunked_vla_forward.cu) and the dense GEMM (gpu/gemm_3xtf32.cuh): mma.sync m16n8k8 with TF32
// operands and fp32 accumulation. CUDA source: included by .cu files only.
//
// Each operand is split into a head of 11 significant bits (a TF32 number) and the remainder, and a b is
// taken as a_lo b_hi + a_hi b_lo + a_hi b_hi, the small terms first: a_lo b_lo (below 2^-22 of a b) is
// dropped and the tensor core reads the remainder's leading 11 bits (it ignores a TF32 operand's low 13), so
// each operand is represented to 2^-21 of itself where one TF32 pass would round both to 2^-11.
// The tensor core's own accumulation truncates instead of rounding to nearest. So that its error does not
// build up along a sum, each k block of 8 products is summed from zero and added to the running sum by an
// fp32 add (mma_3xtf32): against Algorithm 1 in double the chunked VLA forward then rounds as its FMA form did
// (driver checks 1.3e-7 .. 2.3e-7 against 1.1e-7 .. 2.8e-7), where chaining the blocks on the tensor core
// gave 2.3e-7 .. 3.9e-7, and carrying S across chunks there up to 7.3e-7 at one token per chunk.
// Fragments (PTX ISA, mma.m16n8k8 .tf32), with g = lane / 4 and t = lane % 4: A (16 x 8) a0 (g, t),
// a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B (8 x 8) b0 (t, g), b1 (t + 4, g); C (16 x 8)
// c0, c1 (g, 2t + {0, 1}), c2, c3 (g + 8, 2t + {0, 1}).
#include <cuda_runtime.h>

namespace vla::gpu {

struct Tf32 { unsigned hi, lo; };
// Veltkamp's split with 2^13 + 1: hi = x rounded to nearest at 11 significant bits, lo = x - hi exactly;
// four flops (cvt.rna.tf32 is an emulated sequence of about five instructions on sm_90), NaN stays NaN.
// The _rn intrinsics keep the compiler from contracting or reassociating the split away.
__device__ __forceinline__ Tf32 tf32_split(float x) {
  const float p = __fmul_rn(x, 8193.f);
  const float hi = __fsub_rn(p, __fsub_rn(p, x));
  return {__float_as_uint(hi), __float_as_uint(__fsub_rn(x, hi))};
}
__device__ __forceinline__ void mma_tf32(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// c += a b over one k block of 8: the three passes summed from zero on the tensor core, then added to c in fp32.
__device__ __forceinline__ void mma_3xtf32(float (&c)[4], const Tf32 (&a)[4], const Tf32 (&b)[2]) {
  float t[4] = {0.f, 0.f, 0.f, 0.f};
  mma_tf32(t, a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
  mma_tf32(t, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
  mma_tf32(t, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
#pragma unroll
  for (int r = 0; r < 4; ++r) c[r] += t[r];
}

}  // namespace vla::gpu
