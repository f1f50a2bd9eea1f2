#pragma once
// What CUDA devices this process can see. Compiled only when nvcc is found (VLA_HAVE_CUDA).
#include <string>

namespace vla::gpu {

// Number of visible CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();
// One line per device: name, compute capability, SMs, memory; or why there is none.
std::string describe_devices();

}  // namespace vla::gpu
