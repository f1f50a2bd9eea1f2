#pragma once
// The rule delta (the classic delta rule, beta in (0, 2)): forward step, reverse step, GPU trait.
#include "core/rules/delta/adjoint.hpp"
#include "core/rules/delta/forward.hpp"
#include "core/rules/delta/gpu.hpp"
