#pragma once
// The adjoint of one MVA step (forward.hpp): the slot memories' (gsa/slot_memory.hpp, SlotAdjoint) with c
// key memories, the levels in reverse order, and the linear branch.
#include "core/rules/mva/forward.hpp"

namespace vla {

template <class P> struct Adjoint<MvaRule<P>> : SlotAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  Adjoint(const MvaRule<P>& rule, int d) : SlotAdjoint<T>(d, rule.slots()) {}
  using SlotAdjoint<T>::step;
};

}  // namespace vla
