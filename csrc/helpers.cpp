// Index builders for the GPT datasets, compiled by setup.py as core.datasets.helpers_cpp.
//
// build_sample_idx_{int32,int64}(sizes, doc_idx, seq_length, num_epochs, tokens_per_epoch,
//                                drop_last_partial_sequence=true, add_extra_token_to_sequence=1)
//   Walks the documents in the order of doc_idx (positions into sizes) as one token stream
//   and cuts it into samples of seq_length + add_extra_token_to_sequence tokens; consecutive
//   samples overlap by add_extra_token_to_sequence tokens (the label of the last position).
//   Returns a [num_samples + 1, 2] array: row i is (position in doc_idx, token offset in that
//   document) where sample i starts; sample i ends where sample i + 1 starts, plus the extra
//   token. num_samples = (num_epochs * tokens_per_epoch - extra) / seq_length, rounded down
//   (rounded up when drop_last_partial_sequence is false: the last sample is then partial).
//   Same semantics as Megatron-LM's build_sample_idx.
//
// build_blending_indices(dataset_index, dataset_sample_index, weights, num_datasets, size, verbose)
//   Fills the two output arrays of length size: at each step, choose the dataset whose
//   achieved sample count lags its weight the most (weight * max(step, 1) - count, first
//   maximum wins), and take that dataset's next sample.
//
// build_exhaustive_blending_indices(dataset_index, dataset_sample_index, sizes, num_datasets)
//   The same greedy rule with weights sizes / sum(sizes), over sum(sizes) steps; a dataset
//   leaves the competition once all its sizes[d] samples are taken, so every sample of every
//   dataset is used exactly once.
//
// dataset_index may be uint8 or int16; the outputs are written in place, so their dtypes must
// match exactly (a wrong dtype raises TypeError instead of filling a silent copy).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

using InArrayI32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using InArrayF64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
using InArrayI64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
template <typename T>
using OutArray = py::array_t<T, py::array::c_style>;  // no forcecast: writes must reach the caller's array

// ---- sample index -----------------------------------------------------------------------------

template <typename IndexT>
py::array_t<IndexT> build_sample_idx(const InArrayI32& sizes, const InArrayI32& doc_idx, int64_t seq_length,
                                     int64_t num_epochs, int64_t tokens_per_epoch,
                                     bool drop_last_partial_sequence, int64_t add_extra_token_to_sequence) {
  if (seq_length <= 0) throw std::invalid_argument("seq_length must be positive");
  if (num_epochs <= 0) throw std::invalid_argument("num_epochs must be positive");
  if (add_extra_token_to_sequence < 0) throw std::invalid_argument("add_extra_token_to_sequence must be >= 0");
  const int64_t stream_tokens = num_epochs * tokens_per_epoch - add_extra_token_to_sequence;
  if (stream_tokens < 0) throw std::invalid_argument("fewer tokens than one extra token");
  const int64_t num_samples = drop_last_partial_sequence ? stream_tokens / seq_length
                                                         : (stream_tokens + seq_length - 1) / seq_length;
  const int64_t num_docs = doc_idx.shape(0);
  if (num_samples > 0 && num_docs == 0) throw std::invalid_argument("empty doc_idx");
  auto sizes_ = sizes.unchecked<1>();
  auto doc_idx_ = doc_idx.unchecked<1>();
  for (int64_t i = 0; i < num_docs; ++i) {
    if (doc_idx_(i) < 0 || doc_idx_(i) >= sizes.shape(0)) throw std::out_of_range("doc_idx entry outside sizes");
  }
  py::array_t<IndexT> result({num_samples + 1, static_cast<int64_t>(2)});
  auto out = result.template mutable_unchecked<2>();
  bool exhausted = false;
  {
    py::gil_scoped_release release;
    int64_t doc_pos = 0, offset = 0;
    out(0, 0) = 0;
    out(0, 1) = 0;
    for (int64_t sample = 1; sample <= num_samples && !exhausted; ++sample) {
      int64_t remaining = seq_length + add_extra_token_to_sequence;
      while (remaining != 0) {
        const int64_t doc_length = sizes_(doc_idx_(doc_pos)) - offset;
        remaining -= doc_length;
        if (remaining <= 0) {
          // the sample ends inside this document; the next one starts `extra` tokens earlier
          offset += remaining + doc_length - add_extra_token_to_sequence;
          remaining = 0;
        } else if (doc_pos == num_docs - 1) {
          // end of the stream: only the partial last sample (drop_last_partial_sequence=false) gets here
          exhausted = sample != num_samples;
          offset = sizes_(doc_idx_(doc_pos)) - add_extra_token_to_sequence;
          break;
        } else {
          ++doc_pos;
          offset = 0;
        }
      }
      out(sample, 0) = static_cast<IndexT>(doc_pos);
      out(sample, 1) = static_cast<IndexT>(offset);
    }
  }
  if (exhausted) throw std::out_of_range("document index exhausted before num_samples samples");
  return result;
}

// ---- blending ---------------------------------------------------------------------------------

template <typename DatasetT>
void build_blending_indices(OutArray<DatasetT>& dataset_index, OutArray<int64_t>& dataset_sample_index,
                            const InArrayF64& weights, int32_t num_datasets, int64_t size, bool verbose) {
  if (num_datasets <= 0 || weights.shape(0) != num_datasets)
    throw std::invalid_argument("weights must have num_datasets > 0 entries");
  if (num_datasets - 1 > static_cast<int64_t>(std::numeric_limits<DatasetT>::max()))
    throw std::invalid_argument("too many datasets for the dtype of dataset_index");
  if (dataset_index.shape(0) < size || dataset_sample_index.shape(0) < size)
    throw std::invalid_argument("output arrays are shorter than size");
  if (verbose) std::cout << "> building indices for blended datasets ..." << std::endl;
  auto index_out = dataset_index.template mutable_unchecked<1>();
  auto sample_out = dataset_sample_index.mutable_unchecked<1>();
  auto w = weights.unchecked<1>();
  std::vector<int64_t> counts(num_datasets, 0);
  {
    py::gil_scoped_release release;
    for (int64_t step = 0; step < size; ++step) {
      const double step_d = std::max(static_cast<double>(step), 1.0);
      int32_t best = 0;
      double best_error = w(0) * step_d - static_cast<double>(counts[0]);
      for (int32_t d = 1; d < num_datasets; ++d) {
        const double error = w(d) * step_d - static_cast<double>(counts[d]);
        if (error > best_error) {
          best_error = error;
          best = d;
        }
      }
      index_out(step) = static_cast<DatasetT>(best);
      sample_out(step) = counts[best]++;
    }
  }
  if (verbose) {
    std::cout << " > sample ratios:" << std::endl;
    for (int32_t d = 0; d < num_datasets; ++d) {
      std::cout << "   dataset " << d << ", input: " << w(d)
                << ", achieved: " << static_cast<double>(counts[d]) / static_cast<double>(std::max<int64_t>(size, 1))
                << std::endl;
    }
  }
}

template <typename DatasetT>
void build_exhaustive_blending_indices(OutArray<DatasetT>& dataset_index, OutArray<int64_t>& dataset_sample_index,
                                       const InArrayI64& sizes, int32_t num_datasets) {
  if (num_datasets <= 0 || sizes.shape(0) != num_datasets)
    throw std::invalid_argument("sizes must have num_datasets > 0 entries");
  if (num_datasets - 1 > static_cast<int64_t>(std::numeric_limits<DatasetT>::max()))
    throw std::invalid_argument("too many datasets for the dtype of dataset_index");
  auto s = sizes.unchecked<1>();
  int64_t total = 0;
  std::vector<int32_t> unspent;  // datasets with samples left, in increasing order
  for (int32_t d = 0; d < num_datasets; ++d) {
    if (s(d) < 0) throw std::invalid_argument("negative dataset size");
    total += s(d);
    if (s(d) > 0) unspent.push_back(d);
  }
  if (dataset_index.shape(0) < total || dataset_sample_index.shape(0) < total)
    throw std::invalid_argument("output arrays are shorter than sum(sizes)");
  std::vector<double> w(num_datasets, 0.0);
  const double total_d = static_cast<double>(std::max<int64_t>(total, 1));
  for (int32_t d = 0; d < num_datasets; ++d) w[d] = static_cast<double>(s(d)) / total_d;
  auto index_out = dataset_index.template mutable_unchecked<1>();
  auto sample_out = dataset_sample_index.mutable_unchecked<1>();
  std::vector<int64_t> counts(num_datasets, 0);
  py::gil_scoped_release release;
  for (int64_t step = 0; !unspent.empty(); ++step) {
    const double step_d = std::max(static_cast<double>(step), 1.0);
    size_t best_pos = 0;
    double best_error = std::numeric_limits<double>::lowest();
    for (size_t k = 0; k < unspent.size(); ++k) {
      const int32_t d = unspent[k];
      const double error = w[d] * step_d - static_cast<double>(counts[d]);
      if (error > best_error) {
        best_error = error;
        best_pos = k;
      }
    }
    const int32_t best = unspent[best_pos];
    index_out(step) = static_cast<DatasetT>(best);
    sample_out(step) = counts[best]++;
    if (counts[best] == s(best)) unspent.erase(unspent.begin() + static_cast<std::ptrdiff_t>(best_pos));
  }
}

// ---- module -----------------------------------------------------------------------------------

template <typename DatasetT>
void bind_blending(py::module_& m) {
  m.def("build_blending_indices", &build_blending_indices<DatasetT>, py::arg("dataset_index").noconvert(),
        py::arg("dataset_sample_index").noconvert(), py::arg("weights"), py::arg("num_datasets"), py::arg("size"),
        py::arg("verbose") = false);
  m.def("build_exhaustive_blending_indices", &build_exhaustive_blending_indices<DatasetT>,
        py::arg("dataset_index").noconvert(), py::arg("dataset_sample_index").noconvert(), py::arg("sizes"),
        py::arg("num_datasets"));
}

PYBIND11_MODULE(helpers_cpp, m) {
  m.doc() = "C++ index builders for core.datasets (sample index, blending index)";
  m.def("build_sample_idx_int32", &build_sample_idx<int32_t>, py::arg("sizes"), py::arg("doc_idx"),
        py::arg("seq_length"), py::arg("num_epochs"), py::arg("tokens_per_epoch"),
        py::arg("drop_last_partial_sequence") = true, py::arg("add_extra_token_to_sequence") = 1);
  m.def("build_sample_idx_int64", &build_sample_idx<int64_t>, py::arg("sizes"), py::arg("doc_idx"),
        py::arg("seq_length"), py::arg("num_epochs"), py::arg("tokens_per_epoch"),
        py::arg("drop_last_partial_sequence") = true, py::arg("add_extra_token_to_sequence") = 1);
  bind_blending<int16_t>(m);
  bind_blending<uint8_t>(m);
}
