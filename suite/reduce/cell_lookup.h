// Finding a cell's partner in a paired analysis: the same unit under another protocol or method,
// or the unit of the same instance under another backend.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "suite/reduce/study_frame.h"

namespace kvaudit::reduce {

class CellLookup {
 public:
  explicit CellLookup(const StudyFrame& frame);

  // The frame index of the cell (unit, method, budget, protocol), if the expansion has it.
  std::optional<std::size_t> cell(std::uint32_t unit, std::int16_t method, std::uint16_t budget,
                                  std::uint8_t protocol) const;
  // The unit of (model, backend, task, instance), if the expansion has it.
  std::optional<std::uint32_t> unit(std::uint16_t model, std::uint8_t backend, std::uint32_t task,
                                    std::int64_t instance) const;
  // The same cell on the unit of the same instance under `backend`.
  std::optional<std::size_t> on_backend(const FrameCell& c, std::uint8_t backend) const;

 private:
  static std::uint64_t cell_key(std::uint32_t unit, std::int16_t method, std::uint16_t budget,
                                std::uint8_t protocol);
  std::unordered_map<std::uint64_t, std::size_t> cells_;
  // (model, backend, task, instance) packed -> unit
  std::unordered_map<std::uint64_t, std::uint32_t> units_;
  const StudyFrame* frame_;
};

}  // namespace kvaudit::reduce
