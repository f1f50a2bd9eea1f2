#pragma once
// The rule Variational Linear Attention (Algorithm 1) and its variants: forward step, reverse step, GPU trait.
#include "core/rules/vla/adjoint.hpp"
#include "core/rules/vla/forward.hpp"
#include "core/rules/vla/gpu.hpp"
