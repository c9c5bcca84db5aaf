// HF parity of the CPU backend on four tiny random decoders (tests/golden/tiny_models, written by
// tools/golden/make_model_golden.py with torch + transformers on the CPU): Llama (default RoPE),
// Llama with llama3 RoPE scaling (all three frequency bands), Qwen2 (q/k/v biases, tied embeddings,
// θ = 1e6) and Mistral, each as an f32 and a bf16 checkpoint, each under both attention backends.
// The weights are read by load_model_weights (runners/model/formats) and run by cpu::CpuModel.
//
// Acceptance (kvaudit issue 3, item 7):
//   f32   max|Δlogit| ≤ 1e-4 against HF's same backend, every position of every prompt.
//   bf16  top-1 agreement at every position (tie-aware, logit_comparison.h: near ties are rows
//         whose HF top-1/top-2 margin is within HF's own eager-vs-sdpa max|Δ| of that model), and
//         ‖Δ‖/‖ref‖ ≤ 1e-2 for each prompt, under both backends.
//   both  greedy continuations (16 tokens) identical to HF generate(do_sample=False);
//         our eager-vs-sdpa difference of the same order as HF's (TinyModelPerDtype below).
// Known and explained: for bf16 inputs torch 2.15's CPU flash kernel (HF "sdpa" on the CPU)
// exponentiates with a reduced-accuracy exp (relative error up to ~1e-4; the fixture records it,
// sdpa_kernel.cpu_sdpa_exp_relative_error), which flips the bf16 rounding of a few percent of its
// P values. Our sdpa uses an exact exp (FlashAttention numerics, what the GPU backend predicts), so
// in bf16 it sits further from HF's CPU sdpa than our eager sits from HF's eager; the 1e-2 bound
// covers it (measured values are printed), and its top-1 switches are near ties. With torch's CPU
// kernel emulated (SdpaNumerics::torch_cpu_flash) top-1 agrees strictly at every position and bf16
// logits are bit-identical (TorchCpuFlashEmulationMatchesHfSdpaStrictly).
// Localisation aids: per-layer post-RoPE keys and values against HF's DynamicCache, RoPE inverse
// frequencies against HF's rotary_emb.inv_freq, and the loaded config against config.json.
// Every measured number is printed ("[parity] …" lines, visible with ctest -V).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "base/argmax.h"
#include "runners/unit/greedy_decoding.h"
#include "runners/model/formats/load_weights.h"
#include "tests/parity/golden_reference.h"
#include "tests/parity/logit_comparison.h"

namespace kvaudit::parity_test {
namespace {


// Acceptance bounds (see the file comment).
constexpr double kF32MaxAbsLogitDifference = 1e-4;
constexpr double kBf16RelativeNorm = 1e-2;
// Post-RoPE keys/values. f32: the only differences are f32 GEMM summation orders (~1e-7 relative),
// 1e-5 leaves two orders of magnitude. bf16 layer 0: the same inputs and rounding points as HF, so
// only rare one-ulp flips (one bf16 ulp is 2^-8 relative); later layers inherit the attention noise
// and get the logit bound.
constexpr double kF32KeyValueRelativeNorm = 1e-5;
constexpr double kBf16FirstLayerKeyValueRelativeNorm = 0x1p-8;
// RoPE inverse frequencies: HF computes them in f32 torch ops; a double-then-round computation may
// differ by a few f32 ulps (1 ulp = 1.2e-7 relative).
constexpr double kInvFreqRelative = 1e-6;
// Our eager-vs-sdpa difference over HF's, bf16 (EagerVsSdpaDifferenceSameOrderAsHf explains it).
constexpr double kBackendDifferenceRatioLow = 1.0 / 3.0;
constexpr double kBackendDifferenceRatioHigh = 3.0;
// f32: both backends compute the same softmax with different summation orders.
constexpr double kF32BackendDifferenceRelativeNorm = 1e-5;

const std::vector<std::string> kModels = {"llama", "llama3_rope", "qwen2", "mistral"};
const std::vector<std::string> kDtypes = {"f32", "bf16"};

// The fixture directory; the environment variable KVAUDIT_TINY_MODELS_DIR overrides the built-in
// path (e.g. to run the tests against a regenerated or deliberately perturbed copy).
std::filesystem::path fixture_directory() {
  if (const char* path = std::getenv("KVAUDIT_TINY_MODELS_DIR"); path != nullptr && *path != '\0') {
    return path;
  }
  return KVAUDIT_TINY_MODELS_DIR;
}

const GoldenReference& reference() {
  static const GoldenReference golden{fixture_directory()};
  return golden;
}

// Weights are loaded once per (model, dtype) and kept for the whole run (CpuModel references them).
const model::ModelWeights& weights(const std::string& model_name, const std::string& dtype) {
  static std::map<std::string, std::unique_ptr<model::ModelWeights>> loaded;
  const std::string key = model_name + "/" + dtype;
  auto found = loaded.find(key);
  if (found == loaded.end()) {
    const auto directory = reference().directory() / model_name / dtype;
    found =
        loaded
            .emplace(key,
                     std::make_unique<model::ModelWeights>(model::load_model_weights(directory)))
            .first;
  }
  return *found->second;
}

std::string backend_name(AttentionBackend backend) {
  return backend == AttentionBackend::eager ? "eager" : "sdpa";
}

std::int64_t vocab_size(const std::string& model_name) {
  return reference().manifest().at("models").at(model_name).at("config").at("vocab_size");
}

std::vector<std::vector<std::int32_t>> prompts() {
  std::vector<std::vector<std::int32_t>> result;
  for (const auto& prompt : reference().manifest().at("prompts"))
    result.push_back(token_ids(prompt));
  return result;
}

std::string logits_name(const std::string& model_name, const std::string& dtype,
                        const std::string& implementation, std::size_t prompt) {
  return model_name + "." + dtype + "." + implementation + ".logits." + std::to_string(prompt);
}

std::vector<float> hf_logits(const std::string& model_name, const std::string& dtype,
                             const std::string& implementation, std::size_t prompt,
                             std::int64_t tokens) {
  return reference().tensor(logits_name(model_name, dtype, implementation, prompt),
                            {tokens, vocab_size(model_name)});
}

// Our logits for every position of a prompt, from a fresh sequence.
LogitMatrix our_logits(cpu::CpuModel& cpu_model, const std::vector<std::int32_t>& ids) {
  cpu::SequenceState state = cpu_model.new_sequence();
  return cpu_model.prefill(state, ids, LogitRows::all);
}

// HF's own eager-vs-sdpa difference for one model and dtype over all prompts.
DifferenceStats hf_backend_difference(const std::string& model_name, const std::string& dtype) {
  DifferenceStats stats;
  const auto all_prompts = prompts();
  for (std::size_t p = 0; p < all_prompts.size(); ++p) {
    const auto tokens = static_cast<std::int64_t>(all_prompts[p].size());
    stats.add(hf_logits(model_name, dtype, "sdpa", p, tokens),
              hf_logits(model_name, dtype, "eager", p, tokens));
  }
  return stats;
}

// The near-tie tolerance of the top-1 check (logit_comparison.h): f32 → twice the acceptance bound
// (two logits each off by at most the bound can swap only within it); bf16 → HF's own eager-vs-sdpa
// max|Δ| for this model, the rounding noise two equally valid implementations show.
double tie_tolerance(const std::string& model_name, const std::string& dtype) {
  if (dtype == "f32") return 2.0 * kF32MaxAbsLogitDifference;
  return hf_backend_difference(model_name, dtype).max_abs;
}

void print(const std::string& line) { std::cout << "[parity] " << line << std::endl; }

struct TinyCase {
  std::string model_name;
  std::string dtype;
  AttentionBackend backend;
};

// gtest prints a parameter in test listings (and ctest names); without this it dumps bytes.
void PrintTo(const TinyCase& c, std::ostream* out) {
  *out << c.model_name << "_" << c.dtype << "_" << backend_name(c.backend);
}

std::vector<TinyCase> all_cases() {
  std::vector<TinyCase> cases;
  for (const auto& model_name : kModels) {
    for (const auto& dtype : kDtypes) {
      for (const auto backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
        cases.push_back({model_name, dtype, backend});
      }
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<TinyCase>& param_info) {
  const TinyCase& c = param_info.param;
  return c.model_name + "_" + c.dtype + "_" + backend_name(c.backend);
}

class TinyModelParity : public ::testing::TestWithParam<TinyCase> {
 protected:
  std::string label() const {
    return GetParam().model_name + " " + GetParam().dtype + " " + backend_name(GetParam().backend);
  }
  const nlohmann::json& model_entry() const {
    return reference().manifest().at("models").at(GetParam().model_name);
  }
  const nlohmann::json& implementation_entry() const {
    return model_entry()
        .at("dtypes")
        .at(GetParam().dtype)
        .at("implementations")
        .at(backend_name(GetParam().backend));
  }
};

TEST(TinyModelFixture, CoversEveryModelTheTestsIterate) {
  std::vector<std::string> in_fixture;
  for (const auto& [name, entry] : reference().manifest().at("models").items()) {
    in_fixture.push_back(name);
  }
  std::vector<std::string> tested = kModels;
  std::sort(in_fixture.begin(), in_fixture.end());
  std::sort(tested.begin(), tested.end());
  EXPECT_EQ(in_fixture, tested) << "regenerated fixture and test list disagree";
  print("tiny fixture: torch " +
        reference().manifest().at("versions").at("torch").get<std::string>() + ", transformers " +
        reference().manifest().at("versions").at("transformers").get<std::string>() +
        ", sdpa kernel " +
        reference().manifest().at("sdpa_kernel").at("observed_op").get<std::string>() +
        ", its exp's relative error " +
        reference().manifest().at("sdpa_kernel").at("cpu_sdpa_exp_relative_error").dump());
}

TEST_P(TinyModelParity, LogitsMatchHfAtEveryPosition) {
  const TinyCase& c = GetParam();
  cpu::CpuModel cpu_model(weights(c.model_name, c.dtype), c.backend);
  const double tolerance = tie_tolerance(c.model_name, c.dtype);
  const auto all_prompts = prompts();
  DifferenceStats total;
  TopOneAgreement total_top1;
  for (std::size_t p = 0; p < all_prompts.size(); ++p) {
    const auto tokens = static_cast<std::int64_t>(all_prompts[p].size());
    const std::vector<float> hf =
        hf_logits(c.model_name, c.dtype, backend_name(c.backend), p, tokens);
    const LogitMatrix ours = our_logits(cpu_model, all_prompts[p]);
    ASSERT_EQ(ours.rows, tokens);
    ASSERT_EQ(ours.vocab, vocab_size(c.model_name));
    DifferenceStats stats;
    stats.add(ours.values, hf);
    TopOneAgreement top1;
    const auto vocab = static_cast<std::size_t>(ours.vocab);
    for (int row = 0; row < ours.rows; ++row) {
      top1.add_row(ours.row(row),
                   std::span<const float>(hf).subspan(static_cast<std::size_t>(row) * vocab, vocab),
                   tolerance);
    }
    print(label() + " prompt " + std::to_string(p) + " (" + std::to_string(tokens) +
          " tokens): " + stats.summary() + ", " + top1.summary());
    if (c.dtype == "bf16") {
      EXPECT_LE(stats.relative_norm(), kBf16RelativeNorm) << label() << " prompt " << p;
    }
    total.merge(stats);
    total_top1.merge(top1);
  }
  print(label() + " all prompts: " + total.summary() + ", " + total_top1.summary() +
        ", near-tie tolerance " + std::to_string(tolerance));
  if (c.dtype == "f32") {
    EXPECT_LE(total.max_abs, kF32MaxAbsLogitDifference) << label();
  }
  EXPECT_TRUE(total_top1.tie_aware_agreement()) << label() << ": " << total_top1.summary();
}

TEST_P(TinyModelParity, GreedyContinuationMatchesHfGenerate) {
  const TinyCase& c = GetParam();
  const model::ModelWeights& model_weights = weights(c.model_name, c.dtype);
  cpu::CpuModel cpu_model(model_weights, c.backend);
  const std::vector<std::int32_t> prompt = token_ids(model_entry().at("greedy_prompt"));
  const std::vector<std::int32_t> expected =
      token_ids(implementation_entry().at("greedy_new_tokens"));
  cpu::SequenceState state = cpu_model.new_sequence();
  const LogitMatrix last = cpu_model.prefill(state, prompt, LogitRows::last);
  unit::GreedyOptions options;
  options.max_new_tokens = reference().manifest().at("greedy_new_tokens").get<int>();
  options.eos_token_ids = std::vector<std::int32_t>(model_weights.config.eos_token_ids.begin(),
                                                    model_weights.config.eos_token_ids.end());
  const unit::GreedyOutput output = unit::generate_greedy(cpu_model, state, last.row(0), options);
  std::size_t same = 0;
  while (same < std::min(output.tokens.size(), expected.size()) &&
         output.tokens[same] == expected[same]) {
    ++same;
  }
  print(label() + " greedy: " + std::to_string(same) + "/" + std::to_string(expected.size()) +
        " tokens identical to HF generate (HF min top-2 margin on its path " +
        std::to_string(implementation_entry().at("greedy_min_margin_bf16_ulps").get<double>()) +
        " bf16 ulps)");
  EXPECT_EQ(output.tokens, expected) << label();
}

// HF's "sdpa" on the CPU is torch's CPU flash kernel, whose approximate vectorized exp is the one
// known difference from our (FlashAttention-numerics) sdpa. With that kernel emulated
// (SdpaNumerics::torch_cpu_flash, attention_sdpa_torch_cpu.cpp) our logits must agree with HF's on
// the top-1 token at every position, strictly — no near-tie allowance. Measured: bf16 logits are
// bit-identical to HF's for llama, llama3_rope and qwen2; mistral bf16 differs by ‖Δ‖/‖ref‖ ≈ 1e-3
// (the same rare one-ulp flip its eager run shows, 8e-10 there, amplified by attention), still with
// strict top-1 agreement. This shows the default sdpa's bf16 near-tie switches come from torch's
// CPU exp alone.
TEST_P(TinyModelParity, TorchCpuFlashEmulationMatchesHfSdpaStrictly) {
  const TinyCase& c = GetParam();
  if (c.backend != AttentionBackend::sdpa) {
    GTEST_SKIP() << "the torch CPU flash emulation concerns the sdpa backend only";
  }
  cpu::CpuModelOptions options;
  options.sdpa_numerics = cpu::SdpaNumerics::torch_cpu_flash;
  cpu::CpuModel cpu_model(weights(c.model_name, c.dtype), c.backend, options);
  const auto all_prompts = prompts();
  DifferenceStats total;
  TopOneAgreement total_top1;
  for (std::size_t p = 0; p < all_prompts.size(); ++p) {
    const auto tokens = static_cast<std::int64_t>(all_prompts[p].size());
    const std::vector<float> hf = hf_logits(c.model_name, c.dtype, "sdpa", p, tokens);
    const LogitMatrix ours = our_logits(cpu_model, all_prompts[p]);
    ASSERT_EQ(ours.rows, tokens);
    const auto vocab = static_cast<std::size_t>(ours.vocab);
    DifferenceStats stats;
    stats.add(ours.values, hf);
    for (int row = 0; row < ours.rows; ++row) {
      total_top1.add_row(
          ours.row(row),
          std::span<const float>(hf).subspan(static_cast<std::size_t>(row) * vocab, vocab), 0.0);
    }
    total.merge(stats);
  }
  print(label() + " torch-CPU-flash emulation: " + total.summary() + ", " + total_top1.summary());
  EXPECT_EQ(total_top1.strict_agreements, total_top1.rows)
      << label() << ": " << total_top1.summary();
  if (c.dtype == "bf16") {
    EXPECT_LE(total.relative_norm(), kBf16RelativeNorm) << label();
    if (c.model_name != "mistral") {
      EXPECT_EQ(total.max_abs, 0.0) << label();
    }
  } else {
    EXPECT_LE(total.max_abs, kF32MaxAbsLogitDifference) << label();
  }
}

// Post-RoPE keys and values of every layer against HF's DynamicCache: a logit mismatch shows up
// first in the layer where it starts (keys of layer l depend on layers < l only).
TEST_P(TinyModelParity, KeysAndValuesMatchHfPerLayer) {
  const TinyCase& c = GetParam();
  const model::ModelWeights& model_weights = weights(c.model_name, c.dtype);
  const model::ModelConfig& config = model_weights.config;
  cpu::CpuModel cpu_model(model_weights, c.backend);
  const auto prompt_index = reference().manifest().at("key_value_prompt").get<std::size_t>();
  const std::vector<std::int32_t> prompt = prompts().at(prompt_index);
  cpu::SequenceState state = cpu_model.new_sequence();
  (void)cpu_model.prefill(state, prompt, LogitRows::none);
  const auto tokens = static_cast<std::int64_t>(prompt.size());
  const auto head_dim = static_cast<std::size_t>(config.head_dim);
  for (int layer = 0; layer < config.num_layers; ++layer) {
    const std::string prefix = c.model_name + "." + c.dtype + "." + backend_name(c.backend);
    const std::string suffix =
        "." + std::to_string(prompt_index) + ".layer" + std::to_string(layer);
    const std::vector<std::int64_t> shape = {config.num_kv_heads, tokens, config.head_dim};
    const std::vector<float> hf_keys = reference().tensor(prefix + ".keys" + suffix, shape);
    const std::vector<float> hf_values = reference().tensor(prefix + ".values" + suffix, shape);
    DifferenceStats keys;
    DifferenceStats values;
    for (int kv_head = 0; kv_head < config.num_kv_heads; ++kv_head) {
      const cpu::KvHeadView head = state.kv_cache().head(layer, kv_head);
      ASSERT_EQ(head.size(), prompt.size());
      const std::size_t offset = static_cast<std::size_t>(kv_head) * prompt.size() * head_dim;
      const std::size_t count = prompt.size() * head_dim;
      keys.add(head.keys, std::span<const float>(hf_keys).subspan(offset, count));
      values.add(head.values, std::span<const float>(hf_values).subspan(offset, count));
    }
    print(label() + " layer " + std::to_string(layer) + " keys: " + keys.summary() +
          "; values: " + values.summary());
    const double bound = c.dtype == "f32" ? kF32KeyValueRelativeNorm
                         : layer == 0     ? kBf16FirstLayerKeyValueRelativeNorm
                                          : kBf16RelativeNorm;
    EXPECT_LE(keys.relative_norm(), bound) << label() << " layer " << layer << " keys";
    EXPECT_LE(values.relative_norm(), bound) << label() << " layer " << layer << " values";
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, TinyModelParity, ::testing::ValuesIn(all_cases()), case_name);

// Per (model, dtype): the loaded config, RoPE frequencies, and the backends' difference.
class TinyModelPerDtype : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// The loaded ModelConfig against HF's config.json, so that a parity failure caused by the config
// reader is named as such.
TEST_P(TinyModelPerDtype, LoadedConfigMatchesHfConfig) {
  const auto& [model_name, dtype] = GetParam();
  const model::ModelConfig& config = weights(model_name, dtype).config;
  const nlohmann::json& hf = reference().manifest().at("models").at(model_name).at("config");
  EXPECT_EQ(config.hidden_size, hf.at("hidden_size").get<int>());
  EXPECT_EQ(config.intermediate_size, hf.at("intermediate_size").get<int>());
  EXPECT_EQ(config.num_layers, hf.at("num_hidden_layers").get<int>());
  EXPECT_EQ(config.num_heads, hf.at("num_attention_heads").get<int>());
  EXPECT_EQ(config.num_kv_heads, hf.at("num_key_value_heads").get<int>());
  EXPECT_EQ(config.head_dim, hf.at("head_dim").get<int>());
  EXPECT_EQ(config.vocab_size, hf.at("vocab_size").get<int>());
  EXPECT_EQ(config.tie_word_embeddings, hf.at("tie_word_embeddings").get<bool>());
  EXPECT_EQ(config.attention_bias, model_name == "qwen2");
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, hf.at("rms_norm_eps").get<double>());
  const nlohmann::json& rope = hf.at("rope_parameters");
  EXPECT_DOUBLE_EQ(config.rope.theta, rope.at("rope_theta").get<double>());
  const bool llama3 = rope.at("rope_type").get<std::string>() == "llama3";
  EXPECT_EQ(config.rope.scaling,
            llama3 ? model::RopeScalingType::llama3 : model::RopeScalingType::none);
  if (llama3) {
    EXPECT_DOUBLE_EQ(config.rope.factor, rope.at("factor").get<double>());
    EXPECT_DOUBLE_EQ(config.rope.low_freq_factor, rope.at("low_freq_factor").get<double>());
    EXPECT_DOUBLE_EQ(config.rope.high_freq_factor, rope.at("high_freq_factor").get<double>());
    EXPECT_EQ(config.rope.original_max_position_embeddings,
              rope.at("original_max_position_embeddings").get<std::int64_t>());
  }
  EXPECT_EQ(config.dtype, dtype == "bf16" ? model::ComputeDtype::bf16 : model::ComputeDtype::f32);
}

// HF keeps inv_freq in f32 for bf16 models too, so both dtypes compare against the same tensor.
TEST_P(TinyModelPerDtype, RopeInverseFrequenciesMatchHf) {
  const auto& [model_name, dtype] = GetParam();
  const model::ModelWeights& model_weights = weights(model_name, dtype);
  cpu::CpuModel cpu_model(model_weights, AttentionBackend::eager);
  const std::int64_t half = model_weights.config.head_dim / 2;
  const std::vector<float> hf = reference().tensor(model_name + ".inv_freq", {half});
  const std::span<const float> ours = cpu_model.rope_inv_freq();
  ASSERT_EQ(ours.size(), hf.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < hf.size(); ++i) {
    const double relative = std::abs(static_cast<double>(ours[i]) - hf[i]) / hf[i];
    worst = std::max(worst, relative);
    EXPECT_LE(relative, kInvFreqRelative)
        << "inv_freq[" << i << "]: ours " << ours[i] << ", HF " << hf[i];
  }
  print(model_name + " " + dtype + " inv_freq: max relative difference " + std::to_string(worst));
}

// Our eager-vs-sdpa difference against HF's, per model and dtype. bf16: the difference between the
// two backends is produced by the rounding points that distinguish them (eager rounds QKᵀ, the
// scaled scores and the fp32 softmax output to bf16; sdpa keeps the scores in fp32 and rounds only
// P and the output). If both of our backends reproduce HF's rounding points, our difference has the
// size of HF's; the factor 3 either way leaves room for block order and exp approximations (torch's
// CPU flash kernel uses a vectorised exp) while catching an eager backend that skips the score
// roundings (the difference collapses) or a backend that adds roundings (it grows). f32: nothing
// is rounded, both are the same softmax up to summation order, so only an absolute bound applies.
TEST_P(TinyModelPerDtype, EagerVsSdpaDifferenceSameOrderAsHf) {
  const auto& [model_name, dtype] = GetParam();
  const model::ModelWeights& model_weights = weights(model_name, dtype);
  cpu::CpuModel eager(model_weights, AttentionBackend::eager);
  cpu::CpuModel sdpa(model_weights, AttentionBackend::sdpa);
  DifferenceStats ours;
  std::int64_t rows = 0;
  std::int64_t our_top1_same = 0;  // argmax(eager) == argmax(sdpa), ours
  std::int64_t hf_top1_same = 0;   // the same for HF's two stored runs
  const auto all_prompts = prompts();
  for (std::size_t p = 0; p < all_prompts.size(); ++p) {
    const LogitMatrix our_eager = our_logits(eager, all_prompts[p]);
    const LogitMatrix our_sdpa = our_logits(sdpa, all_prompts[p]);
    ours.add(our_sdpa.values, our_eager.values);
    const auto tokens = static_cast<std::int64_t>(all_prompts[p].size());
    const std::vector<float> hf_eager = hf_logits(model_name, dtype, "eager", p, tokens);
    const std::vector<float> hf_sdpa = hf_logits(model_name, dtype, "sdpa", p, tokens);
    const auto vocab = static_cast<std::size_t>(our_eager.vocab);
    for (int row = 0; row < our_eager.rows; ++row) {
      const auto offset = static_cast<std::size_t>(row) * vocab;
      ++rows;
      our_top1_same +=
          argmax_token(our_eager.row(row)) == argmax_token(our_sdpa.row(row));
      hf_top1_same += argmax_token(std::span<const float>(hf_eager).subspan(offset, vocab)) ==
                      argmax_token(std::span<const float>(hf_sdpa).subspan(offset, vocab));
    }
  }
  const DifferenceStats hf = hf_backend_difference(model_name, dtype);
  const double ratio = hf.relative_norm() > 0.0 ? ours.relative_norm() / hf.relative_norm() : 0.0;
  print(model_name + " " + dtype + " eager-vs-sdpa: ours " + ours.summary() + ", top-1 same " +
        std::to_string(our_top1_same) + "/" + std::to_string(rows) + "; HF " + hf.summary() +
        ", top-1 same " + std::to_string(hf_top1_same) + "/" + std::to_string(rows) +
        "; ratio of relative norms " + std::to_string(ratio));
  if (dtype == "f32") {
    EXPECT_LE(ours.relative_norm(), kF32BackendDifferenceRelativeNorm);
  } else {
    EXPECT_GE(ratio, kBackendDifferenceRatioLow);
    EXPECT_LE(ratio, kBackendDifferenceRatioHigh);
  }
}

std::vector<std::pair<std::string, std::string>> model_dtype_pairs() {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& model_name : kModels) {
    for (const auto& dtype : kDtypes) pairs.emplace_back(model_name, dtype);
  }
  return pairs;
}

std::string model_dtype_name(
    const ::testing::TestParamInfo<std::pair<std::string, std::string>>& param_info) {
  return param_info.param.first + "_" + param_info.param.second;
}

INSTANTIATE_TEST_SUITE_P(AllModels, TinyModelPerDtype, ::testing::ValuesIn(model_dtype_pairs()),
                         model_dtype_name);

}  // namespace
}  // namespace kvaudit::parity_test
