// A grid's [grids.decoding] table (docs/MANIFEST.md): parsed into Grid::decoding, part of the
// canonical form only when present (manifests without it keep their hash), and part of the cells'
// content: the same cells with a decoding table are other cells (other ids), each pointing at its
// grid (Cell::decoding_grid). CAM's merge_budget likewise: hashed and carried only when present,
// and so is target_compression_ratio (kvpress CompressionRatioDecodingPress), which replaces
// target_size. Bad tables: tests/manifest/malformed/decoding_bad_table.*,
// decoding_cam_bad_merge_budget.*, decoding_ratio_bad.*.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "suite/common/sha256.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

const char* kHead = R"([study]
name = "t"
seed = 1
output_dir = "out"

[[models]]
name = "m"
path = "model.gguf"
format = "gguf"
chat_template = "chatml"

[[benchmarks]]
name = "r"
kind = "ruler"
tasks = ["niah_single_1"]
length = 1024
instances = 3

[methods.snapkv]
[methods.knorm]

[[grids]]
name = "g"
benchmarks = ["r"]
methods = ["snapkv"]
compression = [0.5]
protocols = ["query-agnostic"]
attention_backends = ["sdpa"]
)";

Manifest load_text(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::path(KVAUDIT_TEST_TMP) / "decoding" / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
  return load_manifest(path);
}

const std::string kTable = R"(
[grids.decoding]
method = "knorm"
compression_interval = 4
target_size = 100
query_positions = "own"
)";

TEST(DecodingManifest, TheTableIsParsedWithItsDefaults) {
  const Manifest m = load_text("with.toml", std::string(kHead) + kTable);
  ASSERT_TRUE(m.grids[0].decoding.has_value());
  const GridDecoding& d = *m.grids[0].decoding;
  EXPECT_EQ(d.method, "knorm");
  EXPECT_EQ(d.compression_interval, 4);
  EXPECT_EQ(d.target_size, 100);
  EXPECT_EQ(d.hidden_states_buffer_size, 256);
  EXPECT_EQ(d.query_positions, "own");
  EXPECT_FALSE(d.merge_budget.has_value());
}

TEST(DecodingManifest, MergeBudgetMakesItCamAndEntersTheHashAndCellsOnlyWhenPresent) {
  const Manifest plain = load_text("with.toml", std::string(kHead) + kTable);
  const Manifest cam = load_text("cam.toml", std::string(kHead) + kTable + "merge_budget = 32\n");
  ASSERT_TRUE(cam.grids[0].decoding.has_value());
  ASSERT_TRUE(cam.grids[0].decoding->merge_budget.has_value());
  EXPECT_EQ(*cam.grids[0].decoding->merge_budget, 32);
  EXPECT_FALSE(canonical_json(plain)["grids"][0]["decoding"].contains("merge_budget"));
  EXPECT_EQ(canonical_json(cam)["grids"][0]["decoding"]["merge_budget"], 32);
  const Expansion a = expand(plain);
  const Expansion b = expand(cam);
  ASSERT_EQ(a.cells.size(), b.cells.size());
  for (std::size_t i = 0; i < a.cells.size(); ++i) {
    EXPECT_NE(a.cells[i].id, b.cells[i].id);
    EXPECT_EQ(cell_tuple(plain, a.units[a.cells[i].unit], a.cells[i]).find("merge_budget"),
              std::string::npos);
    EXPECT_NE(cell_tuple(cam, b.units[b.cells[i].unit], b.cells[i]).find(R"("merge_budget":32)"),
              std::string::npos);
  }
}

TEST(DecodingManifest, AFixedTargetsCanonicalFormIsWhatItWas) {
  // Pinned: the canonical form of a table without target_compression_ratio (the form before the
  // key existed), so existing grids keep their hashes and cell ids.
  const Manifest m = load_text("with.toml", std::string(kHead) + kTable);
  EXPECT_EQ(canonical_grid_decoding(*m.grids[0].decoding).dump(),
            R"({"compression_interval":4,"hidden_states_buffer_size":256,"method":"knorm",)"
            R"("query_positions":"own","target_size":100})");
}

const std::string kRatioTable = R"(
[grids.decoding]
method = "knorm"
compression_interval = 4
target_compression_ratio = 0.5
query_positions = "own"
)";

TEST(DecodingManifest, ARatioReplacesTheTargetInTheHashAndTheCells) {
  const Manifest fixed = load_text("with.toml", std::string(kHead) + kTable);
  const Manifest ratio = load_text("ratio.toml", std::string(kHead) + kRatioTable);
  ASSERT_TRUE(ratio.grids[0].decoding.has_value());
  const GridDecoding& d = *ratio.grids[0].decoding;
  ASSERT_TRUE(d.target_compression_ratio.has_value());
  EXPECT_EQ(*d.target_compression_ratio, 0.5);
  EXPECT_FALSE(fixed.grids[0].decoding->target_compression_ratio.has_value());
  EXPECT_EQ(canonical_grid_decoding(d).dump(),
            R"({"compression_interval":4,"hidden_states_buffer_size":256,"method":"knorm",)"
            R"("query_positions":"own","target_compression_ratio":0.5})");
  const Expansion a = expand(fixed);
  const Expansion b = expand(ratio);
  ASSERT_EQ(a.cells.size(), b.cells.size());
  for (std::size_t i = 0; i < a.cells.size(); ++i) {
    EXPECT_NE(a.cells[i].id, b.cells[i].id);
    const std::string tuple = cell_tuple(ratio, b.units[b.cells[i].unit], b.cells[i]);
    EXPECT_NE(tuple.find(R"("target_compression_ratio":0.5)"), std::string::npos) << tuple;
    EXPECT_EQ(tuple.find("target_size"), std::string::npos) << tuple;
    EXPECT_EQ(
        cell_tuple(fixed, a.units[a.cells[i].unit], a.cells[i]).find("target_compression_ratio"),
        std::string::npos);
  }
  // Another ratio is another grid content.
  const Manifest other = load_text("ratio2.toml", std::string(kHead) + R"(
[grids.decoding]
method = "knorm"
compression_interval = 4
target_compression_ratio = 0.75
query_positions = "own"
)");
  EXPECT_NE(canonical_json(ratio).dump(), canonical_json(other).dump());
}

TEST(DecodingManifest, ItChangesTheHashAndTheCellIdsOnlyWhenPresent) {
  const Manifest plain = load_text("plain.toml", kHead);
  const Manifest with = load_text("with.toml", std::string(kHead) + kTable);
  EXPECT_FALSE(plain.grids[0].decoding.has_value());
  EXPECT_FALSE(canonical_json(plain)["grids"][0].contains("decoding"));
  EXPECT_TRUE(canonical_json(with)["grids"][0].contains("decoding"));
  EXPECT_NE(canonical_json(plain).dump(), canonical_json(with).dump());

  const Expansion a = expand(plain);
  const Expansion b = expand(with);
  ASSERT_EQ(a.cells.size(), b.cells.size());
  ASSERT_EQ(a.units.size(), b.units.size());
  for (std::size_t i = 0; i < a.units.size(); ++i) EXPECT_EQ(a.units[i].id, b.units[i].id);
  for (const Cell& c : a.cells) {
    EXPECT_EQ(c.decoding_grid, -1);
    EXPECT_FALSE(
        std::any_of(b.cells.begin(), b.cells.end(), [&](const Cell& d) { return d.id == c.id; }));
    EXPECT_EQ(cell_tuple(plain, a.units[c.unit], c).find("decoding"), std::string::npos);
  }
  for (const Cell& c : b.cells) {
    EXPECT_EQ(c.decoding_grid, 0);
    const std::string tuple = cell_tuple(with, b.units[c.unit], c);
    // The decoding method is inlined as content (its configuration), as the cell's own method is.
    EXPECT_NE(tuple.find(R"("decoding":{"compression_interval":4)"), std::string::npos) << tuple;
    EXPECT_EQ(c.id, digest_prefix_u64(sha256(tuple)));
  }
}

}  // namespace
}  // namespace kvaudit::manifest
