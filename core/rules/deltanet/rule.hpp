#pragma once
// The rule DeltaNet (eq. 4): forward step, reverse step, GPU trait.
#include "core/rules/deltanet/adjoint.hpp"
#include "core/rules/deltanet/forward.hpp"
#include "core/rules/deltanet/gpu.hpp"
