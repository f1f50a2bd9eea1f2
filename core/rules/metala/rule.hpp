#pragma once
// The rule metala (MetaLA, seed 002 eq. 2: GLA with the key tied to the gate): forward step, reverse step, GPU trait.
#include "core/rules/metala/adjoint.hpp"
#include "core/rules/metala/forward.hpp"
#include "core/rules/metala/gpu.hpp"
