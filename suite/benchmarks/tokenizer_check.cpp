// The tokenizer check (tokenizer_check.h).
#include "suite/benchmarks/tokenizer_check.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/errors.h"

namespace kvaudit::benchmarks {

std::int64_t CheckLimits::limit() const {
  return configured_limit ? std::min(max_positions, *configured_limit) : max_positions;
}

std::string CheckLimits::describe() const {
  std::string s = "max_position_embeddings " + std::to_string(max_positions);
  if (configured_limit) {
    s = "min(" + s + ", configured " + std::to_string(*configured_limit) +
        ") = " + std::to_string(limit());
  }
  return s;
}

std::int64_t TokenizerCheckReport::excluded() const {
  return static_cast<std::int64_t>(
      std::count_if(instances.begin(), instances.end(), [](const auto& c) { return !c.fits; }));
}

std::int64_t median_tokens(std::vector<std::int64_t> values) {
  if (values.empty()) throw InternalError("median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  if (n % 2 == 1) return values[n / 2];
  return (values[n / 2 - 1] + values[n / 2] + 1) / 2;
}

TokenizerCheckReport check_ruler_instances(std::span<const ruler::RulerInstance> instances,
                                           const ruler::PromptMeasurer& evaluated,
                                           const CheckLimits& limits) {
  if (limits.limit() <= 0) throw InputError("tokenizer check: the model limit must be positive");
  TokenizerCheckReport report;
  report.tokenizer = evaluated.description();
  report.limits = limits;
  const std::int64_t limit = limits.limit();
  for (const auto& instance : instances) {
    InstanceCheck c;
    c.task = instance.task;
    c.index = instance.index;
    c.tokenizer = report.tokenizer;
    c.limit = limit;
    c.max_new_tokens = instance.max_new_tokens;
    c.generation_total = instance.total_tokens();
    c.tokens = evaluated.measure(instance.context, instance.question, instance.answer_prefix);
    if (c.total_tokens() > limit) {
      c.fits = false;
      c.reason = "prompt " + std::to_string(c.tokens.prompt()) + " + max_new_tokens " +
                 std::to_string(c.max_new_tokens) + " = " + std::to_string(c.total_tokens()) +
                 " tokens > limit " + std::to_string(limit) + " (" + limits.describe() +
                 "); generated for " + std::to_string(c.generation_total) +
                 " tokens: excluded, not truncated";
    }
    report.instances.push_back(std::move(c));
  }
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::size_t>> by_task;
  for (std::size_t i = 0; i < report.instances.size(); ++i) {
    const auto& task = report.instances[i].task;
    if (!by_task.contains(task)) order.push_back(task);
    by_task[task].push_back(i);
  }
  for (const auto& task : order) {
    TaskCheckSummary s;
    s.task = task;
    std::vector<std::int64_t> generation, evaluated_totals;
    for (const auto i : by_task[task]) {
      const auto& c = report.instances[i];
      s.nominal_length = instances[i].length;
      generation.push_back(c.generation_total);
      evaluated_totals.push_back(c.total_tokens());
      if (!c.fits) ++s.excluded;
    }
    s.instances = static_cast<std::int64_t>(generation.size());
    s.generation_min = *std::min_element(generation.begin(), generation.end());
    s.generation_max = *std::max_element(generation.begin(), generation.end());
    s.generation_median = median_tokens(generation);
    s.evaluated_min = *std::min_element(evaluated_totals.begin(), evaluated_totals.end());
    s.evaluated_max = *std::max_element(evaluated_totals.begin(), evaluated_totals.end());
    s.evaluated_median = median_tokens(evaluated_totals);
    s.ratio = s.generation_median > 0 ? static_cast<double>(s.evaluated_median) /
                                            static_cast<double>(s.generation_median)
                                      : 0.0;
    report.tasks.push_back(s);
  }
  return report;
}

std::string format_check_report(const TokenizerCheckReport& report) {
  std::string out = "tokenizer check: evaluated with " + report.tokenizer +
                    "\n  limit: " + report.limits.describe() +
                    "\n  lengths are prompt + max_new_tokens; ratio = evaluated median / "
                    "generation median\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-16s %7s %5s %22s %22s %6s %9s\n", "task", "nominal", "n",
                "generation min/med/max", "evaluated min/med/max", "ratio", "excluded");
  out += line;
  for (const auto& t : report.tasks) {
    const std::string gen = std::to_string(t.generation_min) + "/" +
                            std::to_string(t.generation_median) + "/" +
                            std::to_string(t.generation_max);
    const std::string eval = std::to_string(t.evaluated_min) + "/" +
                             std::to_string(t.evaluated_median) + "/" +
                             std::to_string(t.evaluated_max);
    std::snprintf(line, sizeof line, "  %-16s %7lld %5lld %22s %22s %6.3f %9lld\n", t.task.c_str(),
                  static_cast<long long>(t.nominal_length), static_cast<long long>(t.instances),
                  gen.c_str(), eval.c_str(), t.ratio, static_cast<long long>(t.excluded));
    out += line;
  }
  for (const auto& c : report.instances) {
    if (!c.fits)
      out += "  excluded " + c.task + " #" + std::to_string(c.index) + ": " + c.reason + "\n";
  }
  return out;
}

}  // namespace kvaudit::benchmarks
