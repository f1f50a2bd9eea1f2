#pragma once
// The rule gated-deltanet (a decayed delta rule, two gates): forward step, reverse step, GPU trait.
#include "core/rules/gated_deltanet/adjoint.hpp"
#include "core/rules/gated_deltanet/forward.hpp"
#include "core/rules/gated_deltanet/gpu.hpp"
