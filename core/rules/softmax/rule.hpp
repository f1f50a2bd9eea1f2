#pragma once
// The rule causal softmax attention (eq. 2): forward step, reverse step.
#include "core/rules/softmax/adjoint.hpp"
#include "core/rules/softmax/forward.hpp"
