// RULER generator: data loading, the per-task probe and the per-instance length search
// (ruler_generator.h).
#include "suite/benchmarks/ruler/ruler_generator.h"

#include <algorithm>
#include <set>

#include "suite/benchmarks/ruler/essay.h"
#include "suite/benchmarks/ruler/qa_data.h"
#include "suite/benchmarks/ruler/ruler_random.h"
#include "suite/benchmarks/ruler/ruler_templates.h"
#include "suite/benchmarks/ruler/task_builder.h"
#include "suite/benchmarks/ruler/word_lists.h"
#include "suite/benchmarks/task_catalog.h"
#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

constexpr std::int64_t kMinLength = 256;
constexpr std::int64_t kMaxLength = std::int64_t{1} << 24;

const TaskSpec& spec_of(std::string_view task) {
  const TaskSpec* spec = find_task(BenchmarkKind::ruler, task);
  if (spec == nullptr) {
    throw InputError("unknown RULER task '" + std::string(task) +
                     "' (known: " + task_name_list(BenchmarkKind::ruler) + ")");
  }
  return *spec;
}

std::uint32_t task_id_of(const TaskSpec& spec) {
  const auto& all = tasks_of(BenchmarkKind::ruler);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].name == spec.name) return static_cast<std::uint32_t>(i);
  }
  throw InternalError("RULER task not in the catalogue");
}

// One rendering of an instance at a haystack size, measured.
struct Fitted {
  std::size_t units = 0;
  PromptSplit split;
  std::vector<std::string> answers;
  PromptTokens tokens;
};

}  // namespace

struct RulerGenerator::TaskState {
  const TaskSpec* spec = nullptr;
  Family family = Family::niah;
  std::unique_ptr<TaskBuilder> builder;
  std::size_t start_units = 0;
};

std::vector<std::string> parse_ruler_task_list(std::string_view text) {
  std::vector<std::string> names;
  if (text == "all") {
    for (const auto& t : tasks_of(BenchmarkKind::ruler)) names.push_back(t.name);
    return names;
  }
  std::set<std::string> seen;
  for (const std::string_view name : split_name_list(text, "RULER task list")) {
    spec_of(name);
    if (!seen.insert(std::string(name)).second) {
      throw InputError("RULER task list: '" + std::string(name) + "' is named twice");
    }
  }
  for (const auto& t : tasks_of(BenchmarkKind::ruler)) {
    if (seen.contains(t.name)) names.push_back(t.name);
  }
  return names;
}

RulerGenerator::RulerGenerator(RulerConfig config, const PromptMeasurer& measurer)
    : config_(std::move(config)), measurer_(measurer) {
  if (config_.length < kMinLength || config_.length > kMaxLength) {
    throw InputError("RULER length " + std::to_string(config_.length) + ": must be in [" +
                     std::to_string(kMinLength) + ", " + std::to_string(kMaxLength) + "]");
  }
}

RulerGenerator::~RulerGenerator() = default;

RulerGenerator::TaskState& RulerGenerator::state_of(std::string_view task) {
  if (const auto it = tasks_.find(task); it != tasks_.end()) return *it->second;
  const TaskSpec& spec = spec_of(task);
  auto state = std::make_unique<TaskState>();
  state->spec = &spec;
  state->family = family_from_name(spec.family);

  BuilderContext context;
  context.seed = config_.seed;
  context.task_id = task_id_of(spec);
  context.length = static_cast<std::uint32_t>(config_.length);
  context.words = &bundled_word_lists();
  context.count_raw_tokens = [this](std::string_view text) { return measurer_.count_raw(text); };
  switch (spec.data) {
    case DataNeed::essay:
      if (!essay_) essay_ = std::make_unique<Essay>(load_essay(config_.essay));
      context.essay = essay_.get();
      break;
    case DataNeed::squad:
      if (config_.squad.empty()) {
        throw InputError("RULER " + spec.name +
                         " needs a SQuAD v2.0 dev JSON file (--squad FILE / squad = \"...\")");
      }
      if (!squad_) squad_ = std::make_unique<QaDataset>(read_squad(config_.squad));
      context.qa = squad_.get();
      break;
    case DataNeed::hotpotqa:
      if (config_.hotpotqa.empty()) {
        throw InputError("RULER " + spec.name +
                         " needs a HotpotQA dev-distractor JSON file (--hotpotqa FILE / hotpotqa "
                         "= \"...\")");
      }
      if (!hotpotqa_) hotpotqa_ = std::make_unique<QaDataset>(read_hotpotqa(config_.hotpotqa));
      context.qa = hotpotqa_.get();
      break;
    case DataNeed::none:
      break;
  }
  switch (state->family) {
    case Family::niah:
      state->builder = make_niah_builder(spec, context);
      break;
    case Family::variable_tracking:
      state->builder = make_variable_tracking_builder(context);
      break;
    case Family::common_words_extraction:
      state->builder = make_common_words_builder(context);
      break;
    case Family::freq_words_extraction:
      state->builder = make_freq_words_builder(context, spec.max_new_tokens);
      break;
    case Family::qa:
      state->builder = make_qa_builder(context);
      break;
  }
  auto& inserted = *tasks_.emplace(spec.name, std::move(state)).first->second;
  // The probe: tokens per unit at RULER's probe size give the first guess; the probe instance's
  // own largest fitting size is every instance's starting point.
  const TaskBuilder& builder = *inserted.builder;
  const InstanceDraft probe = builder.draft(kProbeInstance);
  const std::size_t probe_units = std::max(builder.min_units(), builder.probe_units());
  const TaskText probe_text = probe(probe_units);
  const PromptSplit probe_split = split_ruler_prompt(inserted.family, probe_text.text);
  const auto probe_tokens =
      measurer_.measure(probe_split.context, probe_split.question, probe_split.answer_prefix);
  const double per_unit =
      std::max(1e-3, static_cast<double>(probe_tokens.prompt()) / static_cast<double>(probe_units));
  const double budget = static_cast<double>(config_.length - spec.max_new_tokens);
  inserted.start_units = std::clamp(static_cast<std::size_t>(budget / per_unit),
                                    builder.min_units(), builder.max_units());
  return inserted;
}

RulerInstance RulerGenerator::generate(std::string_view task, std::int64_t index) {
  if (index < 0 || index >= std::int64_t{kProbeInstance}) {
    throw InputError("RULER instance index " + std::to_string(index) + " out of range");
  }
  TaskState& state = state_of(task);
  const TaskBuilder& builder = *state.builder;
  const int max_new = state.spec->max_new_tokens;
  const InstanceDraft draft = builder.draft(static_cast<std::uint32_t>(index));

  std::optional<Fitted> best;
  std::size_t measured_min_total = 0;
  const auto fits = [&](std::size_t units) {
    TaskText text = draft(units);
    PromptSplit split = split_ruler_prompt(state.family, text.text);
    const PromptTokens tokens =
        measurer_.measure(split.context, split.question, split.answer_prefix);
    const std::int64_t total = tokens.prompt() + max_new;
    if (units == builder.min_units()) measured_min_total = static_cast<std::size_t>(total);
    if (total > config_.length) return false;
    if (!best || units > best->units) {
      best = Fitted{units, std::move(split), std::move(text.answers), tokens};
    }
    return true;
  };

  const std::size_t lo_bound = builder.min_units();
  const std::size_t hi_bound = builder.max_units();
  std::size_t lo = 0;  // largest size known to fit (valid when `have_lo`)
  std::size_t hi = 0;  // smallest size known not to fit (valid when `have_hi`)
  bool have_lo = false;
  bool have_hi = false;
  const std::size_t start = std::clamp(state.start_units, lo_bound, hi_bound);
  std::size_t step = std::max<std::size_t>(1, start / 256);
  if (fits(start)) {
    lo = start;
    have_lo = true;
    while (lo < hi_bound) {
      const std::size_t next = std::min(hi_bound, lo + step);
      if (!fits(next)) {
        hi = next;
        have_hi = true;
        break;
      }
      lo = next;
      step *= 2;
    }
  } else {
    hi = start;
    have_hi = true;
    while (hi > lo_bound) {
      const std::size_t next = hi - std::min(step, hi - lo_bound);
      if (fits(next)) {
        lo = next;
        have_lo = true;
        break;
      }
      hi = next;
      step *= 2;
    }
  }
  if (!have_lo) {
    throw InputError("RULER " + state.spec->name + " at length " + std::to_string(config_.length) +
                     ": even the smallest haystack (" + std::to_string(lo_bound) + " " +
                     std::string(builder.unit_name()) + "s) needs " +
                     std::to_string(measured_min_total) + " tokens (prompt + max_new_tokens " +
                     std::to_string(max_new) + ")");
  }
  if (!have_hi) {
    throw InputError("RULER " + state.spec->name + " at length " + std::to_string(config_.length) +
                     ": the haystack would need more than the " + std::to_string(hi_bound) + " " +
                     std::string(builder.unit_name()) +
                     "s the bundled vocabulary holds; use a smaller length");
  }
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }

  RulerInstance instance;
  instance.task = state.spec->name;
  instance.index = index;
  instance.seed = config_.seed;
  instance.length = config_.length;
  instance.context = std::move(best->split.context);
  instance.question = std::move(best->split.question);
  instance.answer_prefix = std::move(best->split.answer_prefix);
  instance.answers = std::move(best->answers);
  instance.max_new_tokens = max_new;
  instance.haystack_units = static_cast<std::int64_t>(best->units);
  instance.haystack_unit = std::string(builder.unit_name());
  instance.tokenizer = measurer_.description();
  instance.context_tokens = best->tokens.context;
  instance.question_tokens = best->tokens.question;
  return instance;
}

std::vector<RulerInstance> RulerGenerator::generate_range(std::string_view task, std::int64_t first,
                                                          std::int64_t count) {
  if (first < 0 || count < 0) throw InputError("RULER: negative instance range");
  std::vector<RulerInstance> out;
  out.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = first; i < first + count; ++i) out.push_back(generate(task, i));
  return out;
}

}  // namespace kvaudit::benchmarks::ruler
