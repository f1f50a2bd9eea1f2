// Whole-model gradient checks in double (core/model/gradcheck.hpp): the hand-written backward of every
// layer (embeddings, LayerNorm, every mixer's BPTT, GELU FFN, tied head) against central differences.
// A failure means a wrong backward formula for the tensor named; the bound is the error model of
// gradcheck.hpp (10x the finite difference's own measured error, Richardson), not a tuned number.
#include "core/model/gradcheck.hpp"

#include <catch2/catch.hpp>

using namespace vla;

static void check_mixer(const std::string& mixer) {
  MixerConfig mc;
  mc.mixer = mixer;
  const auto pr = model::tiny_problem(mc, 11);
  for (const auto& c : model::gradcheck<double>(pr, 5)) {
    INFO(mixer << " " << c.name << " rel_err " << c.rel_err << " bound " << c.bound << " |g| " << c.grad_norm);
    // Every tensor receives gradient on this problem except the two that are exactly zero by the
    // mathematics: W_u/b_u of vla-fixed-a (A_t = A_0, u is never read) and the softmax key bias b_k
    // (q . (k_s + b) shifts every logit of query t by the same q . b, which the softmax removes).
    const bool zero_by_design = (mixer == "vla-fixed-a" && (c.name.find(".Wu") != std::string::npos || c.name.find(".bu") != std::string::npos)) ||
                                (mixer == "softmax" && c.name.find(".bk") != std::string::npos);
    if (zero_by_design) CHECK(c.grad_norm < 1e-12);
    else CHECK(c.grad_norm > 1e-6);
    CHECK(c.pass());
  }
}

TEST_CASE("gradcheck vla (double)", "[train]") { check_mixer("vla"); }
TEST_CASE("gradcheck vla variants (double)", "[train]") {
  for (const char* m : {"vla-v2", "vla-rls", "vla-fixed-a", "vla-no-knorm"}) check_mixer(m);
}
TEST_CASE("gradcheck deltanet (double)", "[train]") { check_mixer("deltanet"); }
TEST_CASE("gradcheck linear (double)", "[train]") { check_mixer("linear"); }
TEST_CASE("gradcheck softmax (double)", "[train]") { check_mixer("softmax"); }
