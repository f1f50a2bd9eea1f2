#pragma once
// The rule Mamba-2 / SSD (seed 004 sec. 5.3, data-dependent scalar decay): forward step, reverse step, GPU trait.
#include "core/rules/mamba2/adjoint.hpp"
#include "core/rules/mamba2/forward.hpp"
#include "core/rules/mamba2/gpu.hpp"
