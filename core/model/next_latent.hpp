#pragma once
// Next-latent alignment (seed 003 sec. 2 and Fig. 1A): under read-after-write, the example the memory
// learns from at token t is the prefix feature paired with the new target, (phi(k_{t-1}), v_t), not the
// same-step pair (phi(k_t), v_t). The paper implements it "by shifting the write-key stream by one
// position with a zero BOS write feature, so the first write is a no-op" (sec. 5).
//
// Here it is one transformation of a head's inputs, the same for every rule (MixerConfig::next_latent):
// the rule runs on the n - 1 tokens t = 2..n with the key-side inputs of the token before (k and VLA's
// u_raw = W_u k) and the rest of token t (q, v, the gate logits: the write's own controls), and token 1's
// output is the read of the initial state, which is 0 for every rule (S_0 = 0; the eq. (11) read gives
// 0 / eps). "Zero write feature" is taken literally: the rule never sees token 1's write, so rules whose
// feature map sends a zero key elsewhere (linear attention's phi(0) = 1) still write nothing there. The
// reverse pass maps the shifted sequence's gradients back to the tokens they belong to; the last token's
// key is never written, so its key gradient is 0.
#include "core/rules/memory_rule.hpp"

namespace vla::model {

// The aligned sequence x' of n - 1 tokens from x (n tokens): row i of x' is token i + 1's q, v, g with
// token i's k, u.
template <class T> HeadSequence<T> next_latent_inputs(const HeadSequence<T>& x) {
  const Eigen::Index m = std::max<Eigen::Index>(x.q.rows() - 1, 0);
  HeadSequence<T> s;
  s.q = x.q.bottomRows(m);
  s.k = x.k.topRows(m);
  s.v = x.v.bottomRows(m);
  if (x.u.size()) s.u = x.u.topRows(m);
  if (x.g.size()) s.g = x.g.bottomRows(m);
  return s;
}

// The outputs of the n tokens from the aligned run's n - 1: token 1 reads the initial state, 0.
template <class T> Mat<T> next_latent_outputs(const Mat<T>& shifted, Eigen::Index d) {
  Mat<T> O = Mat<T>::Zero(shifted.rows() + 1, d);
  O.bottomRows(shifted.rows()) = shifted;
  return O;
}

// The gradients of x's n tokens from those of the aligned sequence (next_latent_inputs): the inverse map
// of its rows; what no aligned token reads (token 1's q, v, g; token n's k, u) gets 0.
template <class T> HeadGrads<T> next_latent_grads(const HeadGrads<T>& gs, int n, int d, int gate_rows) {
  HeadGrads<T> g(n, d, gate_rows);
  const Eigen::Index m = gs.dq.rows();
  // Each gradient keeps the aligned one's width (du is rank * d_h wide for a rank-r VLA).
  auto place = [&](Mat<T>& to, const Mat<T>& from, bool later_token) {
    to = Mat<T>::Zero(n, from.cols());
    if (later_token) to.bottomRows(m) = from;  // q, v, g: aligned row i is token i + 1
    else to.topRows(m) = from;                 // k, u: aligned row i is token i
  };
  place(g.dq, gs.dq, true);
  place(g.dk, gs.dk, false);
  place(g.dv, gs.dv, true);
  place(g.du, gs.du, false);
  place(g.dg, gs.dg, true);
  return g;
}

}  // namespace vla::model
