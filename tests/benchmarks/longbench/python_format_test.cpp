// python_format: Python str.format semantics for "{name}" fields — the template is parsed, the
// values never are; "{{"/"}}" are literal braces; everything the templates never use is refused.
#include "suite/benchmarks/longbench/python_format.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace kvaudit::benchmarks {
namespace {

FormatFieldLookup fields() {
  return [](std::string_view name) -> std::optional<std::string_view> {
    if (name == "context") return std::string_view("a {input} b }{ {{c}}");
    if (name == "input") return std::string_view("Q?");
    if (name == "_id") return std::string_view("id-1");
    if (name == "empty") return std::string_view("");
    return std::nullopt;
  };
}

TEST(PythonFormat, SubstitutesFieldsAndLeavesBracesInValuesAlone) {
  // Python: "X {context} Y {input}".format(context="a {input} b }{ {{c}}", input="Q?")
  EXPECT_EQ(python_format("X {context} Y {input}", fields()), "X a {input} b }{ {{c}} Y Q?");
  EXPECT_EQ(python_format("{context}{context}", fields()),
            "a {input} b }{ {{c}}a {input} b }{ {{c}}");
  EXPECT_EQ(python_format("[{empty}]{_id}", fields()), "[]id-1");
  EXPECT_EQ(python_format("", fields()), "");
  EXPECT_EQ(python_format("no fields at all\n", fields()), "no fields at all\n");
}

TEST(PythonFormat, DoubledBracesAreLiteral) {
  // Python: "{{x}} {{{input}}} }}{{".format(input="Q?") == "{x} {Q?} }{"
  EXPECT_EQ(python_format("{{x}} {{{input}}} }}{{", fields()), "{x} {Q?} }{");
}

TEST(PythonFormat, UnsupportedOrBrokenTemplatesThrow) {
  for (const char* bad : {"{missing}", "{}", "{0}", "{input!r}", "{input:>5}", "{input.x}",
                          "{input[0]}", "a { b", "a } b", "{input", "}", "{ input}"}) {
    EXPECT_THROW(python_format(bad, fields()), std::invalid_argument) << bad;
  }
  try {
    python_format("Story: {story}", fields());
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no field named 'story'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::benchmarks
