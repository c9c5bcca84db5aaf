// Plan-time checks of a study's models and RULER lengths (see plan_checks.h).
#include "suite/cli/plan_checks.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "base/errors.h"
#include "methods/npy_file.h"
#include "methods/param_lists.h"
#include "runners/model/formats/dequantize.h"
#include "runners/model/formats/gguf.h"
#include "runners/model/formats/gguf_config.h"
#include "runners/model/formats/hf_config.h"
#include "runners/model/formats/safetensors.h"
#include "runners/model/model_error.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "suite/benchmarks/ruler/cross_tokenizer_check.h"
#include "suite/benchmarks/ruler/ruler_generator.h"
#include "suite/manifest/diagnostics.h"

namespace kvaudit::cli {
namespace {

namespace fs = std::filesystem;
namespace ruler = benchmarks::ruler;
using Shape = std::vector<std::int64_t>;

// A tensor the weight loader (runners/model/formats/load_weights.cpp) reads, and its shape in
// PyTorch order.
struct TensorSpec {
  std::string name;
  Shape shape;
};

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The tensors load_hf_weights / load_gguf_weights read for `c`, with the shapes they check.
std::vector<TensorSpec> expected_tensors(const model::ModelConfig& c, bool gguf) {
  const std::int64_t hidden = c.hidden_size;
  const std::int64_t q_rows = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
  const std::int64_t kv_rows = static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim;
  const std::int64_t inter = c.intermediate_size;
  std::vector<TensorSpec> out;
  out.push_back({gguf ? "token_embd.weight" : "model.embed_tokens.weight", {c.vocab_size, hidden}});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p =
        gguf ? "blk." + std::to_string(i) + "." : "model.layers." + std::to_string(i) + ".";
    auto add = [&](const char* hf, const char* gg, Shape shape) {
      out.push_back({p + (gguf ? gg : hf), std::move(shape)});
    };
    add("input_layernorm.weight", "attn_norm.weight", {hidden});
    add("self_attn.q_proj.weight", "attn_q.weight", {q_rows, hidden});
    add("self_attn.k_proj.weight", "attn_k.weight", {kv_rows, hidden});
    add("self_attn.v_proj.weight", "attn_v.weight", {kv_rows, hidden});
    if (c.attention_bias) {
      add("self_attn.q_proj.bias", "attn_q.bias", {q_rows});
      add("self_attn.k_proj.bias", "attn_k.bias", {kv_rows});
      add("self_attn.v_proj.bias", "attn_v.bias", {kv_rows});
    }
    add("self_attn.o_proj.weight", "attn_output.weight", {hidden, q_rows});
    add("post_attention_layernorm.weight", "ffn_norm.weight", {hidden});
    add("mlp.gate_proj.weight", "ffn_gate.weight", {inter, hidden});
    add("mlp.up_proj.weight", "ffn_up.weight", {inter, hidden});
    add("mlp.down_proj.weight", "ffn_down.weight", {hidden, inter});
  }
  out.push_back({gguf ? "output_norm.weight" : "model.norm.weight", {hidden}});
  if (!c.tie_word_embeddings)
    out.push_back({gguf ? "output.weight" : "lm_head.weight", {c.vocab_size, hidden}});
  return out;
}

[[noreturn]] void bad_tensor(const std::string& file, const std::string& tensor,
                             const std::string& what) {
  throw model::ModelInputError(file + ": tensor '" + tensor + "': " + what);
}

// config.json (+ generation_config.json) and the safetensors headers (every shard mapped, its
// header parsed, offsets inside the file) of an HF directory; the tensor table against the config.
model::ModelConfig check_hf_model(const fs::path& dir) {
  const model::ModelConfig config = model::read_hf_config_file(dir).config;
  const auto checkpoint = model::SafetensorsCheckpoint::open(dir);
  for (const auto& spec : expected_tensors(config, false)) {
    if (!checkpoint.contains(spec.name))
      throw model::ModelInputError(dir.string() + ": tensor '" + spec.name +
                                   "' is missing from the checkpoint");
    const auto& file = checkpoint.file_of(spec.name);
    const auto& info = file.info(spec.name);
    if (info.shape != spec.shape)
      bad_tensor(file.source(), spec.name,
                 "expected shape " + shape_text(spec.shape) + " (from the model config), found " +
                     shape_text(info.shape));
    if (info.dtype != model::SafetensorsDtype::F32 && info.dtype != model::SafetensorsDtype::F16 &&
        info.dtype != model::SafetensorsDtype::BF16)
      bad_tensor(file.source(), spec.name,
                 "dtype " + std::string(model::safetensors_dtype_name(info.dtype)) +
                     " cannot be loaded (F32, F16, BF16)");
  }
  return config;
}

// The GGUF header (metadata and tensor infos, every tensor's data inside the file) and its tensor
// table against the config it implies.
model::ModelConfig check_gguf_model(const fs::path& path) {
  const auto file = model::GgufFile::open(path);
  const model::ModelConfig config = model::config_from_gguf(file);
  for (const auto& spec : expected_tensors(config, true)) {
    const model::GgufTensorInfo* info = file.find_tensor(spec.name);
    if (info == nullptr)
      throw model::ModelInputError(file.source() + ": tensor '" + spec.name + "' is missing");
    if (info->torch_shape() != spec.shape)
      bad_tensor(file.source(), spec.name,
                 "expected shape " + shape_text(spec.shape) + " (from the model config), found " +
                     shape_text(info->torch_shape()));
    if (!model::dequantize_supported(info->type))
      bad_tensor(file.source(), spec.name,
                 "ggml type " + model::ggml_type_name(info->type) +
                     " cannot be dequantized (F32, F16, BF16, Q8_0, Q4_0, Q4_1)");
  }
  return config;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string one_decimal(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

}  // namespace

model::ChatTemplateKind chat_template_of(const manifest::Model& model) {
  return model::parse_chat_template_name(
      model.chat_template == "mistral" ? "mistral-v3" : model.chat_template,
      "models." + model.name + ".chat_template");
}

std::set<std::string> models_paired_with(const manifest::Manifest& m, const std::string& b) {
  std::set<std::string> names;
  for (const auto& g : m.grids) {
    if (std::find(g.benchmarks.begin(), g.benchmarks.end(), b) == g.benchmarks.end()) continue;
    names.insert(g.models.begin(), g.models.end());
  }
  return names;
}

std::vector<std::string> check_plan_inputs(const manifest::Manifest& m, std::ostream& progress) {
  manifest::Diagnostics diag(m.file.string());
  // The models that open, with their tokenizer (measured with the model's chat template).
  std::map<std::string, std::unique_ptr<ruler::TokenizerSide>> usable;
  for (const auto& model : m.models) {
    if (model.dtype == "f16") {
      diag.error(
          model.dtype_pos, "models." + model.name + ".dtype",
          "\"f16\" is not supported (bf16, f32): the engines emulate bf16 or compute in f32");
      continue;
    }
    const fs::path path = m.resolve(model.path);
    const std::string field = "models." + model.name + ".path";
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const model::ModelConfig config =
          model.format == "gguf" ? check_gguf_model(path) : check_hf_model(path);
      auto side = std::make_unique<ruler::TokenizerSide>(path, chat_template_of(model));
      model::require_tokenizer_fits_model(side->tokenizer(), config.vocab_size, path.string());
      usable[model.name] = std::move(side);
      // per_layer_compression: one ratio per layer of every model its grids run it on (kvpress
      // indexes its list by layer; methods/per_layer_compression.h).
      for (const auto& g : m.grids) {
        if (std::find(g.models.begin(), g.models.end(), model.name) == g.models.end()) continue;
        for (const auto& method_name : g.methods) {
          const manifest::MethodConfig* cfg = m.find_method(method_name);
          // lukv: the budget curve's [99, layers, KV heads] must be the model's (methods/lukv.h;
          // a curve that does not read is reported by the file-parameter check).
          if (cfg != nullptr && cfg->method == "lukv") {
            const auto curve_it = cfg->params.find("curve");
            if (curve_it != cfg->params.end() &&
                std::holds_alternative<std::string>(curve_it->second)) {
              try {
                const methods::NpyArray curve = methods::read_lukv_curve(
                    m.resolve(std::get<std::string>(curve_it->second)).string());
                if (curve.shape[1] != config.num_layers || curve.shape[2] != config.num_kv_heads) {
                  const auto pos = cfg->param_pos.find("curve");
                  diag.error(pos != cfg->param_pos.end() ? pos->second : cfg->pos,
                             "methods." + cfg->name + ".curve",
                             "budget curve [99, " + std::to_string(curve.shape[1]) + ", " +
                                 std::to_string(curve.shape[2]) + "] does not fit model '" +
                                 model.name + "' (grid '" + g.name + "'): want [99, " +
                                 std::to_string(config.num_layers) + ", " +
                                 std::to_string(config.num_kv_heads) + "] (layers, KV heads)");
                }
              } catch (const std::invalid_argument&) {
              }
            }
            continue;
          }
          if (cfg == nullptr || cfg->method != "per_layer_compression") continue;
          const auto it = cfg->params.find("compression_ratios");
          if (it == cfg->params.end() || !std::holds_alternative<std::string>(it->second)) continue;
          const auto ratios = methods::parse_real_list(std::get<std::string>(it->second));
          if (!ratios || static_cast<int>(ratios->size()) == config.num_layers) continue;
          const auto pos = cfg->param_pos.find("compression_ratios");
          diag.error(pos != cfg->param_pos.end() ? pos->second : cfg->pos,
                     "methods." + cfg->name + ".compression_ratios",
                     std::to_string(ratios->size()) + " ratios, but model '" + model.name +
                         "' (grid '" + g.name + "') has " + std::to_string(config.num_layers) +
                         " layers: give one ratio per layer");
        }
      }
    } catch (const model::ModelInputError& e) {
      diag.error(model.path_pos, field, "model '" + model.name + "': " + e.what());
      continue;
    } catch (const InputError& e) {
      diag.error(model.path_pos, field, "model '" + model.name + "': " + e.what());
      continue;
    }
    progress << "model " << model.name << ": header, tensor table and tokenizer ok ("
             << one_decimal(seconds_since(t0)) << " s)\n";
  }
  for (const auto& b : m.benchmarks) {
    if (b.kind != benchmarks::BenchmarkKind::ruler || !b.generation_tokenizer.empty()) continue;
    ruler::RulerConfig config;
    config.seed = m.study.seed;
    config.length = b.length;
    config.essay = b.essay.empty() || b.essay == "builtin" ? std::string("builtin")
                                                           : m.resolve(b.essay).string();
    if (!b.squad.empty()) config.squad = m.resolve(b.squad).string();
    if (!b.hotpotqa.empty()) config.hotpotqa = m.resolve(b.hotpotqa).string();
    for (const auto& name : models_paired_with(m, b.name)) {
      const auto it = usable.find(name);
      if (it == usable.end()) continue;  // reported above
      const auto t0 = std::chrono::steady_clock::now();
      std::size_t failed = 0;
      try {
        ruler::RulerGenerator generator(config, it->second->measurer());
        for (const auto& task : b.tasks) {
          try {
            generator.generate(task, 0);
          } catch (const InputError& e) {
            ++failed;
            diag.error(b.pos, "benchmarks." + b.name + ".tasks",
                       "task '" + task + "' cannot fit length " + std::to_string(b.length) +
                           " with model '" + name + "' (" + it->second->measurer().description() +
                           "): " + e.what());
          } catch (const std::exception& e) {
            // The generator's own limits (e.g. vt's one-shot example within 500 tokens) with a
            // tokenizer far less efficient than RULER's: this model cannot run the task.
            ++failed;
            diag.error(b.pos, "benchmarks." + b.name + ".tasks",
                       "task '" + task + "' cannot be generated with model '" + name + "' (" +
                           it->second->measurer().description() + "): " + e.what());
          }
        }
      } catch (const InputError& e) {
        ++failed;
        diag.error(b.pos, "benchmarks." + b.name, e.what());
      } catch (const model::ModelInputError& e) {
        ++failed;
        diag.error(b.pos, "benchmarks." + b.name, e.what());
      }
      if (failed == 0)
        progress << "benchmark " << b.name << " x model " << name << ": every task fits length "
                 << b.length << " (instance 0 generated, " << one_decimal(seconds_since(t0))
                 << " s)\n";
    }
  }
  return diag.lines();
}

void require_plan_inputs_work(const manifest::Manifest& m, std::ostream& progress,
                              const std::string& consequence) {
  const auto problems = check_plan_inputs(m, progress);
  if (problems.empty()) return;
  for (const auto& line : problems) std::cerr << line << "\n";
  throw InputError(std::to_string(problems.size()) +
                   (problems.size() == 1 ? " input cannot work" : " inputs cannot work") +
                   " (the run would record every cell of it as an error); " + consequence);
}

}  // namespace kvaudit::cli
