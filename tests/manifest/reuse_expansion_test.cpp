// Expansion of a grid with the reuse protocol (docs/MANIFEST.md §grids, `reuse`): reuse cells go
// into reuse units of their own, whose tuples carry "reuse": true; the other protocols' units and
// cells keep exactly the ids they have without reuse in the grid.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

Manifest load(const char* rel) { return load_manifest(test::source_path(rel)); }

TEST(ReuseExpansion, ReuseCellsLiveInReuseUnitsWithTheirOwnTuple) {
  const Manifest m = load("manifests/reuse-demo.toml");
  const Expansion ex = expand(m);
  ASSERT_EQ(ex.grids.size(), 1u);
  EXPECT_EQ(ex.grids[0].units, 8);
  EXPECT_EQ(ex.grids[0].reuse_units, 8);
  ASSERT_EQ(ex.units.size(), 16u);
  // (3 methods x 2 ratios + full-KV) per unit and protocol.
  EXPECT_EQ(ex.cells.size(), 16u * 7u);
  int reuse_units = 0;
  for (const Unit& u : ex.units) {
    const std::string tuple = unit_tuple(m, u);
    EXPECT_EQ(tuple.find(R"("reuse":true)") != std::string::npos, u.reuse) << tuple;
    EXPECT_EQ(u.n_cells, 7u);
    reuse_units += u.reuse ? 1 : 0;
  }
  EXPECT_EQ(reuse_units, 8);
  for (const Cell& c : ex.cells) {
    EXPECT_EQ(c.protocol == Protocol::reuse, ex.units[c.unit].reuse);
  }
}

TEST(ReuseExpansion, AddingReuseChangesNoIdOfTheOtherProtocols) {
  const Manifest with = load("manifests/reuse-demo.toml");
  // The same manifest without "reuse" in the grid's protocols.
  std::ifstream in(test::source_path("manifests/reuse-demo.toml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = R"(protocols = ["query-agnostic", "reuse"])";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), R"(protocols = ["query-agnostic"])");
  const auto path = std::filesystem::path(KVAUDIT_TEST_TMP) / "manifests" / "reuse-off.toml";
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
  const Manifest without = load_manifest(path);

  const Expansion a = expand(with);
  const Expansion b = expand(without);
  ASSERT_EQ(b.units.size(), 8u);
  for (const Unit& u : b.units) {
    EXPECT_TRUE(std::any_of(a.units.begin(), a.units.end(),
                            [&](const Unit& v) { return v.id == u.id && !v.reuse; }));
  }
  for (const Cell& c : b.cells) {
    EXPECT_TRUE(std::binary_search(a.cells.begin(), a.cells.end(), c,
                                   [](const Cell& x, const Cell& y) { return x.id < y.id; }));
  }
}

}  // namespace
}  // namespace kvaudit::manifest
