// Finding a cell's partner in a paired analysis: the same unit under another protocol or method,
// or the unit of the same instance under another backend; for reuse cells the same question of
// the context (frame rows are keyed by (cell, question)).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>

#include "suite/reduce/study_frame.h"

namespace kvaudit::reduce {

class CellLookup {
 public:
  explicit CellLookup(const StudyFrame& frame);

  // The frame index of the row (unit, method, budget, protocol, question), if the frame has it
  // (question 0 for the protocols with one question per cell).
  std::optional<std::size_t> cell(std::uint32_t unit, std::int16_t method, std::uint16_t budget,
                                  std::uint8_t protocol, std::uint32_t question = 0) const;
  // The unit of (model, backend, task, instance), if the expansion has it.
  std::optional<std::uint32_t> unit(std::uint16_t model, std::uint8_t backend, std::uint32_t task,
                                    std::int64_t instance) const;
  // The same cell and question on the unit of the same instance under `backend`.
  std::optional<std::size_t> on_backend(const FrameCell& c, std::uint8_t backend) const;

 private:
  struct Key {
    std::uint64_t cell = 0;      // unit (32 bits) | method + 1 (16) | budget (16)
    std::uint64_t question = 0;  // protocol (8) | question (32)
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<std::uint64_t>()(k.cell ^ (k.question * 0x9e3779b97f4a7c15ull));
    }
  };
  static Key cell_key(std::uint32_t unit, std::int16_t method, std::uint16_t budget,
                      std::uint8_t protocol, std::uint32_t question);
  std::unordered_map<Key, std::size_t, KeyHash> cells_;
  // (model, backend, task, instance) packed -> unit
  std::unordered_map<std::uint64_t, std::uint32_t> units_;
  const StudyFrame* frame_;
};

}  // namespace kvaudit::reduce
