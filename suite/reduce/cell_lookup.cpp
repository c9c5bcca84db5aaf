// Partner lookups for paired analyses (see cell_lookup.h).
#include "suite/reduce/cell_lookup.h"

#include "base/errors.h"

namespace kvaudit::reduce {
namespace {

// model (16 bits) | backend (4) | task (20) | instance (24)
std::uint64_t unit_key(std::uint16_t model, std::uint8_t backend, std::uint32_t task,
                       std::int64_t instance) {
  return (static_cast<std::uint64_t>(model) << 48) | (static_cast<std::uint64_t>(backend) << 44) |
         (static_cast<std::uint64_t>(task & 0xfffffu) << 24) |
         (static_cast<std::uint64_t>(instance) & 0xffffffu);
}

}  // namespace

CellLookup::Key CellLookup::cell_key(std::uint32_t unit, std::int16_t method, std::uint16_t budget,
                                     std::uint8_t protocol, std::uint32_t question) {
  return Key{(static_cast<std::uint64_t>(unit) << 32) |
                 (static_cast<std::uint64_t>(static_cast<std::uint16_t>(method + 1)) << 16) |
                 budget,
             (static_cast<std::uint64_t>(protocol) << 32) | question};
}

CellLookup::CellLookup(const StudyFrame& frame) : frame_(&frame) {
  if (frame.tasks.size() > 0xfffffu)
    throw InputError("the manifest has more than 2^20 tasks; reduce cannot index them");
  cells_.reserve(frame.cells.size());
  for (std::size_t i = 0; i < frame.cells.size(); ++i) {
    const FrameCell& c = frame.cells[i];
    if (c.instance < 0 || c.instance > 0xffffff)
      throw InputError("instance index " + std::to_string(c.instance) +
                       " is beyond what reduce can index (2^24)");
    cells_.emplace(cell_key(c.unit, c.method, c.budget, c.protocol, c.question), i);
    units_.emplace(unit_key(c.model, c.backend, c.task, c.instance), c.unit);
  }
}

std::optional<std::size_t> CellLookup::cell(std::uint32_t unit, std::int16_t method,
                                            std::uint16_t budget, std::uint8_t protocol,
                                            std::uint32_t question) const {
  const auto it = cells_.find(cell_key(unit, method, budget, protocol, question));
  if (it == cells_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::uint32_t> CellLookup::unit(std::uint16_t model, std::uint8_t backend,
                                              std::uint32_t task, std::int64_t instance) const {
  const auto it = units_.find(unit_key(model, backend, task, instance));
  if (it == units_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::size_t> CellLookup::on_backend(const FrameCell& c, std::uint8_t backend) const {
  const auto u = unit(c.model, backend, c.task, c.instance);
  if (!u) return std::nullopt;
  return cell(*u, c.method, c.budget, c.protocol, c.question);
}

}  // namespace kvaudit::reduce
