// The record of one cell: what one (unit, method, ratio, protocol) evaluation produced.
//
// One CellRecord becomes one row of the `/records` compound dataset of a shard (docs/RECORDS.md has
// the field-by-field schema). The enums are stored as HDF5 enums on int8 whose member names and
// stored values are EnumTraits<...>::members, so h5py.check_enum_dtype returns the mapping. The
// attention backend and the protocol are the suite-wide enums (base/); their stored values are
// the file format's and never change (sdpa = 0, eager = 1; query-aware = 0, query-agnostic = 1).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "base/attention_backend.h"
#include "base/protocol.h"

namespace kvaudit::records {

enum class CellStatus : std::int8_t { ok = 0, oom = 1, error = 2, excluded = 3, abandoned = 4 };
enum class Split : std::int8_t { none = 0, calibration = 1, test = 2 };
enum class BudgetKind : std::int8_t { none = 0, compression = 1, retention = 2, threshold = 3 };
// Where the cell ran (schema version 5 on); unknown: a record of an older shard, or a cell that
// failed before a device was chosen. (Not base/device.h's Device, which has no "unknown".)
enum class ComputeDevice : std::int8_t { unknown = 0, cpu = 1, cuda = 2 };

template <typename E>
struct EnumMember {
  std::string_view name;  // the HDF5 enum member name
  E value;
  std::int8_t stored;              // the HDF5 enum member value
  std::int64_t since_version = 1;  // the first schema version whose enum type has the member
};

// For each record enum: the HDF5 type's name (used in messages) and its members in value order.
template <typename E>
struct EnumTraits;

template <>
struct EnumTraits<CellStatus> {
  static constexpr std::string_view type_name = "CellStatus";
  static constexpr std::array<EnumMember<CellStatus>, 5> members{
      {{"ok", CellStatus::ok, 0},
       {"oom", CellStatus::oom, 1},
       {"error", CellStatus::error, 2},
       {"excluded", CellStatus::excluded, 3},
       {"abandoned", CellStatus::abandoned, 4}}};
};
template <>
struct EnumTraits<AttentionBackend> {
  static constexpr std::string_view type_name = "AttentionBackend";
  static constexpr std::array<EnumMember<AttentionBackend>, 2> members{
      {{"sdpa", AttentionBackend::sdpa, 0}, {"eager", AttentionBackend::eager, 1}}};
};
template <>
struct EnumTraits<Protocol> {
  static constexpr std::string_view type_name = "Protocol";
  static constexpr std::array<EnumMember<Protocol>, 3> members{
      {{"query-aware", Protocol::query_aware, 0},
       {"query-agnostic", Protocol::query_agnostic, 1},
       {"reuse", Protocol::reuse, 2, 6}}};
};
template <>
struct EnumTraits<Split> {
  static constexpr std::string_view type_name = "Split";
  static constexpr std::array<EnumMember<Split>, 3> members{
      {{"none", Split::none, 0}, {"calibration", Split::calibration, 1}, {"test", Split::test, 2}}};
};
template <>
struct EnumTraits<BudgetKind> {
  static constexpr std::string_view type_name = "BudgetKind";
  static constexpr std::array<EnumMember<BudgetKind>, 4> members{
      {{"none", BudgetKind::none, 0},
       {"compression", BudgetKind::compression, 1},
       {"retention", BudgetKind::retention, 2},
       {"threshold", BudgetKind::threshold, 3}}};
};
template <>
struct EnumTraits<ComputeDevice> {
  static constexpr std::string_view type_name = "ComputeDevice";
  static constexpr std::array<EnumMember<ComputeDevice>, 3> members{
      {{"unknown", ComputeDevice::unknown, 0},
       {"cpu", ComputeDevice::cpu, 1},
       {"cuda", ComputeDevice::cuda, 2}}};
};

// The member name of `value`, or "" if `value` is not a member (e.g. a bad static_cast).
template <typename E>
constexpr std::string_view enum_name(E value) {
  for (const auto& member : EnumTraits<E>::members) {
    if (member.value == value) return member.name;
  }
  return {};
}

// The member called `name`, if any.
template <typename E>
constexpr std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& member : EnumTraits<E>::members) {
    if (member.name == name) return member.value;
  }
  return std::nullopt;
}

template <typename E>
constexpr bool is_enum_member(E value) {
  return !enum_name(value).empty();
}

// The HDF5 value `value` is stored as (−1 if it is not a member).
template <typename E>
constexpr std::int8_t enum_stored_value(E value) {
  for (const auto& member : EnumTraits<E>::members) {
    if (member.value == value) return member.stored;
  }
  return -1;
}

// The member stored as `stored`, if any.
template <typename E>
constexpr std::optional<E> enum_from_stored(std::int8_t stored) {
  for (const auto& member : EnumTraits<E>::members) {
    if (member.stored == stored) return member.value;
  }
  return std::nullopt;
}

inline constexpr double kNotApplicable = std::numeric_limits<double>::quiet_NaN();

// CellRecord::shared_costs bits (schema version 5 on): the cost fields that are the cell's
// apportioned share of a step several cells shared, not a step of its own (docs/RECORDS.md
// §Costs has the apportioning rules).
enum SharedCost : std::uint32_t {
  kSharedPrefill = 1u << 0,    // cell_prefill_ms: the unit's one prefill, equal shares
  kSharedCapture = 1u << 1,    // cell_capture_ms: the capture's views of a boundary, equal shares
  kSharedExtraPass = 1u << 2,  // cell_extra_pass_ms: one (boundary, pass key) pass, equal shares
  kSharedFeed = 1u << 3,       // cell_feed_ms: a batched feed, shares ∝ tokens fed
  kSharedDecode = 1u << 4,     // cell_decode_ms: batched decode steps, equal shares per step
  // Schema version 6 on (the reuse protocol: one selection and one eviction serve the k records
  // of a cell, one per question):
  kSharedSelect = 1u << 5,  // cell_select_ms: the cell's selection, equal shares per question
  kSharedEvict = 1u << 6,   // cell_evict_ms: the cell's eviction, equal shares per question
};

// One cell's record. Doubles that do not apply (the ratio fields of another budget kind, the score
// of a failed cell, timings never measured) are NaN. Strings are UTF-8.
struct CellRecord {
  std::uint64_t cell_id = 0;  // stable content-derived id from the manifest
  std::uint64_t unit_id = 0;  // the unit (model, backend, benchmark, task, instance) it belongs to
  std::int32_t attempt = 0;   // which attempt of the study wrote it (1 = first run)
  std::int32_t rank = 0;      // MPI rank that wrote it
  CellStatus status = CellStatus::ok;
  std::string model;          // model name as the manifest gives it
  std::string benchmark;      // e.g. "ruler", "longbench"
  std::string task;           // e.g. "niah_single_1"
  std::string method;         // the manifest's method config name
  std::string method_id;      // the method implementation, e.g. "snapkv"
  std::string params_digest;  // 16 hex digits identifying the method parameters
  AttentionBackend attention_backend = AttentionBackend::sdpa;
  Protocol protocol = Protocol::query_aware;
  Split split = Split::none;
  BudgetKind budget_kind = BudgetKind::none;
  double compression = kNotApplicable;  // fraction removed (kvpress cr)
  double retention = kNotApplicable;    // fraction kept
  double threshold = kNotApplicable;    // threshold of threshold-based methods
  std::uint32_t instance = 0;           // instance index within the task
  std::uint32_t nominal_length = 0;     // nominal context length (e.g. RULER 8192)
  std::uint32_t n_prompt_tokens = 0;    // whole prompt as the evaluated tokenizer sees it
  std::uint32_t n_context_tokens = 0;
  std::uint32_t n_question_tokens = 0;
  std::uint32_t n_generated_tokens = 0;
  std::uint64_t kept_tokens = 0;               // KV entries kept, summed over layers and heads
  std::uint64_t kept_bytes = 0;                // bytes of the compacted KV cache
  std::uint64_t full_bytes = 0;                // bytes the uncompressed KV cache would take
  double realised_retention = kNotApplicable;  // kept_bytes / full_bytes as actually achieved
  double score = kNotApplicable;               // the benchmark metric, NaN if not scored
  std::int64_t t_start_ns = 0;                 // Unix epoch ns (system clock)
  std::int64_t t_end_ns = 0;
  double prefill_ms = kNotApplicable;
  double decode_ms = kNotApplicable;
  std::string error;   // "" when status is ok
  std::string output;  // the generated answer
  // Schema version 4 on (content_digests.h); 0 = not computed (a cell that never reached that
  // point, or a record read from an older shard).
  std::uint64_t prompt_digest = 0;  // the prompt's token ids (context | question | suffix)
  std::uint64_t kept_digest = 0;    // the kept positions per (layer, KV head) after eviction
  // Schema version 5 on: what the cell cost (docs/RECORDS.md §Costs). Milliseconds of wall time,
  // the cell's own or its share of a shared step (shared_costs); NaN = not measured (a step the
  // cell never reached or does not have, or a record read from an older shard). prefill_ms and
  // decode_ms above keep their meaning (the unit's whole shared prefill; its feed + decode).
  double cell_prefill_ms = kNotApplicable;     // prefill of the prompt (capture hooks included)
  double cell_capture_ms = kNotApplicable;     // building the capture's views at the boundary
  double cell_extra_pass_ms = kNotApplicable;  // the method's extra forward pass (KVzip)
  double cell_select_ms = kNotApplicable;      // the method's selection
  double cell_evict_ms = kNotApplicable;       // fork + truncate + retain (+ cache edits)
  double cell_feed_ms = kNotApplicable;        // prefill of the rest on the compressed cache
  double cell_decode_ms = kNotApplicable;      // greedy decoding
  std::uint64_t peak_kv_bytes = 0;  // the cell's cache at its largest (after decoding); 0 unknown
  std::uint32_t shared_costs = 0;   // SharedCost bits
  ComputeDevice device = ComputeDevice::unknown;
  std::int32_t threads = 0;  // host threads the run used (OpenMP); 0 = unknown
  // Schema version 6 on. The reuse protocol writes one record per (cell, question): the record key
  // is (cell_id, question). Other protocols, and records of older shards: question 0 of 1.
  std::uint32_t question = 0;     // the question's index within its context
  std::uint32_t n_questions = 1;  // the context's questions (the cell's records)
  // Decode-time compression (docs/design/decoding.md); without it final_kv_bytes = peak_kv_bytes
  // and decode_compressions 0. Older shards: final_kv_bytes 0 (unknown).
  std::uint64_t final_kv_bytes = 0;       // the cell's cache after its last decode step
  std::uint32_t decode_compressions = 0;  // compression steps run while decoding
};

}  // namespace kvaudit::records
