// QFilterScorer (qfilter.h).
#include "methods/qfilter.h"

#include <cstddef>
#include <stdexcept>
#include <utility>

#include "methods/artefact_files.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"

namespace kvaudit::methods {

namespace {

ArtefactTensor load_filters(const std::string& path) {
  return std::move(read_safetensors_tensors(path, {"q_filters"}).at("q_filters"));
}

}  // namespace

QFilterScorer::QFilterScorer(QFilterParams params)
    : QFilterScorer(load_filters(params.filters), params.filters) {}

QFilterScorer::QFilterScorer(ArtefactTensor q_filters, std::string source)
    : source_(std::move(source)), filters_(std::move(q_filters)) {
  const auto& s = filters_.shape;
  if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1 ||
      static_cast<std::int64_t>(filters_.values.size()) != s[0] * s[1] * s[2])
    throw std::invalid_argument(source_ + ": tensor 'q_filters' must be [layers, KV heads, " +
                                "head_dim], not " + shape_text(s));
}

void QFilterScorer::score(const LayerCapture& layer, const SelectionContext&,
                          std::span<float> scores) const {
  check_capture_basics(layer, name());
  if (layer.layer < 0 || layer.layer >= layer.num_layers)
    throw std::invalid_argument(name() + ": layer index " + std::to_string(layer.layer) +
                                " outside the model's " + std::to_string(layer.num_layers));
  if (filters_.shape[0] != layer.num_layers || filters_.shape[1] != layer.num_kv_heads ||
      filters_.shape[2] != layer.head_dim)
    throw std::invalid_argument(source_ + ": q_filters is " + shape_text(filters_.shape) +
                                " but the model has " + std::to_string(layer.num_layers) +
                                " layers, " + std::to_string(layer.num_kv_heads) +
                                " KV heads and head_dim " + std::to_string(layer.head_dim) +
                                " (the filters belong to another model)");
  const auto L = static_cast<std::size_t>(layer.length);
  const auto d = static_cast<std::size_t>(layer.head_dim);
  const bool bf16 = layer.model_is_bf16;
  for (std::size_t h = 0; h < static_cast<std::size_t>(layer.num_kv_heads); ++h) {
    const float* filter =
        filters_.values.data() +
        (static_cast<std::size_t>(layer.layer) * static_cast<std::size_t>(layer.num_kv_heads) + h) *
            d;
    const float* keys = layer.keys[h].data();
    for (std::size_t j = 0; j < L; ++j) {
      double sum = 0.0;
      for (std::size_t c = 0; c < d; ++c) {
        const float f = maybe_bf16(filter[c], bf16);
        sum += bf16 ? static_cast<double>(round_to_bf16(f * keys[j * d + c]))
                    : static_cast<double>(f) * keys[j * d + c];
      }
      scores[h * L + j] = -maybe_bf16(static_cast<float>(sum), bf16);
    }
  }
}

}  // namespace kvaudit::methods
