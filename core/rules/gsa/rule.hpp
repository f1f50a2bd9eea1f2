#pragma once
// The rule gsa (Gated Slot Attention, seed 002 sec. 2.3 and eq. 3: two-pass slots with a softmax): forward step,
// reverse step, GPU trait.
#include "core/rules/gsa/adjoint.hpp"
#include "core/rules/gsa/forward.hpp"
#include "core/rules/gsa/gpu.hpp"
