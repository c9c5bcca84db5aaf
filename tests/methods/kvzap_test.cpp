// KVzap (methods/kvzap.h): the linear and MLP surrogates hand-computed on 2-dimensional toys (f32
// and the bf16 rounding points), the ScorerPress selection over them, the refusals (another model's
// surrogate, no attention input, chunked wrappers), and the model file reader
// (methods/kvzap_model.h).
#include "methods/kvzap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/bf16_rounding.h"
#include "methods/capture_subset.h"
#include "methods/scorer_method.h"
#include "tests/methods/f32_safetensors.h"

namespace kvaudit::methods {
namespace {

using Kept = std::vector<std::vector<std::int32_t>>;

// Linear surrogate, D = 2, Hkv = 2: W = [[1, 2], [−1, 0.5]], b = (0.5, −1).
KvzapLayer toy_linear() {
  KvzapLayer l;
  l.type = KvzapModelType::linear;
  l.input_dim = 2;
  l.output_dim = 2;
  l.w1 = {1, 2, -1, 0.5f};
  l.b1 = {0.5f, -1};
  return l;
}

// MLP surrogate, D = 2, M = 2, Hkv = 2: W₁ = [[1, 0], [0, −1]], b₁ = (0, 1);
// W₂ = [[1, 1], [2, −1]], b₂ = (0, 0.5).
KvzapLayer toy_mlp() {
  KvzapLayer l;
  l.type = KvzapModelType::mlp;
  l.input_dim = 2;
  l.hidden_dim = 2;
  l.output_dim = 2;
  l.w1 = {1, 0, 0, -1};
  l.b1 = {0, 1};
  l.w2 = {1, 1, 2, -1};
  l.b2 = {0, 0.5f};
  return l;
}

TEST(Kvzap, LinearSurrogateIsAnAffineMapPerKvHead) {
  // x = (3, 4): (3 + 8 + 0.5, −3 + 2 − 1) = (11.5, −2); x = (0, −2): (−4 + 0.5, −1 − 1) = (−3.5,
  // −2).
  const std::vector<float> x = {3, 4, 0, -2};
  const std::vector<float> s = kvzap_scores(toy_linear(), x, 2, false);
  // [Hkv, L]: head 0 then head 1.
  EXPECT_EQ(s, (std::vector<float>{11.5f, -3.5f, -2.0f, -2.0f}));
}

TEST(Kvzap, MlpSurrogateAppliesTheExactGelu) {
  // x = (1, 2): W₁x + b₁ = (1, −1); GELU(1) = ½(1 + erf(1/√2)) = 0.8413447,
  // GELU(−1) = −½(1 − erf(1/√2)) = −0.1586553; W₂·u + b₂ = (0.6826895, 2·0.8413447 + 0.1586553 +
  // 0.5 = 2.3413447). (torch: nn.GELU()(tensor([1., -1.])) = [0.8413, -0.1587].)
  const std::vector<float> x = {1, 2};
  const std::vector<float> s = kvzap_scores(toy_mlp(), x, 1, false);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_NEAR(s[0], 0.6826895f, 1e-6);
  EXPECT_NEAR(s[1], 2.3413447f, 1e-6);
  // The tanh approximation of GELU (0.8411920, −0.1588080) would give 0.6823840 instead.
  EXPECT_GT(std::fabs(s[0] - 0.6823840f), 1e-4);
}

TEST(Kvzap, Bf16ModelsRoundWeightsEachLinearOutputAndTheGelu) {
  // One weight of 1/3 (bf16: 0.333984375), bias 0.1 (bf16: 0.10009765625), x = 3:
  // f32: 3·(1/3) + 0.1 = 1.1 → 1.1f;  bf16: round(3·0.333984375 + 0.10009765625 = 1.10205078125)
  // = 1.1015625 (bf16 steps of 2⁻⁷ = 0.0078125 in [1, 2)).
  KvzapLayer l;
  l.type = KvzapModelType::linear;
  l.input_dim = 1;
  l.output_dim = 1;
  l.w1 = {1.0f / 3.0f};
  l.b1 = {0.1f};
  const std::vector<float> x = {3};
  EXPECT_FLOAT_EQ(kvzap_scores(l, x, 1, false)[0], 1.1f);
  EXPECT_EQ(kvzap_scores(l, x, 1, true)[0], 1.1015625f);
  // MLP: the GELU output is rounded before the second Linear. GELU(1) = 0.8413447 → bf16 0.83984375
  // (steps of 2⁻⁸ in [0.5, 1)); with W₂ = 3: 3·0.83984375 = 2.51953125 → bf16 2.515625 (steps of
  // 2⁻⁶ in [2, 4)), while the unrounded GELU would give 3·0.8413447 = 2.524034 → 2.53125.
  KvzapLayer m;
  m.type = KvzapModelType::mlp;
  m.input_dim = 1;
  m.hidden_dim = 1;
  m.output_dim = 1;
  m.w1 = {1};
  m.b1 = {0};
  m.w2 = {3};
  m.b2 = {0};
  const std::vector<float> one = {1};
  EXPECT_EQ(kvzap_scores(m, one, 1, true)[0], 2.515625f);
  EXPECT_NEAR(kvzap_scores(m, one, 1, false)[0], 2.5240341f, 1e-6);
}

TEST(Kvzap, InputOfAnotherSizeIsRefused) {
  const std::vector<float> x = {1, 2, 3};
  EXPECT_THROW(kvzap_scores(toy_linear(), x, 2, false), std::invalid_argument);
}

// Layers of Hkv = 2, H = 2, d = 2, D = 2 with attention inputs `inputs[l]` ([L, 2]).
struct ToyModel {
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> kv;
  std::vector<LayerCapture> layers(bool with_input = true) {
    kv.assign(inputs.size(), std::vector<float>(inputs.front().size(), 0.0f));
    std::vector<LayerCapture> out;
    for (std::size_t l = 0; l < inputs.size(); ++l) {
      LayerCapture c;
      c.layer = static_cast<int>(l);
      c.num_layers = static_cast<int>(inputs.size());
      c.num_heads = 2;
      c.num_kv_heads = 2;
      c.head_dim = 2;
      c.hidden_size = 2;
      c.length = static_cast<int>(inputs[l].size() / 2);
      c.keys = {kv[l], kv[l]};
      c.values = {kv[l], kv[l]};
      if (with_input) c.attention_input = inputs[l];
      out.push_back(c);
    }
    return out;
  }
};

TEST(Kvzap, EachKvHeadKeepsItsHighestScores) {
  // Layer 0 (linear surrogate), L = 4, x = (3,4), (0,−2), (1,1), (−1,0):
  //   head 0 = (11.5, −3.5, 3.5, −0.5), head 1 = (−2, −2, −1.5, 0).
  // cr 0.5: n_kept = 2 → head 0 keeps {0, 2}, head 1 keeps {2, 3}.
  ToyModel model{{{3, 4, 0, -2, 1, 1, -1, 0}}, {}};
  const ScorerMethod method(std::make_shared<KvzapScorer>(std::vector{toy_linear()}, "toy"));
  EXPECT_TRUE(method.needs_attention_input());
  const Selection s = method.select(model.layers(), {.compression = 0.5}, {});
  ASSERT_EQ(s.kept.size(), 1u);
  EXPECT_EQ(s.kept[0], (Kept{{0, 2}, {2, 3}}));
}

TEST(Kvzap, AnotherModelsSurrogateOrAMissingAttentionInputIsRefused) {
  ToyModel model{{{3, 4, 0, -2}, {1, 1, 1, 1}}, {}};  // 2 layers
  const KvzapScorer one_layer({toy_linear()}, "one_layer.safetensors");
  std::vector<float> scores(4);
  try {
    one_layer.score(model.layers()[0], {}, scores);
    ADD_FAILURE() << "a 1-layer surrogate scored a 2-layer model";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("one_layer.safetensors: the KVzap model has 1 layers"),
              std::string::npos)
        << e.what();
  }
  const KvzapScorer two_layers({toy_linear(), toy_linear()}, "two.safetensors");
  two_layers.score(model.layers()[1], {}, scores);
  EXPECT_EQ(scores, (std::vector<float>{3.5f, 3.5f, -1.5f, -1.5f}));
  try {
    two_layers.score(model.layers(false)[0], {}, scores);
    ADD_FAILURE() << "scored without an attention input";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
  // Chunked wrappers score subsets of positions per head; the attention input is per position of
  // the full prefill, so KVzap is not a subset scorer.
  EXPECT_FALSE(reads_only_subset_fields(two_layers));
}

// ---- the model file ---------------------------------------------------------------------------

using testing::F32Tensor;

std::string write(const std::string& name, const std::map<std::string, F32Tensor>& tensors) {
  return testing::write_f32_safetensors("kvaudit_kvzap_test", name, tensors);
}

std::map<std::string, F32Tensor> mlp_tensors(int layers) {
  std::map<std::string, F32Tensor> t;
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    t[p + "0.weight"] = {{2, 2}, {1, 0, 0, -1}};
    t[p + "0.bias"] = {{2}, {0, 1}};
    t[p + "2.weight"] = {{2, 2}, {1, 1, 2, -1}};
    t[p + "2.bias"] = {{2}, {0, 0.5f}};
  }
  return t;
}

std::map<std::string, F32Tensor> linear_tensors(int layers) {
  std::map<std::string, F32Tensor> t;
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    t[p + "weight"] = {{2, 2}, {1, 2, -1, 0.5f}};
    t[p + "bias"] = {{2}, {0.5f, -1}};
  }
  return t;
}

std::string error_of_check(const std::string& path) {
  try {
    check_kvzap_model_file(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(KvzapModelFile, ReadsKvpressKvzapModelNamesForBothTypes) {
  const std::vector<KvzapLayer> mlp = read_kvzap_model(write("mlp.safetensors", mlp_tensors(2)));
  ASSERT_EQ(mlp.size(), 2u);
  EXPECT_EQ(mlp[1].type, KvzapModelType::mlp);
  EXPECT_EQ(mlp[1].hidden_dim, 2);
  EXPECT_EQ(mlp[1].w2, toy_mlp().w2);
  const std::vector<float> x = {1, 2};
  EXPECT_EQ(kvzap_scores(mlp[0], x, 1, false), kvzap_scores(toy_mlp(), x, 1, false));
  const std::vector<KvzapLayer> linear =
      read_kvzap_model(write("linear.safetensors", linear_tensors(3)));
  ASSERT_EQ(linear.size(), 3u);
  EXPECT_EQ(linear[2].type, KvzapModelType::linear);
  EXPECT_EQ(linear[2].hidden_dim, 0);
  EXPECT_EQ(linear[2].w1, toy_linear().w1);
  EXPECT_EQ(error_of_check(write("ok.safetensors", mlp_tensors(1))), "");
}

TEST(KvzapModelFile, ErrorsNameTheTensorAndLeaveThePathToThePlan) {
  auto both = mlp_tensors(1);
  both.merge(linear_tensors(1));
  EXPECT_NE(error_of_check(write("both.safetensors", both)).find("holds both linear"),
            std::string::npos);
  EXPECT_NE(error_of_check(write("none.safetensors", {{"x", {{1}, {0}}}}))
                .find("holds no KVzap surrogate tensors"),
            std::string::npos);
  auto gap = mlp_tensors(3);
  for (const char* rest : {"0.weight", "0.bias", "2.weight", "2.bias"})
    gap.erase(std::string("layers.1.") + rest);
  EXPECT_EQ(error_of_check(write("gap.safetensors", gap)),
            "the surrogate layers are not numbered 0..2");
  auto missing = mlp_tensors(1);
  missing.erase("layers.0.2.bias");
  EXPECT_NE(
      error_of_check(write("missing.safetensors", missing)).find("has no tensor 'layers.0.2.bias'"),
      std::string::npos);
  auto bad_second = mlp_tensors(1);
  bad_second["layers.0.2.weight"] = {{2, 3}, {1, 1, 1, 1, 1, 1}};
  EXPECT_EQ(error_of_check(write("bad_second.safetensors", bad_second)),
            "tensor 'layers.0.2.weight' has shape [2, 3], expected [KV heads, 2]");
  auto bad_bias = linear_tensors(1);
  bad_bias["layers.0.bias"] = {{3}, {1, 1, 1}};
  EXPECT_EQ(error_of_check(write("bad_bias.safetensors", bad_bias)),
            "tensor 'layers.0.bias' has shape [3], expected [2] ([KV heads])");
  auto other_shape = linear_tensors(2);
  other_shape["layers.1.weight"] = {{2, 3}, {1, 1, 1, 1, 1, 1}};
  EXPECT_EQ(error_of_check(write("other.safetensors", other_shape)),
            "the surrogate of layer 1 has another shape than layer 0's (kvpress builds every "
            "layer alike)");
  // Read errors (not the plan check) start with the path.
  const std::string path = write("gap2.safetensors", gap);
  try {
    (void)read_kvzap_model(path);
    ADD_FAILURE() << "read a model with a layer gap";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::methods
