#pragma once
// The rule falcon3a (seed 003's sliding-window inner-product rule, decoupled decay): forward step, reverse
// step, GPU trait.
#include "core/rules/falcon3a/adjoint.hpp"
#include "core/rules/falcon3a/forward.hpp"
#include "core/rules/falcon3a/gpu.hpp"
