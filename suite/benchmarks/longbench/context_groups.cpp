// LongBench records and instances grouped by shared context (context_groups.h).
#include "suite/benchmarks/longbench/context_groups.h"

#include <string>
#include <string_view>
#include <unordered_map>

#include "base/errors.h"

namespace kvaudit::benchmarks {
namespace {

// Groups indices 0…n−1 by context_of(i), in order of first appearance.
template <typename ContextOf>
std::vector<LongBenchContextGroup> group_by(std::size_t n, ContextOf context_of) {
  std::vector<LongBenchContextGroup> groups;
  std::unordered_map<std::string_view, std::size_t> group_of;
  for (std::size_t i = 0; i < n; ++i) {
    const auto [it, inserted] = group_of.try_emplace(context_of(i), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].members.push_back(i);
  }
  return groups;
}

}  // namespace

std::vector<LongBenchContextGroup> group_records_by_context(
    const std::vector<LongBenchRecord>& records) {
  return group_by(records.size(),
                  [&](std::size_t i) { return std::string_view(records[i].context); });
}

std::vector<LongBenchContextGroup> group_instances_by_context(
    const std::vector<LongBenchInstance>& instances) {
  std::vector<LongBenchContextGroup> groups = group_by(
      instances.size(), [&](std::size_t i) { return std::string_view(instances[i].context); });
  for (const LongBenchContextGroup& group : groups) {
    const LongBenchInstance& first = instances[group.members.front()];
    for (const std::size_t m : group.members) {
      const LongBenchInstance& other = instances[m];
      const bool same_prefix = other.answer_prefix == first.answer_prefix;
      const bool same_template = other.chat_template_applied == first.chat_template_applied &&
                                 other.chat_template == first.chat_template &&
                                 other.task == first.task;
      if (!same_prefix || !same_template) {
        throw InputError("LongBench " + first.task + ": records '" + first.id + "' and '" +
                         other.id + "' share a context but differ in " +
                         (same_prefix ? "task or chat template" : "answer prefix") +
                         ", so one compression cannot serve both");
      }
    }
  }
  return groups;
}

}  // namespace kvaudit::benchmarks
