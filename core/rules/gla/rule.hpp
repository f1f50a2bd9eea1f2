#pragma once
// The rule gla (Gated Linear Attention, seed 004 sec. 5.4, a vector gate): forward step, reverse step, GPU trait.
#include "core/rules/gla/adjoint.hpp"
#include "core/rules/gla/forward.hpp"
#include "core/rules/gla/gpu.hpp"
