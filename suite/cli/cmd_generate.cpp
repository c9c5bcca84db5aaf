// kvaudit generate: two jobs under one verb.
//  * kvaudit generate --model PATH --prompt TEXT [--backend sdpa|eager] ...: greedy generation with
//    the CPU reference backend; prints the prompt ids, the generated ids and the text. The prompt
//    is rendered with the model's chat template (auto-detected, or named), tokenized the way HF
//    apply_chat_template(tokenize=True) does (no extra special tokens), prefilled once, and decoded
//    greedily until an eos id or --max-new-tokens.
//  * kvaudit generate ruler|longbench ...: writes benchmark instances; the generators arrive with
//    the benchmarks issue, until then this says so and writes nothing.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "runners/cpu/greedy_generation.h"
#include "runners/model/chat/chat_template.h"
#include "runners/model/formats/load_weights.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "suite/cli/command.h"
#include "suite/cli/model_chat_template.h"
#include "suite/common/errors.h"

namespace kvaudit::cli {

namespace {

std::string join_ids(const std::vector<std::int32_t>& ids) {
  std::ostringstream out;
  for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  return out.str();
}

cpu::AttentionBackend parse_backend(const std::string& name) {
  if (name == "sdpa") return cpu::AttentionBackend::sdpa;
  if (name == "eager") return cpu::AttentionBackend::eager;
  throw InputError("--backend: unknown backend '" + name + "' (expected sdpa or eager)");
}

int generate_text(const po::variables_map& vm) {
  const std::filesystem::path model_path = vm["model"].as<std::string>();
  if (!std::filesystem::exists(model_path)) {
    throw InputError("--model: " + model_path.string() + " does not exist");
  }
  const auto backend = parse_backend(vm["backend"].as<std::string>());
  const int max_new_tokens = vm["max-new-tokens"].as<int>();
  if (max_new_tokens < 0) throw InputError("--max-new-tokens: must be ≥ 0");
  const std::string prompt = vm["prompt"].as<std::string>();

  const auto started = std::chrono::steady_clock::now();
  const auto weights = model::load_model_weights(model_path);
  const auto tokenizer = model::load_tokenizer(model_path);
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

  std::vector<std::int32_t> eos = weights.config.eos_token_ids;
  for (auto id : tokenizer->eos_ids()) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  }
  const cpu::CpuModel model(weights, backend);
  auto state = model.new_sequence();
  const auto last = model.prefill(state, prompt_ids, cpu::LogitRows::last);
  const auto loaded = std::chrono::steady_clock::now();
  const auto output = cpu::generate_greedy(
      model, state, last.row(0), {.max_new_tokens = max_new_tokens, .eos_token_ids = eos});
  const auto finished = std::chrono::steady_clock::now();
  const std::string text = tokenizer->decode(output.tokens, /*skip_special_tokens=*/true);

  const double seconds = std::chrono::duration<double>(finished - started).count();
  if (vm.count("json")) {
    nlohmann::json j = {{"model", model_path.string()},
                        {"backend", vm["backend"].as<std::string>()},
                        {"chat_template", std::string(model::chat_template_name(template_kind))},
                        {"rendered_prompt", rendered},
                        {"prompt_ids", prompt_ids},
                        {"generated_ids", output.tokens},
                        {"stopped_on_eos", output.stopped_on_eos},
                        {"text", text},
                        {"seconds", seconds}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "model: " << model_path.string() << " (" << weights.config.architecture_name
              << ", " << weights.config.num_layers << " layers, "
              << (weights.config.dtype == model::ComputeDtype::bf16 ? "bf16" : "f32")
              << ")\nbackend: " << vm["backend"].as<std::string>()
              << "   chat template: " << model::chat_template_name(template_kind)
              << "\nprompt ids (" << prompt_ids.size() << "): " << join_ids(prompt_ids)
              << "\ngenerated ids (" << output.tokens.size() << ", "
              << (output.stopped_on_eos ? "stopped on eos" : "reached --max-new-tokens")
              << "): " << join_ids(output.tokens) << "\ntext:\n"
              << text << "\n";
    std::cerr << "kvaudit generate: " << seconds << " s ("
              << std::chrono::duration<double>(loaded - started).count() << " s load + prefill)\n";
  }
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

Command generate_command() {
  Command c;
  c.name = "generate";
  c.summary = "greedy generation with the CPU backend; benchmark instances (RULER, LongBench)";
  c.usage =
      "kvaudit generate --model PATH --prompt TEXT [--backend sdpa|eager] [--chat-template auto]\n"
      "       kvaudit generate ruler|longbench ...   (benchmarks issue)";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("model", po::value<std::string>(), "model: an HF directory or a .gguf file")(
        "prompt", po::value<std::string>(), "the user message")("system", po::value<std::string>(),
                                                                "an optional system message")(
        "backend", po::value<std::string>()->default_value("sdpa"), "attention: sdpa or eager")(
        "chat-template", po::value<std::string>()->default_value("auto"),
        "auto (the model's own), none, llama3, qwen2, mistral-v3, deepseek-r1-distill, chatml")(
        "max-new-tokens", po::value<int>()->default_value(64), "greedy tokens at most")(
        "json", "print one JSON object instead of text")("benchmark", po::value<std::string>(),
                                                         "ruler or longbench")(
        "args", po::value<std::vector<std::string>>(), "benchmark options");
    p.add("benchmark", 1).add("args", -1);
  };
  c.body = [](const po::variables_map& vm) -> int {
    if (vm.count("prompt") || vm.count("model")) {
      if (!vm.count("prompt") || !vm.count("model")) {
        throw InputError("generating text needs both --model and --prompt");
      }
      if (vm.count("benchmark")) {
        throw InputError("give either --model/--prompt or a benchmark name, not both");
      }
      return generate_text(vm);
    }
    if (!vm.count("benchmark")) {
      throw InputError("nothing to generate: give --model and --prompt, or ruler|longbench");
    }
    const std::string b = vm["benchmark"].as<std::string>();
    if (b != "ruler" && b != "longbench") {
      throw InputError("unknown benchmark '" + b + "' (expected ruler or longbench)");
    }
    std::cerr << "kvaudit generate: the " << b
              << " generator is not in this build yet (it arrives with the benchmarks issue; "
                 "docs/CLI.md). Nothing was written.\n";
    return static_cast<int>(ExitCode::internal_error);
  };
  return c;
}

}  // namespace kvaudit::cli
