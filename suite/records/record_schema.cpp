// HDF5 compound types for CellRecord, the CellRecord <-> RecordPod conversion and the schema check.
#include "suite/records/record_schema.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.h"
#include "suite/records/hdf5_attributes.h"
#include "suite/records/record_digest.h"

namespace kvaudit::records {
namespace {

const std::string kWhat = "kvaudit record schema";

#define KV_FIELD(member, type) \
  FieldSpec { #member, FieldType::type, offsetof(RecordPod, member), nullptr, 1 }
#define KV_FIELD_SINCE(member, type, version) \
  FieldSpec { #member, FieldType::type, offsetof(RecordPod, member), nullptr, version }

constexpr std::array kFields{
    KV_FIELD(cell_id, u64),
    KV_FIELD(unit_id, u64),
    KV_FIELD(attempt, i32),
    KV_FIELD(rank, i32),
    KV_FIELD(status, cell_status),
    KV_FIELD(model, text),
    KV_FIELD(benchmark, text),
    KV_FIELD(task, text),
    KV_FIELD(method, text),
    KV_FIELD(method_id, text),
    KV_FIELD(params_digest, text),
    FieldSpec{"attention_backend", FieldType::attention_backend,
              offsetof(RecordPod, attention_backend), "backend"},
    KV_FIELD(protocol, protocol),
    KV_FIELD(split, split),
    KV_FIELD(budget_kind, budget_kind),
    KV_FIELD(compression, f64),
    KV_FIELD(retention, f64),
    KV_FIELD(threshold, f64),
    KV_FIELD(instance, u32),
    KV_FIELD(nominal_length, u32),
    KV_FIELD(n_prompt_tokens, u32),
    KV_FIELD(n_context_tokens, u32),
    KV_FIELD(n_question_tokens, u32),
    KV_FIELD(n_generated_tokens, u32),
    KV_FIELD(kept_tokens, u64),
    KV_FIELD(kept_bytes, u64),
    KV_FIELD(full_bytes, u64),
    KV_FIELD(realised_retention, f64),
    KV_FIELD(score, f64),
    KV_FIELD(t_start_ns, i64),
    KV_FIELD(t_end_ns, i64),
    KV_FIELD(prefill_ms, f64),
    KV_FIELD(decode_ms, f64),
    KV_FIELD(error, text),
    KV_FIELD(output, text),
    FieldSpec{"prompt_digest", FieldType::u64, offsetof(RecordPod, prompt_digest), nullptr, 4},
    FieldSpec{"kept_digest", FieldType::u64, offsetof(RecordPod, kept_digest), nullptr, 4},
    KV_FIELD_SINCE(cell_prefill_ms, f64, 5),
    KV_FIELD_SINCE(cell_capture_ms, f64, 5),
    KV_FIELD_SINCE(cell_extra_pass_ms, f64, 5),
    KV_FIELD_SINCE(cell_select_ms, f64, 5),
    KV_FIELD_SINCE(cell_evict_ms, f64, 5),
    KV_FIELD_SINCE(cell_feed_ms, f64, 5),
    KV_FIELD_SINCE(cell_decode_ms, f64, 5),
    KV_FIELD_SINCE(peak_kv_bytes, u64, 5),
    KV_FIELD_SINCE(shared_costs, u32, 5),
    KV_FIELD_SINCE(device, compute_device, 5),
    KV_FIELD_SINCE(threads, i32, 5),
    KV_FIELD_SINCE(question, u32, 6),
    KV_FIELD_SINCE(n_questions, u32, 6),
    KV_FIELD_SINCE(final_kv_bytes, u64, 6),
    KV_FIELD_SINCE(decode_compressions, u32, 6),
    FieldSpec{"record_digest", FieldType::u64, offsetof(RecordPod, record_digest), nullptr, 3},
};

#undef KV_FIELD
#undef KV_FIELD_SINCE

// E's members that files of schema `version` have.
template <typename E>
std::vector<EnumMember<E>> enum_members(std::int64_t version) {
  std::vector<EnumMember<E>> members;
  for (const auto& member : EnumTraits<E>::members) {
    if (version >= member.since_version) members.push_back(member);
  }
  return members;
}

// Whether files of schema `version` have the member `value`.
template <typename E>
bool is_member_in_version(E value, std::int64_t version) {
  for (const auto& member : EnumTraits<E>::members) {
    if (member.value == value) return version >= member.since_version;
  }
  return false;
}

template <typename E>
h5::Datatype make_enum_type(hid_t base, std::int64_t version) {
  auto type = h5::adopt<h5::Kind::datatype>(H5Tenum_create(base), h5::Blame::internal, kWhat,
                                            "H5Tenum_create");
  for (const auto& member : enum_members<E>(version)) {
    const std::int8_t value = member.stored;
    const std::string name(member.name);
    h5::check(H5Tenum_insert(type.get(), name.c_str(), &value), h5::Blame::internal, kWhat,
              "H5Tenum_insert " + name);
  }
  return type;
}

// The type of one member: file types are explicitly little-endian, memory types native.
h5::Datatype make_member_type(FieldType type, bool file, std::int64_t version) {
  auto copy = [](hid_t predefined) {
    return h5::adopt<h5::Kind::datatype>(H5Tcopy(predefined), h5::Blame::internal, kWhat,
                                         "H5Tcopy");
  };
  const hid_t int8_base = file ? H5T_STD_I8LE : H5T_NATIVE_INT8;
  switch (type) {
    case FieldType::u32:
      return copy(file ? H5T_STD_U32LE : H5T_NATIVE_UINT32);
    case FieldType::u64:
      return copy(file ? H5T_STD_U64LE : H5T_NATIVE_UINT64);
    case FieldType::i32:
      return copy(file ? H5T_STD_I32LE : H5T_NATIVE_INT32);
    case FieldType::i64:
      return copy(file ? H5T_STD_I64LE : H5T_NATIVE_INT64);
    case FieldType::f64:
      return copy(file ? H5T_IEEE_F64LE : H5T_NATIVE_DOUBLE);
    case FieldType::text:
      return h5::make_vlen_utf8_type();
    case FieldType::cell_status:
      return make_enum_type<CellStatus>(int8_base, version);
    case FieldType::attention_backend:
      return make_enum_type<AttentionBackend>(int8_base, version);
    case FieldType::protocol:
      return make_enum_type<Protocol>(int8_base, version);
    case FieldType::split:
      return make_enum_type<Split>(int8_base, version);
    case FieldType::budget_kind:
      return make_enum_type<BudgetKind>(int8_base, version);
    case FieldType::compute_device:
      return make_enum_type<ComputeDevice>(int8_base, version);
  }
  throw InternalError("unknown record field type");
}

h5::Datatype make_compound(bool file, std::int64_t version) {
  auto compound = h5::adopt<h5::Kind::datatype>(H5Tcreate(H5T_COMPOUND, sizeof(RecordPod)),
                                                h5::Blame::internal, kWhat, "H5Tcreate");
  for (const FieldSpec& field : kFields) {
    if (!field_present(field, version)) continue;
    const h5::Datatype member = make_member_type(field.type, file, version);
    const char* name = field_name(field, version);
    h5::check(H5Tinsert(compound.get(), name, field.offset, member.get()), h5::Blame::internal,
              kWhat, std::string("H5Tinsert ") + name);
  }
  if (file) h5::check(H5Tpack(compound.get()), h5::Blame::internal, kWhat, "H5Tpack");
  return compound;
}

std::string class_phrase(H5T_class_t cls) {
  switch (cls) {
    case H5T_INTEGER:
      return "an integer";
    case H5T_FLOAT:
      return "a float";
    case H5T_STRING:
      return "a string";
    case H5T_ENUM:
      return "an enum";
    case H5T_COMPOUND:
      return "a compound";
    case H5T_ARRAY:
      return "an array";
    case H5T_VLEN:
      return "a variable-length sequence";
    default:
      return "of HDF5 class " + std::to_string(static_cast<int>(cls));
  }
}

std::string expected_phrase(FieldType type) {
  switch (type) {
    case FieldType::u32:
      return "an unsigned 32-bit integer";
    case FieldType::u64:
      return "an unsigned 64-bit integer";
    case FieldType::i32:
      return "a signed 32-bit integer";
    case FieldType::i64:
      return "a signed 64-bit integer";
    case FieldType::f64:
      return "a 64-bit float";
    case FieldType::text:
      return "a variable-length string";
    case FieldType::cell_status:
      return "the CellStatus enum";
    case FieldType::attention_backend:
      return "the AttentionBackend enum";
    case FieldType::protocol:
      return "the Protocol enum";
    case FieldType::split:
      return "the Split enum";
    case FieldType::budget_kind:
      return "the BudgetKind enum";
    case FieldType::compute_device:
      return "the ComputeDevice enum";
  }
  return "?";
}

// "" if the enum type `member` has exactly E's names and values of schema `version` on a one-byte
// base.
template <typename E>
std::string enum_mismatch(hid_t member, std::int64_t version) {
  if (H5Tget_size(member) != 1) return "is not stored on one byte";
  const int n = H5Tget_nmembers(member);
  const std::size_t expected_count = enum_members<E>(version).size();
  if (n != static_cast<int>(expected_count)) {
    return "has " + std::to_string(n) + " members, expected " + std::to_string(expected_count);
  }
  for (unsigned i = 0; i < static_cast<unsigned>(n); ++i) {
    char* raw_name = H5Tget_member_name(member, i);
    if (raw_name == nullptr) return "has an unreadable member name";
    const std::string name(raw_name);
    H5free_memory(raw_name);
    std::int8_t value = 0;
    if (H5Tget_member_value(member, i, &value) < 0) return "has an unreadable member value";
    const auto expected = enum_from_name<E>(name);
    if (!expected || !is_member_in_version(*expected, version)) {
      return "has an unknown member '" + name + "'";
    }
    if (enum_stored_value(*expected) != value) {
      return "maps '" + name + "' to " + std::to_string(value) + ", expected " +
             std::to_string(static_cast<int>(enum_stored_value(*expected)));
    }
  }
  return {};
}

// "" if `member` (a member type of the compound) fits `type`.
std::string member_mismatch(hid_t member, FieldType type, std::int64_t version) {
  const H5T_class_t cls = H5Tget_class(member);
  const std::size_t size = H5Tget_size(member);
  const auto integer = [&](std::size_t bytes, H5T_sign_t sign) -> std::string {
    if (cls != H5T_INTEGER || size != bytes || H5Tget_sign(member) != sign) {
      return "is " + (cls == H5T_INTEGER ? "a " + std::to_string(size * 8) + "-bit " +
                                               (H5Tget_sign(member) == H5T_SGN_NONE
                                                    ? std::string("unsigned integer")
                                                    : std::string("signed integer"))
                                         : class_phrase(cls));
    }
    return {};
  };
  const auto enumeration = [&]<typename E>(E) -> std::string {
    if (cls != H5T_ENUM) return "is " + class_phrase(cls);
    const std::string problem = enum_mismatch<E>(member, version);
    return problem.empty() ? problem : std::string(EnumTraits<E>::type_name) + " " + problem;
  };
  switch (type) {
    case FieldType::u32:
      return integer(4, H5T_SGN_NONE);
    case FieldType::u64:
      return integer(8, H5T_SGN_NONE);
    case FieldType::i32:
      return integer(4, H5T_SGN_2);
    case FieldType::i64:
      return integer(8, H5T_SGN_2);
    case FieldType::f64:
      if (cls != H5T_FLOAT) return "is " + class_phrase(cls);
      if (size != 8) return "is a " + std::to_string(size * 8) + "-bit float";
      return {};
    case FieldType::text:
      if (cls != H5T_STRING) return "is " + class_phrase(cls);
      if (H5Tis_variable_str(member) <= 0) return "is a fixed-length string";
      return {};
    case FieldType::cell_status:
      return enumeration(CellStatus{});
    case FieldType::attention_backend:
      return enumeration(AttentionBackend{});
    case FieldType::protocol:
      return enumeration(Protocol{});
    case FieldType::split:
      return enumeration(Split{});
    case FieldType::budget_kind:
      return enumeration(BudgetKind{});
    case FieldType::compute_device:
      return enumeration(ComputeDevice{});
  }
  return "has an unknown expected type";
}

std::string text_or_empty(const char* text) { return text != nullptr ? std::string(text) : ""; }

// The member stored as `stored`; a value that is no member (HDF5 converts enums by name, so only a
// hand-made memory buffer can hold one) keeps its raw value, which enum_name reports as "".
template <typename E>
E stored_or_cast(std::int8_t stored) {
  if (const auto value = enum_from_stored<E>(stored)) return *value;
  return static_cast<E>(static_cast<unsigned char>(stored));
}

}  // namespace

std::span<const FieldSpec> record_fields() { return kFields; }

bool field_present(const FieldSpec& field, std::int64_t version) {
  return version >= field.since_version;
}

const char* field_name(const FieldSpec& field, std::int64_t version) {
  return version < 2 && field.v1_name != nullptr ? field.v1_name : field.name;
}

h5::Datatype make_record_file_type() { return make_compound(true, kSchemaVersion); }
h5::Datatype make_record_memory_type(std::int64_t version) { return make_compound(false, version); }

RecordPod to_pod(const CellRecord& r) {
  return RecordPod{
      .cell_id = r.cell_id,
      .unit_id = r.unit_id,
      .attempt = r.attempt,
      .rank = r.rank,
      .status = enum_stored_value(r.status),
      .model = r.model.c_str(),
      .benchmark = r.benchmark.c_str(),
      .task = r.task.c_str(),
      .method = r.method.c_str(),
      .method_id = r.method_id.c_str(),
      .params_digest = r.params_digest.c_str(),
      .attention_backend = enum_stored_value(r.attention_backend),
      .protocol = enum_stored_value(r.protocol),
      .split = enum_stored_value(r.split),
      .budget_kind = enum_stored_value(r.budget_kind),
      .compression = r.compression,
      .retention = r.retention,
      .threshold = r.threshold,
      .instance = r.instance,
      .nominal_length = r.nominal_length,
      .n_prompt_tokens = r.n_prompt_tokens,
      .n_context_tokens = r.n_context_tokens,
      .n_question_tokens = r.n_question_tokens,
      .n_generated_tokens = r.n_generated_tokens,
      .kept_tokens = r.kept_tokens,
      .kept_bytes = r.kept_bytes,
      .full_bytes = r.full_bytes,
      .realised_retention = r.realised_retention,
      .score = r.score,
      .t_start_ns = r.t_start_ns,
      .t_end_ns = r.t_end_ns,
      .prefill_ms = r.prefill_ms,
      .decode_ms = r.decode_ms,
      .error = r.error.c_str(),
      .output = r.output.c_str(),
      .prompt_digest = r.prompt_digest,
      .kept_digest = r.kept_digest,
      .cell_prefill_ms = r.cell_prefill_ms,
      .cell_capture_ms = r.cell_capture_ms,
      .cell_extra_pass_ms = r.cell_extra_pass_ms,
      .cell_select_ms = r.cell_select_ms,
      .cell_evict_ms = r.cell_evict_ms,
      .cell_feed_ms = r.cell_feed_ms,
      .cell_decode_ms = r.cell_decode_ms,
      .peak_kv_bytes = r.peak_kv_bytes,
      .shared_costs = r.shared_costs,
      .device = enum_stored_value(r.device),
      .threads = r.threads,
      .question = r.question,
      .n_questions = r.n_questions,
      .final_kv_bytes = r.final_kv_bytes,
      .decode_compressions = r.decode_compressions,
      .record_digest = record_digest(r),
  };
}

CellRecord from_pod(const RecordPod& p) {
  CellRecord r;
  r.cell_id = p.cell_id;
  r.unit_id = p.unit_id;
  r.attempt = p.attempt;
  r.rank = p.rank;
  r.status = stored_or_cast<CellStatus>(p.status);
  r.model = text_or_empty(p.model);
  r.benchmark = text_or_empty(p.benchmark);
  r.task = text_or_empty(p.task);
  r.method = text_or_empty(p.method);
  r.method_id = text_or_empty(p.method_id);
  r.params_digest = text_or_empty(p.params_digest);
  r.attention_backend = stored_or_cast<AttentionBackend>(p.attention_backend);
  r.protocol = stored_or_cast<Protocol>(p.protocol);
  r.split = stored_or_cast<Split>(p.split);
  r.budget_kind = stored_or_cast<BudgetKind>(p.budget_kind);
  r.compression = p.compression;
  r.retention = p.retention;
  r.threshold = p.threshold;
  r.instance = p.instance;
  r.nominal_length = p.nominal_length;
  r.n_prompt_tokens = p.n_prompt_tokens;
  r.n_context_tokens = p.n_context_tokens;
  r.n_question_tokens = p.n_question_tokens;
  r.n_generated_tokens = p.n_generated_tokens;
  r.kept_tokens = p.kept_tokens;
  r.kept_bytes = p.kept_bytes;
  r.full_bytes = p.full_bytes;
  r.realised_retention = p.realised_retention;
  r.score = p.score;
  r.t_start_ns = p.t_start_ns;
  r.t_end_ns = p.t_end_ns;
  r.prefill_ms = p.prefill_ms;
  r.decode_ms = p.decode_ms;
  r.error = text_or_empty(p.error);
  r.output = text_or_empty(p.output);
  r.prompt_digest = p.prompt_digest;
  r.kept_digest = p.kept_digest;
  r.cell_prefill_ms = p.cell_prefill_ms;
  r.cell_capture_ms = p.cell_capture_ms;
  r.cell_extra_pass_ms = p.cell_extra_pass_ms;
  r.cell_select_ms = p.cell_select_ms;
  r.cell_evict_ms = p.cell_evict_ms;
  r.cell_feed_ms = p.cell_feed_ms;
  r.cell_decode_ms = p.cell_decode_ms;
  r.peak_kv_bytes = p.peak_kv_bytes;
  r.shared_costs = p.shared_costs;
  r.device = stored_or_cast<ComputeDevice>(p.device);
  r.threads = p.threads;
  r.question = p.question;
  r.n_questions = p.n_questions;
  r.final_kv_bytes = p.final_kv_bytes;
  r.decode_compressions = p.decode_compressions;
  return r;
}

RecordPod unread_record_pod() {
  RecordPod pod{};
  pod.cell_prefill_ms = kNotApplicable;
  pod.cell_capture_ms = kNotApplicable;
  pod.cell_extra_pass_ms = kNotApplicable;
  pod.cell_select_ms = kNotApplicable;
  pod.cell_evict_ms = kNotApplicable;
  pod.cell_feed_ms = kNotApplicable;
  pod.cell_decode_ms = kNotApplicable;
  pod.device = enum_stored_value(ComputeDevice::unknown);
  pod.n_questions = 1;
  return pod;
}

std::string describe_schema_mismatch(hid_t file_type, std::int64_t version) {
  const H5T_class_t cls = H5Tget_class(file_type);
  if (cls != H5T_COMPOUND) return "/records is " + class_phrase(cls) + ", expected a compound";
  for (const FieldSpec& field : kFields) {
    if (!field_present(field, version)) continue;
    const char* name = field_name(field, version);
    const int index = H5Tget_member_index(file_type, name);
    if (index < 0) {
      H5Eclear2(H5E_DEFAULT);
      return std::string("/records has no member '") + name + "'";
    }
    const h5::Datatype member(H5Tget_member_type(file_type, static_cast<unsigned>(index)));
    if (!member.valid()) return std::string("cannot read the type of member '") + name + "'";
    const std::string problem = member_mismatch(member.get(), field.type, version);
    if (!problem.empty()) {
      return std::string("/records member '") + name + "' " + problem + ", expected " +
             expected_phrase(field.type);
    }
  }
  return {};
}

}  // namespace kvaudit::records
