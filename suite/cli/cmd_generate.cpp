// kvaudit generate: two jobs under one verb.
//  * kvaudit generate --model PATH --prompt TEXT [--attention-backend sdpa|eager] ...: greedy
//    generation with
//    the CPU reference backend; prints the prompt ids, the generated ids and the text. The prompt
//    is rendered with the model's chat template (auto-detected, or named), tokenized the way HF
//    apply_chat_template(tokenize=True) does (no extra special tokens), prefilled once, and decoded
//    greedily until an eos id, --max-new-tokens or the model's max_position_embeddings (prompt +
//    generated tokens; a prompt that leaves no room is refused, a stop at the limit is warned
//    about on stderr). A tokenizer with ids beyond the model's vocab_size is refused at load.
//  * kvaudit generate ruler --model PATH --length N --tasks a,b|all --instances K --out FILE.jsonl
//    [--first I] [--seed S] [--essay FILE] [--squad FILE] [--hotpotqa FILE] [--chat-template ...]
//    [--generation-tokenizer PATH [--generation-chat-template none]] [--max-context N]:
//    generates RULER instances (suite/benchmarks/ruler/ruler_generator.h) fitted with the model's
//    tokenizer (or, to reproduce the cross-tokenizer pitfall, with --generation-tokenizer), runs
//    the tokenizer check with the model's tokenizer and limit (suite/benchmarks/tokenizer_check.h),
//    writes one JSON line per instance (ruler_jsonl.h; an existing FILE is never replaced) and
//    prints the per-task lengths and the check report.
//  * kvaudit generate longbench --model PATH | --tokenizer PATH --data DIR --tasks a,b|all
//    --out FILE.jsonl [--max-prompt-tokens N] [--chat-template ...] [--chat-rule longbench|always]
//    [--first I] [--instances K]: reads the official LongBench JSONL files
//    (suite/benchmarks/longbench/), builds every chosen record for both protocols with the
//    evaluated tokenizer (pred.py's middle truncation to N tokens, the chat template, kvpress's
//    split; longbench_instance.h), writes one JSON line per instance (longbench_jsonl_writer.h; an
//    existing FILE is never replaced) and prints per task the record count, the truncated count
//    and the original / final prompt lengths (docs/design/benchmarks.md §LongBench truncation,
//    §Tokenizer check). Without
//    --max-prompt-tokens the limit is the model's max_position_embeddings minus the largest
//    kvpress budget (dataset2maxlen + 20) of the chosen tasks.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "runners/cpu/cpu_model.h"
#include "runners/model/chat/chat_template.h"
#include "runners/model/formats/gguf.h"
#include "runners/model/formats/gguf_config.h"
#include "runners/model/formats/hf_config.h"
#include "runners/model/formats/load_weights.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/greedy_decoding.h"
#include "suite/benchmarks/longbench/longbench_instance.h"
#include "suite/benchmarks/longbench/longbench_jsonl.h"
#include "suite/benchmarks/longbench/longbench_task.h"
#include "suite/benchmarks/ruler/cross_tokenizer_check.h"
#include "suite/benchmarks/ruler/essay.h"
#include "suite/benchmarks/ruler/ruler_generator.h"
#include "suite/benchmarks/ruler/ruler_jsonl.h"
#include "suite/benchmarks/task_catalog.h"
#include "suite/benchmarks/tokenizer_check.h"
#include "suite/cli/command.h"
#include "suite/cli/longbench_jsonl_writer.h"
#include "suite/cli/model_chat_template.h"
#include "suite/cli/seed_option.h"
#include "suite/common/atomic_file.h"

namespace kvaudit::cli {

namespace {

std::string join_ids(const std::vector<std::int32_t>& ids) {
  std::ostringstream out;
  for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  return out.str();
}

// --attention-backend, or its old name --backend (still accepted; both given must agree).
std::string attention_backend_option(const po::variables_map& vm) {
  const std::string chosen = vm["attention-backend"].as<std::string>();
  if (!vm.count("backend")) return chosen;
  const std::string old_name = vm["backend"].as<std::string>();
  if (!vm["attention-backend"].defaulted() && old_name != chosen) {
    throw InputError("--backend " + old_name + " contradicts --attention-backend " + chosen +
                     " (--backend is the old name of --attention-backend; give one)");
  }
  return old_name;
}

AttentionBackend parse_backend(const std::string& name) {
  if (const auto backend = parse_attention_backend(name)) return *backend;
  throw InputError("--attention-backend: unknown attention backend '" + name +
                   "' (expected sdpa or eager)");
}

int generate_text(const po::variables_map& vm) {
  const std::filesystem::path model_path = vm["model"].as<std::string>();
  if (!std::filesystem::exists(model_path)) {
    throw InputError("--model: " + model_path.string() + " does not exist");
  }
  const std::string backend_name = attention_backend_option(vm);
  const auto backend = parse_backend(backend_name);
  const int max_new_tokens = vm["max-new-tokens"].as<int>();
  if (max_new_tokens < 0) throw InputError("--max-new-tokens: must be ≥ 0");
  const std::string prompt = vm["prompt"].as<std::string>();

  const auto started = std::chrono::steady_clock::now();
  const auto weights = model::load_model_weights(model_path);
  const auto tokenizer = model::load_tokenizer(model_path);
  model::require_tokenizer_fits_model(*tokenizer, weights.config.vocab_size, model_path.string());
  const auto template_kind =
      resolve_chat_template(vm["chat-template"].as<std::string>(), model_path);

  std::vector<std::int32_t> prompt_ids;
  std::string rendered;
  if (template_kind == model::ChatTemplateKind::none) {
    rendered = prompt;
    prompt_ids = tokenizer->encode(prompt, {.add_special_tokens = true, .parse_special = true});
  } else {
    std::vector<model::ChatMessage> messages;
    if (vm.count("system")) {
      messages.push_back({model::ChatRole::system, vm["system"].as<std::string>()});
    }
    messages.push_back({model::ChatRole::user, prompt});
    rendered = model::render_chat(template_kind, messages);
    prompt_ids = tokenizer->encode(rendered, {.add_special_tokens = false, .parse_special = true});
  }
  if (prompt_ids.empty()) throw InputError("--prompt: the prompt tokenizes to nothing");

  // The position window holds the prompt and every generated token (as HF's max_length): a prompt
  // that leaves no room is refused; otherwise generation stops at the window, with a warning.
  const std::int64_t window = weights.config.max_position_embeddings;
  const auto prompt_tokens = static_cast<std::int64_t>(prompt_ids.size());
  if (prompt_tokens > window || (prompt_tokens == window && max_new_tokens > 0)) {
    throw InputError("--prompt: the prompt is " + std::to_string(prompt_tokens) +
                     " tokens, which leaves no room in the model's max_position_embeddings " +
                     std::to_string(window) + " (prompt + generated tokens must fit it)");
  }
  const int new_token_limit =
      static_cast<int>(std::min<std::int64_t>(max_new_tokens, window - prompt_tokens));

  std::vector<std::int32_t> eos = weights.config.eos_token_ids;
  for (auto id : tokenizer->eos_ids()) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  }
  cpu::CpuModel model(weights, backend);
  auto state = model.new_sequence();
  const auto last = model.prefill(state, prompt_ids, LogitRows::last);
  const auto loaded = std::chrono::steady_clock::now();
  const auto output = unit::generate_greedy(
      model, state, last.row(0), {.max_new_tokens = new_token_limit, .eos_token_ids = eos});
  const auto finished = std::chrono::steady_clock::now();
  const bool stopped_at_window = !output.stopped_on_eos && new_token_limit < max_new_tokens &&
                                 static_cast<int>(output.tokens.size()) == new_token_limit;
  if (stopped_at_window) {
    std::cerr << "kvaudit generate: warning: stopped after " << output.tokens.size()
              << " new tokens at the model's max_position_embeddings " << window << " (prompt "
              << prompt_tokens << " + " << output.tokens.size()
              << " tokens), before --max-new-tokens " << max_new_tokens << "\n";
  }
  const std::string text = tokenizer->decode(output.tokens, /*skip_special_tokens=*/true);

  const double seconds = std::chrono::duration<double>(finished - started).count();
  if (vm.count("json")) {
    nlohmann::json j = {{"model", model_path.string()},
                        {"attention_backend", backend_name},
                        {"chat_template", std::string(model::chat_template_name(template_kind))},
                        {"rendered_prompt", rendered},
                        {"prompt_ids", prompt_ids},
                        {"generated_ids", output.tokens},
                        {"stopped_on_eos", output.stopped_on_eos},
                        {"stopped_at_max_position_embeddings", stopped_at_window},
                        {"text", text},
                        {"seconds", seconds}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "model: " << model_path.string() << " (" << weights.config.architecture_name
              << ", " << weights.config.num_layers << " layers, "
              << (weights.config.dtype == model::ComputeDtype::bf16 ? "bf16" : "f32")
              << ")\nattention backend: " << backend_name
              << "   chat template: " << model::chat_template_name(template_kind)
              << "\nprompt ids (" << prompt_ids.size() << "): " << join_ids(prompt_ids)
              << "\ngenerated ids (" << output.tokens.size() << ", "
              << (output.stopped_on_eos ? "stopped on eos"
                  : stopped_at_window   ? "reached max_position_embeddings"
                                        : "reached --max-new-tokens")
              << "): " << join_ids(output.tokens) << "\ntext:\n"
              << text << "\n";
    std::cerr << "kvaudit generate: " << seconds << " s ("
              << std::chrono::duration<double>(loaded - started).count() << " s load + prefill)\n";
  }
  return static_cast<int>(ExitCode::ok);
}

// max_position_embeddings of an HF directory or a GGUF file (shared with kvaudit plan).
using benchmarks::ruler::model_max_positions;

template <class T>
T required_option(const po::variables_map& vm, const char* benchmark, const char* name) {
  if (!vm.count(name)) {
    throw InputError(std::string("generate ") + benchmark + ": --" + name + " is required");
  }
  return vm[name].as<T>();
}

// Options that belong to another mode of `generate`: given explicitly, they are an error rather
// than silently ignored.
void reject_options(const po::variables_map& vm, const char* benchmark,
                    std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (vm.count(name) && !vm[name].defaulted()) {
      throw InputError(std::string("generate ") + benchmark + ": --" + name +
                       " does not apply here (kvaudit generate --help)");
    }
  }
}

int generate_ruler(const po::variables_map& vm) {
  namespace ruler = benchmarks::ruler;
  reject_options(vm, "ruler", {"tokenizer", "data", "max-prompt-tokens", "chat-rule"});
  const std::filesystem::path model_path = required_option<std::string>(vm, "ruler", "model");
  if (!std::filesystem::exists(model_path)) {
    throw InputError("--model: " + model_path.string() + " does not exist");
  }
  const std::filesystem::path out = required_option<std::string>(vm, "ruler", "out");
  if (std::filesystem::exists(out)) {
    throw InputError("--out: " + out.string() + " already exists; kvaudit never overwrites it");
  }
  ruler::RulerConfig config;
  config.length = required_option<std::int64_t>(vm, "ruler", "length");
  config.seed = parse_seed_option(vm["seed"].as<std::string>(), "generate ruler: --seed");
  config.essay = vm["essay"].as<std::string>();
  if (vm.count("squad")) config.squad = vm["squad"].as<std::string>();
  if (vm.count("hotpotqa")) config.hotpotqa = vm["hotpotqa"].as<std::string>();
  const auto tasks =
      ruler::parse_ruler_task_list(required_option<std::string>(vm, "ruler", "tasks"));
  const std::int64_t instances = required_option<std::int64_t>(vm, "ruler", "instances");
  const std::int64_t first = vm["first"].as<std::int64_t>();
  if (instances < 1) throw InputError("--instances: must be >= 1");
  if (first < 0) throw InputError("--first: must be >= 0");

  // Evaluated side: the model's tokenizer, chat template and position limit.
  const ruler::TokenizerSide evaluated_side(
      model_path, resolve_chat_template(vm["chat-template"].as<std::string>(), model_path));
  const ruler::PromptMeasurer& evaluated = evaluated_side.measurer();
  benchmarks::CheckLimits limits;
  limits.max_positions = model_max_positions(model_path);
  if (vm.count("max-context")) {
    limits.configured_limit = vm["max-context"].as<std::int64_t>();
    if (*limits.configured_limit < 1) throw InputError("--max-context: must be >= 1");
  }

  // Generation side: the same, unless --generation-tokenizer reproduces the pitfall.
  std::optional<ruler::TokenizerSide> generation_side;
  if (vm.count("generation-tokenizer")) {
    generation_side.emplace(
        vm["generation-tokenizer"].as<std::string>(),
        model::parse_chat_template_name(vm["generation-chat-template"].as<std::string>(),
                                        "--generation-chat-template"));
  } else if (!vm["generation-chat-template"].defaulted()) {
    throw InputError("--generation-chat-template needs --generation-tokenizer");
  }
  const ruler::PromptMeasurer& generation =
      generation_side ? generation_side->measurer() : evaluated;

  const auto set = ruler::generate_ruler_set(config, tasks, first, instances, generation);
  const auto& all = set.instances;
  const double seconds = set.seconds;
  const auto report = benchmarks::check_ruler_instances(all, evaluated, limits);

  std::string content;
  for (std::size_t i = 0; i < all.size(); ++i) {
    content += ruler::instance_json_line(all[i], &report.instances[i]);
    content += '\n';
  }
  write_new_file(out, content);

  std::cout << "kvaudit generate ruler: " << all.size() << " instances (" << tasks.size()
            << " tasks x " << instances << ", indices " << first << ".." << first + instances - 1
            << ", seed " << config.seed << ", length " << config.length << ") in " << seconds
            << " s -> " << out.string() << "\n  generated with " << generation.description()
            << "\n";
  if (set.essay) std::cout << "  essay: " << *set.essay << "\n";
  std::cout << "  lengths (prompt + max_new_tokens, generation tokenizer), % of " << config.length
            << ":\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-16s %5s %8s %8s %8s %7s %7s %12s\n", "task", "n", "min",
                "median", "max", "min%", "max%", "units");
  std::cout << line;
  for (const auto& t : report.tasks) {
    std::int64_t units_min = INT64_MAX, units_max = 0;
    for (const auto& inst : all) {
      if (inst.task != t.task) continue;
      units_min = std::min(units_min, inst.haystack_units);
      units_max = std::max(units_max, inst.haystack_units);
    }
    const double L = static_cast<double>(config.length);
    const std::string units = std::to_string(units_min) + "-" + std::to_string(units_max);
    std::snprintf(
        line, sizeof line, "  %-16s %5lld %8lld %8lld %8lld %6.1f%% %6.1f%% %12s\n", t.task.c_str(),
        static_cast<long long>(t.instances), static_cast<long long>(t.generation_min),
        static_cast<long long>(t.generation_median), static_cast<long long>(t.generation_max),
        100.0 * static_cast<double>(t.generation_min) / L,
        100.0 * static_cast<double>(t.generation_max) / L, units.c_str());
    std::cout << line;
  }
  std::cout << benchmarks::format_check_report(report);
  return static_cast<int>(ExitCode::ok);
}

// --tasks for longbench: "all" is the catalogue's English tasks (the suite's default set, as in a
// manifest); otherwise comma-separated LongBench or LongBench-E ("<task>_e") names, kept in the
// given order. Unknown or repeated names are an error.
std::vector<benchmarks::LongBenchTaskRef> parse_longbench_task_list(std::string_view text) {
  std::vector<benchmarks::LongBenchTaskRef> tasks;
  if (text == "all") {
    for (const auto& t : benchmarks::tasks_of(benchmarks::BenchmarkKind::longbench)) {
      if (t.english) tasks.push_back(benchmarks::resolve_longbench_task(t.name));
    }
    return tasks;
  }
  for (const std::string_view name :
       benchmarks::split_name_list(text, "--tasks: LongBench task list")) {
    auto task = benchmarks::resolve_longbench_task(name);
    for (const auto& seen : tasks) {
      if (seen.name == task.name) {
        throw InputError("--tasks: LongBench task '" + task.name + "' is named twice");
      }
    }
    tasks.push_back(std::move(task));
  }
  return tasks;
}

benchmarks::LongBenchChatRule parse_chat_rule(const std::string& name) {
  if (name == "longbench") return benchmarks::LongBenchChatRule::longbench;
  if (name == "always") return benchmarks::LongBenchChatRule::always;
  throw InputError("--chat-rule: unknown rule '" + name +
                   "' (expected longbench: pred.py's, no template for trec, triviaqa, samsum, "
                   "lsht, lcc, repobench-p; or always: kvpress's)");
}

// Where `--chat-template auto` looks for a tokenizer's template: a directory or .gguf file holds
// it; a tokenizer.json / tokenizer.model file has its configs beside it (as load_tokenizer reads).
std::filesystem::path template_source_of_tokenizer(const std::filesystem::path& tokenizer_path) {
  if (std::filesystem::is_directory(tokenizer_path) || tokenizer_path.extension() == ".gguf") {
    return tokenizer_path;
  }
  const auto parent = tokenizer_path.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

// The token lengths of one task's instances, for the summary.
struct LongBenchTaskSummary {
  std::string task;
  std::size_t first = 0;
  std::size_t records = 0;
  std::size_t available = 0;  // records in the file
  std::int64_t truncated = 0;
  std::int64_t original_min = 0, original_median = 0, original_max = 0;
  std::int64_t final_max = 0;
  std::int64_t split_max = 0;
  std::int64_t over_window = 0;  // prompt + budget > max_position_embeddings, either protocol
};

LongBenchTaskSummary summarize_longbench_task(
    const std::string& task, std::size_t first, std::size_t available,
    std::span<const benchmarks::LongBenchInstance> instances, std::optional<std::int64_t> window) {
  LongBenchTaskSummary s;
  s.task = task;
  s.first = first;
  s.records = instances.size();
  s.available = available;
  std::vector<std::int64_t> original;
  for (const auto& in : instances) {
    const auto final_tokens = static_cast<std::int64_t>(in.final_prompt_tokens);
    const auto split_tokens = static_cast<std::int64_t>(
        in.split_context_tokens + in.split_question_tokens + in.split_suffix_tokens);
    original.push_back(static_cast<std::int64_t>(in.original_prompt_tokens));
    if (in.truncated) ++s.truncated;
    s.final_max = std::max(s.final_max, final_tokens);
    s.split_max = std::max(s.split_max, split_tokens);
    if (window && (final_tokens + in.max_new_tokens > *window ||
                   split_tokens + in.kvpress_max_new_tokens > *window)) {
      ++s.over_window;
    }
  }
  s.original_min = *std::min_element(original.begin(), original.end());
  s.original_max = *std::max_element(original.begin(), original.end());
  s.original_median = benchmarks::median_tokens(std::move(original));
  return s;
}

int generate_longbench(const po::variables_map& vm) {
  namespace lb = benchmarks;
  reject_options(vm, "longbench",
                 {"prompt", "system", "backend", "attention-backend", "max-new-tokens", "json",
                  "length", "seed", "essay", "squad", "hotpotqa", "generation-tokenizer",
                  "generation-chat-template", "max-context"});
  // The evaluated tokenizer: the model's, or a tokenizer alone.
  if (vm.count("model") && vm.count("tokenizer")) {
    throw InputError("generate longbench: give --model or --tokenizer, not both");
  }
  if (!vm.count("model") && !vm.count("tokenizer")) {
    throw InputError("generate longbench: --model (or --tokenizer) is required");
  }
  const bool from_model = vm.count("model") > 0;
  const std::filesystem::path tokenizer_path =
      vm[from_model ? "model" : "tokenizer"].as<std::string>();
  const char* const tokenizer_option = from_model ? "--model" : "--tokenizer";
  if (!std::filesystem::exists(tokenizer_path)) {
    throw InputError(std::string(tokenizer_option) + ": " + tokenizer_path.string() +
                     " does not exist");
  }
  const std::filesystem::path data_dir = required_option<std::string>(vm, "longbench", "data");
  if (!std::filesystem::is_directory(data_dir)) {
    throw InputError("--data: " + data_dir.string() +
                     " is not a directory (the unpacked LongBench data: <dir>/<task>.jsonl)");
  }
  const auto tasks =
      parse_longbench_task_list(required_option<std::string>(vm, "longbench", "tasks"));
  const std::filesystem::path out = required_option<std::string>(vm, "longbench", "out");
  if (std::filesystem::exists(out)) {
    throw InputError("--out: " + out.string() + " already exists; kvaudit never overwrites it");
  }
  const auto rule = parse_chat_rule(vm["chat-rule"].as<std::string>());
  const std::int64_t first = vm["first"].as<std::int64_t>();
  if (first < 0) throw InputError("--first: must be >= 0");
  std::optional<std::int64_t> instances;
  if (vm.count("instances")) {
    instances = vm["instances"].as<std::int64_t>();
    if (*instances < 1) throw InputError("--instances: must be >= 1");
  }

  // The prompt limit: given, or the model's window minus the largest generation budget.
  int largest_budget = 0;
  for (const auto& task : tasks)
    largest_budget = std::max(largest_budget, lb::kvpress_max_new_tokens(task));
  std::optional<std::int64_t> window;
  if (from_model) window = model_max_positions(tokenizer_path);
  std::int64_t limit = 0;
  std::string limit_source;
  if (vm.count("max-prompt-tokens")) {
    limit = vm["max-prompt-tokens"].as<std::int64_t>();
    if (limit < 2)
      throw InputError(
          "--max-prompt-tokens: must be >= 2 (pred.py keeps limit/2 tokens on each side)");
    limit_source = "--max-prompt-tokens";
  } else if (window) {
    limit = *window - largest_budget;
    limit_source = "max_position_embeddings " + std::to_string(*window) +
                   " - largest kvpress max_new_tokens " + std::to_string(largest_budget) +
                   " of the chosen tasks";
    if (limit < 2) {
      throw InputError("--max-prompt-tokens: the model's max_position_embeddings (" +
                       std::to_string(*window) + ") minus the largest generation budget (" +
                       std::to_string(largest_budget) + ") leaves " + std::to_string(limit) +
                       " tokens; give --max-prompt-tokens");
    }
  } else {
    throw InputError(
        "generate longbench: --max-prompt-tokens is required with --tokenizer (only --model "
        "gives a window to derive it from)");
  }

  const auto tokenizer = model::load_tokenizer(tokenizer_path);
  lb::LongBenchChatOptions chat;
  chat.kind = resolve_chat_template(
      vm["chat-template"].as<std::string>(),
      from_model ? tokenizer_path : template_source_of_tokenizer(tokenizer_path));
  chat.rule = rule;
  if (const auto bos = tokenizer->bos_id()) {
    if (const auto text = tokenizer->id_to_token(*bos)) chat.render.bos_text = *text;
  }
  const std::string tokenizer_description = tokenizer->description();

  const auto started = std::chrono::steady_clock::now();
  std::string content;
  std::vector<LongBenchTaskSummary> summaries;
  std::size_t total = 0;
  for (const auto& task : tasks) {
    const lb::LongBenchTaskData data = lb::load_longbench_task(data_dir, task.name);
    const auto begin = static_cast<std::size_t>(first);
    if (begin >= data.records.size()) {
      throw InputError("--first " + std::to_string(first) + ": " + data.file.string() + " has " +
                       std::to_string(data.records.size()) + " records (indices 0.." +
                       std::to_string(data.records.size() - 1) + ")");
    }
    std::size_t end = data.records.size();
    if (instances) end = begin + std::min(end - begin, static_cast<std::size_t>(*instances));
    std::vector<lb::LongBenchInstance> built;
    built.reserve(end - begin);
    for (std::size_t i = begin; i < end; ++i) {
      built.push_back(lb::build_longbench_instance(data.records[i], data.task, *tokenizer, chat,
                                                   static_cast<std::size_t>(limit)));
      content += longbench_instance_json_line(built.back(), i, rule, tokenizer_description);
      content += '\n';
    }
    total += built.size();
    summaries.push_back(
        summarize_longbench_task(task.name, begin, data.records.size(), built, window));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  write_new_file(out, content);

  std::cout << "kvaudit generate longbench: " << total << " instances (" << tasks.size()
            << " tasks, from record " << first;
  if (instances) std::cout << ", at most " << *instances << " per task";
  std::cout << ") in " << seconds << " s -> " << out.string() << "\n  data: " << data_dir.string()
            << "\n  tokenizer: " << tokenizer_description
            << "\n  chat template: " << model::chat_template_name(chat.kind) << " (rule "
            << lb::longbench_chat_rule_name(rule)
            << (rule == lb::LongBenchChatRule::longbench
                    ? ": none for trec, triviaqa, samsum, lsht, lcc, repobench-p"
                    : ": every task")
            << ")\n  prompt limit (pred.py max_length): " << limit << " tokens (" << limit_source
            << ")\n  lengths in tokens: original = untruncated LongBench prompt (pred.py's count), "
               "final = the prompt as fed, split = context + question + suffix parts\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-20s %7s %9s %8s %8s %8s %9s %9s", "task", "records",
                "truncated", "orig min", "orig med", "orig max", "final max", "split max");
  std::cout << line << (window ? "  over window" : "") << "\n";
  for (const auto& s : summaries) {
    std::snprintf(line, sizeof line, "  %-20s %7zu %9lld %8lld %8lld %8lld %9lld %9lld",
                  s.task.c_str(), s.records, static_cast<long long>(s.truncated),
                  static_cast<long long>(s.original_min), static_cast<long long>(s.original_median),
                  static_cast<long long>(s.original_max), static_cast<long long>(s.final_max),
                  static_cast<long long>(s.split_max));
    std::cout << line;
    if (window) {
      std::snprintf(line, sizeof line, "  %11lld", static_cast<long long>(s.over_window));
      std::cout << line;
    }
    std::cout << "\n";
  }
  for (const auto& s : summaries) {
    if (instances && s.records < static_cast<std::size_t>(*instances)) {
      std::cout << "  note: " << s.task << " has " << s.available << " records; took indices "
                << s.first << ".." << s.first + s.records - 1 << " (" << s.records << ", not "
                << *instances << ")\n";
    }
  }
  if (window) {
    std::int64_t over = 0;
    for (const auto& s : summaries) over += s.over_window;
    std::cout << "  over window: prompt + max_new_tokens > max_position_embeddings " << *window
              << " (final + dataset2maxlen, or split + dataset2maxlen + 20): " << over
              << " instances\n";
  }
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

Command generate_command() {
  Command c;
  c.name = "generate";
  c.summary = "greedy generation on the CPU; benchmark instances (RULER, LongBench)";
  c.usage =
      "kvaudit generate --model PATH --prompt TEXT [--attention-backend sdpa|eager]\n"
      "              [--chat-template auto]\n"
      "       kvaudit generate ruler --model PATH --length N --tasks a,b|all --instances K --out "
      "FILE.jsonl\n"
      "              [--first I] [--seed S] [--essay FILE] [--squad FILE] [--hotpotqa FILE]\n"
      "              [--chat-template auto] [--generation-tokenizer PATH] [--max-context N]\n"
      "       kvaudit generate longbench --model PATH|--tokenizer PATH --data DIR --tasks a,b|all "
      "--out FILE.jsonl\n"
      "              [--max-prompt-tokens N] [--chat-template auto] [--chat-rule "
      "longbench|always]\n"
      "              [--first I] [--instances K]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("model", po::value<std::string>(), "model: an HF directory or a .gguf file")(
        "prompt", po::value<std::string>(), "the user message")("system", po::value<std::string>(),
                                                                "an optional system message")(
        "attention-backend", po::value<std::string>()->default_value("sdpa"),
        "attention backend: sdpa or eager")("backend", po::value<std::string>(),
                                            "the old name of --attention-backend")(
        "chat-template", po::value<std::string>()->default_value("auto"),
        "auto (the model's own), none, llama3, qwen2, mistral-v3, deepseek-r1-distill, chatml")(
        "max-new-tokens", po::value<int>()->default_value(64), "greedy tokens at most")(
        "json", "print one JSON object instead of text")("benchmark", po::value<std::string>(),
                                                         "ruler or longbench")(
        "args", po::value<std::vector<std::string>>(), "benchmark options")(
        "length", po::value<std::int64_t>(), "ruler: nominal length L (prompt + max_new_tokens)")(
        "tasks", po::value<std::string>(),
        "comma-separated task names, or all (longbench: the 16 English tasks; <task>_e names "
        "LongBench-E)")(
        "instances", po::value<std::int64_t>(),
        "ruler: instances per task; longbench: at most this many records per task (default all)")(
        "first", po::value<std::int64_t>()->default_value(0),
        "ruler: first instance index; longbench: first record (0-based) of every task file")(
        "seed", po::value<std::string>()->default_value("42"),
        "ruler: study seed, an integer in [0, 2^64 - 1]")(
        "essay", po::value<std::string>()->default_value("builtin"),
        "ruler: essay haystack text file, or builtin")("squad", po::value<std::string>(),
                                                       "ruler: SQuAD v2.0 dev JSON (qa_1)")(
        "hotpotqa", po::value<std::string>(), "ruler: HotpotQA dev-distractor JSON (qa_2)")(
        "out", po::value<std::string>(), "ruler, longbench: output JSONL (never overwritten)")(
        "generation-tokenizer", po::value<std::string>(),
        "ruler: size the data with this tokenizer instead of the model's (pitfall reproduction)")(
        "generation-chat-template", po::value<std::string>()->default_value("none"),
        "ruler: chat template used with --generation-tokenizer")(
        "max-context", po::value<std::int64_t>(),
        "ruler: configured runtime context (the check's limit is min(this, max positions))")(
        "tokenizer", po::value<std::string>(),
        "longbench: measure with this tokenizer (tokenizer.json / tokenizer.model / HF directory "
        "/ .gguf) instead of --model's; then --max-prompt-tokens is required")(
        "data", po::value<std::string>(),
        "longbench: directory of the official JSONL files (<task>.jsonl, <task>_e.jsonl)")(
        "max-prompt-tokens", po::value<std::int64_t>(),
        "longbench: pred.py's max_length, the middle-truncation limit (>= 2); default with "
        "--model: max_position_embeddings minus the largest dataset2maxlen + 20 of the chosen "
        "tasks")("chat-rule", po::value<std::string>()->default_value("longbench"),
                 "longbench: longbench (pred.py: no template for trec, triviaqa, samsum, lsht, "
                 "lcc, repobench-p) or always (kvpress)");
    p.add("benchmark", 1).add("args", -1);
  };
  c.body = [](const po::variables_map& vm) -> int {
    if (vm.count("benchmark")) {
      if (vm.count("prompt")) {
        throw InputError("give either --prompt or a benchmark name, not both");
      }
      const std::string b = vm["benchmark"].as<std::string>();
      if (vm.count("args")) {
        throw InputError("generate " + b + ": unexpected argument '" +
                         vm["args"].as<std::vector<std::string>>().front() + "'");
      }
      if (b == "ruler") return generate_ruler(vm);
      if (b == "longbench") return generate_longbench(vm);
      throw InputError("unknown benchmark '" + b + "' (expected ruler or longbench)");
    }
    if (!vm.count("prompt") || !vm.count("model")) {
      throw InputError(
          "nothing to generate: give --model and --prompt, or ruler|longbench (docs/CLI.md)");
    }
    return generate_text(vm);
  };
  return c;
}

}  // namespace kvaudit::cli
