// gpu/train/model.hpp: the batch forward and backward, layer by layer in the order of
// core/model/transformer.hpp and core/model/mixer.hpp (the CPU reference these are tested against).
#include "gpu/train/model.hpp"

#include "core/rules/gpu_support.hpp"
#include "gpu/chunked_vla_backward.hpp"
#include "gpu/chunked_vla_forward.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/gemm_3xtf32.hpp"
#include "gpu/recurrent_backward.hpp"
#include "gpu/recurrent_forward.hpp"
#include "gpu/softmax_attention.hpp"
#include "gpu/train/kernels.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>

namespace vla::gpu::train {

using model::Params;

namespace {

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(fmt::format("cuBLAS error in {}: status {}", what, int(s)));
}
void check_launch(cudaError_t e, const char* what) { check(e, what); }

}  // namespace

void validate_gpu_config(const model::ModelConfig& cfg, RecurrentForm form) {
  cfg.validate();
  const GpuKernel k = gpu_kernel_for(cfg.mixer, cfg.d_head, GpuUse::Training);  // throws naming the flag and what is allowed
  if (form == RecurrentForm::Chunked)
    if (const std::string why = chunked_refusal(k, cfg.d_head); !why.empty()) throw std::invalid_argument(why);
}

struct GpuModel::Impl {
  model::ModelConfig cfg;
  // The mixer's GPU path, from its rule's GPU trait (core/rules/<rule>/gpu.hpp), read once. Softmax
  // attention is not a recurrence: it runs gpu/softmax_attention.hpp (cuBLAS + row kernels) instead.
  GpuKernel trait;
  bool softmax() const { return trait.path == GpuPath::Softmax; }  // then kind() is Linear: no u, no gate
  RecurrentKind kind() const { return trait.kind; }
  bool gated() const { return trait.gated; }
  RecurrentForm form = RecurrentForm::Auto;  // asked for; resolved per batch shape in allocate()
  bool chunked = false;                      // this shape runs the chunked pair
  int group_tokens = 0;                      // the chunked pair's backward groups (tokens)
  std::vector<std::size_t> off;            // start of tensor i in the flat arrays
  std::vector<int> rows, cols;             // tensor i's shape
  DeviceBuffer P, G, M, V;                 // flat parameters, gradient, AdamW moments
  DeviceBuffer adamw_tensors;              // per tensor: int64 off << 1 | decayed (kernels.hpp's adamw)
  long adam_step = 0;
  cublasHandle_t blas = nullptr;
  cudaStream_t stream = nullptr;          // every launch, copy and GEMM of this model runs on it
  int device = 0;                          // the GPU that holds all of the above
  // Activations for the current (B, T). Shapes: N = B T rows, d = d_model, H heads of dh (hd = H dh),
  // F = ffn, V = vocab. The per-head tensors are kept as the recurrent kernels read them, (B, H, T, dh):
  // the projections read and write them head-major in place (heads(), gpu/gemm_3xtf32.hpp).
  int B = 0, T = 0, N = 0;
  // A LayerNorm's output and what its backward reads (core/model/layernorm.hpp).
  struct LayerNormActs {
    DeviceBuffer xhat, rstd, Y;  // (N, d), (N), (N, d)
    LayerNormActs() = default;
    LayerNormActs(std::size_t n, std::size_t d) : xhat(n * d), rstd(n), Y(n * d) {}
  };
  // The mixer's activations (core/model/mixer.hpp).
  struct MixerActs {
    DeviceBuffer qkv, u, g;      // q, k, v one after another, each (B, H, T, dh): H1 W^T + b (one product, qkv_heads());
                                 // u = u_raw (VLA), (B, H, T, dh); g = gate logits, (B, H, T) (DeltaNet)
    DeviceBuffer o;              // (B, H, T, dh): the attention's output
    DeviceBuffer Wu_blocks;      // VLA: (hd, hd) the block-diagonal matrix of W_u's heads (u = k Wu_blocks^T + b_u)
    // Recurrent mixers: what this layer's forward leaves for its backward: the fused pair's backward
    // workspace filled with its checkpoints (x.checkpoints), so the backward skips its own first forward
    // pass; the chunked pair's state before every chunk (chunk_starts). One per layer: all forwards run
    // before the first backward.
    DeviceBuffer ck;
    MixerActs() = default;
    MixerActs(std::size_t n, std::size_t hd, std::size_t H, bool vla, bool gated)
        : qkv(3 * n * hd), u(vla ? n * hd : 0), g(gated ? n * H : 0), o(n * hd), Wu_blocks(vla ? hd * hd : 0) {}
    float* q() const { return qkv.get(); }
    float* k() const { return qkv.get() + qkv.size() / 3; }
    float* v() const { return qkv.get() + 2 * (qkv.size() / 3); }
  };
  struct FfnActs {
    DeviceBuffer Z1, A1;  // (N, F): H2 W1^T + b1, GELU(Z1)
    FfnActs() = default;
    FfnActs(std::size_t n, std::size_t F) : Z1(n * F), A1(n * F) {}
  };
  struct BlockActs {
    LayerNormActs ln1;  // ln1.Y = H1, the mixer's input
    MixerActs mix;
    LayerNormActs ln2;  // ln2.Y = H2, the FFN's input
    FfnActs ffn;
    BlockActs(std::size_t n, std::size_t d, std::size_t hd, std::size_t H, std::size_t F, bool vla, bool gated)
        : ln1(n, d), mix(n, hd, H, vla, gated), ln2(n, d), ffn(n, F) {}
  };
  // The mixer backward's scratch, shared by the blocks: dL/d of MixerActs' tensors, same shapes.
  struct MixerGrads {
    DeviceBuffer dO, dqkv, du, dg;  // dqkv: dq, dk, dv one after another, as MixerActs::qkv
    MixerGrads() = default;
    MixerGrads(std::size_t n, std::size_t hd, std::size_t H) : dO(n * hd), dqkv(3 * n * hd), du(n * hd), dg(n * H) {}
    float* dq() const { return dqkv.get(); }
    float* dk() const { return dqkv.get() + dqkv.size() / 3; }
    float* dv() const { return dqkv.get() + 2 * (dqkv.size() / 3); }
  };
  std::vector<BlockActs> L;
  DeviceBuffer X;                          // (N, d) the residual stream
  LayerNormActs lnf;                       // lnf.Y = HF, the head's input
  DeviceBuffer logits, dlogits, ce, correct;  // (N, V), (N, V), (N), int32 (N)
  // int32 in 4-byte slots: tokens (N), targets (N), then the positions grouped by token (N; ascending
  // within a token) and where each token's group starts (V + 1), for the embedding's gradient.
  DeviceBuffer ids;
  DeviceBuffer stats;                      // (L, B, H, T, 3): the fused forward's ||S_t||_F, ||A_t||_F, delta_t
  SoftmaxAttentionPlan plan;               // softmax: query chunking of the score workspace `work`
  DeviceBuffer dX, dH;                     // (N, d): dL/dX of the residual stream; dL/dY of a LayerNorm's output
  DeviceBuffer dF;                         // (N, F): the FFN's dL/dA1, then dL/dZ1
  MixerGrads dmix;
  DeviceBuffer work, partials;             // softmax attention's score workspace; grad_norm's kSumSqBlocks doubles
  DeviceBuffer colsum;                     // column_sums' per-split sums, sized for the step's largest
  DeviceBuffer gemm_work;                  // gemm_3xtf32's per-slice partial products, sized for the step's largest
  DeviceBuffer dWu_full;                   // VLA: (hd, hd) du^T k over all head pairs, its diagonal blocks dW_u
  // cuBLAS reads and writes the row layout (B, T, H, dh): where it runs a product of a head-major tensor, that
  // tensor passes through one of these (N, hd) buffers, permuted (allocated on first use: the shapes the
  // fused GEMM takes never need them).
  std::array<DeviceBuffer, 3> row_scratch;
  DeviceBuffer chunk_work;                 // the chunked pair's backward workspace, shared by the layers
  DeviceBuffer chunk_fwd_work;             // the chunked forward's, shared by the layers (one runs at a time)

  float* p(int i) const { return P.get() + off[i]; }
  float* g(int i) const { return G.get() + off[i]; }
  int blk(int l, model::BlockTensor k) const { return 2 + l * model::kPerBlock + k; }
  int lnf_g() const { return int(off.size()) - 2; }  // the final LayerNorm's gain and bias: the last two tensors
  int lnf_b() const { return int(off.size()) - 1; }
  const int* token_ids() const { return reinterpret_cast<const int*>(ids.get()); }
  const int* target_ids() const { return token_ids() + N; }
  const int* token_positions() const { return token_ids() + 2 * std::size_t(N); }
  const int* token_starts() const { return token_ids() + 3 * std::size_t(N); }

  // The per-head tensors (B, H, T, dh) as head-major (N, hd) matrices; q, k, v side by side as one (N, 3 hd)
  // (their weights and biases are adjacent in P: the constructor's layout); the gate logits (B, H, T) as (N, H).
  HeadMajor heads() const { return {T, cfg.d_head}; }
  HeadMajor qkv_heads() const { return {T, cfg.d_head, 3}; }
  HeadMajor gate_heads() const { return {T, 1}; }

  // The dense projections' products: the fused 3xTF32 GEMM (gpu/gemm_3xtf32.hpp: fp32 accuracy on the tensor
  // cores) where its contract takes the product and it is the faster, cuBLAS SGEMM otherwise (dimensions that
  // are not multiples of 4, unaligned tensors, a weight gradient over many tokens, heads of a width that is
  // not a multiple of 4). A product of a head-major tensor stays fused whenever the contract takes it, also
  // where SGEMM alone is faster (a weight gradient over more than kGemm3xTf32MaxFasterK tokens: 0.80-0.93x),
  // since SGEMM would need a permute before or after it.
  static bool fused_gemm(int M, int N, int K, const void* A, const void* B, const void* C, MatrixLayout la, MatrixLayout lb,
                         const GemmHeads& h) {
    const bool any_heads = h.a.on() || h.b.on() || h.c.on();
    return gemm_3xtf32_serves(M, N, K, A, B, C, la, lb, h) && (any_heads || gemm_3xtf32_faster(M, N, K));
  }
  // For cuBLAS: row_scratch[slot] (N, hd); to_rows: a head-major (n, cols) tensor permuted into it, in the
  // row layout; rows_of: the same, or x itself when it is not head-major.
  float* scratch(int slot) {
    const std::size_t need = std::size_t(N) * cfg.heads * cfg.d_head;
    if (row_scratch[slot].size() < need) row_scratch[slot] = DeviceBuffer(need);
    return row_scratch[slot].get();
  }
  float* to_rows(const float* x, HeadMajor h, int n, int cols, int slot) {
    float* y = scratch(slot);
    check_launch(bhtc_to_bthc(x, n / h.T, h.T, cols / h.d, h.d, y, stream), "permute to rows");
    return y;
  }
  const float* rows_of(const float* x, HeadMajor h, int n, int cols, int slot) { return h.on() ? to_rows(x, h, n, cols, slot) : x; }
  // Y (n, out) = beta Y + X (n, in) W^T, W (out, in) row-major; then Y += b (when b). X or Y head-major
  // where xh, yh say.
  void linear_fwd(const float* Xp, int n, int in, const float* W, const float* b, int out, float* Y, float beta, HeadMajor xh = {},
                  HeadMajor yh = {}) {
    constexpr auto R = MatrixLayout::RowMajor, Cm = MatrixLayout::ColMajor;
    if (fused_gemm(n, out, in, Xp, W, Y, R, Cm, {xh, {}, yh})) {  // the bias in the product's epilogue
      check_launch(gemm_3xtf32(R, Cm, n, out, in, Xp, W, beta, Y, GemmEpilogue{b, nullptr}, gemm_work.get(), gemm_work.size(), stream, {xh, {}, yh}),
                   "gemm forward");
      return;
    }
    if (yh.groups > 1) {  // tensor by tensor: W's rows, b and Y in blocks of out / groups
      const int o = out / yh.groups;
      for (int t = 0; t < yh.groups; ++t)
        linear_fwd(Xp, n, in, W + std::size_t(t) * o * in, b ? b + std::size_t(t) * o : nullptr, o, Y + std::size_t(t) * n * o, beta, xh, {yh.T, yh.d});
      return;
    }
    const float one = 1.f;
    const float* x = rows_of(Xp, xh, n, in, 0);
    float* y = yh.on() ? (beta != 0.f ? to_rows(Y, yh, n, out, 1) : scratch(1)) : Y;
    check_blas(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, W, in, x, in, &beta, y, out), "sgemm forward");
    if (b) check_launch(add_bias(y, b, n, out, stream), "add_bias");
    if (yh.on()) check_launch(bthc_to_bhtc(y, n / yh.T, yh.T, out / yh.d, yh.d, Y, stream), "permute to heads");
  }
  // dW (+)= dY^T X (accumulate_dw, else =), db += column sums of dY, dX = beta dX + dY W (when dXp). dY, X
  // or dX head-major where dyh, xh, dxh say.
  void linear_bwd(const float* dY, int n, int out, const float* Xp, int in, const float* W, float* dW, float* db, float* dXp, float beta,
                  HeadMajor dyh = {}, HeadMajor xh = {}, HeadMajor dxh = {}, bool accumulate_dw = true) {
    constexpr auto R = MatrixLayout::RowMajor, Cm = MatrixLayout::ColMajor;
    if (dyh.groups > 1 && !(fused_gemm(out, in, n, dY, Xp, dW, Cm, R, {dyh, xh, {}}) && (!dXp || fused_gemm(n, in, out, dY, W, dXp, R, R, {dyh, {}, dxh})))) {
      const int o = out / dyh.groups;  // tensor by tensor, their dX summed
      for (int t = 0; t < dyh.groups; ++t)
        linear_bwd(dY + std::size_t(t) * n * o, n, o, Xp, in, W + std::size_t(t) * o * in, dW + std::size_t(t) * o * in, db ? db + std::size_t(t) * o : nullptr,
                   dXp, t == 0 ? beta : 1.f, {dyh.T, dyh.d}, xh, dxh, accumulate_dw);
      return;
    }
    const float one = 1.f, dw_beta = accumulate_dw ? 1.f : 0.f;
    const float* dy_rows = nullptr;  // dY in the row layout, once a cuBLAS product has needed it
    auto dy_for_blas = [&] { return dy_rows ? dy_rows : (dy_rows = rows_of(dY, dyh, n, out, 0)); };
    if (fused_gemm(out, in, n, dY, Xp, dW, Cm, R, {dyh, xh, {}})) {  // db from the same product: the row sums of its A = dY^T
      check_launch(gemm_3xtf32(Cm, R, out, in, n, dY, Xp, dw_beta, dW, GemmEpilogue{nullptr, db}, gemm_work.get(), gemm_work.size(), stream,
                               {dyh, xh, {}}),
                   "gemm dW");
    } else {
      check_blas(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, rows_of(Xp, xh, n, in, 1), in, dy_for_blas(), out, &dw_beta, dW, in),
                 "sgemm dW");
      if (db) check_launch(column_sums(dy_for_blas(), n, out, db, colsum.get(), stream), "column_sums");
    }
    if (!dXp) return;
    if (fused_gemm(n, in, out, dY, W, dXp, R, R, {dyh, {}, dxh})) {
      check_launch(gemm_3xtf32(R, R, n, in, out, dY, W, beta, dXp, GemmEpilogue{}, gemm_work.get(), gemm_work.size(), stream, {dyh, {}, dxh}),
                   "gemm dX");
      return;
    }
    float* dx = dxh.on() ? (beta != 0.f ? to_rows(dXp, dxh, n, in, 2) : scratch(2)) : dXp;
    check_blas(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, W, in, dy_for_blas(), out, &beta, dx, in), "sgemm dX");
    if (dxh.on()) check_launch(bthc_to_bhtc(dx, n / dxh.T, dxh.T, in / dxh.d, dxh.d, dXp, stream), "permute to heads");
  }

  void allocate(int b, int t) {
    if (b == B && t == T) return;
    B = b; T = t; N = b * t;
    const std::size_t n = N, d = cfg.d_model, hd = std::size_t(cfg.heads) * cfg.d_head, F = cfg.ffn, V_ = cfg.vocab, H = cfg.heads;
    L.clear();
    L.reserve(cfg.layers);
    for (int l = 0; l < cfg.layers; ++l) L.emplace_back(n, d, hd, H, F, kind() == RecurrentKind::Vla, gated());
    X = DeviceBuffer(n * d);
    lnf = LayerNormActs(n, d);
    logits = DeviceBuffer(n * V_); dlogits = DeviceBuffer(n * V_); ce = DeviceBuffer(n); correct = DeviceBuffer(n);
    ids = DeviceBuffer(3 * n + std::size_t(V_) + 1);
    dX = DeviceBuffer(n * d); dH = DeviceBuffer(n * d); dF = DeviceBuffer(n * F);
    dmix = MixerGrads(n, hd, H);
    for (auto& r : row_scratch) r = DeviceBuffer();
    stats = DeviceBuffer(softmax() ? 0 : std::size_t(cfg.layers) * n * H * 3);
    std::size_t scratch = column_sums_scratch_floats(B, T * int(d));  // the positional gradient: (B, T d) column sums
    for (const std::size_t m : {d, hd, F, H}) scratch = std::max(scratch, column_sums_scratch_floats(N, int(m)));
    colsum = DeviceBuffer(scratch);
    // The GEMMs' split-K workspace, sized for the largest of every linear layer's three products (linear_fwd,
    // linear_bwd): y (N, out) over in, dW (out, in) over N, dx (N, in) over out.
    std::size_t gemm_scratch = 0;
    for (const auto& [out, in] : {std::pair{3 * hd, d}, std::pair{hd, d}, std::pair{d, hd}, std::pair{hd, hd}, std::pair{F, d}, std::pair{d, F},
                                  std::pair{H, d}, std::pair{V_, d}})
      for (const auto [M, Nc, K] : {std::array{N, int(out), int(in)}, std::array{int(out), int(in), N}, std::array{N, int(in), int(out)}})
        gemm_scratch = std::max(gemm_scratch, gemm_3xtf32_workspace_floats(M, Nc, K));
    gemm_work = DeviceBuffer(gemm_scratch);
    dWu_full = DeviceBuffer(kind() == RecurrentKind::Vla ? hd * hd : 0);
    chunked = !softmax() && (form == RecurrentForm::Chunked ||
                             (form == RecurrentForm::Auto && chunked_serves(trait, cfg.d_head) && chunked_train_faster(B * cfg.heads, T)));
    if (softmax()) {
      plan = softmax_attention_plan(B, cfg.heads, T);
      work = DeviceBuffer(plan.workspace_floats);
    } else if (chunked) {
      group_tokens = chunked_vla_backward_group_tokens(0, trait.params, B, cfg.heads, T);
      chunk_work = DeviceBuffer(chunked_vla_backward_workspace_floats(0, trait.params, B, cfg.heads, T, group_tokens));
      chunk_fwd_work = DeviceBuffer(chunked_vla_forward_workspace_floats(B, cfg.heads, T, 0, 0, trait.params));
      for (auto& y : L) y.mix.ck = DeviceBuffer(chunked_vla_chunk_starts_floats(B, cfg.heads, T, 0, trait.params));
    } else {
      chunk_work = DeviceBuffer();
      chunk_fwd_work = DeviceBuffer();
      for (auto& y : L) y.mix.ck = DeviceBuffer(recurrent_backward_workspace_floats(B, cfg.heads, T, cfg.d_head));
    }
  }

  // The layers, each forward beside its backward (defined below, in the model's order).
  int upload_batch(const vla::train::Batch& batch);
  void embedding_forward();
  void embedding_backward();
  void ln_forward(int gain, int bias, LayerNormActs& a, const char* what);
  void ln_backward(int gain, int bias, const LayerNormActs& a, bool accumulate, const char* what);
  void mixer_forward(int l, const float* H1, MixerActs& a, bool backward, const RecurrentParams& rp);
  void mixer_backward(int l, const float* H1, const MixerActs& a, const RecurrentParams& rp);
  void u_forward(int l, MixerActs& a);
  void u_backward(int l, const MixerActs& a);
  RecurrentTensors kernel_inputs(const MixerActs& a) const;
  void ffn_forward(int l, const float* H2, FfnActs& a);
  void ffn_backward(int l, const float* H2, const FfnActs& a);
  GpuBatchResult head_forward(double scale, int total_targets);
  void head_backward();
  void read_state_norms(GpuBatchResult& r);

};

GpuModel::GpuModel(const model::ModelConfig& cfg, const Params<float>& p, cudaStream_t stream, RecurrentForm form)
    : impl_(std::make_unique<Impl>()) {
  validate_gpu_config(cfg, form);
  auto& m = *impl_;
  m.cfg = cfg;
  m.stream = stream;
  check(cudaGetDevice(&m.device), "cudaGetDevice");
  m.trait = gpu_kernel_of(cfg.mixer);
  m.form = form;
  // P's layout: core/model/params.hpp's order, but for each block's q, k, v projections, whose weights [Wq; Wk;
  // Wv] and biases [bq bk bv] lie next to each other, so that one product computes the three (mixer_forward).
  // `order` lists the tensors by ascending offset (AdamW's table is searched by offset).
  static_assert(model::BQ == model::WQ + 1 && model::WK == model::WQ + 2 && model::BK == model::WQ + 3 && model::WV == model::WQ + 4 &&
                    model::BV == model::WQ + 5,
                "the q, k, v tensors are read as one span of core/model/params.hpp's order");
  std::vector<int> order(p.t.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  for (int l = 0; l < cfg.layers; ++l) {
    using namespace model;
    const int at = p.block(l, WQ);  // the params.hpp order here: WQ, BQ, WK, BK, WV, BV
    const std::array<BlockTensor, 6> qkv_first{WQ, WK, WV, BQ, BK, BV};
    for (int k = 0; k < 6; ++k) order[std::size_t(at + k)] = p.block(l, qkv_first[std::size_t(k)]);
  }
  std::size_t total = 0;
  m.off.assign(p.t.size(), 0);
  for (const auto& t : p.t) {
    m.rows.push_back(int(t.rows()));
    m.cols.push_back(int(t.cols()));
  }
  for (const int i : order) {
    m.off[std::size_t(i)] = total;
    total += std::size_t(p.t[std::size_t(i)].size());
  }
  m.P = DeviceBuffer(total); m.G = DeviceBuffer(total); m.M = DeviceBuffer(total); m.V = DeviceBuffer(total);
  {  // AdamW's tensor table: matrices are decayed, vectors not (core/train/adamw.hpp's rule)
    std::vector<long long> table;
    for (const int i : order) table.push_back((long long)m.off[std::size_t(i)] << 1 | (m.cols[std::size_t(i)] > 1 ? 1 : 0));
    m.adamw_tensors = DeviceBuffer(2 * table.size());  // two float slots per int64
    check(cudaMemcpy(m.adamw_tensors.get(), table.data(), table.size() * sizeof(long long), cudaMemcpyHostToDevice), "upload AdamW table");
  }
  check(cudaMemset(m.M.get(), 0, total * sizeof(float)), "cudaMemset M");
  check(cudaMemset(m.V.get(), 0, total * sizeof(float)), "cudaMemset V");
  check(cudaMemset(m.G.get(), 0, total * sizeof(float)), "cudaMemset G");
  m.partials = DeviceBuffer(2 * kSumSqBlocks);  // kSumSqBlocks doubles
  check_blas(cublasCreate(&m.blas), "cublasCreate");
  check_blas(cublasSetStream(m.blas, stream), "cublasSetStream");
  // Default math: SGEMM in plain fp32 (TF32 is only used when asked for with CUBLAS_TF32_TENSOR_OP_MATH);
  // the parity bounds assume fp32 products.
  check_blas(cublasSetMathMode(m.blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  set_params(p);
}

GpuModel::~GpuModel() {
  if (!impl_) return;
  DeviceGuard on(impl_->device);  // the buffers are freed on their own GPU
  if (impl_->blas) cublasDestroy(impl_->blas);
  impl_.reset();
}

namespace {
// Uploads p (Eigen, column-major) into buf in the flat row-major layout. The memsets and the upload
// run on the legacy default stream, which does not order against a non-blocking stream: wait for the
// model's stream before (no step still reads buf) and for the device after.
void upload_like(const GpuModel::Impl& m, DeviceBuffer& buf, const Params<float>& p, const char* what) {
  if (p.t.size() != m.off.size()) throw std::invalid_argument(fmt::format("GpuModel::{}: parameter list of a different model", what));
  std::vector<float> h(buf.size());
  for (std::size_t i = 0; i < p.t.size(); ++i) {
    if (p.t[i].rows() != m.rows[i] || p.t[i].cols() != m.cols[i])
      throw std::invalid_argument(fmt::format("GpuModel::{}: tensor {} has a different shape", what, p.names[i]));
    for (int r = 0; r < m.rows[i]; ++r)
      for (int c = 0; c < m.cols[i]; ++c) h[m.off[i] + std::size_t(r) * m.cols[i] + c] = p.t[i](r, c);
  }
  check(cudaStreamSynchronize(m.stream), "upload (sync)");
  buf.upload(h);
  check(cudaDeviceSynchronize(), "upload (device sync)");
}
}  // namespace

void GpuModel::set_params(const Params<float>& p) {
  DeviceGuard on(impl_->device);
  upload_like(*impl_, impl_->P, p, "set_params");
}

void GpuModel::set_adam_moments(const Params<float>& m, const Params<float>& v, long step) {
  DeviceGuard on(impl_->device);
  if (step < 0) throw std::invalid_argument(fmt::format("GpuModel::set_adam_moments: step must be >= 0, got {}", step));
  upload_like(*impl_, impl_->M, m, "set_adam_moments");
  upload_like(*impl_, impl_->V, v, "set_adam_moments");
  impl_->adam_step = step;
}

namespace {
Params<float> download_like(const GpuModel::Impl& m, const DeviceBuffer& buf, const Params<float>& layout) {
  Params<float> o = layout;
  check(cudaStreamSynchronize(m.stream), "download (sync)");  // the model's stream wrote buf
  const std::vector<float> h = buf.download();
  for (std::size_t i = 0; i < o.t.size(); ++i)
    for (int r = 0; r < m.rows[i]; ++r)
      for (int c = 0; c < m.cols[i]; ++c) o.t[i](r, c) = h[m.off[i] + std::size_t(r) * m.cols[i] + c];
  return o;
}
Params<float> layout_of(const GpuModel::Impl& m) {
  Params<float> p = model::init_params<float>(m.cfg, 0);
  return p;
}
}  // namespace

Params<float> GpuModel::params() const {
  DeviceGuard on(impl_->device);
  return download_like(*impl_, impl_->P, layout_of(*impl_));
}
Params<float> GpuModel::grads() const {
  DeviceGuard on(impl_->device);
  return download_like(*impl_, impl_->G, layout_of(*impl_));
}
GpuModel::DeviceArray GpuModel::gradient() { return {impl_->G.get(), impl_->G.size(), impl_->stream, impl_->device}; }

long GpuModel::adam_moments(Params<float>& mo, Params<float>& vo) const {
  DeviceGuard on(impl_->device);
  const Params<float> layout = layout_of(*impl_);
  mo = download_like(*impl_, impl_->M, layout);
  vo = download_like(*impl_, impl_->V, layout);
  return impl_->adam_step;
}

// ---- The layers (llm.c layout: each forward beside its backward). A forward reads X or its input and
// adds into X (the residual stream) or writes its activations; its backward reads dX or dH and the
// forward's activations, writes dH or dX, and adds every weight gradient into G. Shapes as in Impl.

// The batch's tokens and targets to the device, as int32 (N); activations sized for its (B, T).
// Returns the number of positions with a target.
int GpuModel::Impl::upload_batch(const vla::train::Batch& batch) {
  const int nb = int(batch.tokens.size());
  if (nb == 0) throw std::invalid_argument("--batch: must be >= 1");
  const int nt = int(batch.tokens[0].size());
  if (nt > cfg.max_len) throw std::invalid_argument(fmt::format("--seq-len: T = {} exceeds the positional table ({} rows)", nt, cfg.max_len));
  // One (B, T) block: a shorter sequence would be read past its end, a longer one cut.
  if (int(batch.targets.size()) != nb)
    throw std::invalid_argument(fmt::format("batch: {} token sequences but {} target sequences", nb, batch.targets.size()));
  for (int b = 0; b < nb; ++b)
    if (int(batch.tokens[b].size()) != nt || int(batch.targets[b].size()) != nt)
      throw std::invalid_argument(fmt::format("batch: sequence {} has {} tokens and {} targets (the GPU path needs T = {} for every sequence)", b,
                                              batch.tokens[b].size(), batch.targets[b].size(), nt));
  allocate(nb, nt);
  const int V = cfg.vocab;
  std::vector<int> h(ids.size());  // ids' layout (Impl)
  int* tok = h.data();
  int* tgt = tok + N;
  int* positions = tok + 2 * std::size_t(N);
  int* starts = tok + 3 * std::size_t(N);
  int total_targets = 0;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      tok[b * T + t] = batch.tokens[b][t];
      tgt[b * T + t] = batch.targets[b][t];
      total_targets += tgt[b * T + t] >= 0;
      if (tok[b * T + t] < 0 || tok[b * T + t] >= V) throw std::invalid_argument("tokens: outside the vocabulary");
    }
  // Positions grouped by token, ascending within each (a counting sort): starts[v] .. starts[v + 1].
  for (int n = 0; n < N; ++n) ++starts[tok[n] + 1];
  for (int v = 0; v < V; ++v) starts[v + 1] += starts[v];
  std::vector<int> next(starts, starts + V);
  for (int n = 0; n < N; ++n) positions[next[tok[n]]++] = n;
  check(cudaMemcpyAsync(ids.get(), h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice, stream), "upload tokens");
  // h is pageable host memory that dies with this call: wait for the copy.
  check(cudaStreamSynchronize(stream), "upload (sync)");
  return total_targets;
}

// Embedding: X (N, d) = E[tokens] + P[t]; E (V, d) is also the tied head's weight.
void GpuModel::Impl::embedding_forward() {
  check_launch(embed_forward(token_ids(), p(model::TOK), p(model::POS), N, T, cfg.d_model, X.get(), stream), "embed_forward");
}
// dE from the rows of each token; dP[t] = sum over b of dX[b, t]: column sums of dX as a (B, T d) matrix.
void GpuModel::Impl::embedding_backward() {
  check_launch(embed_backward_tokens(token_positions(), token_starts(), dX.get(), cfg.d_model, cfg.vocab, g(model::TOK), stream), "embed_backward");
  check_launch(column_sums(dX.get(), B, T * cfg.d_model, g(model::POS), colsum.get(), stream), "positional gradient");
}

// LayerNorm of the residual stream: a.Y (N, d) = LN(X) with the gain and bias tensors given.
void GpuModel::Impl::ln_forward(int gain, int bias, LayerNormActs& a, const char* what) {
  check_launch(layernorm_forward(X.get(), p(gain), p(bias), N, cfg.d_model, a.Y.get(), a.xhat.get(), a.rstd.get(), stream), what);
}
// From dH = dL/dY: dX (+)= dL/dX (accumulate: the residual branch adds), gain and bias gradients.
void GpuModel::Impl::ln_backward(int gain, int bias, const LayerNormActs& a, bool accumulate, const char* what) {
  check_launch(layernorm_backward(dH.get(), p(gain), a.xhat.get(), a.rstd.get(), N, cfg.d_model, dX.get(), accumulate, g(gain), g(bias),
                                  colsum.get(), stream),
               what);
}

// The recurrent kernels' inputs (B, H, T, dh) from this layer's activations: q, k, v, and u (VLA) and
// the gate logits g (gated DeltaNet); no output, stats or checkpoints.
RecurrentTensors GpuModel::Impl::kernel_inputs(const MixerActs& a) const {
  RecurrentTensors x;
  x.B = B; x.H = cfg.heads; x.T = T; x.d = cfg.d_head;
  x.q = a.q(); x.k = a.k(); x.v = a.v();
  if (kind() == RecurrentKind::Vla) x.u = a.u.get();
  if (gated()) x.g = a.g.get();
  return x;
}

// Mixer (core/model/mixer.hpp): from H1 (N, d), X += O W_o^T + b_o with O (N, hd) the per-head
// attention of Q, K, V (and U, G) = H1 W^T + b, each kept head-major. With backward, a recurrent mixer's
// forward also writes the state norms (stats) and this layer's backward checkpoints.
void GpuModel::Impl::mixer_forward(int l, const float* H1, MixerActs& a, bool backward, const RecurrentParams& rp) {
  using namespace model;
  const int d = cfg.d_model, H = cfg.heads, dh = cfg.d_head, hd = H * dh;
  const HeadMajor hm = heads();
  linear_fwd(H1, N, d, p(blk(l, WQ)), p(blk(l, BQ)), 3 * hd, a.qkv.get(), 0.f, {}, qkv_heads());  // [Wq; Wk; Wv], [bq bk bv]
  RecurrentTensors x = kernel_inputs(a);
  x.o = a.o.get();
  if (backward && !softmax() && !chunked) {
    x.stats = stats.get() + std::size_t(l) * N * H * 3;  // S/A norms for the log
    x.checkpoints = a.ck.get();  // for this layer's backward
  }
  if (kind() == RecurrentKind::Vla) u_forward(l, a);
  if (gated()) linear_fwd(H1, N, d, p(blk(l, WG)), p(blk(l, BG)), H, a.g.get(), 0.f, {}, gate_heads());  // gate logits, (B, H, T)
  if (softmax()) softmax_attention_forward(blas, AttentionInputs{x.q, x.k, x.v, B, H, T, dh}, x.o, plan, work.get());
  else if (chunked)
    check_launch(chunked_vla_forward(x, rp, 0, 0, stream, backward ? a.ck.get() : nullptr, ProductOperands::Full, chunk_fwd_work.get(),
                                     chunk_fwd_work.size()),
                 "chunked_vla_forward");
  else check_launch(recurrent_forward(kind(), x, rp, stream), "recurrent_forward");
  linear_fwd(a.o.get(), N, hd, p(blk(l, WO)), p(blk(l, BO)), d, X.get(), 1.f, hm, {});  // X += Y (residual)
}
// From dX = dL/dY: dH = dL/dH1, through the output projection, the attention's backward (the recurrent
// one from the forward's checkpoints) and the input projections.
void GpuModel::Impl::mixer_backward(int l, const float* H1, const MixerActs& a, const RecurrentParams& rp) {
  using namespace model;
  const int d = cfg.d_model, H = cfg.heads, dh = cfg.d_head, hd = H * dh;
  const HeadMajor hm = heads();
  auto& m = dmix;
  linear_bwd(dX.get(), N, d, a.o.get(), hd, p(blk(l, WO)), g(blk(l, WO)), g(blk(l, BO)), m.dO.get(), 0.f, {}, hm, hm);
  RecurrentTensors x = kernel_inputs(a);
  RecurrentGrads rg;
  rg.dout = m.dO.get(); rg.dq = m.dq(); rg.dk = m.dk(); rg.dv = m.dv();
  if (kind() == RecurrentKind::Vla) rg.du = m.du.get();
  if (gated()) rg.dg = m.dg.get();
  if (softmax())
    softmax_attention_backward(blas, AttentionInputs{x.q, x.k, x.v, B, H, T, dh}, rg.dout, rg.dq, rg.dk, rg.dv, plan, work.get());
  else {
    if (chunked)  // from the chunk starts this layer's forward wrote
      check_launch(chunked_vla_backward(x, rg, rp, 0, group_tokens, a.ck.get(), chunk_work.get(), stream), "chunked_vla_backward");
    else {
      x.checkpoints = a.ck.get();  // written by this layer's forward
      check_launch(recurrent_backward(kind(), x, rg, rp, a.ck.get(), stream), "recurrent_backward");
    }
  }
  if (kind() == RecurrentKind::Vla) u_backward(l, a);  // dk += through u, before dk is read below
  linear_bwd(m.dqkv.get(), N, 3 * hd, H1, d, p(blk(l, WQ)), g(blk(l, WQ)), g(blk(l, BQ)), dH.get(), 0.f, qkv_heads());
  if (gated()) linear_bwd(m.dg.get(), N, H, H1, d, p(blk(l, WG)), g(blk(l, WG)), g(blk(l, BG)), dH.get(), 1.f, gate_heads());
}

// VLA's u_raw^h = W_u^h k^h + b_u^h (Alg. 1 line 10), per head: W_u is (H dh, dh), block h its rows. All
// heads in one head-major product, u = k Wu_blocks^T + b_u, with the block-diagonal matrix of the W_u^h
// (zeros off the diagonal blocks add exact zeros: each u^h reads its own head's k alone).
void GpuModel::Impl::u_forward(int l, MixerActs& a) {
  using namespace model;
  const int H = cfg.heads, dh = cfg.d_head, hd = H * dh;
  check_launch(block_diagonal(p(blk(l, WU)), H, dh, a.Wu_blocks.get(), stream), "W_u blocks");
  linear_fwd(a.k(), N, hd, a.Wu_blocks.get(), p(blk(l, BU)), hd, a.u.get(), 0.f, heads(), heads());
}
// From du = dL/du_raw: dW_u^h += du^h^T k^h (the diagonal blocks of du^T k), db_u += column sums of du,
// dk += du Wu_blocks (each head's du^h W_u^h).
void GpuModel::Impl::u_backward(int l, const MixerActs& a) {
  using namespace model;
  const int H = cfg.heads, dh = cfg.d_head, hd = H * dh;
  const HeadMajor hm = heads();
  linear_bwd(dmix.du.get(), N, hd, a.k(), hd, a.Wu_blocks.get(), dWu_full.get(), g(blk(l, BU)), dmix.dk(), 1.f, hm, hm, hm,
             /*accumulate_dw=*/false);
  check_launch(add_diagonal_blocks(dWu_full.get(), H, dh, g(blk(l, WU)), stream), "dWu blocks");
}

// FFN: from H2 (N, d), X += W2 GELU(Z1) + b2 with Z1 = H2 W1^T + b1 (N, F).
void GpuModel::Impl::ffn_forward(int l, const float* H2, FfnActs& a) {
  using namespace model;
  const int d = cfg.d_model, F = cfg.ffn;
  linear_fwd(H2, N, d, p(blk(l, W1)), p(blk(l, B1)), F, a.Z1.get(), 0.f);
  check_launch(gelu_forward(a.Z1.get(), (long long)N * F, a.A1.get(), stream), "gelu");
  linear_fwd(a.A1.get(), N, F, p(blk(l, W2)), p(blk(l, B2)), d, X.get(), 1.f);
}
// From dX = dL/dY: dH = dL/dH2, through dF = dL/dA1, then dL/dZ1 in place.
void GpuModel::Impl::ffn_backward(int l, const float* H2, const FfnActs& a) {
  using namespace model;
  const int d = cfg.d_model, F = cfg.ffn;
  linear_bwd(dX.get(), N, d, a.A1.get(), F, p(blk(l, W2)), g(blk(l, W2)), g(blk(l, B2)), dF.get(), 0.f);
  check_launch(gelu_backward(dF.get(), a.Z1.get(), (long long)N * F, stream), "gelu backward");
  linear_bwd(dF.get(), N, F, H2, d, p(blk(l, W1)), g(blk(l, W1)), g(blk(l, B1)), dH.get(), 0.f);
}

// Head: HF = LNf(X), logits (N, V) = HF E^T (tied to the embedding), cross-entropy at the positions
// with a target, each scaled by `scale` (1 / #targets: the batch mean). Its forward also computes
// dlogits (N, V), and reads the loss and accuracy back.
GpuBatchResult GpuModel::Impl::head_forward(double scale, int total_targets) {
  const int d = cfg.d_model, V = cfg.vocab;
  ln_forward(lnf_g(), lnf_b(), lnf, "lnf");
  linear_fwd(lnf.Y.get(), N, d, p(model::TOK), nullptr, V, logits.get(), 0.f);  // tied head, (N, V)
  int* dcorrect = reinterpret_cast<int*>(correct.get());
  check_launch(softmax_cross_entropy(logits.get(), target_ids(), N, V, float(scale), dlogits.get(), ce.get(), dcorrect, stream), "cross-entropy");
  std::vector<float> ce_h(N);
  std::vector<int> corr(N);
  check(cudaMemcpyAsync(ce_h.data(), ce.get(), N * sizeof(float), cudaMemcpyDeviceToHost, stream), "download ce");
  check(cudaMemcpyAsync(corr.data(), dcorrect, N * sizeof(int), cudaMemcpyDeviceToHost, stream), "download correct");
  check(cudaStreamSynchronize(stream), "download (sync)");
  GpuBatchResult r;
  double loss = 0;
  int right = 0;
  for (int n = 0; n < N; ++n) { loss += ce_h[n]; right += corr[n]; }  // rows with no target hold 0
  r.loss = loss * scale;
  r.targets = total_targets;
  r.correct = right;
  r.accuracy = double(right) / std::max(1, total_targets);
  return r;
}
// From dlogits: dX = dL/dX of the last block's output (and E's head gradient, LNf's gain and bias).
void GpuModel::Impl::head_backward() {
  linear_bwd(dlogits.get(), N, cfg.vocab, lnf.Y.get(), cfg.d_model, p(model::TOK), g(model::TOK), nullptr, dH.get(), 0.f);
  ln_backward(lnf_g(), lnf_b(), lnf, false, "lnf backward");
}

// S/A norms as the CPU's batch_gradient: per sequence the mean over heads of ||S_T||_F (as a float,
// the CPU's T(norm)), summed over the batch in order, divided by B. Only the last step's stats come
// back: one strided copy, row (l, b, h) at offset (T - 1) * 3 of its T * 3 floats.
void GpuModel::Impl::read_state_norms(GpuBatchResult& r) {
  const int H = cfg.heads;
  r.S_fro.assign(cfg.layers, std::nan(""));
  r.A_fro.assign(cfg.layers, std::nan(""));
  if (softmax() || chunked) return;  // no state, or no per-token norms computed
  std::vector<float> last(std::size_t(cfg.layers) * B * H * 3);
  check(cudaMemcpy2DAsync(last.data(), 3 * sizeof(float), stats.get() + std::size_t(T - 1) * 3, std::size_t(T) * 3 * sizeof(float),
                          3 * sizeof(float), std::size_t(cfg.layers) * B * H, cudaMemcpyDeviceToHost, stream), "download stats");
  check(cudaStreamSynchronize(stream), "download stats (sync)");
  for (int l = 0; l < cfg.layers; ++l) {
    double S = 0, A = 0;
    for (int b = 0; b < B; ++b) {
      double s = 0, a = 0;
      for (int h = 0; h < H; ++h) {
        const float* st = &last[((std::size_t(l) * B + b) * H + h) * 3];
        s += double(st[0]);
        a += double(st[1]);  // NaN for linear/deltanet: the CPU's kNotApplicable
      }
      S += s / H;
      A += a / H;
    }
    r.S_fro[l] = S / B;
    r.A_fro[l] = A / B;
  }
  // A rule with a constant A (its kernel tracks none): ||a I||_F = a sqrt(d_h) in every head.
  if (const double a = trait.constant_A; a > 0) r.A_fro.assign(cfg.layers, a * std::sqrt(double(cfg.d_head)));
}

// The model (core/model/transformer.hpp's order): embedding, blocks, head; then the backward in reverse.
GpuBatchResult GpuModel::forward_backward(const vla::train::Batch& batch, bool backward, int step_targets) {
  using namespace model;
  auto& m = *impl_;
  DeviceGuard on(m.device);
  if (step_targets < 0)
    throw std::invalid_argument(fmt::format("GpuModel::forward_backward: step_targets must be >= 0, got {}", step_targets));
  const int total_targets = m.upload_batch(batch);
  const double scale = 1.0 / std::max(1, step_targets > 0 ? step_targets : total_targets);
  const RecurrentParams& rp = m.trait.params;

  // ---- forward ----
  m.embedding_forward();
  for (int l = 0; l < m.cfg.layers; ++l) {
    auto& y = m.L[l];
    m.ln_forward(m.blk(l, LN1_G), m.blk(l, LN1_B), y.ln1, "ln1");  // H1 = LN1(X)
    m.mixer_forward(l, y.ln1.Y.get(), y.mix, backward, rp);        // X += Mixer(H1)
    m.ln_forward(m.blk(l, LN2_G), m.blk(l, LN2_B), y.ln2, "ln2");  // H2 = LN2(X)
    m.ffn_forward(l, y.ln2.Y.get(), y.ffn);                        // X += FFN(H2)
  }
  GpuBatchResult r = m.head_forward(scale, total_targets);
  if (!backward) return r;
  m.read_state_norms(r);

  // ---- backward (reverse order of the forward; every weight gradient adds into the zeroed G) ----
  check(cudaMemsetAsync(m.G.get(), 0, m.G.size() * sizeof(float), m.stream), "cudaMemset G");
  m.head_backward();  // dX = dL/dX of the last block's output
  for (int l = m.cfg.layers - 1; l >= 0; --l) {
    auto& y = m.L[l];
    m.ffn_backward(l, y.ln2.Y.get(), y.ffn);                                       // dH = dL/dH2
    m.ln_backward(m.blk(l, LN2_G), m.blk(l, LN2_B), y.ln2, true, "ln2 backward");  // dX += LN2'(dH)
    m.mixer_backward(l, y.ln1.Y.get(), y.mix, rp);                                 // dH = dL/dH1
    m.ln_backward(m.blk(l, LN1_G), m.blk(l, LN1_B), y.ln1, true, "ln1 backward");  // dX += LN1'(dH)
  }
  m.embedding_backward();
  check(cudaStreamSynchronize(m.stream), "forward_backward (sync)");
  return r;
}

double GpuModel::grad_norm() const {
  auto& m = *impl_;
  DeviceGuard on(m.device);
  double* part = reinterpret_cast<double*>(m.partials.get());
  check_launch(sum_squares_partials(m.G.get(), (long long)m.G.size(), part, m.stream), "sum_squares");
  std::vector<double> h(kSumSqBlocks);
  check(cudaMemcpyAsync(h.data(), part, kSumSqBlocks * sizeof(double), cudaMemcpyDeviceToHost, m.stream), "download partials");
  check(cudaStreamSynchronize(m.stream), "grad_norm (sync)");
  double s = 0;
  for (double v : h) s += v;
  return std::sqrt(s);
}

void GpuModel::synchronize() const {
  DeviceGuard on(impl_->device);
  check(cudaStreamSynchronize(impl_->stream), "GpuModel (sync)");
}

void GpuModel::adamw_step(const vla::train::AdamWConfig& c, double lr, double gscale) {
  auto& m = *impl_;
  DeviceGuard on(m.device);
  m.adam_step += 1;
  // As core/train/adamw.hpp: bias corrections in double, every factor rounded to float once.
  const double bc1 = 1.0 - std::pow(c.beta1, double(m.adam_step)), bc2 = 1.0 - std::pow(c.beta2, double(m.adam_step));
  const AdamwFactors f{float(gscale), float(c.beta1), float(1 - c.beta1), float(c.beta2), float(1 - c.beta2), float(bc1), float(bc2),
                       float(lr), float(lr * c.weight_decay), float(c.eps)};
  check_launch(adamw(m.P.get(), m.G.get(), m.M.get(), m.V.get(), (long long)m.P.size(), reinterpret_cast<const long long*>(m.adamw_tensors.get()),
                     int(m.off.size()), f, m.stream),
               "adamw");
}

}  // namespace vla::gpu::train
