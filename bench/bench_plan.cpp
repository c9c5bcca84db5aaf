// How long planning takes: parsing + canonical hash of the seed manifests, and the expansion of the
// query-visibility audit (643,800 cells, one SHA-256 per unit and per cell).
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "suite/manifest/canonical.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"

namespace {

std::string read(const char* rel) {
  std::ifstream in(std::string(KVAUDIT_SOURCE_DIR) + "/" + rel);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void BM_ParseAndHashAuditManifest(benchmark::State& state) {
  const std::string text = read("manifests/query-visibility-audit.toml");
  for (auto _ : state) {
    auto m = kvaudit::manifest::parse_manifest(text, "query-visibility-audit.toml");
    benchmark::DoNotOptimize(kvaudit::manifest::manifest_sha256(m));
  }
}
BENCHMARK(BM_ParseAndHashAuditManifest)->Unit(benchmark::kMicrosecond);

void BM_ExpandAuditManifest(benchmark::State& state) {
  const auto m = kvaudit::manifest::parse_manifest(read("manifests/query-visibility-audit.toml"),
                                                   "query-visibility-audit.toml");
  std::size_t cells = 0;
  for (auto _ : state) {
    auto ex = kvaudit::manifest::expand(m);
    cells = ex.cells.size();
    benchmark::DoNotOptimize(ex.cells.data());
  }
  state.counters["cells"] = static_cast<double>(cells);
  state.counters["cells_per_s"] =
      benchmark::Counter(static_cast<double>(cells) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ExpandAuditManifest)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
