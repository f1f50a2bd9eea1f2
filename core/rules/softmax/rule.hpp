#pragma once
// The rule causal softmax attention (eq. 2): forward step, reverse step, GPU trait.
#include "core/rules/softmax/adjoint.hpp"
#include "core/rules/softmax/forward.hpp"
#include "core/rules/softmax/gpu.hpp"
