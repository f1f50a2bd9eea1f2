#pragma once
// The rule RetNet retention (seed 004 sec. 5.2, constant decay gamma): forward step, reverse step, GPU trait.
#include "core/rules/retnet/adjoint.hpp"
#include "core/rules/retnet/forward.hpp"
#include "core/rules/retnet/gpu.hpp"
