// BenchmarkInstances: see unit_instance.h.
#include "suite/run/unit_instance.h"

#include <algorithm>
#include <span>
#include <utility>

#include "base/errors.h"
#include "suite/benchmarks/longbench/longbench_instance.h"
#include "suite/benchmarks/longbench/longbench_task.h"
#include "suite/benchmarks/ruler/multi_question.h"
#include "suite/benchmarks/tokenizer_check.h"

namespace kvaudit::run {

unit::UnitTokens tokenize_prompt_parts(const model::Tokenizer& tokenizer,
                                       const model::PromptParts& parts) {
  const model::EncodeOptions options{.add_special_tokens = false, .parse_special = true};
  unit::UnitTokens tokens;
  tokens.context = tokenizer.encode(parts.prefix_plus_context, options);
  tokens.question = tokenizer.encode(parts.question, options);
  tokens.suffix = tokenizer.encode(parts.suffix_plus_answer_prefix, options);
  return tokens;
}

methods::PassPrompt reconstruction_prompt(const model::Tokenizer& tokenizer,
                                          model::ChatTemplateKind kind) {
  const model::EncodeOptions options{.add_special_tokens = false, .parse_special = true};
  std::string prefix_text;
  std::string suffix_text = "\n";
  if (kind != model::ChatTemplateKind::none) {
    const std::string dummy = "dummy context";
    const std::string separator = "\n" + std::string(dummy.size(), '#');
    const model::ChatMessage message{model::ChatRole::user, dummy + separator};
    const std::string rendered =
        model::render_chat(kind, std::span<const model::ChatMessage>(&message, 1));
    const std::size_t cut = rendered.find(separator);
    const std::string head = rendered.substr(0, cut);
    suffix_text =
        cut == std::string::npos ? std::string() : rendered.substr(cut + separator.size());
    prefix_text = head.substr(0, head.find(dummy));
  }
  methods::PassPrompt prompt;
  prompt.prefix_length = static_cast<int>(tokenizer.encode(prefix_text, options).size());
  prompt.suffix = tokenizer.encode(suffix_text, options);
  prompt.repeat_first = tokenizer.encode("\n\nRepeat the previous context exactly.", options);
  prompt.repeat_next = tokenizer.encode(
      "\n\nRepeat the part of the previous context exactly, starting with", options);
  return prompt;
}

namespace {

std::int64_t prompt_size(const unit::UnitTokens& t) {
  return static_cast<std::int64_t>(t.context.size() + t.question.size() + t.suffix.size());
}

}  // namespace

BenchmarkInstances::BenchmarkInstances(const manifest::Manifest& manifest,
                                       std::size_t benchmark_index, const LoadedModel& model,
                                       std::optional<std::int64_t> configured_limit,
                                       std::optional<GenerationTokenizer> generation)
    : manifest_(manifest),
      benchmark_(manifest.benchmarks.at(benchmark_index)),
      model_(model),
      configured_limit_(configured_limit),
      evaluated_(model.tokenizer(), model.chat_template()) {
  if (benchmark_.kind != benchmarks::BenchmarkKind::ruler) return;
  if (generation) {
    generation_tokenizer_ = model::load_tokenizer(generation->path);
    generation_measurer_ = std::make_unique<benchmarks::ruler::PromptMeasurer>(
        *generation_tokenizer_, generation->chat_template);
  }
  benchmarks::ruler::RulerConfig config;
  config.seed = manifest.study.seed;
  config.length = benchmark_.length;
  config.essay = benchmark_.essay == "builtin" || benchmark_.essay.empty()
                     ? std::string("builtin")
                     : manifest.resolve(benchmark_.essay).string();
  if (!benchmark_.squad.empty()) config.squad = manifest.resolve(benchmark_.squad).string();
  if (!benchmark_.hotpotqa.empty()) {
    config.hotpotqa = manifest.resolve(benchmark_.hotpotqa).string();
  }
  ruler_ = std::make_unique<benchmarks::ruler::RulerGenerator>(
      config, generation_measurer_ ? *generation_measurer_ : evaluated_);
}

BenchmarkInstances::~BenchmarkInstances() = default;

benchmarks::CheckLimits BenchmarkInstances::limits() const {
  benchmarks::CheckLimits limits;
  limits.max_positions = model_.weights().config.max_position_embeddings;
  limits.configured_limit = configured_limit_;
  // RULER: the nominal length is a limit too (as `kvaudit plan` checks it); an instance sized with
  // the evaluated tokenizer fits it by construction, one sized with a generation tokenizer may not.
  if (benchmark_.kind == benchmarks::BenchmarkKind::ruler) {
    limits.configured_limit =
        std::min(benchmark_.length, configured_limit_.value_or(benchmark_.length));
  }
  return limits;
}

UnitInstance BenchmarkInstances::build(std::string_view task, std::int64_t index) {
  return benchmark_.kind == benchmarks::BenchmarkKind::ruler ? build_ruler(task, index)
                                                             : build_longbench(task, index);
}

UnitInstance BenchmarkInstances::build_ruler(std::string_view task, std::int64_t index) {
  const benchmarks::ruler::RulerInstance instance = ruler_->generate(task, index);

  model::PromptSplitInput input;
  input.kind = model_.chat_template();
  input.context = instance.context;
  input.question = instance.question;
  input.answer_prefix = instance.answer_prefix;
  input.options.bos_text = model_.bos_text();

  UnitInstance out;
  out.tokens = tokenize_prompt_parts(model_.tokenizer(), model::split_prompt(input));
  out.tokens.pass_prompt = reconstruction_prompt(model_.tokenizer(), model_.chat_template());
  out.answers = instance.answers;
  out.max_new_tokens = instance.max_new_tokens;
  out.nominal_length = benchmark_.length;

  const auto report = benchmarks::check_ruler_instances(
      std::span<const benchmarks::ruler::RulerInstance>(&instance, 1), evaluated_, limits());
  const benchmarks::InstanceCheck& check = report.instances.at(0);
  if (!check.fits) {
    out.excluded =
        "tokenizer check: " + check.reason +
        (generation_measurer_ ? "; generated with " + instance.tokenizer : std::string());
  }
  return out;
}

const benchmarks::LongBenchTaskData& BenchmarkInstances::longbench_data(std::string_view task) {
  auto it = longbench_.find(task);
  if (it == longbench_.end()) {
    auto data = benchmarks::load_longbench_task(manifest_.resolve(benchmark_.data_dir), task);
    it = longbench_.emplace(std::string(task), std::move(data)).first;
  }
  return it->second;
}

benchmarks::LongBenchChatOptions BenchmarkInstances::longbench_chat() const {
  benchmarks::LongBenchChatOptions chat;
  chat.kind = model_.chat_template();
  chat.render.bos_text = model_.bos_text();
  chat.rule = benchmarks::LongBenchChatRule::always;
  return chat;
}

UnitInstance BenchmarkInstances::build_longbench(std::string_view task, std::int64_t index) {
  const benchmarks::LongBenchTaskData& data = longbench_data(task);
  if (index < 0 || static_cast<std::size_t>(index) >= data.records.size()) {
    throw InputError(data.file.string() + ": benchmark " + benchmark_.name + " asks for instance " +
                     std::to_string(index) + " of task " + std::string(task) +
                     ", but the file holds " + std::to_string(data.records.size()) +
                     " records (benchmarks." + benchmark_.name + ".instances is too large)");
  }
  const benchmarks::LongBenchInstance instance = benchmarks::build_longbench_instance(
      data.records[static_cast<std::size_t>(index)], data.task, model_.tokenizer(),
      longbench_chat(), static_cast<std::size_t>(benchmark_.length));

  UnitInstance out;
  out.tokens = tokenize_prompt_parts(model_.tokenizer(), instance.split_parts);
  out.tokens.pass_prompt = reconstruction_prompt(model_.tokenizer(), model_.chat_template());
  out.answers = instance.answers;
  if (instance.all_classes) out.all_classes = *instance.all_classes;
  out.max_new_tokens = instance.max_new_tokens;
  out.nominal_length = benchmark_.length;
  const std::int64_t total = prompt_size(out.tokens) + out.max_new_tokens;
  const benchmarks::CheckLimits limit = limits();
  if (total > limit.limit()) {
    out.excluded = "prompt " + std::to_string(prompt_size(out.tokens)) + " + max_new_tokens " +
                   std::to_string(out.max_new_tokens) + " = " + std::to_string(total) +
                   " tokens > limit " + std::to_string(limit.limit()) + " (" + limit.describe() +
                   ")";
  }
  return out;
}

UnitInstance BenchmarkInstances::build_reuse(std::string_view task, std::int64_t index) {
  return benchmark_.kind == benchmarks::BenchmarkKind::ruler ? build_ruler_reuse(task, index)
                                                             : build_longbench_reuse(task, index);
}

void BenchmarkInstances::add_reuse_question(UnitInstance& out, const model::PromptParts& parts,
                                            std::string_view what) const {
  unit::UnitTokens tokens = tokenize_prompt_parts(model_.tokenizer(), parts);
  if (out.tokens.reuse_questions.empty()) {
    out.tokens.context = std::move(tokens.context);
  } else if (tokens.context != out.tokens.context) {
    throw InternalError(std::string(what) +
                        ": the shared context tokenizes differently for question " +
                        std::to_string(out.tokens.reuse_questions.size()));
  }
  out.tokens.reuse_questions.push_back(
      unit::QuestionTokens{std::move(tokens.question), std::move(tokens.suffix)});
}

UnitInstance BenchmarkInstances::build_ruler_reuse(std::string_view task, std::int64_t index) {
  if (task != benchmarks::kRulerMultiQuestionTask) {
    throw InputError("benchmark " + benchmark_.name + ", task " + std::string(task) +
                     ": the reuse protocol needs several questions per context; of RULER only " +
                     std::string(benchmarks::kRulerMultiQuestionTask) + " has them");
  }
  const benchmarks::ruler::RulerMultiQuestionInstance multi =
      benchmarks::ruler::generate_multi_question(
          *ruler_, generation_measurer_ ? *generation_measurer_ : evaluated_, index);
  UnitInstance out;
  std::vector<benchmarks::ruler::RulerInstance> questions;
  for (std::size_t j = 0; j < multi.questions.size(); ++j) {
    questions.push_back(multi.question_instance(j));
    const benchmarks::ruler::RulerInstance& q = questions.back();
    model::PromptSplitInput input;
    input.kind = model_.chat_template();
    input.context = q.context;
    input.question = q.question;
    input.answer_prefix = q.answer_prefix;
    input.options.bos_text = model_.bos_text();
    add_reuse_question(out, model::split_prompt(input),
                       "benchmark " + benchmark_.name + ", task " + std::string(task) +
                           ", instance " + std::to_string(index));
    out.question_answers.push_back(q.answers);
    out.max_new_tokens = std::max(out.max_new_tokens, q.max_new_tokens);
  }
  out.tokens.pass_prompt = reconstruction_prompt(model_.tokenizer(), model_.chat_template());
  out.nominal_length = benchmark_.length;
  const auto report = benchmarks::check_ruler_instances(questions, evaluated_, limits());
  for (std::size_t j = 0; j < report.instances.size(); ++j) {
    const benchmarks::InstanceCheck& check = report.instances[j];
    if (check.fits) continue;
    out.excluded =
        "tokenizer check (question " + std::to_string(j) + "): " + check.reason +
        (generation_measurer_ ? "; generated with " + questions[j].tokenizer : std::string());
    break;
  }
  return out;
}

const BenchmarkInstances::LongBenchGroups& BenchmarkInstances::longbench_groups(
    std::string_view task) {
  auto it = longbench_groups_.find(task);
  if (it == longbench_groups_.end()) {
    LongBenchGroups groups;
    groups.instances = benchmarks::build_longbench_instances(
        longbench_data(task), model_.tokenizer(), longbench_chat(),
        static_cast<std::size_t>(benchmark_.length));
    groups.groups = benchmarks::group_instances_by_context(groups.instances);
    it = longbench_groups_.emplace(std::string(task), std::move(groups)).first;
  }
  return it->second;
}

UnitInstance BenchmarkInstances::build_longbench_reuse(std::string_view task, std::int64_t index) {
  const LongBenchGroups& groups = longbench_groups(task);
  if (index < 0 || static_cast<std::size_t>(index) >= groups.groups.size()) {
    throw InputError(longbench_data(task).file.string() + ": benchmark " + benchmark_.name +
                     " asks for context " + std::to_string(index) + " of task " +
                     std::string(task) + " under the reuse protocol, but its records share " +
                     std::to_string(groups.groups.size()) + " distinct contexts (benchmarks." +
                     benchmark_.name + ".instances counts contexts for reuse cells)");
  }
  UnitInstance out;
  const std::string what = "benchmark " + benchmark_.name + ", task " + std::string(task) +
                           ", context " + std::to_string(index);
  for (const std::size_t member : groups.groups[static_cast<std::size_t>(index)].members) {
    const benchmarks::LongBenchInstance& instance = groups.instances.at(member);
    add_reuse_question(out, instance.split_parts, what);
    out.question_answers.push_back(instance.answers);
    if (instance.all_classes && out.all_classes.empty()) out.all_classes = *instance.all_classes;
    out.max_new_tokens = std::max(out.max_new_tokens, instance.max_new_tokens);
  }
  out.tokens.pass_prompt = reconstruction_prompt(model_.tokenizer(), model_.chat_template());
  out.nominal_length = benchmark_.length;
  const benchmarks::CheckLimits limit = limits();
  for (std::size_t j = 0; j < out.tokens.reuse_questions.size(); ++j) {
    const unit::QuestionTokens& q = out.tokens.reuse_questions[j];
    const auto prompt =
        static_cast<std::int64_t>(out.tokens.context.size() + q.question.size() + q.suffix.size());
    const std::int64_t total = prompt + out.max_new_tokens;
    if (total <= limit.limit()) continue;
    out.excluded = "question " + std::to_string(j) + ": prompt " + std::to_string(prompt) +
                   " + max_new_tokens " + std::to_string(out.max_new_tokens) + " = " +
                   std::to_string(total) + " tokens > limit " + std::to_string(limit.limit()) +
                   " (" + limit.describe() + ")";
    break;
  }
  return out;
}

}  // namespace kvaudit::run
