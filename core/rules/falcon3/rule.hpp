#pragma once
// The rule falcon3 (seed 003's sliding-window regression rule): forward step, reverse step, GPU trait.
#include "core/rules/falcon3/adjoint.hpp"
#include "core/rules/falcon3/forward.hpp"
#include "core/rules/falcon3/gpu.hpp"
