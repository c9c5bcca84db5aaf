// Protocol: where a cell's compression boundary lies (docs/design/protocols.md).
//   query_agnostic  the cache is compressed at the end of the context, before the question is
//                   seen; the question is fed on top of the compressed cache
//   query_aware     the cache is compressed after the question (kvpress query_aware=True)
//   reuse           query-agnostic compression done once per context; each of the context's
//                   questions is then fed on its own copy of the compressed cache
//                   (docs/design/reuse.md)
// One enum for the manifest, the unit runner, the records and the reports.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "base/enum_spelling.h"

namespace kvaudit {

// Values are in name order: they index per-protocol tables (manifest expansion, reduce).
enum class Protocol : unsigned char { query_agnostic = 0, query_aware = 1, reuse = 2 };

inline constexpr std::array<EnumSpelling<Protocol>, 3> kProtocolSpellings{
    {EnumSpelling<Protocol>{Protocol::query_agnostic, "query-agnostic"},
     EnumSpelling<Protocol>{Protocol::query_aware, "query-aware"},
     EnumSpelling<Protocol>{Protocol::reuse, "reuse"}}};

constexpr std::string_view protocol_name(Protocol value) {
  return spelling_of(kProtocolSpellings, value);
}
constexpr std::optional<Protocol> parse_protocol(std::string_view name) {
  return parse_spelling(kProtocolSpellings, name);
}

}  // namespace kvaudit
