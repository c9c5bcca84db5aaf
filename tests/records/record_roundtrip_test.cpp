// Round trip of CellRecord through a published shard: every field, UTF-8 strings (multibyte,
// empty, 100 KB), NaN and extreme numbers, every enum value; the on-disk type (packed,
// little-endian, named enums); UTF-8 repair of strings that are not valid UTF-8.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/errors.h"
#include "suite/records/record_schema.h"
#include "suite/records/shard_reader.h"
#include "suite/records/shard_writer.h"
#include "suite/records/utf8_text.h"
#include "tests/records/record_formula.h"
#include "tests/records/test_support.h"

namespace kvaudit::records {
namespace {

using testing::expect_same_record;
using testing::formula_record;
using testing::TempDir;
using testing::test_writer_options;

std::vector<CellRecord> write_and_read_back(const TempDir& dir, const std::vector<CellRecord>& in,
                                            std::size_t flush_every = 64) {
  ShardWriter writer(test_writer_options(dir.path(), 0, 0, flush_every));
  for (const CellRecord& record : in) writer.append(record);
  const auto published = writer.close_and_publish();
  return read_shard(published).records;
}

TEST(RecordRoundTrip, EveryFieldOfThreeHundredFormulaRecordsSurvives) {
  TempDir dir;
  std::vector<CellRecord> in;
  for (std::uint64_t g = 0; g < 300; ++g) in.push_back(formula_record(g, 3, 2));
  const auto out = write_and_read_back(dir, in);
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    expect_same_record(out[i], in[i]);
    testing::expect_same_costs(out[i], in[i]);
    testing::expect_same_schema6_members(out[i], in[i]);
  }
}

TEST(RecordRoundTrip, MultibyteEmptyAndLongStringsSurvive) {
  TempDir dir;
  CellRecord multibyte = formula_record(1, 0, 1);
  for (std::string* text :
       {&multibyte.model, &multibyte.benchmark, &multibyte.task, &multibyte.method,
        &multibyte.method_id, &multibyte.params_digest, &multibyte.error, &multibyte.output}) {
    *text = "naïve — 東京 ✓";
  }
  CellRecord empty = formula_record(2, 0, 1);
  for (std::string* text : {&empty.model, &empty.benchmark, &empty.task, &empty.method,
                            &empty.method_id, &empty.params_digest, &empty.error, &empty.output}) {
    text->clear();
  }
  CellRecord long_strings = formula_record(3, 0, 1);
  long_strings.output = testing::long_output();
  std::string long_multibyte;
  while (long_multibyte.size() < 100 * 1024) long_multibyte += "東京 ✓ naïve — ";
  long_strings.error = long_multibyte;
  ASSERT_GT(long_strings.output.size(), 100000U);

  const auto out = write_and_read_back(dir, {multibyte, empty, long_strings}, 2);
  ASSERT_EQ(out.size(), 3U);
  expect_same_record(out[0], multibyte);
  EXPECT_EQ(out[0].output, "naïve — 東京 ✓");
  expect_same_record(out[1], empty);
  expect_same_record(out[2], long_strings);
  EXPECT_EQ(out[2].output.size(), long_strings.output.size());
}

TEST(RecordRoundTrip, NaNInfinityAndExtremeIntegersSurvive) {
  TempDir dir;
  CellRecord r = formula_record(0, 0, 1);
  r.cell_id = std::numeric_limits<std::uint64_t>::max();
  r.unit_id = 0;
  r.attempt = std::numeric_limits<std::int32_t>::min();
  r.rank = std::numeric_limits<std::int32_t>::max();
  r.compression = kNotApplicable;
  r.retention = kNotApplicable;
  r.threshold = kNotApplicable;
  r.score = std::numeric_limits<double>::infinity();
  r.realised_retention = -0.0;
  r.prefill_ms = std::numeric_limits<double>::denorm_min();
  r.decode_ms = -std::numeric_limits<double>::max();
  r.instance = std::numeric_limits<std::uint32_t>::max();
  r.kept_bytes = std::numeric_limits<std::uint64_t>::max();
  r.t_start_ns = std::numeric_limits<std::int64_t>::min();
  r.t_end_ns = std::numeric_limits<std::int64_t>::max();
  const auto out = write_and_read_back(dir, {r});
  ASSERT_EQ(out.size(), 1U);
  expect_same_record(out[0], r);
  EXPECT_TRUE(std::isnan(out[0].threshold));
  EXPECT_TRUE(std::signbit(out[0].realised_retention));
}

TEST(RecordRoundTrip, EveryEnumValueSurvives) {
  TempDir dir;
  std::vector<CellRecord> in;
  for (const auto& status : EnumTraits<CellStatus>::members) {
    for (const auto& backend : EnumTraits<AttentionBackend>::members) {
      for (const auto& protocol : EnumTraits<Protocol>::members) {
        for (const auto& split : EnumTraits<Split>::members) {
          for (const auto& budget : EnumTraits<BudgetKind>::members) {
            CellRecord r = formula_record(in.size(), 0, 1);
            r.status = status.value;
            r.attention_backend = backend.value;
            r.protocol = protocol.value;
            r.split = split.value;
            r.budget_kind = budget.value;
            in.push_back(r);
          }
        }
      }
    }
  }
  ASSERT_EQ(in.size(), 5U * 2 * 3 * 3 * 4);
  const auto out = write_and_read_back(dir, in, 7);
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) expect_same_record(out[i], in[i]);
}

TEST(RecordSchema, EnumMemberNamesAreTheDocumentedOnes) {
  EXPECT_EQ(enum_name(CellStatus::ok), "ok");
  EXPECT_EQ(enum_name(CellStatus::oom), "oom");
  EXPECT_EQ(enum_name(CellStatus::error), "error");
  EXPECT_EQ(enum_name(CellStatus::excluded), "excluded");
  EXPECT_EQ(enum_name(CellStatus::abandoned), "abandoned");
  EXPECT_EQ(enum_name(AttentionBackend::sdpa), "sdpa");
  EXPECT_EQ(enum_name(AttentionBackend::eager), "eager");
  // The stored values are the file format's, whatever the suite-wide enums' values.
  EXPECT_EQ(enum_stored_value(AttentionBackend::sdpa), 0);
  EXPECT_EQ(enum_stored_value(AttentionBackend::eager), 1);
  EXPECT_EQ(enum_stored_value(Protocol::query_aware), 0);
  EXPECT_EQ(enum_stored_value(Protocol::query_agnostic), 1);
  EXPECT_EQ(enum_from_stored<Protocol>(1), Protocol::query_agnostic);
  EXPECT_FALSE(enum_from_stored<AttentionBackend>(2).has_value());
  EXPECT_EQ(enum_name(Protocol::query_aware), "query-aware");
  EXPECT_EQ(enum_name(Protocol::query_agnostic), "query-agnostic");
  EXPECT_EQ(enum_name(Split::none), "none");
  EXPECT_EQ(enum_name(Split::calibration), "calibration");
  EXPECT_EQ(enum_name(Split::test), "test");
  EXPECT_EQ(enum_name(BudgetKind::none), "none");
  EXPECT_EQ(enum_name(BudgetKind::compression), "compression");
  EXPECT_EQ(enum_name(BudgetKind::retention), "retention");
  EXPECT_EQ(enum_name(BudgetKind::threshold), "threshold");
  EXPECT_EQ(enum_from_name<Protocol>("query-agnostic"), Protocol::query_agnostic);
  EXPECT_FALSE(enum_from_name<Protocol>("query_agnostic").has_value());
  EXPECT_EQ(enum_name(static_cast<CellStatus>(9)), "");
}

TEST(RecordSchema, FileTypeIsPackedLittleEndianWithTheSchemaMembers) {
  const h5::Datatype type = make_record_file_type();
  const auto fields = record_fields();
  ASSERT_EQ(H5Tget_nmembers(type.get()), static_cast<int>(fields.size()));
  std::size_t expected_offset = 0;
  for (unsigned i = 0; i < fields.size(); ++i) {
    char* name = H5Tget_member_name(type.get(), i);
    EXPECT_STREQ(name, fields[i].name);
    H5free_memory(name);
    EXPECT_EQ(H5Tget_member_offset(type.get(), i), expected_offset) << fields[i].name;
    const h5::Datatype member(H5Tget_member_type(type.get(), i));
    expected_offset += H5Tget_size(member.get());
    const H5T_class_t cls = H5Tget_class(member.get());
    if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
      EXPECT_EQ(H5Tget_order(member.get()), H5T_ORDER_LE) << fields[i].name;
    }
  }
  EXPECT_EQ(H5Tget_size(type.get()), expected_offset) << "the file type has padding";
  EXPECT_LT(H5Tget_size(type.get()), sizeof(RecordPod));
  EXPECT_EQ(describe_schema_mismatch(type.get()), "");
}

TEST(Utf8Text, ValidTextIsKeptAndInvalidBytesBecomeReplacementCharacters) {
  EXPECT_TRUE(is_valid_utf8_without_nul("naïve — 東京 ✓ 🙂"));
  EXPECT_TRUE(is_valid_utf8_without_nul(""));
  EXPECT_EQ(make_valid_utf8("naïve — 東京 ✓ 🙂"), "naïve — 東京 ✓ 🙂");
  const std::string truncated_tokyo = "abc\xE6\x9D";  // first two bytes of 東
  EXPECT_FALSE(is_valid_utf8_without_nul(truncated_tokyo));
  EXPECT_EQ(make_valid_utf8(truncated_tokyo), "abc\uFFFD\uFFFD");
  EXPECT_EQ(make_valid_utf8(std::string("a\0b", 3)), "a\uFFFDb");
  EXPECT_EQ(make_valid_utf8("\xC0\xAF"), "\uFFFD\uFFFD");                      // overlong '/'
  EXPECT_EQ(make_valid_utf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");            // surrogate D800
  EXPECT_EQ(make_valid_utf8("\xF4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");  // > U+10FFFF
}

TEST(RecordRoundTrip, InvalidUtf8IsStoredRepairedSoH5pyCanDecodeIt) {
  TempDir dir;
  CellRecord r = formula_record(5, 0, 1);
  r.output = "cut in the middle of \xE6\x9D";
  r.error = std::string("nul\0inside", 10);
  ShardWriter writer(test_writer_options(dir.path(), 0, 0, 4));
  writer.append(r);
  EXPECT_EQ(writer.n_repaired_strings(), 2U);
  const auto out = read_shard(writer.close_and_publish()).records;
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].output, "cut in the middle of \uFFFD\uFFFD");
  EXPECT_EQ(out[0].error, "nul\uFFFDinside");
}

TEST(ShardWriter, AppendRejectsEnumValuesOutsideTheSchema) {
  TempDir dir;
  ShardWriter writer(test_writer_options(dir.path(), 0, 0, 4));
  CellRecord r = formula_record(0, 0, 1);
  r.status = static_cast<CellStatus>(9);
  EXPECT_THROW(writer.append(r), InternalError);
  r = formula_record(0, 0, 1);
  r.budget_kind = static_cast<BudgetKind>(-1);
  EXPECT_THROW(writer.append(r), InternalError);
  EXPECT_EQ(writer.n_buffered(), 0U);
}

}  // namespace
}  // namespace kvaudit::records
