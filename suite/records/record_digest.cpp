// The record digest (see record_digest.h): SHA-256 over a fixed little-endian serialisation.
#include "suite/records/record_digest.h"

#include <bit>
#include <cstring>

#include "suite/common/sha256.h"

namespace kvaudit::records {
namespace {

class Serialiser {
 public:
  template <typename T>
  void integer(T value) {
    using U = std::make_unsigned_t<T>;
    auto bits = static_cast<U>(value);
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      out_.push_back(static_cast<char>(bits & 0xffu));
      if constexpr (sizeof(T) > 1) bits = static_cast<U>(bits >> 8);
    }
  }
  void real(double value) { integer(std::bit_cast<std::uint64_t>(value)); }
  template <typename E>
  void enumeration(E value) {
    integer(enum_stored_value(value));
  }
  void text(const std::string& value) {
    integer(static_cast<std::uint64_t>(value.size()));
    out_ += value;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string record_digest_message(const CellRecord& r, std::int64_t version) {
  Serialiser s;
  s.integer(r.cell_id);
  s.integer(r.unit_id);
  s.integer(r.attempt);
  s.integer(r.rank);
  s.enumeration(r.status);
  s.text(r.model);
  s.text(r.benchmark);
  s.text(r.task);
  s.text(r.method);
  s.text(r.method_id);
  s.text(r.params_digest);
  s.enumeration(r.attention_backend);
  s.enumeration(r.protocol);
  s.enumeration(r.split);
  s.enumeration(r.budget_kind);
  s.real(r.compression);
  s.real(r.retention);
  s.real(r.threshold);
  s.integer(r.instance);
  s.integer(r.nominal_length);
  s.integer(r.n_prompt_tokens);
  s.integer(r.n_context_tokens);
  s.integer(r.n_question_tokens);
  s.integer(r.n_generated_tokens);
  s.integer(r.kept_tokens);
  s.integer(r.kept_bytes);
  s.integer(r.full_bytes);
  s.real(r.realised_retention);
  s.real(r.score);
  s.integer(r.t_start_ns);
  s.integer(r.t_end_ns);
  s.real(r.prefill_ms);
  s.real(r.decode_ms);
  s.text(r.error);
  s.text(r.output);
  if (version >= 4) {
    s.integer(r.prompt_digest);
    s.integer(r.kept_digest);
  }
  if (version >= 5) {
    s.real(r.cell_prefill_ms);
    s.real(r.cell_capture_ms);
    s.real(r.cell_extra_pass_ms);
    s.real(r.cell_select_ms);
    s.real(r.cell_evict_ms);
    s.real(r.cell_feed_ms);
    s.real(r.cell_decode_ms);
    s.integer(r.peak_kv_bytes);
    s.integer(r.shared_costs);
    s.enumeration(r.device);
    s.integer(r.threads);
  }
  if (version >= 6) {
    s.integer(r.question);
    s.integer(r.n_questions);
    s.integer(r.final_kv_bytes);
    s.integer(r.decode_compressions);
  }
  return s.take();
}

std::uint64_t record_digest(const CellRecord& record, std::int64_t version) {
  return digest_prefix_u64(sha256(record_digest_message(record, version)));
}

}  // namespace kvaudit::records
