// The two instances of test::mixer_gradcheck (mixer_gradcheck.hpp) that the gradient tests use.
#include "mixer_gradcheck.hpp"

namespace vla::test {
template std::vector<model::TensorCheck> mixer_gradcheck<double>(const MixerConfig&, const MixerShape&, std::uint64_t);
template std::vector<model::TensorCheck> mixer_gradcheck<mp50>(const MixerConfig&, const MixerShape&, std::uint64_t);
}  // namespace vla::test
