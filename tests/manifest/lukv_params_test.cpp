// lukv's and block's parameters through the manifest layer (methods/lukv.h, methods/block.h;
// ranges from methods/catalog.cpp): a budget curve of the wrong shape is reported by the plan's
// path check at the value's file:line:column with the .npy reader's message. (Out-of-range
// integers: tests/manifest/malformed/lukv_negative_sink.toml, lukv_block_zero_block_size.toml.)
#include <gtest/gtest.h>

#include <string>

#include "suite/manifest/diagnostics.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/path_check.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

namespace fs = std::filesystem;

// A version 1.0 .npy file of float32 zeros with `shape_text` (a Python tuple) and `count` values.
std::string npy_zeros(const std::string& shape_text, std::size_t count) {
  const std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out += std::string(count * 4, '\0');
  return out;
}

const std::string kLukvLines =
    "method = \"lukv\"\nscorer = \"knorm\"\ncurve = \"c.npy\"\n\n[methods.knorm]\n"
    "method = \"knorm\"";

TEST(LukvParameters, ACurveOfTheWrongShapeIsReportedAtTheValue) {
  // Line 22 = `curve = "c.npy"`, column 9 = the value.
  const fs::path dir = test::one_method_study("lukv_flat_curve", "a", kLukvLines);
  test::write_file(dir / "c.npy", npy_zeros("(3, 2)", 6));
  const auto lines = check_paths(load_manifest(dir / "study.toml"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], (dir / "study.toml").string() + ":22:9: methods.a.curve: " +
                          fs::absolute(dir / "c.npy").lexically_normal().string() +
                          ": LU-KV budget curve has shape [3, 2] (want [99, layers, KV heads], "
                          "layers and KV heads >= 1)");
  // A curve of the right rank passes the file check (its layer/head counts are checked against
  // each model by the plan's model checks).
  const fs::path ok = test::one_method_study("lukv_good_curve", "a", kLukvLines);
  test::write_file(ok / "c.npy", npy_zeros("(99, 2, 2)", 99 * 4));
  EXPECT_TRUE(check_paths(load_manifest(ok / "study.toml")).empty());
}

}  // namespace
}  // namespace kvaudit::manifest
