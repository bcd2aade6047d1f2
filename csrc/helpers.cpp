// Index builders for the GPT datasets, compiled by setup.py as core.datasets.helpers_cpp.
//
// build_sample_idx: for each training sample, the (document index position, offset)
// where it starts, walking documents in the order of the shuffled document index and
// cutting the token stream into samples of seq_length + 1 tokens that overlap by one.
// Output: [num_samples + 1, 2] array of (doc_idx position, token offset).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>

namespace py = pybind11;

template <typename IndexT>
py::array_t<IndexT> build_sample_idx(const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& sizes,
                                     const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& doc_idx,
                                     int64_t seq_length, int64_t num_epochs, int64_t tokens_per_epoch) {
  if (seq_length <= 0) throw std::invalid_argument("seq_length must be positive");
  auto sizes_ = sizes.unchecked<1>();
  auto doc_idx_ = doc_idx.unchecked<1>();
  const int64_t num_samples = (num_epochs * tokens_per_epoch - 1) / seq_length;
  py::array_t<IndexT> result({num_samples + 1, static_cast<int64_t>(2)});
  auto out = result.template mutable_unchecked<2>();
  int64_t sample = 0, doc_pos = 0, offset = 0;
  out(0, 0) = 0;
  out(0, 1) = 0;
  for (sample = 1; sample <= num_samples; ++sample) {
    int64_t remaining = seq_length + 1;
    while (remaining != 0) {
      if (doc_pos >= doc_idx_.shape(0)) throw std::out_of_range("document index exhausted");
      const int64_t doc_length = sizes_(doc_idx_(doc_pos)) - offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        offset += remaining + doc_length - 1;  // samples overlap by one token
        remaining = 0;
      } else {
        ++doc_pos;
        offset = 0;
      }
    }
    out(sample, 0) = static_cast<IndexT>(doc_pos);
    out(sample, 1) = static_cast<IndexT>(offset);
  }
  return result;
}

PYBIND11_MODULE(helpers_cpp, m) {
  m.doc() = "C++ index builders for core.datasets (sample index, blending index)";
  m.def("build_sample_idx_int32", &build_sample_idx<int32_t>, py::arg("sizes"), py::arg("doc_idx"),
        py::arg("seq_length"), py::arg("num_epochs"), py::arg("tokens_per_epoch"));
  m.def("build_sample_idx_int64", &build_sample_idx<int64_t>, py::arg("sizes"), py::arg("doc_idx"),
        py::arg("seq_length"), py::arg("num_epochs"), py::arg("tokens_per_epoch"));
}
