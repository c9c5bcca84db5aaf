// Expansion into units and cells: counts (the seed's 144,300 RULER records), ids that depend on
// content only, deduplication across grids, and the certification splits.
#include "suite/manifest/expansion.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "methods/catalog.h"
#include "suite/common/sha256.h"
#include "suite/manifest/manifest_parser.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

Manifest load(const char* rel) { return load_manifest(test::source_path(rel)); }

TEST(Expansion, QueryVisibilityAuditCountsMatchTheSeed) {
  const Manifest m = load("manifests/query-visibility-audit.toml");
  const Expansion ex = expand(m);
  ASSERT_EQ(ex.grids.size(), 2u);
  const GridCount& lb = ex.grids[0];
  const GridCount& ruler = ex.grids[1];
  ASSERT_EQ(ruler.grid, "ruler-audit");
  // 9 methods x 4 ratios x 2 protocols + full-KV under each protocol = 74 cells per unit.
  EXPECT_EQ(ruler.cells_per_unit, 74);
  EXPECT_EQ(ruler.instances, 13 * 50);
  EXPECT_EQ(ruler.units, 650 * 3 * 2);
  EXPECT_EQ(ruler.cells, 650 * 3 * 74 * 2);
  EXPECT_EQ(ruler.cells / 2, 144300);  // per backend: the seed's RULER record count
  EXPECT_EQ(lb.units, 16 * 50 * 3 * 2);
  EXPECT_EQ(lb.cells, 16 * 50 * 3 * 2 * 74);
  EXPECT_EQ(ex.units.size(), static_cast<std::size_t>(ruler.units + lb.units));
  EXPECT_EQ(ex.cells.size(), static_cast<std::size_t>(ruler.cells + lb.cells));
  EXPECT_EQ(ex.overlapping_cells, 0);
}

TEST(Expansion, EveryMethodManifestNamesEveryCatalogueMethod) {
  const Manifest m = load("manifests/every-method.toml");
  std::set<std::string> named;
  for (const MethodConfig& c : m.methods) named.insert(c.method);
  for (const auto& spec : methods::method_catalog()) {
    if (spec.id != "full") {
      EXPECT_TRUE(named.count(spec.id)) << spec.id << " is missing";
    }
  }
  const Expansion ex = expand(m);
  ASSERT_EQ(ex.units.size(), 1u);
  // 52 configurations (kvzip, duo_attention, composed and dms twice each) at one budget each +
  // full KV, x 2 protocols.
  EXPECT_EQ(ex.units.front().n_cells, (52u + 1u) * 2u);
}

TEST(Expansion, QuickstartCountsAndBlocks) {
  const Manifest m = load("manifests/quickstart.toml");
  const Expansion ex = expand(m);
  ASSERT_EQ(ex.grids.size(), 4u);
  const auto grid = [&](const std::string& name) -> const GridCount& {
    for (const GridCount& g : ex.grids) {
      if (g.grid == name) return g;
    }
    throw std::runtime_error("no grid " + name);
  };
  // methods: 4 tasks x 6 instances, (4 methods x 1 ratio + full) x 2 protocols under sdpa.
  EXPECT_EQ(grid("methods").units, 24);
  EXPECT_EQ(grid("methods").cells_per_unit, 10);
  // certify: the same units, kvzip at 2 ratios + full, query-agnostic only (its full-KV cell is
  // the methods grid's, counted once).
  EXPECT_EQ(grid("certify").units, 24);
  EXPECT_EQ(grid("certify").cells_per_unit, 3);
  // eager: the same instances under eager, one method at one ratio + full, query-aware only.
  EXPECT_EQ(grid("eager").units, 24);
  EXPECT_EQ(grid("eager").cells_per_unit, 2);
  // tokenizer-check: 2 tasks x 4 instances (the plan's tokenizer check excludes most of them).
  EXPECT_EQ(grid("tokenizer-check").units, 8);
  EXPECT_EQ(ex.units.size(), 24u + 24u + 8u);
  EXPECT_EQ(ex.cells.size(), 24u * (10u + 3u - 1u) + 24u * 2u + 8u * 2u);
  ASSERT_EQ(m.certifications.size(), 2u);
  for (const auto& block : m.certifications) {
    EXPECT_EQ(block.calibration, 4);
    EXPECT_EQ(block.test, 2);
    EXPECT_DOUBLE_EQ(block.epsilon, 0.25);
    EXPECT_DOUBLE_EQ(block.delta, 0.10);
  }
  EXPECT_EQ(m.models.front().dtype, "bf16");
}

TEST(Expansion, IdsAreUniqueSortedAndRecomputable) {
  const Manifest m = load("manifests/smollm2-ruler-f32.toml");
  const Expansion ex = expand(m);
  std::unordered_set<std::uint64_t> ids;
  for (std::size_t i = 0; i < ex.cells.size(); ++i) {
    EXPECT_TRUE(ids.insert(ex.cells[i].id).second);
    if (i) {
      EXPECT_LT(ex.cells[i - 1].id, ex.cells[i].id);
    }
    const Unit& u = ex.units[ex.cells[i].unit];
    EXPECT_EQ(ex.cells[i].id, digest_prefix_u64(sha256(cell_tuple(m, u, ex.cells[i]))));
  }
  for (const Unit& u : ex.units) EXPECT_EQ(u.id, digest_prefix_u64(sha256(unit_tuple(m, u))));
  // Every unit has (5 methods x 2 ratios + full) x 2 protocols cells.
  for (const Unit& u : ex.units) EXPECT_EQ(u.n_cells, 22u);
}

TEST(Expansion, CellTupleNamesContentNotPositions) {
  const Manifest m = load("manifests/smollm2-ruler-f32.toml");
  const Expansion ex = expand(m);
  const Cell& c = ex.cells.front();
  const std::string t = cell_tuple(m, ex.units[c.unit], c);
  EXPECT_NE(t.find("\"unit\":{\"backend\":"), std::string::npos) << t;
  EXPECT_NE(t.find("\"model\":{\"chat_template\":\"chatml\",\"dtype\":\"f32\",\"format\":\"gguf\","
                   "\"name\":\"smollm2-135m-instruct\"}"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("path"), std::string::npos) << "locations must not enter cell ids: " << t;
}

std::set<std::uint64_t> cell_ids(const std::string& text) {
  const Expansion ex = expand(parse_manifest(text, "x.toml"));
  std::set<std::uint64_t> s;
  for (const auto& c : ex.cells) s.insert(c.id);
  return s;
}

TEST(Expansion, IdsDoNotDependOnOrderOrConfigNames) {
  const std::string base = test::read_file(test::source_path("manifests/smollm2-ruler-f32.toml"));
  const auto ids = cell_ids(base);
  // Reordered sets.
  std::string reordered = test::replace_once(
      base, "methods = [\"random\", \"knorm\", \"streaming_llm\", \"snapkv\", \"keydiff\"]",
      "methods = [\"keydiff\", \"snapkv\", \"streaming_llm\", \"knorm\", \"random\"]");
  reordered = test::replace_once(reordered, "backends = [\"sdpa\", \"eager\"]",
                                 "backends = [\"eager\", \"sdpa\"]");
  EXPECT_EQ(ids, cell_ids(reordered));
  // A renamed method configuration is the same cells.
  std::string renamed =
      test::replace_once(base, "[methods.keydiff]", "[methods.kd]\nmethod = \"keydiff\"");
  renamed = test::replace_once(renamed, "\"snapkv\", \"keydiff\"]", "\"snapkv\", \"kd\"]");
  EXPECT_EQ(ids, cell_ids(renamed));
  // A moved model is the same cells.
  EXPECT_EQ(ids,
            cell_ids(test::replace_once(
                base, "path = \"../models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf\"",
                "path = \"/elsewhere/model.gguf\"")));
  // A changed parameter is different cells for that method only.
  const auto changed =
      cell_ids(test::replace_once(base, "[methods.snapkv]", "[methods.snapkv]\nwindow = 32"));
  EXPECT_NE(ids, changed);
  std::vector<std::uint64_t> common;
  std::set_intersection(ids.begin(), ids.end(), changed.begin(), changed.end(),
                        std::back_inserter(common));
  // 40 units x 2 protocols x 2 ratios of snapkv changed.
  EXPECT_EQ(common.size(), ids.size() - 40 * 2 * 2);
}

TEST(Expansion, OverlappingGridsProduceEachCellOnce) {
  std::string text = test::read_file(test::source_path("tests/manifest/valid_minimal.toml"));
  text +=
      "\n[[grids]]\nname = \"g2\"\nbenchmarks = [\"r\"]\nmethods = [\"knorm\"]\n"
      "compression = [0.5, 0.75]\nprotocols = [\"query-aware\"]\nbackends = [\"sdpa\"]\n";
  const Expansion ex = expand(parse_manifest(text, "x.toml"));
  // g: 8 units x (2 methods x 1 ratio + 1) x 2 protocols = 48; g2: 8 x (1 x 2 + 1) x 1 = 24, of
  // which knorm@0.5 and full under query-aware (16) are already in g.
  EXPECT_EQ(ex.units.size(), 8u);
  EXPECT_EQ(ex.overlapping_cells, 16);
  EXPECT_EQ(ex.cells.size(), 48u + 24u - 16u);
}

TEST(Expansion, RiskCertificationSplitsEachTaskIntoCalibrationAndTest) {
  const Manifest m = load("manifests/risk-certification.toml");
  const Expansion ex = expand(m);
  // fixed-budget: 2 models x (12 + 13 tasks) x 200 = 10,000 units x (4 x 13 + 1) cells;
  // request-adaptive: 2 x 12 x 200 = 4,800 units x (10 + 1) cells.
  EXPECT_EQ(ex.units.size(), 14800u);
  EXPECT_EQ(ex.cells.size(), 10000u * 53u + 4800u * 11u);
  std::map<std::pair<std::string, std::string>, std::array<int, 3>> per_task;
  for (const Unit& u : ex.units) {
    if (m.models[u.model].name != "mistral-7b-instruct-v0.3") continue;
    per_task[{m.benchmarks[u.benchmark].name, unit_task(m, u)}][static_cast<int>(u.split)] += 1;
  }
  ASSERT_EQ(per_task.size(), 12u + 13u + 12u);
  for (const auto& [key, counts] : per_task) {
    SCOPED_TRACE(key.first + "/" + key.second);
    EXPECT_EQ(counts[0], 0);    // none
    EXPECT_EQ(counts[1], 100);  // calibration
    EXPECT_EQ(counts[2], 100);  // test
  }
}

}  // namespace
}  // namespace kvaudit::manifest
