#pragma once
// The rule falcon2 (seed 003's NLMS delta rule with per-column gains): forward step, reverse step, GPU trait.
#include "core/rules/falcon2/adjoint.hpp"
#include "core/rules/falcon2/forward.hpp"
#include "core/rules/falcon2/gpu.hpp"
