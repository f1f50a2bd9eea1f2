#pragma once
// The rule linear attention (eq. 3): forward step, reverse step.
#include "core/rules/linear/adjoint.hpp"
#include "core/rules/linear/forward.hpp"
