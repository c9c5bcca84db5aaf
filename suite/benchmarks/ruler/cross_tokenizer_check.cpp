// The cross-tokenizer pitfall: generation with tokenizer A, re-measurement with B
// (cross_tokenizer_check.h).
#include "suite/benchmarks/ruler/cross_tokenizer_check.h"

#include <chrono>
#include <cstdio>
#include <iterator>
#include <map>

#include "runners/model/formats/gguf.h"
#include "runners/model/formats/gguf_config.h"
#include "runners/model/formats/hf_config.h"
#include "suite/benchmarks/ruler/essay.h"

namespace kvaudit::benchmarks::ruler {

TokenizerSide::TokenizerSide(const std::filesystem::path& path,
                             model::ChatTemplateKind chat_template)
    : tokenizer_(model::load_tokenizer(path)), measurer_(*tokenizer_, chat_template) {}

std::int64_t model_max_positions(const std::filesystem::path& model_path) {
  if (std::filesystem::is_directory(model_path)) {
    return model::read_hf_config(model_path).max_position_embeddings;
  }
  return model::config_from_gguf(model::GgufFile::open(model_path)).max_position_embeddings;
}

GeneratedSet generate_ruler_set(const RulerConfig& config, std::span<const std::string> tasks,
                                std::int64_t first, std::int64_t count,
                                const PromptMeasurer& generation) {
  GeneratedSet set;
  set.generation = generation.description();
  const auto started = std::chrono::steady_clock::now();
  RulerGenerator generator(config, generation);
  for (const auto& task : tasks) {
    auto part = generator.generate_range(task, first, count);
    set.instances.insert(set.instances.end(), std::make_move_iterator(part.begin()),
                         std::make_move_iterator(part.end()));
  }
  set.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (const auto* essay = generator.essay()) {
    set.essay = essay->source + " (" + std::to_string(essay->words.size()) + " words)";
  }
  return set;
}

std::string format_cross_tokenizer_report(const std::string& generation_description,
                                          const TokenizerCheckReport& report) {
  std::string out = "  A (generation): " + generation_description +
                    "\n  B (evaluated):  " + report.tokenizer +
                    "\n  limit: " + report.limits.describe() +
                    "\n  lengths are prompt + max_new_tokens; ratio = B median / A median\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-16s %7s %5s %8s %20s %6s %9s\n", "task", "nominal", "n",
                "A median", "B min/median/max", "ratio", "excluded");
  out += line;
  for (const auto& t : report.tasks) {
    const std::string evaluated = std::to_string(t.evaluated_min) + "/" +
                                  std::to_string(t.evaluated_median) + "/" +
                                  std::to_string(t.evaluated_max);
    std::snprintf(line, sizeof line, "  %-16s %7lld %5lld %8lld %20s %6.3f %9lld\n", t.task.c_str(),
                  static_cast<long long>(t.nominal_length), static_cast<long long>(t.instances),
                  static_cast<long long>(t.generation_median), evaluated.c_str(), t.ratio,
                  static_cast<long long>(t.excluded));
    out += line;
  }
  const std::int64_t excluded = report.excluded();
  out += "  excluded: " + std::to_string(excluded) + " of " +
         std::to_string(report.instances.size()) + " instances (never truncated)\n";
  if (excluded == 0) return out;
  out += "  first excluded instance of each task:\n";
  std::map<std::string, const InstanceCheck*> first_excluded;
  for (const auto& c : report.instances) {
    if (!c.fits && !first_excluded.contains(c.task)) first_excluded.emplace(c.task, &c);
  }
  for (const auto& t : report.tasks) {
    const auto it = first_excluded.find(t.task);
    if (it == first_excluded.end()) continue;
    out += "    " + t.task + " #" + std::to_string(it->second->index) + ": " + it->second->reason;
    if (t.excluded > 1) out += " (and " + std::to_string(t.excluded - 1) + " more)";
    out += "\n";
  }
  return out;
}

}  // namespace kvaudit::benchmarks::ruler
