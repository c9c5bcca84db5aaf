// Group "lukv" (kvpress 0.5.5 LUKVPress, BlockPress over any scorer): the .npy reader on good and
// bad headers, LU-KV's budget arithmetic and selection on a hand-computed 2-layer x 2-head curve,
// BlockMethod's block steps, and the factory. Parity with kvpress: kept_lukv.json
// (kvpress_parity_test).
#include "methods/lukv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/block.h"
#include "methods/keydiff.h"
#include "methods/knorm.h"
#include "methods/method_factory.h"
#include "methods/npy_file.h"
#include "methods/scorer_method.h"
#include "methods/snapkv.h"
#include "tests/methods/test_capture.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

namespace fs = std::filesystem;
using testing::OwnedLayer;
using testing::zero_layer;
using Kept = std::vector<std::vector<std::int32_t>>;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

// ---------------------------------------------------------------------------------------------
// .npy files built byte by byte.

std::vector<unsigned char> npy_bytes(int major, const std::string& dict,
                                     const std::vector<unsigned char>& data) {
  std::vector<unsigned char> out = {
      0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  const std::string header = dict + "\n";
  const auto n = static_cast<std::uint32_t>(header.size());
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out.push_back(static_cast<unsigned char>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<unsigned char> f4_bytes(const std::vector<float>& values) {
  std::vector<unsigned char> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());  // the test host is little-endian
  return out;
}

std::vector<unsigned char> f8_bytes(const std::vector<double>& values) {
  std::vector<unsigned char> out(values.size() * 8);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

TEST(LukvNpyFile, ReadsVersions1To3AndBothFloatTypes) {
  const auto v1 =
      parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }    ",
                          f4_bytes({1, 2, 3, 4, 5, 0.5f})),
                "v1");
  EXPECT_EQ(v1.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(v1.descr, "<f4");
  EXPECT_EQ(v1.values, (std::vector<double>{1, 2, 3, 4, 5, 0.5}));
  // Keys in another order, double quotes, a 1-d shape with its trailing comma, version 2.
  const auto v2 =
      parse_npy(npy_bytes(2, "{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f8\"}",
                          f8_bytes({0.1, -2.5})),
                "v2");
  EXPECT_EQ(v2.shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(v2.values, (std::vector<double>{0.1, -2.5}));
  // Version 3 and a scalar (shape ()).
  const auto v3 = parse_npy(
      npy_bytes(3, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", f8_bytes({7.25})),
      "v3");
  EXPECT_TRUE(v3.shape.empty());
  EXPECT_EQ(v3.values, (std::vector<double>{7.25}));
  // An empty array.
  const auto empty = parse_npy(
      npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", {}), "e");
  EXPECT_TRUE(empty.values.empty());
}

TEST(LukvNpyFile, RefusesBadHeadersNamingTheSourceAndTheField) {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const auto data = f4_bytes({1, 2});
  auto error = [&](const std::vector<unsigned char>& bytes) {
    return error_of([&] { (void)parse_npy(bytes, "c.npy"); });
  };
  auto bad_magic = npy_bytes(1, good, data);
  bad_magic[1] = 'X';
  EXPECT_EQ(error(bad_magic), "c.npy: not an npy file (the magic \\x93NUMPY is missing)");
  auto version = npy_bytes(1, good, data);
  version[6] = 4;
  EXPECT_EQ(error(version),
            "c.npy: npy format version 4.0 is not supported (want 1.0, 2.0 or 3.0)");
  EXPECT_EQ(error({0x93, 'N', 'U'}), "c.npy: too short for an npy file (3 bytes)");
  auto long_header = npy_bytes(1, good, data);
  long_header[8] = 0xff;
  long_header[9] = 0x7f;
  EXPECT_EQ(error(long_header), "c.npy: npy header length 32767 runs past the end of the " +
                                    std::to_string(long_header.size()) + "-byte file");
  EXPECT_EQ(error(npy_bytes(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", data)),
            "c.npy: npy dtype '>f4' is not supported (want '<f4' or '<f8': little-endian float32 "
            "/ float64; object arrays are never read)");
  EXPECT_NE(error(npy_bytes(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", data))
                .find("npy dtype '|O' is not supported"),
            std::string::npos);
  EXPECT_NE(error(npy_bytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
                            f8_bytes({1})))
                .find("npy dtype '<i8' is not supported"),
            std::string::npos);
  EXPECT_EQ(error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", data)),
            "c.npy: npy array is in Fortran order (want C order)");
  EXPECT_EQ(error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data)),
            "c.npy: npy shape [3] of <f4 needs 12 data bytes, the file has 8");
  auto trailing = npy_bytes(1, good, data);
  trailing.push_back(0);
  EXPECT_EQ(error(trailing), "c.npy: npy shape [2] of <f4 needs 8 data bytes, the file has 9");
  EXPECT_EQ(error(npy_bytes(1, "{'descr': '<f4', 'shape': (2,), }", data)),
            "c.npy: npy header: missing key 'fortran_order'");
  EXPECT_NE(error(npy_bytes(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, }", data))
                .find("duplicate key 'descr'"),
            std::string::npos);
  EXPECT_NE(
      error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", data))
          .find("unexpected key 'x'"),
      std::string::npos);
  EXPECT_NE(error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", data))
                .find("expected a non-negative integer in 'shape'"),
            std::string::npos);
  EXPECT_NE(
      error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999,)}",
                      data))
          .find("exceeds 2^40"),
      std::string::npos);
  // Dimensions that each fit but whose product overflows.
  EXPECT_NE(error(npy_bytes(1,
                            "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, "
                            "1099511627776), }",
                            data))
                .find("overflows the element count"),
            std::string::npos);
  auto no_newline = npy_bytes(1, good, data);
  no_newline[10 + good.size()] = ' ';
  EXPECT_EQ(error(no_newline), "c.npy: npy header does not end in a newline");
  EXPECT_EQ(error_of([] { (void)read_npy_file("/nonexistent/curve.npy"); }),
            "/nonexistent/curve.npy: cannot open the file");
}

fs::path write_temp(const std::string& name, const std::vector<unsigned char>& bytes) {
  const fs::path path = fs::temp_directory_path() / ("kvaudit_lukv_test_" + name);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return path;
}

TEST(LukvNpyFile, CurveCheckWantsRank3With99TargetsAndFiniteValues) {
  const fs::path flat = write_temp(
      "flat.npy", npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }",
                            f4_bytes({1, 2, 3, 4, 5, 6})));
  // The plan-time check leaves the path out (the plan prefixes it with the manifest position).
  EXPECT_EQ(error_of([&] { check_lukv_curve_file(flat.string()); }),
            "LU-KV budget curve has shape [3, 2] (want [99, layers, KV heads], layers and KV heads "
            ">= 1)");
  std::vector<float> values(99 * 2, 0.5f);
  values[101] = NAN;
  const fs::path nan = write_temp(
      "nan.npy", npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99, 1, 2), }",
                           f4_bytes(values)));
  EXPECT_EQ(error_of([&] { (void)read_lukv_curve(nan.string()); }),
            nan.string() + ": LU-KV budget curve value 101 is not finite");
  // The golden curves (written by numpy) pass.
  const fs::path golden =
      fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/artefacts/lukv_curve_llama.npy";
  const NpyArray curve = read_lukv_curve(golden.string());
  EXPECT_EQ(curve.shape, (std::vector<std::int64_t>{99, 2, 2}));
  EXPECT_NO_THROW(check_lukv_curve_file(golden.string()));
  fs::remove(flat);
  fs::remove(nan);
}

// ---------------------------------------------------------------------------------------------
// LU-KV's budget arithmetic.

TEST(LukvBudget, TargetIndexRoundsHalfToEvenAndClamps) {
  EXPECT_EQ(lukv_target_index(0.25), 24);
  EXPECT_EQ(lukv_target_index(0.5), 49);
  EXPECT_EQ(lukv_target_index(0.9), 89);
  EXPECT_EQ(lukv_target_index(0.125), 11);  // 12.5 rounds to 12 (half to even), not 13
  EXPECT_EQ(lukv_target_index(0.375), 37);  // 37.5 rounds to 38
  EXPECT_EQ(lukv_target_index(0.001), 0);   // round(0.1) − 1 = −1, clamped to 0
  EXPECT_EQ(lukv_target_index(0.999), 98);  // round(99.9) − 1 = 99, clamped to 98
}

TEST(LukvBudget, SumsInTorchsCpuOrder) {
  // Values whose f32 sum depends on the order; torch 2.15's sum (CPU) of each vector, and the
  // sequential sum it differs from (tools/.venv-kvpress, torch.from_numpy(x).sum()).
  const std::vector<float> six = {260635.8125f, 189772.125f, 428989.3125f,
                                  324862.5625f, 12561.0625f, 14004.25f};
  EXPECT_EQ(torch_cpu_sum(six), 1230825.125f);  // sequential: 1230825.0
  const std::vector<float> sixteen = {29431.3125f, 40350.375f,  2213.5625f,  48579.0625f,
                                      44935.5f,    76421.0625f, 62654.1875f, 174542.8125f,
                                      140632.625f, 178806.0f,   37720.375f,  180275.8125f,
                                      1570.0625f,  160036.625f, 47597.8125f, 159654.6875f};
  EXPECT_EQ(torch_cpu_sum(sixteen), 1385421.875f);  // sequential: 1385422.0
  const std::vector<float> thirty_seven = {
      163606.3125f, 341314.3125f, 26289.0f,     53291.5f,     62951.375f,   53748.625f,
      45419.3125f,  116410.875f,  254427.6875f, 94757.8125f,  56997.25f,    157222.1875f,
      26832.75f,    17152.9375f,  32029.0f,     112371.5625f, 90546.9375f,  20833.0f,
      36036.1875f,  121632.75f,   32831.8125f,  114507.75f,   324112.25f,   47893.5625f,
      40592.1875f,  202960.1875f, 183090.1875f, 178846.9375f, 144827.8125f, 46311.1875f,
      398693.3125f, 40431.125f,   49369.25f,    11072.875f,   22389.4375f,  100780.6875f,
      111685.125f};
  EXPECT_EQ(torch_cpu_sum(thirty_seven), 3934267.0f);  // sequential: 3934267.5
  EXPECT_EQ(torch_cpu_sum(std::vector<float>{}), 0.0f);
}

TEST(LukvBudget, KeepCountsOfHandComputedCurveRows) {
  // L = 10, r = [0.25, 0.625]: ideal = [7.5, 3.75], Σ = 11.25 → total 11; floors [7, 3] (10),
  // remainder 1 → the larger fraction (0.75, head 1) gets it: [7, 4].
  EXPECT_EQ(lukv_keep_counts(std::vector<float>{0.25f, 0.625f}, 10),
            (std::vector<std::int64_t>{7, 4}));
  // r = [1.0, −0.5]: keep rates clamp to [0, 1]: ideal [0, 10], total 10, floors [0, 10],
  // remainder 0; head 0 is clamped up to 1: [1, 10] (11 kept, above the curve's total).
  EXPECT_EQ(lukv_keep_counts(std::vector<float>{1.0f, -0.5f}, 10),
            (std::vector<std::int64_t>{1, 10}));
  // L = 4, r = [0.375, 0.75]: ideal [2.5, 1], Σ 3.5 → 4 (half to even); floors [2, 1], remainder
  // 1 → head 0 (fraction 0.5): [3, 1].
  EXPECT_EQ(lukv_keep_counts(std::vector<float>{0.375f, 0.75f}, 4),
            (std::vector<std::int64_t>{3, 1}));
  // L = 4, r = [0.375, 1.0]: ideal [2.5, 0], Σ 2.5 → 2 (half to even; half up would give 3 and
  // [3, 1]); floors [2, 0], remainder 0; head 1 clamped to 1: [2, 1].
  EXPECT_EQ(lukv_keep_counts(std::vector<float>{0.375f, 1.0f}, 4),
            (std::vector<std::int64_t>{2, 1}));
  // Every head fully pruned: total is clamped up to Hkv = 2; floors [0, 0], remainder 2 goes to
  // both heads: [1, 1].
  EXPECT_EQ(lukv_keep_counts(std::vector<float>{1.0f, 1.0f}, 6), (std::vector<std::int64_t>{1, 1}));
}

TEST(LukvBudget, StableTopKeepsTheLowerPositionOfEqualScores) {
  const std::vector<float> scores = {0.3f, 0.5f, 0.3f, 0.3f};
  EXPECT_EQ(stable_top_positions(scores, 2), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(stable_top_positions(scores, 3), (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(stable_top_positions(scores, 9), (std::vector<std::int32_t>{0, 1, 2, 3}));
  // NaN ranks first, as torch's descending sort puts it.
  EXPECT_EQ(stable_top_positions(std::vector<float>{0.1f, NAN, 0.9f}, 1),
            (std::vector<std::int32_t>{1}));
}

// Scores from a table [Hkv, L], the same for every layer.
class TableScorer : public Scorer {
 public:
  explicit TableScorer(std::vector<float> table) : table_(std::move(table)) {}
  void score(const LayerCapture&, const SelectionContext&, std::span<float> out) const override {
    ASSERT_EQ(out.size(), table_.size());
    std::copy(table_.begin(), table_.end(), out.begin());
  }
  std::string name() const override { return "table"; }

 private:
  std::vector<float> table_;
};

// A [99, 2, 2] curve, 0.5 everywhere except row `target`.
NpyArray curve_with_row(int target, const std::vector<float>& row) {
  NpyArray curve{.shape = {99, 2, 2}, .descr = "<f4", .values = std::vector<double>(99 * 4, 0.5)};
  for (std::size_t i = 0; i < 4; ++i)
    curve.values[static_cast<std::size_t>(target) * 4 + i] = static_cast<double>(row[i]);
  return curve;
}

std::vector<OwnedLayer> two_layers(int length) {
  std::vector<OwnedLayer> owned;
  for (int l = 0; l < 2; ++l) {
    OwnedLayer o = zero_layer(2, 2, length, 2);
    o.layer = l;
    o.num_layers = 2;
    owned.push_back(std::move(o));
  }
  return owned;
}

TEST(LukvMethod, HandComputedSelectionWithSinkAndWindowProtected) {
  // L = 6, sink 1, window 1, cr = 0.5 → curve row 49: layer 0 r = [0.5, 0.5] → keep [3, 3];
  // layer 1 r = [0.0, 1.0] → ideal [6, 0], keep [6, 1].
  // Scores: head 0 [0.1, 0.9, 0.3, 0.3, 0.8, 0.2], head 1 [0.5, 0.4, 0.4, 0.7, 0.1, 0.0];
  // max = 0.9 → positions 0 and 5 of both heads get 1.9.
  //   head 0: [1.9, .9, .3, .3, .8, 1.9] → stable order 0, 5, 1, 4, 2, 3 → keep 3: {0, 1, 5}
  //   head 1: [1.9, .4, .4, .7, .1, 1.9] → stable order 0, 5, 3, 1, 2, 4 → keep 3: {0, 3, 5}
  // Layer 1: head 0 keeps all 6; head 1 keeps 1: the first of the equal 1.9s, position 0.
  auto scorer = std::make_shared<TableScorer>(
      std::vector<float>{0.1f, 0.9f, 0.3f, 0.3f, 0.8f, 0.2f, 0.5f, 0.4f, 0.4f, 0.7f, 0.1f, 0.0f});
  const LukvMethod method(scorer, curve_with_row(49, {0.5f, 0.5f, 0.0f, 1.0f}), "c.npy", 1, 1);
  EXPECT_EQ(method.name(), "lukv(table)");
  const auto owned = two_layers(6);
  const std::vector<LayerCapture> layers = {owned[0].view(), owned[1].view()};
  const Selection s = method.select(layers, {.compression = 0.5}, {});
  ASSERT_EQ(s.kept.size(), 2u);
  EXPECT_EQ(s.kept[0], (Kept{{0, 1, 5}, {0, 3, 5}}));
  EXPECT_EQ(s.kept[1], (Kept{{0, 1, 2, 3, 4, 5}, {0}}));
  // Without protection (sink 0, window 0): head 0 keeps its 3 best scores {1, 4, 2} (0.3 at 2
  // before 0.3 at 3), head 1 {3, 0, 1}.
  const LukvMethod bare(scorer, curve_with_row(49, {0.5f, 0.5f, 0.0f, 1.0f}), "c.npy", 0, 0);
  EXPECT_EQ(bare.select(layers, {.compression = 0.5}, {}).kept[0], (Kept{{1, 2, 4}, {0, 1, 3}}));
  // cr = 0 keeps everything (kvpress returns before scoring).
  EXPECT_EQ(method.select(layers, {.compression = 0.0}, {}).kept[1][1].size(), 6u);
  // Another cr reads another row: cr = 0.25 → row 24, 0.5 everywhere → keep [3, 3] in layer 1.
  EXPECT_EQ(method.select(layers, {.compression = 0.25}, {}).kept[1], (Kept{{0, 1, 5}, {0, 3, 5}}));
}

TEST(LukvMethod, RefusesACurveThatDoesNotFitTheModel) {
  auto scorer = std::make_shared<TableScorer>(std::vector<float>(3 * 6, 0.0f));
  const LukvMethod method(scorer, curve_with_row(49, {0.5f, 0.5f, 0.5f, 0.5f}), "c.npy", 4, 1);
  std::vector<OwnedLayer> owned = two_layers(6);
  for (auto& o : owned) o = zero_layer(3, 3, 6, 2);  // 3 KV heads, the curve has 2
  owned[1].layer = 1;
  const std::vector<LayerCapture> layers = {owned[0].view(), owned[1].view()};
  EXPECT_EQ(error_of([&] { (void)method.select(layers, {.compression = 0.5}, {}); }),
            "lukv(table): c.npy: budget curve [99, 2, 2] does not fit the model: want [99, 2, 3] "
            "(layers, KV heads)");
  NpyArray flat{.shape = {98, 2, 2}, .descr = "<f4", .values = std::vector<double>(98 * 4, 0.5)};
  EXPECT_NE(error_of([&] { LukvMethod(scorer, flat, "c.npy", 4, 1); }).find("[98, 2, 2]"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// BlockMethod.

// s(j) = the first key component of subset slot j (reads only keys).
class FirstKeyComponent : public Scorer {
 public:
  void score(const LayerCapture& layer, const SelectionContext&,
             std::span<float> scores) const override {
    const auto L = static_cast<std::size_t>(layer.length);
    const auto d = static_cast<std::size_t>(layer.head_dim);
    for (std::size_t h = 0; h < layer.keys.size(); ++h)
      for (std::size_t j = 0; j < L; ++j) scores[h * L + j] = layer.keys[h][j * d];
  }
  std::string name() const override { return "first_key"; }
};

// s(slot) = −slot: prefers the earliest slots of the subset, i.e. the survivors in their order.
class EarliestSlot : public Scorer {
 public:
  void score(const LayerCapture& layer, const SelectionContext&,
             std::span<float> scores) const override {
    const auto L = static_cast<std::size_t>(layer.length);
    for (std::size_t h = 0; h < layer.keys.size(); ++h)
      for (std::size_t j = 0; j < L; ++j) scores[h * L + j] = -static_cast<float>(j);
  }
  std::string name() const override { return "earliest"; }
};

TEST(BlockMethod, HandComputedBlockSteps) {
  // One head, L = 8, key first components [5, 1, 4, 2, 9, 3, 0, 8], cr = 0.5 → n = 4, B = 2.
  //   kept = [0, 1, 2, 3]
  //   i = 4: candidates [0, 1, 2, 3, 4, 5] scores [5, 1, 4, 2, 9, 3] → top 4: 4, 0, 2, 5
  //   i = 6: candidates [4, 0, 2, 5, 6, 7] scores [9, 5, 4, 3, 0, 8] → top 4: 4, 7, 0, 2
  //   kept = {0, 2, 4, 7}
  OwnedLayer o = zero_layer(1, 1, 8, 2);
  const std::vector<float> first = {5, 1, 4, 2, 9, 3, 0, 8};
  for (std::size_t j = 0; j < first.size(); ++j) o.keys[0][2 * j] = first[j];
  const std::vector<LayerCapture> layers = {o.view()};
  const BlockMethod block(std::make_shared<FirstKeyComponent>(), 2);
  EXPECT_EQ(block.name(), "block(first_key)");
  EXPECT_EQ(block.select(layers, {.compression = 0.5}, {}).kept[0], (Kept{{0, 2, 4, 7}}));
  // A subset-dependent scorer: preferring the earliest slots keeps the first n forever.
  const BlockMethod earliest(std::make_shared<EarliestSlot>(), 2);
  EXPECT_EQ(earliest.select(layers, {.compression = 0.5}, {}).kept[0], (Kept{{0, 1, 2, 3}}));
  // Budget 1 (cr = 0.9 → n = max(1, floor(0.8)) = 1): the single best, 9 at position 4.
  EXPECT_EQ(block.select(layers, {.compression = 0.9}, {}).kept[0], (Kept{{4}}));
  // cr = 0 keeps everything.
  EXPECT_EQ(block.select(layers, {.compression = 0.0}, {}).kept[0].front().size(), 8u);
  EXPECT_THROW(BlockMethod(std::make_shared<FirstKeyComponent>(), 0), std::invalid_argument);
}

OwnedLayer random_layer(int heads, int length, int d, std::uint32_t seed) {
  OwnedLayer o = zero_layer(heads, heads, length, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (auto& k : o.keys)
    for (auto& x : k) x = normal(rng);
  for (auto& v : o.values)
    for (auto& x : v) x = normal(rng);
  return o;
}

TEST(BlockMethod, BlockOfKeydiffIsKeydiffsBlockVariantAndABigBlockIsTheScorer) {
  const OwnedLayer o = random_layer(2, 40, 4, 7);
  const std::vector<LayerCapture> layers = {o.view()};
  for (const double cr : {0.25, 0.5, 0.75, 0.9}) {
    const Budget budget{.compression = cr};
    EXPECT_EQ(BlockMethod(std::make_shared<KeyDiffScorer>(), 8).select(layers, budget, {}).kept,
              BlockKeyDiffMethod(8).select(layers, budget, {}).kept)
        << cr;
    // block_size >= L: one step over [0, n) then [n, L) — the scorer's own top-k.
    EXPECT_EQ(BlockMethod(std::make_shared<KnormScorer>(), 1000).select(layers, budget, {}).kept,
              ScorerMethod(std::make_shared<KnormScorer>()).select(layers, budget, {}).kept)
        << cr;
  }
}

TEST(BlockMethod, WindowScorersOnlyWhenOneStepCoversThePrefill) {
  // L = 40, 2 KV heads, 4 query heads, 16 random window rows; snapkv(window = 16).
  OwnedLayer o = random_layer(2, 40, 4, 11);
  o.num_heads = 4;
  o.window_rows = 16;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  o.window_queries.resize(4 * 16 * 4);
  for (auto& x : o.window_queries) x = normal(rng);
  const std::vector<LayerCapture> layers = {o.view()};
  auto snap = std::make_shared<SnapKvScorer>(SnapKvParams{.window = 16});
  // cr = 0.5: n = 20; blocks of 8 need 3 steps → refused at select time (not at construction,
  // so the factory builds it and a single-step cell can run).
  const BlockMethod small(snap, 8);
  const std::string message =
      error_of([&] { (void)small.select(layers, {.compression = 0.5}, {}); });
  EXPECT_NE(message.find("block(snapkv"), std::string::npos) << message;
  EXPECT_NE(message.find("unless one step covers the prefill"), std::string::npos) << message;
  // Blocks of 20 = L − n: one step over 0..39 in order — SnapKV's own top-k.
  EXPECT_EQ(BlockMethod(snap, 20).select(layers, {.compression = 0.5}, {}).kept,
            ScorerMethod(snap).select(layers, {.compression = 0.5}, {}).kept);
}

// ---------------------------------------------------------------------------------------------
// Factory.

MethodConfig config(std::string name, std::string id, std::map<std::string, ParamValue> params) {
  return {std::move(name), std::move(id), "", std::move(params)};
}

TEST(LukvFactory, BuildsLukvAndBlockFromTheirConfigs) {
  const std::string curve =
      (fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/artefacts/lukv_curve_llama.npy")
          .string();
  const std::map<std::string, MethodConfig> configs = {
      {"knorm", config("knorm", "knorm", {})},
      {"snap", config("snap", "snapkv", {{"window", std::int64_t{16}}})}};
  const ConfigResolver resolve = [&](const std::string& n) -> const MethodConfig* {
    const auto it = configs.find(n);
    return it == configs.end() ? nullptr : &it->second;
  };
  const auto lukv = make_method(
      config("l", "lukv", {{"scorer", std::string("knorm")}, {"curve", curve}}), resolve);
  EXPECT_EQ(lukv->name(), "lukv(knorm)");
  const auto& params = std::get<LukvParams>(lukv->parameters());
  EXPECT_EQ(params.sink, 4);
  EXPECT_EQ(params.recent_window, 1);
  const auto block = make_method(
      config("b", "block", {{"scorer", std::string("knorm")}, {"block_size", std::int64_t{16}}}),
      resolve);
  EXPECT_EQ(block->name(), "block(knorm)");
  EXPECT_EQ(make_method(config("b", "block", {{"scorer", std::string("snap")}}), resolve)->name(),
            "block(snapkv)");
  EXPECT_THROW(
      (void)make_method(
          config("l", "lukv",
                 {{"scorer", std::string("knorm")}, {"curve", curve}, {"sink", std::int64_t{-1}}}),
          resolve),
      std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
