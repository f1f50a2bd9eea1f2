// The MVA family of seed 002 (core/rules/metala/, gsa/, mva/), checked like the other rules: each forward
// against an independent form written out here from the seed in mp50 (MetaLA's and GSA's parallel forms,
// eq. 2 and eq. 3 unrolled over tokens; MVA's eq. 6 with its documented choices, in the seed's row
// form), MVA with one level against MetaLA + GSA exactly, every precision against mp100, the backward
// against central differences in double and mp50.
#include "mixer_gradcheck.hpp"

#include "../core/precision_case.hpp"
#include "analysis/chunked_exactness.hpp"  // chunk_test_stream, rule_outputs
#include "core/rules/gpu_support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace vla;

namespace {

MixerConfig mixer(const std::string& name, int levels = MixerConfig{}.mva_levels) {
  MixerConfig mc;
  mc.mixer = name;
  mc.mva_levels = levels;
  return mc;
}

const char* const kMvaMixers[] = {"metala", "gsa", "mva"};

// Token t's inputs of the stream in mp50, as row vectors of the seed's notation (1, d).
struct Token {
  Vec<mp50> q, k, v, g;  // g = sigmoid(gate logits), one per channel / slot
};
Token token(const analysis::HeadStream& s, int t) {
  Token x{cast_vector<mp50>(Vec<double>(s.q.col(t))), cast_vector<mp50>(Vec<double>(s.k.col(t))),
          cast_vector<mp50>(Vec<double>(s.v.col(t))), Vec<mp50>(s.d)};
  for (int i = 0; i < s.d; ++i) x.g(i) = 1 / (1 + exp(mp50(-s.gate(i, t))));
  return x;
}

// softmax over a row, written out (no maximum subtracted: mp50's range holds these scores).
Vec<mp50> softmax(const Vec<mp50>& s) {
  Vec<mp50> e = s;
  for (Eigen::Index i = 0; i < e.size(); ++i) e(i) = exp(s(i));
  return e / mp50(e.sum());
}

mp50 rel(const Mat<mp50>& a, const Mat<mp50>& b) { return mp50((a - b).norm() / b.norm()); }

}  // namespace

TEST_CASE("MetaLA forward equals seed 002's parallel form O = LA(Q . B, (1 - G) / B, V) in mp50", "[train][mva][metala]") {
  // Eq. 2 unrolled: o_t = sum_{s<=t} ((q_t . b_t) . ((1 - g_s) / b_s)) v_s, b_t = prod_{i<=t} g_i, the
  // closed form of its recursive form S_t = diag(g_t) S_{t-1} + (1 - g_t)^T v_t, o_t = q_t S_t. Gates ~0.88
  // over 23 tokens keep b_t >= ~1e-3, where the division is harmless in mp50. If this fails, the key is
  // not tied to the gate (1 - g_t), the decay acts on the value channels, or the read precedes the write.
  const analysis::HeadStream s = analysis::chunk_test_stream(6, 23, 4);
  const Mat<mp50> O = analysis::rule_outputs<mp50>(MetaLaRule<Precision<mp50>>(), s);
  Mat<mp50> ref(s.T, s.d);
  std::vector<Token> x;
  std::vector<Vec<mp50>> b;
  for (int t = 0; t < s.T; ++t) {
    x.push_back(token(s, t));
    b.push_back(t ? Vec<mp50>(b.back().cwiseProduct(x[t].g)) : x[t].g);
    Vec<mp50> o = Vec<mp50>::Zero(s.d);
    for (int j = 0; j <= t; ++j)
      o += mp50(x[t].q.cwiseProduct(b[t]).dot(Vec<mp50>(Vec<mp50>::Ones(s.d) - x[j].g).cwiseQuotient(b[j]))) * x[j].v;
    ref.row(t) = o.transpose();
  }
  INFO("relative difference " << to_double(rel(O, ref)));
  CHECK(rel(O, ref) <= mp50(1e-45));
}

TEST_CASE("GSA forward equals seed 002's two-pass form (eq. 3) unrolled over tokens in mp50", "[train][mva][gsa]") {
  // Eq. 3, O = GLA(Softmax(GLA^T(Q, K, 1 - G, G)), 1 - G, V, G), entry by entry: with the decay of slot j
  // from token s to t, D_tsj = prod_{s<r<=t} g_rj, the slot scores are a_tj = sum_{s<=t} D_tsj (1 - g_sj)
  // (q_t . k_s), p_t = softmax(a_t), and o_t = sum_{s<=t} sum_j p_tj D_tsj (1 - g_sj) v_s. If this fails,
  // the softmax runs over tokens instead of slots, the slot keys are not written with 1 - g_t, or the two
  // passes read different memories.
  const analysis::HeadStream s = analysis::chunk_test_stream(5, 19, 6);
  const Mat<mp50> O = analysis::rule_outputs<mp50>(GsaRule<Precision<mp50>>(), s);
  Mat<mp50> ref(s.T, s.d);
  std::vector<Token> x;
  for (int t = 0; t < s.T; ++t) {
    x.push_back(token(s, t));
    std::vector<Vec<mp50>> w(t + 1, Vec<mp50>(s.d));  // w[s_](j) = D_tsj (1 - g_sj)
    for (int j = 0; j <= t; ++j)
      for (int i = 0; i < s.d; ++i) {
        mp50 D = 1;
        for (int r = j + 1; r <= t; ++r) D *= x[r].g(i);
        w[j](i) = D * (1 - x[j].g(i));
      }
    Vec<mp50> a = Vec<mp50>::Zero(s.d);
    for (int j = 0; j <= t; ++j) a += mp50(x[t].q.dot(x[j].k)) * w[j];
    const Vec<mp50> p = softmax(a);
    Vec<mp50> o = Vec<mp50>::Zero(s.d);
    for (int j = 0; j <= t; ++j) o += mp50(p.dot(w[j])) * x[j].v;
    ref.row(t) = o.transpose();
  }
  INFO("relative difference " << to_double(rel(O, ref)));
  CHECK(rel(O, ref) <= mp50(1e-45));
}

TEST_CASE("MVA forward and its key residual equal seed 002 eq. 6 written out, c = 1, 2, 3, in mp50", "[train][mva]") {
  // Eq. 6 in the seed's row form (slots as rows: K^(i), V (m, d)) with the choices docs/recurrences.md
  // states: one gate for every level, the residual k^(i+1) = k^(i) - softmax(k^(i) K^(i)T) K^(i) (eq. 4 with
  // its one-hot S relaxed; the one-hot S itself with hard_select), P^(i) = q + softmax(q K^(i)T),
  // o_t = (q + (1/c) sum_i softmax(q K^(i)T)) V. Also the step's e_norm, ||k^(c)|| (what the Theorem 3.3
  // claim measures). If this fails, a level reads another level's memory, the residual is taken before
  // the level's write, the levels are summed without their 1/c, or the linear branch is repeated per level.
  const analysis::HeadStream s = analysis::chunk_test_stream(4, 17, 8);
  for (const bool hard : {false, true})
    for (const int c : {1, 2, 3}) {
      INFO("c = " << c << (hard ? ", one-hot S" : ", softmax"));
      Mat<mp50> O(s.T, s.d);
      std::vector<double> e_norm;
      analysis::drive(MvaRule<Precision<mp50>>(MvaOptions{c, hard}), s, [&](int t, const auto&, const auto& out, const auto& rec) {
        O.row(t - 1) = out.col(0).transpose();
        e_norm.push_back(rec.stats[0].e_norm);
      });
      Mat<mp50> V = Mat<mp50>::Zero(s.d, s.d), ref(s.T, s.d);
      std::vector<Mat<mp50>> K(c, V);
      mp50 e_err = 0;
      for (int t = 0; t < s.T; ++t) {
        const Token x = token(s, t);
        const Vec<mp50> kappa = Vec<mp50>::Ones(s.d) - x.g;
        V = x.g.asDiagonal() * V + kappa * x.v.transpose();
        Vec<mp50> kk = x.k, pbar = Vec<mp50>::Zero(s.d);
        for (int i = 0; i < c; ++i) {
          K[i] = x.g.asDiagonal() * K[i] + kappa * kk.transpose();
          pbar += softmax(K[i] * x.q);
          const Vec<mp50> r = K[i] * kk;
          Vec<mp50> sel = softmax(r);
          if (hard) {
            Eigen::Index j = 0;
            r.maxCoeff(&j);
            sel.setZero();
            sel(j) = 1;
          }
          kk -= K[i].transpose() * sel;
        }
        ref.row(t) = (x.q + pbar / mp50(c)).transpose() * V;
        e_err = std::max(e_err, mp50(abs(mp50(e_norm[t]) - kk.norm()) / kk.norm()));
      }
      INFO("relative difference " << to_double(rel(O, ref)) << ", e_norm " << to_double(e_err));
      CHECK(rel(O, ref) <= mp50(1e-45));
      CHECK(e_err <= mp50(1e-15));  // e_norm is reported in double
    }
}

TEST_CASE("MVA with one level is MetaLA + GSA, exactly (double and mp50)", "[train][mva]") {
  // c = 1 reduces eq. 6 to its base (the paper's "MVA w/o VD", Table 8): the MetaLA branch q V_t plus the
  // GSA branch softmax(K_t^T q) V_t on the shared memories. The same operations in the same order, so
  // equal to the last bit. If this fails, MVA's level weights, its gates or its memories differ from the
  // two rules' at c = 1.
  auto check = [&]<class T>(T) {
    using P = Precision<T>;
    const analysis::HeadStream s = analysis::chunk_test_stream(6, 29, 12);
    const Mat<T> mva = analysis::rule_outputs<T>(MvaRule<P>(MvaOptions{1}), s);
    const Mat<T> sum = analysis::rule_outputs<T>(MetaLaRule<P>(), s) + analysis::rule_outputs<T>(GsaRule<P>(), s);
    CHECK((mva - sum).cwiseAbs().maxCoeff() == T(0));
    // With more levels it is not (the decomposition adds to the GSA branch).
    CHECK((analysis::rule_outputs<T>(MvaRule<P>(MvaOptions{2}), s) - sum).norm() > T(1e-3) * sum.norm());
  };
  check(double{});
  check(mp50{});
}

TEST_CASE("MetaLA, GSA and MVA in every precision against mp100", "[train][mva][precision]") {
  // The precision tests' shared case (tests/core/precision_case.hpp: a single-head layer, d = 8, T = 16)
  // and their tolerance from the storage format's unit roundoff; MVA at c = 1 and the default c = 2 and 4.
  // If this fails, a format loses more than its rounding explains (the slot softmax's exponent, or 1 - alpha
  // where alpha rounds to 1).
  for (const std::string m : kMvaMixers) test::check_mixer_against_mp100(mixer(m));
  for (const int c : {1, 4}) test::check_mixer_against_mp100(mixer("mva", c));
}

// dX and every weight of one mixer layer (the gate projection's d_h rows per head included) against central
// differences, bound 10x the finite difference's own error; in mp50 on the small shape
// (tests/train/mixer_gradcheck.hpp). One test case per rule, so that each stays short.
TEST_CASE("MetaLA: layer gradcheck (double) and mixer gradcheck (mp50)", "[train][mva][metala]") {
  // Its key projection must get exactly no gradient (the key is 1 - alpha_t). If this fails, look at the
  // gate's two paths (the decay and the tied key).
  test::check_mixer_gradients(mixer("metala"));
}

TEST_CASE("GSA: layer gradcheck (double) and mixer gradcheck (mp50)", "[train][mva][gsa]") {
  // If this fails, look at the slot softmax's adjoint or the key memory's write.
  test::check_mixer_gradients(mixer("gsa"));
}

TEST_CASE("MVA (c = 1, 2): layer gradcheck (double) and mixer gradcheck (mp50)", "[train][mva]") {
  // c = 2 runs the residual between levels (its softmax selection and the reverse order of the levels);
  // c = 1 the linear branch beside GSA's. If this fails only at c = 2, look at the residual's adjoint.
  for (const int c : {1, 2}) test::check_mixer_gradients(mixer("mva", c));
}

TEST_CASE("MVA's levels are a knob: refused outside [1, 64] naming mva_levels", "[train][mva]") {
  // If this fails, a run with no levels (an empty output sum) or a state of unbounded size is accepted.
  for (const int c : {0, -1, 65}) {
    CHECK_THROWS_WITH(MvaRule<Precision<double>>::from_config(mixer("mva", c)), Catch::Contains("mva_levels"));
    MixerConfig mc = mixer("mva", c);
    for_each_knob(mc, [](const auto& k) {
      if (k.name == "mva_levels") CHECK_THROWS_WITH(k.check(), Catch::Contains("mva_levels") && Catch::Contains("[1, 64]"));
    });
  }
  CHECK(MvaRule<Precision<double>>::from_config(mixer("mva", 5)).options().levels == 5);
}

TEST_CASE("MetaLA, GSA and MVA have no GPU kernel and say so", "[train][mva]") {
  for (const std::string m : kMvaMixers)
    CHECK_THROWS_WITH(gpu_kernel_for(mixer(m), 32, GpuUse::Training), Catch::Contains("--mixer") && Catch::Contains(m));
}
