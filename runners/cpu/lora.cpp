// add_lora, adapter_in_model_dtype (lora.h).
#include "runners/cpu/lora.h"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "runners/cpu/linear.h"

namespace kvaudit::cpu {

methods::LoraAdapter adapter_in_model_dtype(const methods::LoraAdapter& adapter,
                                            Rounding rounding) {
  methods::LoraAdapter out = adapter;
  if (rounding != Rounding::bf16) return out;
  for (auto& layer : out.layers)
    for (auto& [target, module] : layer) {
      (void)target;
      for (float& v : module.a) v = round_as(rounding, v);
      for (float& v : module.b) v = round_as(rounding, v);
    }
  return out;
}

void add_lora(std::span<const float> x, int rows, const methods::LoraModule& module, int rank,
              double scaling, Rounding rounding, std::span<float> y) {
  const auto r = static_cast<std::size_t>(rows);
  const auto in = static_cast<std::size_t>(module.in_features);
  const auto out = static_cast<std::size_t>(module.out_features);
  const auto k = static_cast<std::size_t>(rank);
  if (x.size() != r * in || y.size() != r * out || module.a.size() != k * in ||
      module.b.size() != out * k)
    throw std::invalid_argument("add_lora: shapes do not match (" + std::to_string(rows) +
                                " rows, in " + std::to_string(in) + ", out " + std::to_string(out) +
                                ", r " + std::to_string(rank) + ")");
  std::vector<float> ax(r * k), bax(r * out);
  linear(x, rows, module.in_features, module.a, rank, {}, rounding, ax);
  linear(ax, rows, rank, module.b, module.out_features, {}, rounding, bax);
  // peft multiplies the tensor by the Python float s (a scalar in the tensor's dtype arithmetic:
  // the product of a bf16 tensor and a Python scalar is computed in f32 and rounded once).
  const float s = static_cast<float>(scaling);
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = round_as(rounding, y[i] + round_as(rounding, bax[i] * s));
}

}  // namespace kvaudit::cpu
