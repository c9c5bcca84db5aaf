// Bounds-checked protobuf wire walking for SentencePiece ModelProto, and the normalizer rewrite.
#include "runners/model/tokenizer/sentencepiece_model_proto.h"

#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct Field {
  std::uint32_t number = 0;
  std::uint32_t wire_type = 0;
  std::uint64_t varint = 0;  // kVarint
  std::string_view bytes;    // kLengthDelimited payload
  std::size_t begin = 0;     // offset of the key (relative to the message)
  std::size_t end = 0;       // offset just past the field
};

class WireReader {
 public:
  WireReader(std::string_view message, const std::string& source, std::string what,
             std::size_t base_offset)
      : message_(message), source_(source), what_(std::move(what)), base_(base_offset) {}

  bool done() const { return position_ >= message_.size(); }

  Field next() {
    Field field;
    field.begin = position_;
    const std::uint64_t key = varint();
    field.number = static_cast<std::uint32_t>(key >> 3);
    field.wire_type = static_cast<std::uint32_t>(key & 7);
    if (field.number == 0 || (key >> 3) > 0x1FFFFFFF) fail(field.begin, "invalid field number");
    switch (field.wire_type) {
      case kVarint:
        field.varint = varint();
        break;
      case kFixed64:
        skip(8, field.begin);
        break;
      case kFixed32:
        skip(4, field.begin);
        break;
      case kLengthDelimited: {
        const std::uint64_t length = varint();
        if (length > message_.size() - position_) {
          fail(field.begin, "field " + std::to_string(field.number) + " claims " +
                                std::to_string(length) + " bytes but only " +
                                std::to_string(message_.size() - position_) + " remain");
        }
        field.bytes = message_.substr(position_, static_cast<std::size_t>(length));
        position_ += static_cast<std::size_t>(length);
        break;
      }
      default:
        fail(field.begin, "unsupported wire type " + std::to_string(field.wire_type) +
                              " for field " + std::to_string(field.number));
    }
    field.end = position_;
    return field;
  }

  // Offset of `payload` (a view into this message) in the file.
  std::size_t absolute_of(std::string_view payload) const {
    return base_ + static_cast<std::size_t>(payload.data() - message_.data());
  }

 private:
  [[noreturn]] void fail(std::size_t offset, const std::string& what) const {
    throw ModelInputError(source_ + ": not a valid SentencePiece model: " + what_ + " at byte " +
                          std::to_string(base_ + offset) + ": " + what);
  }

  std::uint64_t varint() {
    const std::size_t start = position_;
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (position_ >= message_.size()) fail(start, "truncated varint");
      const auto byte = static_cast<std::uint8_t>(message_[position_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail(start, "varint longer than 10 bytes");
  }

  void skip(std::size_t count, std::size_t field_begin) {
    if (count > message_.size() - position_) fail(field_begin, "truncated fixed-width field");
    position_ += count;
  }

  std::string_view message_;
  const std::string& source_;
  std::string what_;
  std::size_t base_ = 0;
  std::size_t position_ = 0;
};

void append_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void append_key(std::string& out, std::uint32_t number, std::uint32_t wire_type) {
  append_varint(out, (static_cast<std::uint64_t>(number) << 3) | wire_type);
}

std::string identity_normalizer_spec() {
  std::string spec;
  constexpr std::string_view kName = "identity";
  append_key(spec, 1, kLengthDelimited);
  append_varint(spec, kName.size());
  spec.append(kName);
  append_key(spec, 3, kVarint);  // add_dummy_prefix = false
  append_varint(spec, 0);
  append_key(spec, 4, kVarint);  // remove_extra_whitespaces = false
  append_varint(spec, 0);
  append_key(spec, 5, kVarint);  // escape_whitespaces = true
  append_varint(spec, 1);
  return spec;
}

}  // namespace

SentencePieceModelSummary prepare_sentencepiece_model(std::string_view serialized,
                                                      const std::string& source) {
  SentencePieceModelSummary summary;
  std::string& out = summary.identity_normalizer_model;
  out.reserve(serialized.size() + 32);
  WireReader model(serialized, source, "ModelProto", 0);
  bool has_trainer_spec = false;
  while (!model.done()) {
    const Field field = model.next();
    if (field.number == 3) continue;  // normalizer_spec: replaced below
    out.append(serialized.substr(field.begin, field.end - field.begin));
    if (field.number == 1) {
      if (field.wire_type != kLengthDelimited) {
        throw ModelInputError(source +
                              ": not a valid SentencePiece model: ModelProto.pieces at byte " +
                              std::to_string(field.begin) + " is not a message");
      }
      const std::size_t index = summary.pieces.size();
      WireReader piece(field.bytes, source, "ModelProto.pieces[" + std::to_string(index) + "]",
                       model.absolute_of(field.bytes));
      SentencePieceEntry entry;
      while (!piece.done()) {
        const Field p = piece.next();
        if (p.number == 1 && p.wire_type == kLengthDelimited) entry.piece.assign(p.bytes);
        if (p.number == 3 && p.wire_type == kVarint) {
          if (p.varint < 1 || p.varint > 6) {
            throw ModelInputError(source + ": ModelProto.pieces[" + std::to_string(index) +
                                  "].type: unknown piece type " + std::to_string(p.varint));
          }
          entry.type = static_cast<SentencePieceType>(p.varint);
        }
      }
      summary.pieces.push_back(std::move(entry));
    } else if (field.number == 2) {
      if (field.wire_type != kLengthDelimited) {
        throw ModelInputError(
            source + ": not a valid SentencePiece model: ModelProto.trainer_spec at byte " +
            std::to_string(field.begin) + " is not a message");
      }
      has_trainer_spec = true;
      WireReader trainer(field.bytes, source, "ModelProto.trainer_spec",
                         model.absolute_of(field.bytes));
      while (!trainer.done()) {
        const Field t = trainer.next();
        if (t.wire_type != kVarint) continue;
        if (t.number == 3) summary.model_type = static_cast<std::int64_t>(t.varint);
        if (t.number == 24) summary.treat_whitespace_as_suffix = t.varint != 0;
        if (t.number == 35) summary.byte_fallback = t.varint != 0;
      }
    }
  }
  if (summary.pieces.empty()) {
    throw ModelInputError(source + ": not a valid SentencePiece model: ModelProto has no pieces");
  }
  if (!has_trainer_spec) {
    throw ModelInputError(source +
                          ": not a valid SentencePiece model: ModelProto.trainer_spec is missing");
  }
  const std::string spec = identity_normalizer_spec();
  append_key(out, 3, kLengthDelimited);
  append_varint(out, spec.size());
  out += spec;
  return summary;
}

}  // namespace kvaudit::model
