// FastKVzip (methods/fastkvzip.h): the gate forward hand-computed on 2-dimensional toys, the
// sink/window rule, the KVzip-style budget over layers, and the gates file's errors.
#include "methods/fastkvzip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/method_factory.h"
#include "tests/methods/f32_safetensors.h"

namespace kvaudit::methods {
namespace {

namespace fs = std::filesystem;
using Kept = std::vector<std::vector<std::int32_t>>;

// ---- a 2-dim toy gate: Hkv = 1, o = 2, D = 2 -------------------------------------------------

// G = 1, S = 1: W_q = W_k = I, β = 0, norm weights 1, k̂ = (1, 0), b = 0.
FastKvzipGate toy_gate() {
  FastKvzipGate g;
  g.kv_heads = 1;
  g.groups = 1;
  g.output_dim = 2;
  g.sinks = 1;
  g.input_dim = 2;
  g.q_weight = {1, 0, 0, 1};
  g.q_bias = {0, 0};
  g.k_weight = {1, 0, 0, 1};
  g.q_norm = {1, 1};
  g.k_norm = {1, 1};
  g.k_base = {1, 0};
  g.bias = {0};
  return g;
}

TEST(FastKvzip, GateOfOneGroupAndOneSinkKey) {
  // x = (3, 4): q = k = x / sqrt(mean(9, 16)) = (3, 4)/√12.5 = (0.848528, 1.131371);
  //   z = k·q/√2 = 2/√2 = √2 (|q|² = 2 after the RMSNorm), z⁰ = k̂·q/√2 = 0.848528/1.414214 = 0.6,
  //   σ = 1/(1 + exp(0.6 − √2)) = 1/(1 + 0.443003) = 0.693007.
  // x = (0, 2): q = k = (0, √2); z = √2, z⁰ = 0, σ = 1/(1 + exp(−√2)) = 0.804430.
  // (kvpress's FastKVzipGate gives 0.69300663 and 0.80442959.)
  const std::vector<float> x = {3, 4, 0, 2};
  const std::vector<float> s = fastkvzip_gate_scores(toy_gate(), x, 2, false);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_NEAR(s[0], 0.69300663f, 2e-6);
  EXPECT_NEAR(s[1], 0.80442959f, 2e-6);
}

TEST(FastKvzipGate, TwoGroupsTwoSinkKeysBiasesAndNormWeights) {
  // G = 2, S = 2. q_proj rows: group 0 = I, group 1 = swap, β = (0, 0 | 1, −1); W_k = I;
  // q_norm weight (2, 1), k_norm weight (1, 1); k̂ = {(1, 0), (0, 1)}; b = (0.5, −0.5).
  FastKvzipGate g = toy_gate();
  g.groups = 2;
  g.sinks = 2;
  g.q_weight = {1, 0, 0, 1, 0, 1, 1, 0};
  g.q_bias = {0, 0, 1, -1};
  g.q_norm = {2, 1};
  g.k_base = {1, 0, 0, 1};
  g.bias = {0.5f, -0.5f};
  // x = (3, 4): k = (0.848528, 1.131371).
  //  group 0: q = (3, 4)/√12.5 ⊙ (2, 1) = (1.697056, 1.131371);
  //    z = (1.44 + 1.28)/√2 + 0.5 = 2.423330; z⁰ = (1.2, 0.8);
  //    σ = 1/(1 + e^(1.2−2.423330) + e^(0.8−2.423330)) = 1/(1 + 0.294230 + 0.197235) = 0.670478.
  //  group 1: (4 + 1, 3 − 1) = (5, 2), /√14.5 ⊙ (2, 1) = (2.626129, 0.525226);
  //    z = (2.228344 + 0.594225)/√2 − 0.5 = 1.495860; z⁰ = (1.856953, 0.371391);
  //    σ = 1/(1 + e^0.361093 + e^−1.124469) = 1/(1 + 1.434891 + 0.324829) = 0.362356.
  //  mean = 0.516417 (kvpress's FastKVzipGate: 0.51641273).
  // x = (0, 2): kvpress's FastKVzipGate gives 0.34784505.
  const std::vector<float> x = {3, 4, 0, 2};
  const std::vector<float> s = fastkvzip_gate_scores(g, x, 2, false);
  EXPECT_NEAR(s[0], 0.51641273f, 2e-6);
  EXPECT_NEAR(s[1], 0.34784505f, 2e-6);
}

TEST(FastKvzipGate, Bf16ModelsRoundTheProjectionsAndTheNormalisedVector) {
  // β = (0.001, 0): in f32 q_raw = (3.001, 4) (σ = 0.69297940 in kvpress); in bf16 3.001 rounds
  // to 3, and the normalised (0.848528, 1.131371) to (0.84765625, 1.1328125):
  //   z = (0.718521 + 1.283264)/√2 = 1.415476, z⁰ = 0.599384, σ = 1/(1 + e^−0.816092) = 0.693406
  // (kvpress's bf16 FastKVzipGate: 0.69340622).
  FastKvzipGate g = toy_gate();
  g.q_bias = {0.001f, 0};
  const std::vector<float> x = {3, 4};
  EXPECT_NEAR(fastkvzip_gate_scores(g, x, 1, false)[0], 0.69297940f, 2e-6);
  EXPECT_NEAR(fastkvzip_gate_scores(g, x, 1, true)[0], 0.69340622f, 2e-6);
}

TEST(FastKvzipGate, InputOfAnotherSizeIsRefused) {
  const std::vector<float> x = {3, 4, 0};
  EXPECT_THROW(fastkvzip_gate_scores(toy_gate(), x, 2, false), std::invalid_argument);
}

// ---- the sink / window rule ------------------------------------------------------------------

TEST(FastKvzipWindow, RatioOfTheContextBelow32000ElseWindowSize) {
  FastKvzipParams p;                            // window_ratio 0.02, window_size 4096
  EXPECT_EQ(fastkvzip_window(p, 128), 2);       // int(2.56)
  EXPECT_EQ(fastkvzip_window(p, 10), 1);        // int(0.2) = 0 -> at least 1
  EXPECT_EQ(fastkvzip_window(p, 31999), 639);   // int(639.98)
  EXPECT_EQ(fastkvzip_window(p, 32000), 4096);  // kvpress's chunked-prefill window
  p.window_ratio = 0.0;
  EXPECT_EQ(fastkvzip_window(p, 1000), 1);
}

// Layers of Hkv = 1, H = 1, D = 2 whose attention inputs are `inputs[l]` ([L, 2]).
struct ToyModel {
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> kv;  // zero keys/values per layer (d = 2)
  std::vector<LayerCapture> layers(bool with_input = true) {
    kv.assign(inputs.size(), std::vector<float>(inputs.front().size(), 0.0f));
    std::vector<LayerCapture> out;
    for (std::size_t l = 0; l < inputs.size(); ++l) {
      LayerCapture c;
      c.layer = static_cast<int>(l);
      c.num_layers = static_cast<int>(inputs.size());
      c.num_heads = 1;
      c.num_kv_heads = 1;
      c.head_dim = 2;
      c.hidden_size = 2;
      c.length = static_cast<int>(inputs[l].size() / 2);
      c.keys.emplace_back(kv[l]);
      c.values.emplace_back(kv[l]);
      if (with_input) c.attention_input = inputs[l];
      out.push_back(c);
    }
    return out;
  }
};

// Toy-gate scores (tests above / kvpress): (1,0) 0.602097, (4,3) 0.648901, (3,4) 0.693007,
// (0,2) 0.804430.
TEST(FastKvzip, SinksAndTheRecentWindowScoreOne) {
  FastKvzipParams p;
  p.n_sink = 2;
  p.window_ratio = 0.25;  // L = 8: w = int(2.0) = 2
  const FastKvzipMethod m(p, {toy_gate()});
  ToyModel model{{{1, 0, 1, 0, 1, 0, 4, 3, 3, 4, 0, 2, 1, 0, 1, 0}}, {}};
  const std::vector<float> s = m.scores(model.layers());
  ASSERT_EQ(s.size(), 8u);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_NEAR(s[2], 0.60209733f, 2e-6);
  EXPECT_NEAR(s[3], 0.64890134f, 2e-6);
  EXPECT_NEAR(s[4], 0.69300663f, 2e-6);
  EXPECT_NEAR(s[5], 0.80442959f, 2e-6);
  EXPECT_EQ(s[6], 1.0f);
  EXPECT_EQ(s[7], 1.0f);
}

TEST(FastKvzip, ContextsShorterThanTheSinksAndWindowAreAllProtected) {
  FastKvzipParams p;
  p.n_sink = 4;
  const FastKvzipMethod m(p, {toy_gate()});
  ToyModel model{{{3, 4, 0, 2}}, {}};  // L = 2 < n_sink
  EXPECT_EQ(m.scores(model.layers()), (std::vector<float>{1.0f, 1.0f}));
  const Selection kept = m.select(model.layers(), {.compression = 0.5}, {});
  EXPECT_EQ(kept.kept[0], (Kept{{1}}));  // int(2·0.5) = 1 pruned among equal 1.0s: torch's order
}

// Two layers, L = 6, n_sink 1, window 1 (ratio 0): layer 0 scores
// [1, 0.602097, 0.804430, 0.648901, 0.693007, 1], layer 1 [1, 0.804430, 0.693007, 0.804430,
// 0.804430, 1].
ToyModel two_layers() {
  return ToyModel{{{0, 2, 1, 0, 0, 2, 4, 3, 3, 4, 0, 2}, {0, 2, 0, 2, 3, 4, 0, 2, 0, 2, 0, 2}}, {}};
}

FastKvzipMethod two_layer_method(bool layerwise) {
  FastKvzipParams p;
  p.n_sink = 1;
  p.window_ratio = 0.0;
  p.layerwise = layerwise;
  return FastKvzipMethod(p, {toy_gate(), toy_gate()});
}

TEST(FastKvzip, GlobalBudgetPrunesTheLowestEntriesOfAllLayersTogether) {
  // N = 12, cr = 0.2: int(2.4) = 2 pruned over both layers: layer 0's 0.602097 and 0.648901.
  ToyModel model = two_layers();
  const Selection s = two_layer_method(false).select(model.layers(), {.compression = 0.2}, {});
  EXPECT_EQ(s.kept[0], (Kept{{0, 2, 4, 5}}));
  EXPECT_EQ(s.kept[1], (Kept{{0, 1, 2, 3, 4, 5}}));
  // cr = 0.25: int(3) — the third lowest, 0.693007, appears in both layers (a tie): 2 + 1 or
  // 1 + 2 per layer, 9 kept in all.
  const Selection t = two_layer_method(false).select(model.layers(), {.compression = 0.25}, {});
  EXPECT_EQ(t.kept_entries(), 9);
}

TEST(FastKvzip, LayerwiseBudgetPrunesTheSameCountInEveryLayer) {
  // int(6·0.2) = 1 per layer: layer 0's 0.602097 (position 1), layer 1's 0.693007 (position 2).
  ToyModel model = two_layers();
  const Selection s = two_layer_method(true).select(model.layers(), {.compression = 0.2}, {});
  EXPECT_EQ(s.kept[0], (Kept{{0, 2, 3, 4, 5}}));
  EXPECT_EQ(s.kept[1], (Kept{{0, 1, 3, 4, 5}}));
}

TEST(FastKvzip, NoCompressionKeepsEverythingAndBadBudgetsAreRefused) {
  ToyModel model = two_layers();
  const FastKvzipMethod m = two_layer_method(false);
  EXPECT_EQ(m.select(model.layers(), {.compression = 0.0}, {}).kept_entries(), 12);
  EXPECT_THROW(m.select(model.layers(), {.compression = 1.0}, {}), std::invalid_argument);
  EXPECT_THROW(m.select(model.layers(), {.compression = -0.1}, {}), std::invalid_argument);
}

TEST(FastKvzip, AMissingAttentionInputOrAnotherModelShapeIsRefused) {
  ToyModel model = two_layers();
  const FastKvzipMethod m = two_layer_method(false);
  try {
    m.select(model.layers(false), {.compression = 0.5}, {});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
  FastKvzipParams p;
  const FastKvzipMethod one_layer(p, {toy_gate()});  // gates of 1 layer, model of 2
  try {
    one_layer.select(model.layers(), {.compression = 0.5}, {});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit the model (2 layers"), std::string::npos)
        << e.what();
  }
}

TEST(FastKvzip, ParametersOutOfRangeAreRefused) {
  FastKvzipParams p;
  p.n_sink = -1;
  EXPECT_THROW(FastKvzipMethod{p}, std::invalid_argument);
  p = {};
  p.window_size = 0;
  EXPECT_THROW(FastKvzipMethod{p}, std::invalid_argument);
  p = {};
  p.window_ratio = 1.5;
  EXPECT_THROW(FastKvzipMethod{p}, std::invalid_argument);
}

// ---- the gates file --------------------------------------------------------------------------

using Tensor = testing::F32Tensor;

std::string write_f32_safetensors(const std::string& name,
                                  const std::map<std::string, Tensor>& tensors) {
  return testing::write_f32_safetensors("kvaudit_fastkvzip_test", name, tensors);
}

// The toy gate as kvpress's state_dict names it, for `layers` layers.
std::map<std::string, Tensor> toy_tensors(int layers) {
  std::map<std::string, Tensor> t;
  for (int l = 0; l < layers; ++l) {
    const std::string p = std::to_string(l) + ".";
    t[p + "q_proj.weight"] = {{2, 2}, {1, 0, 0, 1}};
    t[p + "q_proj.bias"] = {{2}, {0, 0}};
    t[p + "k_proj.weight"] = {{2, 2}, {1, 0, 0, 1}};
    t[p + "q_norm.weight"] = {{2}, {1, 1}};
    t[p + "k_norm.weight"] = {{2}, {1, 1}};
    t[p + "k_base"] = {{1, 1, 1, 2}, {1, 0}};
    t[p + "b"] = {{1, 1, 1}, {0}};
  }
  return t;
}

std::string error_of_check(const std::string& path) {
  try {
    check_fastkvzip_gates_file(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(FastKvzipGatesFile, ReadsKvpressStateDictNamesPerLayer) {
  const std::string path = write_f32_safetensors("gates.safetensors", toy_tensors(2));
  const std::vector<FastKvzipGate> gates = read_fastkvzip_gates(path);
  ASSERT_EQ(gates.size(), 2u);
  EXPECT_EQ(gates[1].kv_heads, 1);
  EXPECT_EQ(gates[1].groups, 1);
  EXPECT_EQ(gates[1].output_dim, 2);
  EXPECT_EQ(gates[1].sinks, 1);
  EXPECT_EQ(gates[1].input_dim, 2);
  EXPECT_EQ(gates[1].k_base, (std::vector<float>{1, 0}));
  EXPECT_EQ(error_of_check(path), "");
  // Through the factory (the gates are read at the first select) the same scores as in memory.
  FastKvzipParams p;
  p.gates = path;
  p.n_sink = 0;
  p.window_ratio = 0.0;
  ToyModel model = two_layers();
  const std::vector<float> from_file = FastKvzipMethod(p).scores(model.layers());
  EXPECT_EQ(from_file, FastKvzipMethod(p, {toy_gate(), toy_gate()}).scores(model.layers()));
  EXPECT_NEAR(from_file[1], 0.60209733f, 2e-6);
}

TEST(FastKvzipGatesFile, ParsingTheBytesGivesWhatReadingTheFileGives) {
  const std::string path = write_f32_safetensors("gates_bytes.safetensors", toy_tensors(2));
  std::ifstream in(path, std::ios::binary);
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                         std::istreambuf_iterator<char>());
  const std::vector<FastKvzipGate> read = read_fastkvzip_gates(path);
  const std::vector<FastKvzipGate> parsed = parse_fastkvzip_gates(bytes, "mem");
  ASSERT_EQ(parsed.size(), read.size());
  for (std::size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(parsed[i].q_weight, read[i].q_weight);
    EXPECT_EQ(parsed[i].k_base, read[i].k_base);
    EXPECT_EQ(parsed[i].bias, read[i].bias);
  }
  // A header length beyond the bytes is refused, naming the source.
  std::vector<unsigned char> cut(bytes.begin(), bytes.begin() + 12);
  try {
    (void)parse_fastkvzip_gates(cut, "mem");
    ADD_FAILURE() << "a cut file was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "mem: the header length exceeds the file");
  }
}

TEST(FastKvzipGatesFile, ErrorsNameTheTensorAndLeaveThePathToThePlan) {
  auto missing = toy_tensors(1);
  missing.erase("0.b");
  const std::string missing_path = write_f32_safetensors("missing.safetensors", missing);
  EXPECT_NE(error_of_check(missing_path).find("0.b"), std::string::npos)
      << error_of_check(missing_path);
  EXPECT_EQ(error_of_check(missing_path).find(missing_path), std::string::npos);

  auto bad_b = toy_tensors(1);
  bad_b["0.b"] = {{1, 2}, {0, 0}};
  EXPECT_EQ(error_of_check(write_f32_safetensors("bad_b.safetensors", bad_b)),
            "0.b has shape [1, 2], expected [1, 1, 1] ([KV heads, 1, groups])");

  auto bad_q = toy_tensors(1);
  bad_q["0.q_proj.weight"] = {{3, 2}, {1, 0, 0, 1, 0, 0}};
  EXPECT_EQ(error_of_check(write_f32_safetensors("bad_q.safetensors", bad_q)),
            "0.q_proj.weight has shape [3, 2], expected [2·groups, 2]");

  auto gap = toy_tensors(3);
  for (const char* n : {"q_proj.weight", "q_proj.bias", "k_proj.weight", "q_norm.weight",
                        "k_norm.weight", "k_base", "b"})
    gap.erase(std::string("1.") + n);
  EXPECT_EQ(error_of_check(write_f32_safetensors("gap.safetensors", gap)),
            "the gate layers are not numbered 0..2");

  auto other_shape = toy_tensors(2);
  other_shape["1.k_base"] = {{1, 1, 2, 2}, {1, 0, 0, 1}};  // 2 sink keys in layer 1 only
  EXPECT_EQ(error_of_check(write_f32_safetensors("other.safetensors", other_shape)),
            "the gate of layer 1 has another shape than layer 0's (kvpress builds every gate with "
            "layer 0's)");

  EXPECT_EQ(error_of_check(write_f32_safetensors("none.safetensors", {{"x", {{1}, {0}}}})),
            "holds no gate tensors (expected \"0.q_proj.weight\", \"0.k_proj.weight\", ...)");
  EXPECT_EQ(error_of_check("/nonexistent/gates.safetensors"), "cannot open the file");
}

TEST(FastKvzipFactory, BuildsFromTheCatalogueAndAsksForTheAttentionInput) {
  const MethodConfig c{"f", "fastkvzip", "", {{"gates", std::string("/x.safetensors")}}};
  const auto m = make_method(c, {});
  EXPECT_EQ(m->name(), "fastkvzip");
  EXPECT_TRUE(m->needs_attention_input());
  EXPECT_FALSE(m->needs_all_queries());
  const auto& p = std::get<FastKvzipParams>(m->parameters());
  EXPECT_FALSE(p.layerwise);
  EXPECT_EQ(p.n_sink, 4);
  EXPECT_EQ(p.window_size, 4096);
  EXPECT_DOUBLE_EQ(p.window_ratio, 0.02);
}

}  // namespace
}  // namespace kvaudit::methods
