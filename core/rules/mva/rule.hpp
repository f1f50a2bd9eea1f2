#pragma once
// The rule mva (seed 002 eq. 6: c levels of slot memories, the multi-level vocabulary decomposition): forward
// step, reverse step, GPU trait.
#include "core/rules/mva/adjoint.hpp"
#include "core/rules/mva/forward.hpp"
#include "core/rules/mva/gpu.hpp"
