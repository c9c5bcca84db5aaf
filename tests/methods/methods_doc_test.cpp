// docs/METHODS.md stays true to the catalogue (methods/catalog.h): every method id has its row in
// the table, and every parameter of the method is named in that row (as `name`), with every
// variant. A planted doc without a row must fail the same check.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "methods/catalog.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

std::string read_doc() {
  const auto path = std::filesystem::path(KVAUDIT_SOURCE_DIR) / "docs/METHODS.md";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The table row of `id` ("| `id` | ..." up to the end of the line), or "" if none.
std::string row_of(const std::string& doc, const std::string& id) {
  const std::string start = "\n| `" + id + "` |";
  const auto at = doc.find(start);
  if (at == std::string::npos) return "";
  const auto end = doc.find('\n', at + 1);
  return doc.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
}

// What is missing from `doc` for the catalogue: one line per problem.
std::vector<std::string> problems(const std::string& doc) {
  std::vector<std::string> out;
  for (const MethodSpec& spec : method_catalog()) {
    const std::string row = row_of(doc, spec.id);
    if (row.empty()) {
      out.push_back("no row for method `" + spec.id + "`");
      continue;
    }
    for (const ParamSpec& param : spec.params) {
      if (row.find("`" + param.name + "`") == std::string::npos)
        out.push_back("row of `" + spec.id + "` does not name parameter `" + param.name + "`");
    }
    for (const std::string& variant : spec.variants) {
      if (spec.variants.size() > 1 && row.find("`" + variant + "`") == std::string::npos)
        out.push_back("row of `" + spec.id + "` does not name variant `" + variant + "`");
    }
  }
  return out;
}

TEST(MethodsDoc, EveryCatalogueMethodAndParameterIsDocumented) {
  const auto found = problems(read_doc());
  std::string all;
  for (const auto& p : found) all += "  " + p + "\n";
  EXPECT_TRUE(found.empty()) << "docs/METHODS.md is out of date with methods/catalog.cpp:\n" << all;
}

TEST(MethodsDoc, AMissingRowIsFound) {
  std::string doc = read_doc();
  const std::string row = row_of(doc, "snapkv");
  ASSERT_FALSE(row.empty());
  doc.erase(doc.find(row), row.size());
  const auto found = problems(doc);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front(), "no row for method `snapkv`");
}

TEST(MethodsDoc, AMissingParameterIsFound) {
  std::string doc = read_doc();
  const auto at = doc.find("`kernel_size` odd (5; original 7)");
  ASSERT_NE(at, std::string::npos);
  doc.replace(at, 13, "kernel size");
  const auto found = problems(doc);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found.front(), "row of `snapkv` does not name parameter `kernel_size`");
}

}  // namespace
}  // namespace kvaudit::methods
