// finch's parameters through the manifest layer (methods/finch.h; ranges from methods/catalog.cpp):
// a bad value is refused at plan time at its file:line:column.
#include <gtest/gtest.h>

#include "suite/manifest/diagnostics.h"
#include "suite/manifest/manifest_parser.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

namespace fs = std::filesystem;

// The first diagnostic line of loading a one-method study whose config `f` has `lines` (line 20+).
std::string first_error(const std::string& name, const std::string& lines) {
  const fs::path dir = test::one_method_study(name, "f", lines);
  try {
    load_manifest(dir / "study.toml");
  } catch (const ManifestError& e) {
    return e.lines().empty() ? "no lines" : e.lines()[0];
  }
  return "";
}

TEST(FinchParameters, OutOfRangeValuesAreReportedAtTheValue) {
  // window = 0 (line 21, the value at column 10): the fallback window must be >= 1.
  const std::string window = first_error("finch_window", "method = \"finch\"\nwindow = 0");
  EXPECT_NE(window.find("study.toml:21:10: methods.f.window"), std::string::npos) << window;
  // chunk_length = -8 (line 21, column 16): 0 (no chunks) or a positive length.
  const std::string chunk = first_error("finch_chunk", "method = \"finch\"\nchunk_length = -8");
  EXPECT_NE(chunk.find("study.toml:21:16: methods.f.chunk_length"), std::string::npos) << chunk;
  // A valid configuration loads.
  EXPECT_EQ(first_error("finch_ok",
                        "method = \"finch\"\nwindow = 16\nchunk_length = 96\n"
                        "rerotate_keys = false"),
            "");
}

}  // namespace
}  // namespace kvaudit::manifest
