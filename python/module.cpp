// The Python module `vla`: the toolkit's layer forward, a rule's steps on one head, the analyses and
// the claims ledger over NumPy arrays (float64; anything numpy.asarray takes). Rows are tokens
// throughout: x (T, d_model), q/k/v (T, d_head), keys and values (n, d_head). Bad input raises
// ValueError naming the parameter (the C++ std::invalid_argument); a run that leaves its precision's range
// raises vla.NonFiniteError (an ArithmeticError). Every knob of the mixer (lambda0, eps, refresh_period,
// refresh_eta, delta_policy, rank, renormalise_S, renorm_threshold, deltanet_gated; core/knob.hpp) is a
// keyword argument, with the toolkit's defaults. The long computations release the GIL.
#include "python/arrays.hpp"

#include "analysis/atlas_trajectory.hpp"
#include "analysis/claims.hpp"
#include "analysis/jacobian.hpp"
#include "analysis/norms.hpp"
#include "analysis/recovery.hpp"
#include "analysis/rule_zoo.hpp"
#include "core/layers/layer_forward.hpp"
#include "core/rules/non_finite.hpp"

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>

namespace {

namespace py = pybind11;
using namespace pybind11::literals;
using vla::Mat;
using namespace vla::python;

// The single-head layer on x, as `vla layer-forward` computes it (core/layers/layer_forward.hpp).
py::object layer_forward(py::handle x, const py::dict& weights, const std::string& mixer, const std::string& precision,
                         bool trace, const py::kwargs& knobs) {
  const vla::MixerConfig cfg = mixer_config(mixer, knobs);
  vla::with_precision(precision, [](auto) {});  // an unknown name throws naming --precision
  vla::NamedArray X = named_array(x, "x");
  vla::check_layer_input(X, "x");
  for (const auto& [key, value] : weights) {
    const std::string name = py::str(key);
    if (std::find(vla::kSingleHeadWeightNames.begin(), vla::kSingleHeadWeightNames.end(), name) == vla::kSingleHeadWeightNames.end())
      throw std::invalid_argument(fmt::format("weights: unknown array '{}' (allowed: {})", name, fmt::join(vla::kSingleHeadWeightNames, ", ")));
  }
  const auto get = [&](const std::string& name, bool required) -> std::optional<vla::NamedArray> {
    if (!weights.contains(name)) {
      if (required) throw std::invalid_argument(fmt::format("weights: '{}' is required for mixer {}", name, cfg.mixer));
      return std::nullopt;
    }
    vla::NamedArray a = named_array(weights[name.c_str()], fmt::format("weights['{}']", name));
    a.where = name;
    return a;
  };
  const auto [shape, w] = vla::single_head_weights(cfg, X.data.cols(), get, "weights", "x");
  vla::LayerForwardResult r;
  {
    py::gil_scoped_release release;
    r = vla::layer_forward(precision, cfg, shape, w, X.data);
  }
  if (!trace) return to_numpy(r.Y);
  std::vector<double> S, A, delta, e;  // (T) each
  for (const auto& s : r.trace) {
    S.push_back(s.S_fro);
    A.push_back(s.A_fro);
    delta.push_back(s.delta);
    e.push_back(s.e_norm);
  }
  return py::make_tuple(to_numpy(r.Y),
                        py::dict("S_fro"_a = to_numpy(S), "A_fro"_a = to_numpy(A), "delta"_a = to_numpy(delta), "e_norm"_a = to_numpy(e)));
}

// The rule's steps on one head's own q, k, v (u, gate) through analysis::atlas_trajectory.
py::dict rule_steps(py::handle q, py::handle k, py::handle v, const std::string& mixer, const std::string& precision,
                    const py::object& u, const py::object& gate, const py::kwargs& knobs) {
  const vla::MixerConfig cfg = mixer_config(mixer, knobs);
  const Mat<double> Q = matrix_arg(q, "q", "(T, d_head)");
  const long T = Q.rows(), d = Q.cols(), rank = cfg.penalty.rank;
  // What the rule reads besides q, k, v: its projected penalty directions u (VLA's rules, unless they
  // take them from the key), its gate logits.
  bool reads_u = false;
  long gate_rows = 0;
  vla::analysis::with_analysis_rule<vla::Precision<double>>(mixer, cfg, [&](const auto& rule) {
    using R = std::decay_t<decltype(rule)>;
    reads_u = R::needs.penalty;
    if constexpr (requires { rule.options().penalty_source; })
      reads_u = rule.options().penalty_source == vla::PenaltySource::Projection;
    gate_rows = R::needs.gate_rows(int(d));
  });
  if (reads_u && u.is_none())
    throw std::invalid_argument(fmt::format("u: mixer {} reads penalty directions u = W_u k_raw, (T, rank * d_head) = ({}, {})",
                                            mixer, T, rank * d));
  vla::analysis::HeadStream s{int(d), int(T), int(rank), Q.transpose(), matrix_arg(k, "k", "(T, d_head)", T, d).transpose(),
                              matrix_arg(v, "v", "(T, d_head)", T, d).transpose(), {}, {}};
  s.u = u.is_none() ? Mat<double>::Zero(rank * d, T)
                    : Mat<double>(matrix_arg(u, "u", "(T, rank * d_head)", T, rank * d).transpose());
  // Absent gate logits are zero: the gate is sigmoid(0) = 1/2, as with the layer's absent W_g.
  s.gate = gate.is_none() ? Mat<double>::Zero(std::max(gate_rows, 1L), T)
                          : Mat<double>(matrix_arg(gate, "gate", gate_rows ? "(T, gate rows)" : "(T, >= 1)", T,
                                                   gate_rows ? gate_rows : -1).transpose());
  vla::analysis::AtlasTrajectory r;
  {
    py::gil_scoped_release release;
    r = vla::analysis::atlas_trajectory(precision, mixer, cfg, s);
  }
  Mat<double> out(T, d);  // (T, d_head)
  py::array_t<double> S({T, d, d});
  auto Sv = S.mutable_unchecked<3>();
  for (long t = 0; t < T; ++t) {
    out.row(t) = r.out[t].transpose();
    for (long i = 0; i < d; ++i)
      for (long j = 0; j < d; ++j) Sv(t, i, j) = r.S[t](i, j);
  }
  return py::dict("out"_a = to_numpy(out), "S"_a = S, "A_min_eig"_a = to_numpy(r.A_min_eig),
                  "first_nonfinite"_a = r.first_nonfinite, "first_nonfinite_what"_a = r.first_nonfinite_what,
                  "guard_fires"_a = r.guard_fires, "renorms"_a = r.renorms);
}

// Keys and values (n, d_head) of one recovery measurement, as the analysis holds them: (d_head, n).
std::pair<Mat<double>, Mat<double>> key_values(py::handle keys, py::handle values) {
  const Mat<double> K = matrix_arg(keys, "keys", "(n, d_head)");
  return {K.transpose(), matrix_arg(values, "values", "(n, d_head)", K.rows(), K.cols()).transpose()};
}

double recovery_error(py::handle keys, py::handle values, const std::string& mixer, const std::string& precision,
                      std::uint64_t seed, const py::kwargs& knobs) {
  const vla::MixerConfig cfg = mixer_config(mixer, knobs);
  const auto [K, V] = key_values(keys, values);
  const auto stream = vla::analysis::recovery_stream(K, V, seed);
  py::gil_scoped_release release;
  return vla::analysis::recovery_error(precision, mixer, cfg, stream);
}

double least_squares_recovery_error(py::handle keys, py::handle values, const std::string& precision) {
  const auto [K, V] = key_values(keys, values);
  return vla::with_precision_in<vla::analysis::RecoveryPrecisions>(precision, "precision", [&](auto p) {
    return vla::analysis::least_squares_recovery_error_in<decltype(p)>(K, V);
  });
}

py::list jacobian(const std::vector<std::string>& mixers, const std::vector<int>& d_heads, int T, int check_steps,
                  int product_T, std::uint64_t seed, const py::kwargs& knobs) {
  vla::analysis::JacobianConfig c;
  c.mixers = mixers;
  c.d_heads = d_heads;
  c.T = T;
  c.check_steps = check_steps;
  c.product_T = product_T;
  c.seed = seed;
  c.base = mixer_config(c.base.mixer, knobs);
  std::vector<vla::analysis::JacobianSeries> r;
  {
    py::gil_scoped_release release;
    r = vla::analysis::run_jacobian(c);
  }
  py::list out;
  for (const auto& s : r)
    out.append(py::dict("mixer"_a = s.mixer, "d_head"_a = s.d, "closed"_a = to_numpy(s.closed), "power"_a = to_numpy(s.power),
                        "svd"_a = to_numpy(s.svd), "product"_a = to_numpy(s.product), "lyapunov"_a = s.lyapunov,
                        "max_rel_disagreement"_a = s.max_rel_disagreement));
  return out;
}

py::list state_norms(const std::vector<std::string>& mixers, int T, int d_head, const std::vector<std::uint64_t>& seeds,
                     const py::kwargs& knobs) {
  vla::analysis::NormConfig c;
  c.mixers = mixers;
  c.T = T;
  c.d_head = d_head;
  c.seeds = seeds;
  c.base = mixer_config(c.base.mixer, knobs);
  vla::analysis::NormResult r;
  {
    py::gil_scoped_release release;
    r = vla::analysis::run_norms(c);
  }
  py::list out;
  for (const auto& s : r.series)
    out.append(py::dict("mixer"_a = s.mixer, "seed"_a = s.seed, "S_fro"_a = to_numpy(s.S), "A_fro"_a = to_numpy(s.A),
                        "bound"_a = to_numpy(s.bound), "max_bound_excess"_a = s.max_bound_excess));
  return out;
}

std::vector<std::string> claim_ids() {
  std::vector<std::string> ids;
  for (const auto& c : vla::analysis::claim_registry()) ids.push_back(c.id);
  return ids;
}

py::dict run_claim(const std::string& id, const std::filesystem::path& out_dir, bool quick) {
  vla::analysis::ClaimsConfig c{quick, out_dir, {id}};
  std::vector<vla::analysis::ClaimResult> all;
  {
    py::gil_scoped_release release;
    all = vla::analysis::run_claims(c);  // an unknown id throws naming --only and the ids
  }
  const auto& r = *std::find_if(all.begin(), all.end(), [&](const auto& x) { return x.id == id; });
  return py::dict("id"_a = r.id, "source"_a = r.source, "paper_says"_a = r.paper_says, "tolerance"_a = r.tolerance,
                  "measured"_a = r.measured, "verdict"_a = vla::analysis::verdict_name(r.verdict),
                  "counterexample"_a = r.counterexample, "artifacts"_a = r.artifacts, "seconds"_a = r.seconds,
                  "quick"_a = r.quick, "studies"_a = r.studies);
}

std::vector<std::string> split_names(std::string_view names) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= names.size();) {
    const std::size_t comma = std::min(names.find(", ", at), names.size());
    out.emplace_back(names.substr(at, comma - at));
    at = comma + 2;
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(vla, m) {
  m.doc() = "The VLA toolkit over NumPy arrays: layer_forward, rule_steps, the analyses, the claims ledger (README, "
            "\"Using the toolkit as a library\").";
  m.attr("__version__") = VLA_VERSION;
  m.attr("mixers") = split_names(vla::kMixerNames);
  m.attr("analysis_mixers") = split_names(vla::analysis::kAnalysisRuleNames);
  m.attr("precisions") = split_names(vla::kPrecisionNames);
  py::register_exception<vla::NonFiniteError>(m, "NonFiniteError", PyExc_ArithmeticError);

  m.def("layer_forward", &layer_forward, "x"_a, "weights"_a, "mixer"_a = vla::MixerConfig{}.mixer, "precision"_a = "double",
        "trace"_a = false,
        "One single-head mixer layer over x (T, d_model), as `vla layer-forward` (docs/recurrences.md, \"The .npy "
        "contract\"): weights is a dict of the contract's arrays, Wq Wk Wv (d_head, d_model), Wo (d_model, d_head), Wu "
        "(rank*d_head, d_head; VLA), Wg (gate rows, d_model; absent = 0), biases b* (absent = 0). Returns y (T, d_model), "
        "or with trace=True (y, {'S_fro', 'A_fro', 'delta', 'e_norm'}: (T) each, NaN where the rule has none). "
        "precision: one of vla.precisions; knobs as keyword arguments.");
  m.def("rule_steps", &rule_steps, "q"_a, "k"_a, "v"_a, "mixer"_a = vla::MixerConfig{}.mixer, "precision"_a = "double",
        "u"_a = py::none(), "gate"_a = py::none(),
        "The rule's steps t = 1..T on one head's own inputs (one sequence): q, k, v (T, d_head) before the feature map, "
        "u (T, rank*d_head) the penalty directions W_u k_raw (required by the VLA rules that read them), gate (T, gate rows) "
        "logits (absent = 0). mixer: one of vla.analysis_mixers; precision: any of vla.precisions but mp100. Returns "
        "{'out': (T, d_head) o_t, 'S': (T, d_head, d_head) S_t as stored, 'A_min_eig': (T) lambda_min of A_t (VLA, else "
        "NaN), 'first_nonfinite': first step with a non-finite value (0 = none), 'first_nonfinite_what', 'guard_fires', "
        "'renorms'}.");
  m.def(
      "make_keys",
      [](const std::string& kind, int d_head, int n, double rho, std::uint64_t seed) {
        return to_numpy(Mat<double>(vla::analysis::make_keys(vla::analysis::parse_key_kind(kind), d_head, n, rho, seed).transpose()));
      },
      "kind"_a, "d_head"_a, "n"_a, "rho"_a = vla::analysis::RecoveryConfig{}.rho, "seed"_a = vla::analysis::RecoveryConfig{}.seed,
      "Unit keys (n, d_head) of the recovery analysis (analysis/recovery.hpp): kind orthonormal, random or correlated "
      "(Gram matrix (1 - rho) I + rho 1 1^T).");
  m.def("recovery_error", &recovery_error, "keys"_a, "values"_a, "mixer"_a = vla::MixerConfig{}.mixer, "precision"_a = "double",
        "seed"_a = vla::analysis::RecoveryConfig{}.seed,
        "Proposition 3's exact recovery: write the n pairs (keys (n, d_head) unit vectors of the positive orthant, "
        "values (n, d_head)), then max_i ||S_n k_hat_i - v_i|| / ||v_i||. precision double or mp50; seed draws W_u.");
  m.def("least_squares_recovery_error", &least_squares_recovery_error, "keys"_a, "values"_a, "precision"_a = "double",
        "The same error for the least-squares memory S = V K^+ (the reference).");
  const vla::analysis::JacobianConfig jc;
  m.def("jacobian", &jacobian, "mixers"_a = jc.mixers, "d_heads"_a = jc.d_heads, "T"_a = jc.T, "check_steps"_a = jc.check_steps,
        "product_T"_a = jc.product_T, "seed"_a = jc.seed,
        "The per-step state Jacobian's norm along the Sec. 6.2 random-input protocol (analysis/jacobian.hpp), in double: "
        "one dict per (mixer, d_head) with 'closed' (T), 'power' and 'svd' (check_steps), 'product' (product_T) "
        "||M_1...M_t||_2, 'lyapunov', 'max_rel_disagreement'.");
  const vla::analysis::NormConfig nc;
  m.def("state_norms", &state_norms, "mixers"_a = nc.mixers, "T"_a = nc.T, "d_head"_a = nc.d_head, "seeds"_a = nc.seeds,
        "||S_t||_F, ||A_t||_F and Proposition 1's bound (eq. 13) along the Sec. 6.2 protocol (analysis/norms.hpp), in "
        "double: one dict per (mixer, seed) with 'S_fro', 'A_fro', 'bound' (T) and 'max_bound_excess'.");
  m.def("claim_ids", &claim_ids, "The ids of the claims ledger (analysis/claims.hpp).");
  m.def("run_claim", &run_claim, "id"_a, "out_dir"_a, "quick"_a = true,
        "Measures one claim of the ledger (`vla claims --only ID`), writing its CSVs and plots under out_dir/claims/: "
        "a dict with 'verdict' (holds, fails, partial, not-run), 'measured', 'counterexample', 'tolerance', "
        "'paper_says', 'source', 'artifacts' (relative to out_dir), 'seconds', and for a training claim the 'studies' that "
        "decide it and 'quick' (decided by a --quick study run).");
}
