// gpu/train/model.hpp: the batch forward and backward, layer by layer in the order of
// core/model/transformer.hpp and core/model/mixer.hpp (the CPU reference these are tested against).
#include "gpu/train/model.hpp"

#include "core/rules/gpu_support.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/recurrent_backward.hpp"
#include "gpu/recurrent_forward.hpp"
#include "gpu/softmax_attention.hpp"
#include "gpu/train/kernels.hpp"

#include <cublas_v2.h>

#include <cmath>
#include <fmt/format.h>

namespace vla::gpu::train {

using model::Params;

namespace {

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(fmt::format("cuBLAS error in {}: status {}", what, int(s)));
}
void check_launch(cudaError_t e, const char* what) { check(e, what); }

// The GPU path of the configured mixer, from its rule's GPU trait (core/rules/<rule>/gpu.hpp). Softmax
// attention is not a recurrence: it runs gpu/softmax_attention.hpp (cuBLAS + row kernels) instead.
bool is_softmax(const MixerConfig& c) { return gpu_kernel_of(c).path == GpuPath::Softmax; }
RecurrentKind kind_of(const MixerConfig& c) { return gpu_kernel_of(c).kind; }

}  // namespace

void validate_gpu_config(const model::ModelConfig& cfg) {
  cfg.validate();
  gpu_kernel_for(cfg.mixer, cfg.d_head, GpuUse::Training);  // throws naming the flag and what is allowed
}

struct GpuModel::Impl {
  model::ModelConfig cfg;
  bool softmax = false;                    // softmax attention; then kind stays Linear (no u, no gate)
  RecurrentKind kind = RecurrentKind::Linear;
  bool gated = false;
  std::vector<std::size_t> off;            // start of tensor i in the flat arrays
  std::vector<int> rows, cols;             // tensor i's shape
  DeviceBuffer P, G, M, V;                 // flat parameters, gradient, AdamW moments
  long adam_step = 0;
  cublasHandle_t blas = nullptr;
  cudaStream_t stream = nullptr;          // every launch, copy and GEMM of this model runs on it
  // Activations for the current (B, T); N = B T rows.
  int B = 0, T = 0, N = 0;
  struct Layer {
    DeviceBuffer xhat1, rstd1, H1, Q, K, V, U, G, qb, kb, vb, ub, gb, ob, O, xhat2, rstd2, H2, Z1, A1;
    // Recurrent mixers: this layer's backward workspace, which its forward fills with the backward's
    // checkpoints (x.checkpoints), so the backward skips its own first forward pass. One per layer: all
    // forwards run before the first backward.
    DeviceBuffer ck;
  };
  std::vector<Layer> L;
  DeviceBuffer X, xhatf, rstdf, HF, logits, dlogits, ce, correct, tokens, targets;
  DeviceBuffer stats;                      // (L, B, H, T, 3): the fused forward's ||S_t||_F, ||A_t||_F, delta_t
  SoftmaxAttentionPlan plan;               // softmax: query chunking of the score workspace `work`
  DeviceBuffer dX, dH, dF, dO, dob, dqb, dkb, dvb, dub, dgb, dQ, dK, dV, dU, dG, work, partials;  // work: softmax only

  float* p(int i) const { return P.get() + off[i]; }
  float* g(int i) const { return G.get() + off[i]; }
  int blk(int l, model::BlockTensor k) const { return 2 + l * model::kPerBlock + k; }

  // Y (N, out) = beta Y + X (N, in) W^T, W (out, in) row-major; then Y += b (when b).
  void linear_fwd(const float* Xp, int n, int in, const float* W, const float* b, int out, float* Y, float beta) {
    const float one = 1.f;
    check_blas(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, W, in, Xp, in, &beta, Y, out), "sgemm forward");
    if (b) check_launch(add_bias(Y, b, n, out, stream), "add_bias");
  }
  // dW += dY^T X, db += column sums of dY, dX = beta dX + dY W (when dXp).
  void linear_bwd(const float* dY, int n, int out, const float* Xp, int in, const float* W, float* dW, float* db, float* dXp, float beta) {
    const float one = 1.f;
    check_blas(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, Xp, in, dY, out, &one, dW, in), "sgemm dW");
    if (db) check_launch(column_sums(dY, n, out, db, stream), "column_sums");
    if (dXp) check_blas(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, W, in, dY, out, &beta, dXp, in), "sgemm dX");
  }

  void allocate(int b, int t) {
    if (b == B && t == T) return;
    B = b; T = t; N = b * t;
    const std::size_t n = N, d = cfg.d_model, hd = std::size_t(cfg.heads) * cfg.d_head, F = cfg.ffn, V_ = cfg.vocab, H = cfg.heads;
    L.clear();
    L.resize(cfg.layers);
    for (auto& y : L) {  // shapes: (N, d), (N), (N, H*dh) row layout, (B, H, T, dh) kernel layout, (N, F)
      y.xhat1 = DeviceBuffer(n * d); y.rstd1 = DeviceBuffer(n); y.H1 = DeviceBuffer(n * d);
      y.Q = DeviceBuffer(n * hd); y.K = DeviceBuffer(n * hd); y.V = DeviceBuffer(n * hd); y.U = DeviceBuffer(n * hd); y.G = DeviceBuffer(n * H);
      y.qb = DeviceBuffer(n * hd); y.kb = DeviceBuffer(n * hd); y.vb = DeviceBuffer(n * hd); y.ub = DeviceBuffer(n * hd); y.gb = DeviceBuffer(n * H);
      y.ob = DeviceBuffer(n * hd); y.O = DeviceBuffer(n * hd);
      y.xhat2 = DeviceBuffer(n * d); y.rstd2 = DeviceBuffer(n); y.H2 = DeviceBuffer(n * d);
      y.Z1 = DeviceBuffer(n * F); y.A1 = DeviceBuffer(n * F);
    }
    X = DeviceBuffer(n * d); xhatf = DeviceBuffer(n * d); rstdf = DeviceBuffer(n); HF = DeviceBuffer(n * d);  // (N, d)
    logits = DeviceBuffer(n * V_); dlogits = DeviceBuffer(n * V_); ce = DeviceBuffer(n);                   // (N, V), (N)
    correct = DeviceBuffer(n); tokens = DeviceBuffer(n); targets = DeviceBuffer(n);  // int32 (N), stored in 4-byte slots
    dX = DeviceBuffer(n * d); dH = DeviceBuffer(n * d); dF = DeviceBuffer(n * F); dO = DeviceBuffer(n * hd);
    dob = DeviceBuffer(n * hd); dqb = DeviceBuffer(n * hd); dkb = DeviceBuffer(n * hd); dvb = DeviceBuffer(n * hd); dub = DeviceBuffer(n * hd);
    dgb = DeviceBuffer(n * H); dQ = DeviceBuffer(n * hd); dK = DeviceBuffer(n * hd); dV = DeviceBuffer(n * hd); dU = DeviceBuffer(n * hd);
    dG = DeviceBuffer(n * H);
    stats = DeviceBuffer(softmax ? 0 : std::size_t(cfg.layers) * n * H * 3);
    if (softmax) {
      plan = softmax_attention_plan(B, cfg.heads, T);
      work = DeviceBuffer(plan.workspace_floats);
    } else {
      for (auto& y : L) y.ck = DeviceBuffer(recurrent_backward_workspace_floats(B, cfg.heads, T, cfg.d_head));
    }
  }

  RecurrentParams rparams() const { return gpu_kernel_of(cfg.mixer).params; }  // the rule's GPU trait
};

GpuModel::GpuModel(const model::ModelConfig& cfg, const Params<float>& p, cudaStream_t stream) : impl_(std::make_unique<Impl>()) {
  validate_gpu_config(cfg);
  auto& m = *impl_;
  m.cfg = cfg;
  m.stream = stream;
  m.softmax = is_softmax(cfg.mixer);
  if (!m.softmax) m.kind = kind_of(cfg.mixer);
  m.gated = gpu_kernel_of(cfg.mixer).gated;
  std::size_t total = 0;
  for (const auto& t : p.t) {
    m.off.push_back(total);
    m.rows.push_back(int(t.rows()));
    m.cols.push_back(int(t.cols()));
    total += std::size_t(t.size());
  }
  m.P = DeviceBuffer(total); m.G = DeviceBuffer(total); m.M = DeviceBuffer(total); m.V = DeviceBuffer(total);
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
  if (impl_ && impl_->blas) cublasDestroy(impl_->blas);
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

void GpuModel::set_params(const Params<float>& p) { upload_like(*impl_, impl_->P, p, "set_params"); }

void GpuModel::set_adam_moments(const Params<float>& m, const Params<float>& v, long step) {
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

Params<float> GpuModel::params() const { return download_like(*impl_, impl_->P, layout_of(*impl_)); }
Params<float> GpuModel::grads() const { return download_like(*impl_, impl_->G, layout_of(*impl_)); }

long GpuModel::adam_moments(Params<float>& mo, Params<float>& vo) const {
  const Params<float> layout = layout_of(*impl_);
  mo = download_like(*impl_, impl_->M, layout);
  vo = download_like(*impl_, impl_->V, layout);
  return impl_->adam_step;
}

GpuBatchResult GpuModel::forward_backward(const vla::train::Batch& batch, bool backward) {
  using namespace model;
  auto& m = *impl_;
  const auto& c = m.cfg;
  const int B = int(batch.tokens.size());
  if (B == 0) throw std::invalid_argument("--batch: must be >= 1");
  const int T = int(batch.tokens[0].size());
  if (T > c.max_len) throw std::invalid_argument(fmt::format("--seq-len: T = {} exceeds the positional table ({} rows)", T, c.max_len));
  m.allocate(B, T);
  const int N = m.N, d = c.d_model, H = c.heads, dh = c.d_head, hd = H * dh, F = c.ffn, V = c.vocab;
  std::vector<int> tok(N), tgt(N);
  int total_targets = 0;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      tok[b * T + t] = batch.tokens[b][t];
      tgt[b * T + t] = batch.targets[b][t];
      total_targets += tgt[b * T + t] >= 0;
      if (tok[b * T + t] < 0 || tok[b * T + t] >= V) throw std::invalid_argument("tokens: outside the vocabulary");
    }
  check(cudaMemcpyAsync(m.tokens.get(), tok.data(), N * sizeof(int), cudaMemcpyHostToDevice, m.stream), "upload tokens");
  check(cudaMemcpyAsync(m.targets.get(), tgt.data(), N * sizeof(int), cudaMemcpyHostToDevice, m.stream), "upload targets");
  // tok and tgt are pageable host memory that dies with this call: wait for the copies.
  check(cudaStreamSynchronize(m.stream), "upload (sync)");
  const int* dtok = reinterpret_cast<const int*>(m.tokens.get());
  const int* dtgt = reinterpret_cast<const int*>(m.targets.get());
  const double scale = 1.0 / std::max(1, total_targets);
  const RecurrentParams rp = m.rparams();

  // ---- forward ----
  check_launch(embed_forward(dtok, m.p(TOK), m.p(POS), N, T, d, m.X.get(), m.stream), "embed_forward");
  for (int l = 0; l < c.layers; ++l) {
    auto& y = m.L[l];
    check_launch(layernorm_forward(m.X.get(), m.p(m.blk(l, LN1_G)), m.p(m.blk(l, LN1_B)), N, d, y.H1.get(), y.xhat1.get(), y.rstd1.get(), m.stream), "ln1");
    m.linear_fwd(y.H1.get(), N, d, m.p(m.blk(l, WQ)), m.p(m.blk(l, BQ)), hd, y.Q.get(), 0.f);
    m.linear_fwd(y.H1.get(), N, d, m.p(m.blk(l, WK)), m.p(m.blk(l, BK)), hd, y.K.get(), 0.f);
    m.linear_fwd(y.H1.get(), N, d, m.p(m.blk(l, WV)), m.p(m.blk(l, BV)), hd, y.V.get(), 0.f);
    RecurrentTensors x;
    x.B = B; x.H = H; x.T = T; x.d = dh;
    check_launch(bthc_to_bhtc(y.Q.get(), B, T, H, dh, y.qb.get(), m.stream), "permute q");
    check_launch(bthc_to_bhtc(y.K.get(), B, T, H, dh, y.kb.get(), m.stream), "permute k");
    check_launch(bthc_to_bhtc(y.V.get(), B, T, H, dh, y.vb.get(), m.stream), "permute v");
    x.q = y.qb.get(); x.k = y.kb.get(); x.v = y.vb.get(); x.o = y.ob.get();
    if (backward && !m.softmax) {
      x.stats = m.stats.get() + std::size_t(l) * N * H * 3;  // S/A norms for the log
      x.checkpoints = y.ck.get();                            // for this layer's backward
    }
    if (m.kind == RecurrentKind::Vla) {
      // u_raw^h = K^h W_u^h^T + b_u^h (Alg. 1 line 10), per head: W_u is (H*dh, dh), block h its rows.
      const float one = 1.f, zero = 0.f;
      for (int h = 0; h < H; ++h)
        check_blas(cublasSgemm(m.blas, CUBLAS_OP_T, CUBLAS_OP_N, dh, N, dh, &one, m.p(m.blk(l, WU)) + std::size_t(h) * dh * dh, dh,
                               y.K.get() + h * dh, hd, &zero, y.U.get() + h * dh, hd), "sgemm u");
      check_launch(add_bias(y.U.get(), m.p(m.blk(l, BU)), N, hd, m.stream), "bias u");
      check_launch(bthc_to_bhtc(y.U.get(), B, T, H, dh, y.ub.get(), m.stream), "permute u");
      x.u = y.ub.get();
    }
    if (m.gated) {  // gate logits G = H1 W_g^T + b_g, (N, H)
      m.linear_fwd(y.H1.get(), N, d, m.p(m.blk(l, WG)), m.p(m.blk(l, BG)), H, y.G.get(), 0.f);
      check_launch(bthc_to_bhtc(y.G.get(), B, T, H, 1, y.gb.get(), m.stream), "permute g");
      x.g = y.gb.get();
    }
    if (m.softmax) softmax_attention_forward(m.blas, AttentionInputs{x.q, x.k, x.v, B, H, T, dh}, x.o, m.plan, m.work.get());
    else check_launch(recurrent_forward(m.kind, x, rp, m.stream), "recurrent_forward");
    check_launch(bhtc_to_bthc(y.ob.get(), B, T, H, dh, y.O.get(), m.stream), "permute o");
    m.linear_fwd(y.O.get(), N, hd, m.p(m.blk(l, WO)), m.p(m.blk(l, BO)), d, m.X.get(), 1.f);  // X += Y (residual)
    check_launch(layernorm_forward(m.X.get(), m.p(m.blk(l, LN2_G)), m.p(m.blk(l, LN2_B)), N, d, y.H2.get(), y.xhat2.get(), y.rstd2.get(), m.stream), "ln2");
    m.linear_fwd(y.H2.get(), N, d, m.p(m.blk(l, W1)), m.p(m.blk(l, B1)), F, y.Z1.get(), 0.f);
    check_launch(gelu_forward(y.Z1.get(), (long long)N * F, y.A1.get(), m.stream), "gelu");
    m.linear_fwd(y.A1.get(), N, F, m.p(m.blk(l, W2)), m.p(m.blk(l, B2)), d, m.X.get(), 1.f);
  }
  const int gf = int(m.off.size()) - 2, bf = int(m.off.size()) - 1;
  check_launch(layernorm_forward(m.X.get(), m.p(gf), m.p(bf), N, d, m.HF.get(), m.xhatf.get(), m.rstdf.get(), m.stream), "lnf");
  m.linear_fwd(m.HF.get(), N, d, m.p(TOK), nullptr, V, m.logits.get(), 0.f);  // tied head, (N, V)
  int* dcorrect = reinterpret_cast<int*>(m.correct.get());
  check_launch(softmax_cross_entropy(m.logits.get(), dtgt, N, V, float(scale), m.dlogits.get(), m.ce.get(), dcorrect, m.stream), "cross-entropy");
  std::vector<float> ce(N);
  std::vector<int> corr(N);
  check(cudaMemcpyAsync(ce.data(), m.ce.get(), N * sizeof(float), cudaMemcpyDeviceToHost, m.stream), "download ce");
  check(cudaMemcpyAsync(corr.data(), dcorrect, N * sizeof(int), cudaMemcpyDeviceToHost, m.stream), "download correct");
  check(cudaStreamSynchronize(m.stream), "download (sync)");
  GpuBatchResult r;
  double loss = 0;
  int right = 0;
  for (int n = 0; n < N; ++n) { loss += ce[n]; right += corr[n]; }  // rows with no target hold 0
  r.loss = loss * scale;
  r.targets = total_targets;
  r.accuracy = double(right) / std::max(1, total_targets);
  if (!backward) return r;
  // S/A norms as the CPU's batch_gradient: per sequence the mean over heads of ||S_T||_F (as a float,
  // the CPU's T(norm)), summed over the batch in order, divided by B. Only the last step's stats come
  // back: one strided copy, row (l, b, h) at offset (T - 1) * 3 of its T * 3 floats.
  r.S_fro.assign(c.layers, std::nan(""));
  r.A_fro.assign(c.layers, std::nan(""));
  if (!m.softmax) {
    std::vector<float> last(std::size_t(c.layers) * B * H * 3);
    check(cudaMemcpy2DAsync(last.data(), 3 * sizeof(float), m.stats.get() + std::size_t(T - 1) * 3, std::size_t(T) * 3 * sizeof(float),
                            3 * sizeof(float), std::size_t(c.layers) * B * H, cudaMemcpyDeviceToHost, m.stream), "download stats");
    check(cudaStreamSynchronize(m.stream), "download stats (sync)");
    for (int l = 0; l < c.layers; ++l) {
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
  }

  // ---- backward (reverse order of the forward; every weight gradient adds into the zeroed G) ----
  check(cudaMemsetAsync(m.G.get(), 0, m.G.size() * sizeof(float), m.stream), "cudaMemset G");
  m.linear_bwd(m.dlogits.get(), N, V, m.HF.get(), d, m.p(TOK), m.g(TOK), nullptr, m.dH.get(), 0.f);
  check_launch(layernorm_backward(m.dH.get(), m.p(gf), m.xhatf.get(), m.rstdf.get(), N, d, m.dX.get(), false, m.g(gf), m.g(bf), m.stream), "lnf backward");
  for (int l = c.layers - 1; l >= 0; --l) {
    auto& y = m.L[l];
    m.linear_bwd(m.dX.get(), N, d, y.A1.get(), F, m.p(m.blk(l, W2)), m.g(m.blk(l, W2)), m.g(m.blk(l, B2)), m.dF.get(), 0.f);
    check_launch(gelu_backward(m.dF.get(), y.Z1.get(), (long long)N * F, m.stream), "gelu backward");
    m.linear_bwd(m.dF.get(), N, F, y.H2.get(), d, m.p(m.blk(l, W1)), m.g(m.blk(l, W1)), m.g(m.blk(l, B1)), m.dH.get(), 0.f);
    check_launch(layernorm_backward(m.dH.get(), m.p(m.blk(l, LN2_G)), y.xhat2.get(), y.rstd2.get(), N, d, m.dX.get(), true,
                                    m.g(m.blk(l, LN2_G)), m.g(m.blk(l, LN2_B)), m.stream), "ln2 backward");
    // Mixer: Y = O W_o^T + b_o, then the recurrence's backward, then the projections.
    m.linear_bwd(m.dX.get(), N, d, y.O.get(), hd, m.p(m.blk(l, WO)), m.g(m.blk(l, WO)), m.g(m.blk(l, BO)), m.dO.get(), 0.f);
    check_launch(bthc_to_bhtc(m.dO.get(), B, T, H, dh, m.dob.get(), m.stream), "permute dO");
    RecurrentTensors x;
    x.B = B; x.H = H; x.T = T; x.d = dh;
    x.q = y.qb.get(); x.k = y.kb.get(); x.v = y.vb.get();
    if (m.kind == RecurrentKind::Vla) x.u = y.ub.get();
    if (m.gated) x.g = y.gb.get();
    RecurrentGrads rg;
    rg.dout = m.dob.get(); rg.dq = m.dqb.get(); rg.dk = m.dkb.get(); rg.dv = m.dvb.get();
    if (m.kind == RecurrentKind::Vla) rg.du = m.dub.get();
    if (m.gated) rg.dg = m.dgb.get();
    if (m.softmax)
      softmax_attention_backward(m.blas, AttentionInputs{x.q, x.k, x.v, B, H, T, dh}, rg.dout, rg.dq, rg.dk, rg.dv, m.plan, m.work.get());
    else {
      x.checkpoints = y.ck.get();  // written by this layer's forward above
      check_launch(recurrent_backward(m.kind, x, rg, rp, y.ck.get(), m.stream), "recurrent_backward");
    }
    check_launch(bhtc_to_bthc(m.dqb.get(), B, T, H, dh, m.dQ.get(), m.stream), "permute dq");
    check_launch(bhtc_to_bthc(m.dkb.get(), B, T, H, dh, m.dK.get(), m.stream), "permute dk");
    check_launch(bhtc_to_bthc(m.dvb.get(), B, T, H, dh, m.dV.get(), m.stream), "permute dv");
    if (m.kind == RecurrentKind::Vla) {
      // u_raw^h = K^h W_u^h^T + b_u^h: dW_u^h += dU^h^T K^h, db_u += column sums, dK^h += dU^h W_u^h.
      check_launch(bhtc_to_bthc(m.dub.get(), B, T, H, dh, m.dU.get(), m.stream), "permute du");
      const float one = 1.f;
      for (int h = 0; h < H; ++h) {
        float* Wu = m.p(m.blk(l, WU)) + std::size_t(h) * dh * dh;
        float* gWu = m.g(m.blk(l, WU)) + std::size_t(h) * dh * dh;
        check_blas(cublasSgemm(m.blas, CUBLAS_OP_N, CUBLAS_OP_T, dh, dh, N, &one, y.K.get() + h * dh, hd, m.dU.get() + h * dh, hd,
                               &one, gWu, dh), "sgemm dWu");
        check_blas(cublasSgemm(m.blas, CUBLAS_OP_N, CUBLAS_OP_N, dh, N, dh, &one, Wu, dh, m.dU.get() + h * dh, hd, &one,
                               m.dK.get() + h * dh, hd), "sgemm dK from u");
      }
      check_launch(column_sums(m.dU.get(), N, hd, m.g(m.blk(l, BU)), m.stream), "column_sums bu");
    }
    m.linear_bwd(m.dQ.get(), N, hd, y.H1.get(), d, m.p(m.blk(l, WQ)), m.g(m.blk(l, WQ)), m.g(m.blk(l, BQ)), m.dH.get(), 0.f);
    m.linear_bwd(m.dK.get(), N, hd, y.H1.get(), d, m.p(m.blk(l, WK)), m.g(m.blk(l, WK)), m.g(m.blk(l, BK)), m.dH.get(), 1.f);
    m.linear_bwd(m.dV.get(), N, hd, y.H1.get(), d, m.p(m.blk(l, WV)), m.g(m.blk(l, WV)), m.g(m.blk(l, BV)), m.dH.get(), 1.f);
    if (m.gated) {
      check_launch(bhtc_to_bthc(m.dgb.get(), B, T, H, 1, m.dG.get(), m.stream), "permute dg");
      m.linear_bwd(m.dG.get(), N, H, y.H1.get(), d, m.p(m.blk(l, WG)), m.g(m.blk(l, WG)), m.g(m.blk(l, BG)), m.dH.get(), 1.f);
    }
    check_launch(layernorm_backward(m.dH.get(), m.p(m.blk(l, LN1_G)), y.xhat1.get(), y.rstd1.get(), N, d, m.dX.get(), true,
                                    m.g(m.blk(l, LN1_G)), m.g(m.blk(l, LN1_B)), m.stream), "ln1 backward");
  }
  check_launch(embed_backward(dtok, m.dX.get(), N, T, d, V, m.g(TOK), m.g(POS), m.stream), "embed_backward");
  check(cudaStreamSynchronize(m.stream), "forward_backward (sync)");
  return r;
}

double GpuModel::grad_norm() const {
  auto& m = *impl_;
  double* part = reinterpret_cast<double*>(m.partials.get());
  check_launch(sum_squares_partials(m.G.get(), (long long)m.G.size(), part, m.stream), "sum_squares");
  std::vector<double> h(kSumSqBlocks);
  check(cudaMemcpyAsync(h.data(), part, kSumSqBlocks * sizeof(double), cudaMemcpyDeviceToHost, m.stream), "download partials");
  check(cudaStreamSynchronize(m.stream), "grad_norm (sync)");
  double s = 0;
  for (double v : h) s += v;
  return std::sqrt(s);
}

void GpuModel::adamw_step(const vla::train::AdamWConfig& c, double lr, double gscale) {
  auto& m = *impl_;
  m.adam_step += 1;
  // As core/train/adamw.hpp: bias corrections in double, every factor rounded to float once.
  const double bc1 = 1.0 - std::pow(c.beta1, double(m.adam_step)), bc2 = 1.0 - std::pow(c.beta2, double(m.adam_step));
  for (std::size_t i = 0; i < m.off.size(); ++i) {
    const long long n = (long long)m.rows[i] * m.cols[i];
    const bool decay = m.cols[i] > 1;  // matrices only (the CPU's rule)
    check_launch(adamw(m.P.get() + m.off[i], m.G.get() + m.off[i], m.M.get() + m.off[i], m.V.get() + m.off[i], n, float(gscale),
                       float(c.beta1), float(1 - c.beta1), float(c.beta2), float(1 - c.beta2), float(bc1), float(bc2), float(lr),
                       float(lr * c.weight_decay), float(c.eps), decay, m.stream), "adamw");
  }
}

}  // namespace vla::gpu::train
