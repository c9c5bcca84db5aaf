// kvaudit plan MANIFEST: validate, expand into units and cells, print the expansion, check that
// the files it names exist and can work (plan_checks.h: model headers and tensor tables, dtype,
// RULER tasks fit their length), fingerprint the models and data, and write the preregistration
// lock <output_dir>/prereg.json. Every refusal (exit 1) happens before anything is written; an
// existing lock is verified whole, and re-planning the same manifest over it also compares the
// fingerprints (a swapped model is refused, not silently accepted).
//
// The tokenizer check (docs/design/benchmarks.md §Tokenizer check; only for RULER benchmarks with
// `generation_tokenizer`, so plan stays instant for every other manifest): the benchmark's
// instances (its tasks, `instances` per task, the study seed) are generated once, sized with the
// generation tokenizer A and no chat template, then re-measured with the tokenizer and chat
// template B of every model that a grid pairs with the benchmark, against
//     limit = min(the model's max_position_embeddings, the benchmark's length),
// and the per-task report (suite/benchmarks/ruler/cross_tokenizer_check.h) is printed and written
// to <output_dir>/tokenizer-check.txt beside the lock. It is computed before anything is written,
// so a tokenizer that cannot be loaded or a task that cannot fit leaves nothing behind. The file is
// never replaced: re-planning the same manifest finds identical text and leaves it; different text
// for the same locked manifest (the tokenizer files or kvaudit changed, the paths being the same)
// goes to tokenizer-check-2.txt, -3, …, so every measurement stays on record.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "runners/model/chat/chat_template.h"
#include "suite/benchmarks/ruler/cross_tokenizer_check.h"
#include "suite/cli/command.h"
#include "suite/cli/plan_checks.h"
#include "suite/cli/study_paths.h"
#include "suite/common/atomic_file.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/plan_summary.h"
#include "suite/manifest/prereg.h"

namespace kvaudit::cli {
namespace {

namespace ruler = benchmarks::ruler;

inline constexpr const char* kTokenizerCheckFile = "tokenizer-check.txt";

bool has_tokenizer_check(const manifest::Manifest& m) {
  for (const auto& b : m.benchmarks)
    if (!b.generation_tokenizer.empty()) return true;
  return false;
}

// The report text (deterministic: no timings); progress and timings go to `progress`.
std::string tokenizer_check_report(const manifest::Manifest& m, const std::string& sha256,
                                   std::ostream& progress) {
  std::string text =
      "kvaudit tokenizer check (docs/design/benchmarks.md §Tokenizer check) of study '" +
      m.study.name + "', manifest sha256 " + sha256 + "\n";
  for (const auto& b : m.benchmarks) {
    if (b.generation_tokenizer.empty()) continue;
    ruler::RulerConfig config;
    config.seed = m.study.seed;
    config.length = b.length;
    config.essay = b.essay == "builtin" ? b.essay : m.resolve(b.essay).string();
    if (!b.squad.empty()) config.squad = m.resolve(b.squad).string();
    if (!b.hotpotqa.empty()) config.hotpotqa = m.resolve(b.hotpotqa).string();
    const ruler::TokenizerSide generation(m.resolve(b.generation_tokenizer),
                                          model::ChatTemplateKind::none);
    progress << "tokenizer check: generating " << b.name << " (" << b.tasks.size() << " tasks x "
             << b.instances << " instances at " << b.length << " tokens) ..." << std::flush;
    ruler::GeneratedSet set;
    try {
      set = ruler::generate_ruler_set(config, b.tasks, 0, b.instances, generation.measurer());
    } catch (const InputError& e) {  // e.g. a task that cannot fit `length` with tokenizer A
      progress << "\n";
      throw InputError(m.file.string() + ": benchmarks." + b.name +
                       ".generation_tokenizer: " + e.what());
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", set.seconds);
    progress << " " << seconds << " s\n";

    text += "\nbenchmark " + b.name + ": RULER at length " + std::to_string(b.length) + ", " +
            std::to_string(b.tasks.size()) + " tasks x " + std::to_string(b.instances) +
            " instances (indices 0.." + std::to_string(b.instances - 1) + "), seed " +
            std::to_string(config.seed) + ", sized with generation_tokenizer " +
            m.resolve(b.generation_tokenizer).string() + " (no chat template)\n";
    if (set.essay) text += "  essay: " + *set.essay + "\n";
    const auto models = models_paired_with(m, b.name);
    if (models.empty()) text += "  no grid runs this benchmark: nothing to check\n";
    for (const auto& name : models) {
      const manifest::Model& model = *m.find_model(name);
      const auto path = m.resolve(model.path);
      const ruler::TokenizerSide evaluated(path, chat_template_of(model));
      benchmarks::CheckLimits limits;
      limits.max_positions = ruler::model_max_positions(path);
      limits.configured_limit = b.length;  // "configured" below: the benchmark's length
      const auto report =
          benchmarks::check_ruler_instances(set.instances, evaluated.measurer(), limits);
      text += " model " + model.name + " (" + model.format + ", chat template " +
              model.chat_template + "): " + std::to_string(report.excluded()) + " of " +
              std::to_string(report.instances.size()) + " instances exceed the limit\n";
      text += ruler::format_cross_tokenizer_report(set.generation, report);
    }
  }
  return text;
}

std::optional<std::string> read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to tokenizer-check.txt, or finds it there already; a different existing text moves
// this one to tokenizer-check-2.txt, -3, …. Returns the path and whether it was written now.
std::pair<std::filesystem::path, bool> write_tokenizer_check(const std::filesystem::path& out,
                                                             const std::string& text) {
  for (int n = 1;; ++n) {
    const auto path = out / (n == 1 ? std::string(kTokenizerCheckFile)
                                    : "tokenizer-check-" + std::to_string(n) + ".txt");
    if (!std::filesystem::exists(path)) {
      write_new_file(path, text);
      return {path, true};
    }
    if (read_text(path) == text) return {path, false};
  }
}

}  // namespace

Command plan_command() {
  Command c;
  c.name = "plan";
  c.summary = "validate a manifest, print its expansion and write the preregistration lock";
  c.usage = "kvaudit plan MANIFEST [--output-dir DIR] [--dry-run]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("manifest", po::value<std::string>()->required(), "the study manifest (TOML)")(
        "output-dir", po::value<std::string>(),
        "write prereg.json here instead of study.output_dir")(
        "dry-run", "print the expansion and check paths; write nothing");
    p.add("manifest", 1);
  };
  c.body = [](const po::variables_map& vm) {
    const std::string manifest_file = vm["manifest"].as<std::string>();
    std::error_code ec;
    if (std::filesystem::is_directory(manifest_file, ec))
      throw InputError(manifest_file + ": is a directory, expected a manifest TOML file");
    const auto m = manifest::load_manifest(manifest_file);
    const auto ex = manifest::expand(m);
    const auto summary = manifest::summarize(m, ex);
    manifest::print_plan(std::cout, m, ex, summary);
    std::cout.flush();
    const auto out = study_output_dir(m, vm);
    if (std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec))
      throw InputError(out.string() + ": not a directory (" +
                       (vm.count("output-dir") ? "--output-dir" : "study.output_dir") +
                       " must name a directory); nothing was written");
    // An existing lock is verified whole before any slow check (a damaged lock is refused).
    std::optional<nlohmann::json> existing;
    if (std::filesystem::exists(out / manifest::kPreregFile, ec)) {
      existing = manifest::load_prereg(out);
      manifest::require_same_study(out, *existing, summary.manifest_sha256);
    }
    require_paths_exist(m, "nothing was written");
    std::cout << "\n";
    require_plan_inputs_work(m, std::cout, "nothing was written");
    std::optional<std::string> check;
    if (has_tokenizer_check(m)) {
      std::cout << "\n";
      check = tokenizer_check_report(m, summary.manifest_sha256, std::cout);
      std::cout << "\n" << *check;
    }
    if (vm.count("dry-run")) {
      std::cout << "\ndry run: nothing written (the lock would be "
                << (out / manifest::kPreregFile).string();
      if (check) std::cout << "; the tokenizer check " << (out / kTokenizerCheckFile).string();
      std::cout << ")\n";
      return 0;
    }
    const auto inputs = manifest::fingerprint_inputs(m, &std::cout);
    if (existing)
      manifest::require_same_inputs(*existing, out / manifest::kPreregFile, inputs,
                                    manifest::AbsentInput::refuse, "nothing was written",
                                    std::cerr);
    const auto outcome = manifest::write_prereg(out, manifest::make_prereg(m, ex, summary, inputs));
    if (outcome == manifest::PreregOutcome::written) {
      std::cout << "\npreregistered: wrote " << (out / manifest::kPreregFile).string() << "\n";
    } else {
      std::cout << "\npreregistered already: " << (out / manifest::kPreregFile).string()
                << " locks this manifest (unchanged)\n";
    }
    if (check) {
      const auto [path, written] = write_tokenizer_check(out, *check);
      std::cout << (written ? "tokenizer check: wrote " : "tokenizer check: unchanged in ")
                << path.string() << "\n";
    }
    return 0;
  };
  return c;
}

}  // namespace kvaudit::cli
