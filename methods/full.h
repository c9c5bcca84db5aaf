// FullMethod: no eviction, the full-KV reference: every layer and KV head keeps all L positions.
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class FullMethod : public Method {
 public:
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  std::string name() const override { return "full"; }
};

}  // namespace kvaudit::methods
