#pragma once
// The rule falcon2a (seed 003's inner-product rule with the NLMS step): forward step, reverse step, GPU trait.
#include "core/rules/falcon2a/adjoint.hpp"
#include "core/rules/falcon2a/forward.hpp"
#include "core/rules/falcon2a/gpu.hpp"
