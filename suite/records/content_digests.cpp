// Content digests of a record (see content_digests.h).
#include "suite/records/content_digests.h"

#include <stdexcept>

#include "suite/common/sha256.h"

namespace kvaudit::records {
namespace {

void put_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>(value & 0xffu));
    value >>= 8;
  }
}

}  // namespace

std::string prompt_digest_message(std::span<const std::int32_t> context,
                                  std::span<const std::int32_t> question,
                                  std::span<const std::int32_t> suffix) {
  std::string out;
  out.reserve(4 * (context.size() + question.size() + suffix.size()));
  for (const auto part : {context, question, suffix}) {
    for (const std::int32_t id : part) put_u32(out, static_cast<std::uint32_t>(id));
  }
  return out;
}

std::string kept_digest_message(const KeptPositions& kept) {
  std::size_t entries = 0;
  const std::size_t heads = kept.empty() ? 0 : kept.front().size();
  for (const auto& layer : kept) {
    if (layer.size() != heads) {
      throw std::invalid_argument("kept_digest: layers with different numbers of KV heads");
    }
    for (const auto& head : layer) entries += head.size() + 1;
  }
  std::string out;
  out.reserve(8 + 4 * entries);
  put_u32(out, static_cast<std::uint32_t>(kept.size()));
  put_u32(out, static_cast<std::uint32_t>(heads));
  for (const auto& layer : kept) {
    for (const auto& head : layer) {
      put_u32(out, static_cast<std::uint32_t>(head.size()));
      std::int64_t previous = -1;
      for (const std::int32_t position : head) {
        if (position <= previous) {
          throw std::invalid_argument(
              "kept_digest: positions must be non-negative and strictly ascending");
        }
        previous = position;
        put_u32(out, static_cast<std::uint32_t>(position));
      }
    }
  }
  return out;
}

std::uint64_t prompt_digest(std::span<const std::int32_t> context,
                            std::span<const std::int32_t> question,
                            std::span<const std::int32_t> suffix) {
  return digest_prefix_u64(sha256(prompt_digest_message(context, question, suffix)));
}

std::uint64_t kept_digest(const KeptPositions& kept) {
  return digest_prefix_u64(sha256(kept_digest_message(kept)));
}

std::uint64_t full_kept_digest(int layers, int heads, int boundary) {
  if (layers < 0 || heads < 0 || boundary < 0) {
    throw std::invalid_argument("full_kept_digest: negative layers, heads or boundary");
  }
  std::string out;
  const auto per_head = static_cast<std::size_t>(boundary) + 1;
  out.reserve(8 +
              4 * per_head * static_cast<std::size_t>(layers) * static_cast<std::size_t>(heads));
  put_u32(out, static_cast<std::uint32_t>(layers));
  put_u32(out, static_cast<std::uint32_t>(heads));
  for (int l = 0; l < layers; ++l) {
    for (int h = 0; h < heads; ++h) {
      put_u32(out, static_cast<std::uint32_t>(boundary));
      for (int p = 0; p < boundary; ++p) put_u32(out, static_cast<std::uint32_t>(p));
    }
  }
  return digest_prefix_u64(sha256(out));
}

}  // namespace kvaudit::records
