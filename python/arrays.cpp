#include "python/arrays.hpp"

#include "core/knob.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <type_traits>

namespace vla::python {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using InArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

// What a knob of type T takes, for the error when a value of another type is given.
template <class T> std::string_view python_type() {
  if constexpr (std::is_same_v<T, bool>) return "True or False";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else return "a number";
}

}  // namespace

NamedArray named_array(py::handle obj, const std::string& name) {
  const InArray a = InArray::ensure(obj);  // numpy.asarray(obj, dtype=float64); null when that fails
  if (!a) throw std::invalid_argument(fmt::format("{}: must be an array of numbers, got {}", name, std::string(py::repr(obj))));
  if (a.ndim() != 1 && a.ndim() != 2)
    throw std::invalid_argument(fmt::format("{}: must be a 1-D or 2-D array, got {}-D", name, a.ndim()));
  const long rows = long(a.shape(0)), cols = a.ndim() == 2 ? long(a.shape(1)) : 1;
  return {Mat<double>(Eigen::Map<const RowMajor>(a.data(), rows, cols)), int(a.ndim()), ""};
}

Mat<double> matrix_arg(py::handle obj, const std::string& name, const std::string& shape, long rows, long cols) {
  const NamedArray a = named_array(obj, name);
  const auto& m = a.data;
  if (a.ndim != 2 || m.rows() < 1 || m.cols() < 1 || (rows >= 0 && m.rows() != rows) || (cols >= 0 && m.cols() != cols))
    throw std::invalid_argument(fmt::format("{}: must be a 2-D array {} = ({}, {}), got {}-D ({}, {})", name, shape,
                                            rows >= 0 ? fmt::format("{}", rows) : ">= 1",
                                            cols >= 0 ? fmt::format("{}", cols) : ">= 1", a.ndim, m.rows(), m.cols()));
  if (!all_finite(m)) throw std::invalid_argument(fmt::format("{}: contains a non-finite value", name));
  return m;
}

py::array_t<double> to_numpy(const Mat<double>& m) {
  py::array_t<double> out({m.rows(), m.cols()});
  Eigen::Map<RowMajor>(out.mutable_data(), m.rows(), m.cols()) = m;
  return out;
}

py::array_t<double> to_numpy(const std::vector<double>& v) {
  py::array_t<double> out(py::ssize_t(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

MixerConfig mixer_config(const std::string& mixer, const py::kwargs& kwargs) {
  MixerConfig cfg;
  cfg.mixer = mixer;
  std::string names;
  for_each_knob(cfg, [&](auto k) { names += (names.empty() ? "" : ", ") + std::string(k.name); });
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key);
    bool known = false;
    for_each_knob(cfg, [&](auto k) {
      if (k.name != name) return;
      known = true;
      using T = typename decltype(k)::value_type;
      if constexpr (std::is_enum_v<T>) {
        if (!py::isinstance<py::str>(value))
          throw std::invalid_argument(fmt::format("{}: must be one of {}, got {}", name, knob_value_names<T>(),
                                                  std::string(py::repr(value))));
        k.value = parse_knob_value<T>(value.template cast<std::string>(), name);
      } else {
        // bool accepts True or False only (pybind11 would take any object with __bool__).
        const bool ok = std::is_same_v<T, bool> ? py::isinstance<py::bool_>(value) : true;
        try {
          if (!ok) throw py::cast_error();
          k.value = value.template cast<T>();
        } catch (const py::cast_error&) {
          throw std::invalid_argument(fmt::format("{}: must be {}, got {}", name, python_type<T>(), std::string(py::repr(value))));
        }
        k.check(name);
      }
    });
    if (!known) throw std::invalid_argument(fmt::format("{}: not a knob of the mixer (knobs: {})", name, names));
  }
  return cfg;
}

}  // namespace vla::python
