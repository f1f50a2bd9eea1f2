#pragma once
// The adjoint of one GSA step (forward.hpp): the slot memories' (slot_memory.hpp, SlotAdjoint) with one
// key memory and no linear branch.
#include "core/rules/gsa/forward.hpp"

namespace vla {

template <class P> struct Adjoint<GsaRule<P>> : SlotAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  Adjoint(const GsaRule<P>& rule, int d) : SlotAdjoint<T>(d, rule.slots()) {}
  using SlotAdjoint<T>::step;
};

}  // namespace vla
