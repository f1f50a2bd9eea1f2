#pragma once
// The rule linear attention (eq. 3): forward step, reverse step, GPU trait.
#include "core/rules/linear/adjoint.hpp"
#include "core/rules/linear/forward.hpp"
#include "core/rules/linear/gpu.hpp"
