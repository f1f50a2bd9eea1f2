// `vla device`: which CUDA devices this build can use (or that it was built without CUDA).
#include "cli/command.hpp"

#include <fmt/format.h>

#ifdef VLA_HAVE_CUDA
#include "gpu/device_query.hpp"
#endif

namespace {
const vla::cli::RegisterCommand reg{"device", "list the CUDA devices this build can use", [](CLI::App& app) {
                                      app.final_callback([] {
#ifdef VLA_HAVE_CUDA
                                        fmt::print("{}", vla::gpu::describe_devices());
#else
                                        fmt::print("this build has no CUDA path (nvcc was not found at configure time)\n");
#endif
                                      });
                                    }};
}  // namespace
