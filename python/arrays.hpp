#pragma once
// NumPy arrays and keyword arguments in and out of the toolkit's types, for the Python module
// (python/module.cpp). Bad input throws std::invalid_argument naming the Python parameter (pybind11
// turns it into ValueError).
#include "core/layers/single_head_weights.hpp"
#include "core/rules/mixer_config.hpp"
#include "core/scalar.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

namespace vla::python {

namespace py = pybind11;

// `obj` (anything numpy.asarray takes) as float64 values: 1-D (n) as (n, 1), 2-D as is; other ranks, a
// non-numeric array or a non-finite value throw naming `name`.
NamedArray named_array(py::handle obj, const std::string& name);

// `obj` as a (rows, cols) matrix, rows >= 1 and cols >= 1; `shape` says what it is ("(T, d_head)") in
// the error; rows/cols < 0: any number of them.
Mat<double> matrix_arg(py::handle obj, const std::string& name, const std::string& shape, long rows = -1, long cols = -1);

py::array_t<double> to_numpy(const Mat<double>& m);        // (rows, cols)
py::array_t<double> to_numpy(const std::vector<double>& v);  // (n)

// cfg with the knobs named in `kwargs` set (core/knob.hpp: lambda0, eps, refresh_period, refresh_eta,
// delta_policy, rank, renormalise_S, renorm_threshold, deltanet_gated), each checked against what it
// allows; an unknown keyword throws naming it and the knobs.
MixerConfig mixer_config(const std::string& mixer, const py::kwargs& kwargs);

}  // namespace vla::python
