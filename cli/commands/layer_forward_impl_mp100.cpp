// layer_forward_cpu for one precision (see layer_forward.hpp): one translation unit each, to keep compile times short.
#include "cli/commands/layer_forward_impl.hpp"

namespace vla::cli {
VLA_INSTANTIATE_LAYER_FORWARD(vla::Precision<mp100>);
}  // namespace vla::cli
