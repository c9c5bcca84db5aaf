// tokenizer.json parsing into BpeVocabulary, with file + JSON-path errors for every rejection.
#include "runners/model/tokenizer/tokenizer_json.h"

#include <limits>
#include <unordered_map>

#include "runners/model/formats/mapped_file.h"
#include "runners/model/formats/strict_json.h"
#include "runners/model/model_error.h"
#include "runners/model/tokenizer/message_text.h"

namespace kvaudit::model {
namespace {

using nlohmann::json;

// Typed access to untrusted JSON; every failure names the file and the JSON path.
class JsonFields {
 public:
  explicit JsonFields(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw ModelInputError(source_ + ": " + path + ": " + what);
  }

  void expect(const json& value, json::value_t type, const std::string& path) const {
    const bool ok =
        type == json::value_t::number_integer ? value.is_number_integer() : value.type() == type;
    if (!ok) {
      const char* wanted = type == json::value_t::object    ? "an object"
                           : type == json::value_t::array   ? "an array"
                           : type == json::value_t::string  ? "a string"
                           : type == json::value_t::boolean ? "a boolean"
                                                            : "an integer";
      fail(path, std::string("expected ") + wanted + ", found " + json_type_name(value));
    }
  }

  // The member, or nullptr when it is absent or null.
  const json* find(const json& object, std::string_view key) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
  }

  const json& require(const json& object, std::string_view key, const std::string& path) const {
    const json* value = find(object, key);
    if (value == nullptr) fail(join(path, key), "is missing");
    return *value;
  }

  std::string string_member(const json& object, std::string_view key,
                            const std::string& path) const {
    const json& value = require(object, key, path);
    expect(value, json::value_t::string, join(path, key));
    return value.get<std::string>();
  }

  bool bool_member(const json& object, std::string_view key, const std::string& path,
                   bool fallback) const {
    const json* value = find(object, key);
    if (value == nullptr) return fallback;
    expect(*value, json::value_t::boolean, join(path, key));
    return value->get<bool>();
  }

  std::int32_t id_value(const json& value, const std::string& path) const {
    expect(value, json::value_t::number_integer, path);
    constexpr auto kMax = std::numeric_limits<std::int32_t>::max();
    const bool in_range = value.is_number_unsigned()
                              ? value.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMax)
                              : value.get<std::int64_t>() >= 0 && value.get<std::int64_t>() <= kMax;
    if (!in_range) fail(path, "id " + value.dump() + " is outside [0, 2147483647]");
    return static_cast<std::int32_t>(value.get<std::int64_t>());
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  static std::string index(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

 private:
  const std::string& source_;
};

std::string type_of(const JsonFields& f, const json& node, const std::string& path) {
  f.expect(node, json::value_t::object, path);
  return f.string_member(node, "type", path);
}

void parse_model(const JsonFields& f, const json& root, BpeVocabulary& v) {
  const json& model = f.require(root, "model", "");
  const std::string type = type_of(f, model, "model");
  if (type != "BPE") {
    f.fail("model.type", quote_for_message(type) + " is not supported (only BPE)");
  }
  const json& vocab = f.require(model, "vocab", "model");
  f.expect(vocab, json::value_t::object, "model.vocab");
  v.vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    v.vocab.emplace_back(token, f.id_value(id, "model.vocab." + quote_for_message(token)));
  }
  const json& merges = f.require(model, "merges", "model");
  f.expect(merges, json::value_t::array, "model.merges");
  v.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    const std::string path = JsonFields::index("model.merges", i);
    if (merge.is_string()) {
      const auto& line = merge.get_ref<const std::string&>();
      if (line.starts_with("#version")) continue;
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        f.fail(path, quote_for_message(line) + " is not two tokens separated by one space");
      }
      v.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (merge.is_array()) {
      if (merge.size() != 2 || !merge[0].is_string() || !merge[1].is_string()) {
        f.fail(path, "expected a pair of strings, found " + quote_for_message(merge.dump()));
      }
      v.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      f.fail(path, "expected a string or a pair of strings, found " + json_type_name(merge));
    }
  }
  if (const json* unk = f.find(model, "unk_token")) {
    f.expect(*unk, json::value_t::string, "model.unk_token");
    v.unk_token = unk->get<std::string>();
  }
  v.fuse_unk = f.bool_member(model, "fuse_unk", "model", false);
  v.ignore_merges = f.bool_member(model, "ignore_merges", "model", false);
  if (f.bool_member(model, "byte_fallback", "model", false)) {
    f.fail("model.byte_fallback", "true is not supported for a byte-level BPE");
  }
  if (const json* dropout = f.find(model, "dropout")) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      f.fail("model.dropout",
             "must be null or 0 (BPE dropout makes encoding random), found " + dropout->dump());
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* affix = f.find(model, key)) {
      if (!affix->is_string() || !affix->get_ref<const std::string&>().empty()) {
        f.fail(JsonFields::join("model", key), "must be null or \"\" for a byte-level BPE, found " +
                                                   quote_for_message(affix->dump()));
      }
    }
  }
}

void parse_added_tokens(const JsonFields& f, const json& root, BpeVocabulary& v) {
  const json* added = f.find(root, "added_tokens");
  if (added == nullptr) return;
  f.expect(*added, json::value_t::array, "added_tokens");
  std::unordered_map<std::string, std::int32_t> vocab_ids;
  vocab_ids.reserve(v.vocab.size());
  for (const auto& [token, id] : v.vocab) vocab_ids.emplace(token, id);
  std::unordered_map<std::string, std::size_t> seen;
  auto next_id = static_cast<std::int64_t>(v.vocab.size());  // HF: model.get_vocab_size()
  for (std::size_t i = 0; i < added->size(); ++i) {
    const json& entry = (*added)[i];
    const std::string path = JsonFields::index("added_tokens", i);
    f.expect(entry, json::value_t::object, path);
    AddedToken token;
    token.content = f.string_member(entry, "content", path);
    if (token.content.empty()) f.fail(path + ".content", "is empty");
    token.id = f.id_value(f.require(entry, "id", path), path + ".id");
    token.special = f.bool_member(entry, "special", path, false);
    token.single_word = f.bool_member(entry, "single_word", path, false);
    token.lstrip = f.bool_member(entry, "lstrip", path, false);
    token.rstrip = f.bool_member(entry, "rstrip", path, false);
    token.normalized = f.bool_member(entry, "normalized", path, !token.special);
    if (const auto it = seen.find(token.content); it != seen.end()) {
      f.fail(path + ".content", quote_for_message(token.content) + " repeats added_tokens[" +
                                    std::to_string(it->second) + "]");
    }
    seen.emplace(token.content, i);
    const auto in_vocab = vocab_ids.find(token.content);
    const std::int64_t expected = in_vocab != vocab_ids.end() ? in_vocab->second : next_id++;
    if (token.id != expected) {
      f.fail(path + ".id", std::to_string(token.id) + " differs from the id tokenizers gives " +
                               quote_for_message(token.content) + ", " + std::to_string(expected) +
                               (in_vocab != vocab_ids.end()
                                    ? " (its model.vocab id)"
                                    : " (added tokens not in model.vocab follow it in order)"));
    }
    v.added_tokens.push_back(std::move(token));
  }
}

void parse_normalizer(const JsonFields& f, const json& root, BpeVocabulary& v) {
  const json* normalizer = f.find(root, "normalizer");
  if (normalizer == nullptr) return;
  const std::string type = type_of(f, *normalizer, "normalizer");
  const auto unsupported = [&](const std::string& path, const std::string& t) {
    f.fail(path, "normalizer " + quote_for_message(t) +
                     " is not supported (supported: null, NFC, or a Sequence of NFC)");
  };
  if (type == "NFC") {
    v.nfc = true;
  } else if (type == "Sequence") {
    const json& list = f.require(*normalizer, "normalizers", "normalizer");
    f.expect(list, json::value_t::array, "normalizer.normalizers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string path = JsonFields::index("normalizer.normalizers", i);
      const std::string inner = type_of(f, list[i], path);
      if (inner != "NFC") unsupported(path + ".type", inner);
      v.nfc = true;
    }
  } else {
    unsupported("normalizer.type", type);
  }
}

// Adds the stages of one pre-tokenizer; returns true when it was the ByteLevel stage.
bool parse_pre_tokenizer_stage(const JsonFields& f, const json& node, const std::string& path,
                               BpeVocabulary& v) {
  const std::string type = type_of(f, node, path);
  if (type == "ByteLevel") {
    v.add_prefix_space = f.bool_member(node, "add_prefix_space", path, true);
    v.byte_level_regex = f.bool_member(node, "use_regex", path, true);
    return true;
  }
  if (type == "Split") {
    const json& pattern = f.require(node, "pattern", path);
    f.expect(pattern, json::value_t::object, path + ".pattern");
    SplitPattern split;
    if (const json* regex = f.find(pattern, "Regex")) {
      f.expect(*regex, json::value_t::string, path + ".pattern.Regex");
      split.pattern = regex->get<std::string>();
      split.origin = path + ".pattern.Regex";
    } else if (const json* literal = f.find(pattern, "String")) {
      f.expect(*literal, json::value_t::string, path + ".pattern.String");
      split.pattern = literal->get<std::string>();
      split.literal = true;
      split.origin = path + ".pattern.String";
    } else {
      f.fail(path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    if (split.pattern.empty()) f.fail(split.origin, "the pattern is empty");
    const std::string behavior = f.string_member(node, "behavior", path);
    if (behavior != "Isolated") {
      f.fail(path + ".behavior", quote_for_message(behavior) + " is not supported (only Isolated)");
    }
    if (f.bool_member(node, "invert", path, false))
      f.fail(path + ".invert", "true is not supported");
    v.splits.push_back(std::move(split));
    return false;
  }
  if (type == "Digits") {
    // HF Digits: char::is_numeric (categories Nd, Nl, No = \p{N}); individual digits are
    // isolated one by one, otherwise runs of them (Contiguous) are.
    const bool individual = f.bool_member(node, "individual_digits", path, false);
    v.splits.push_back({individual ? "\\p{N}" : "\\p{N}+", false, path});
    return false;
  }
  f.fail(path + ".type", "pre-tokenizer " + quote_for_message(type) +
                             " is not supported (supported: ByteLevel, or a Sequence of Split "
                             "and Digits ending with ByteLevel)");
}

void parse_pre_tokenizer(const JsonFields& f, const json& root, BpeVocabulary& v) {
  const json* pre = f.find(root, "pre_tokenizer");
  if (pre == nullptr) {
    f.fail("pre_tokenizer", "is missing or null; a byte-level BPE needs a ByteLevel pre-tokenizer");
  }
  const std::string type = type_of(f, *pre, "pre_tokenizer");
  if (type != "Sequence") {
    if (!parse_pre_tokenizer_stage(f, *pre, "pre_tokenizer", v)) {
      f.fail("pre_tokenizer", "a byte-level BPE needs a ByteLevel pre-tokenizer");
    }
    return;
  }
  const json& list = f.require(*pre, "pretokenizers", "pre_tokenizer");
  f.expect(list, json::value_t::array, "pre_tokenizer.pretokenizers");
  bool byte_level = false;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = JsonFields::index("pre_tokenizer.pretokenizers", i);
    if (byte_level) f.fail(path, "nothing may follow the ByteLevel stage");
    byte_level = parse_pre_tokenizer_stage(f, list[i], path, v);
  }
  if (!byte_level) f.fail("pre_tokenizer.pretokenizers", "no ByteLevel stage (it must be last)");
}

struct Template {
  std::vector<std::int32_t> prefix;
  std::vector<std::int32_t> suffix;
};

// Nested Sequence post-processors deeper than this are rejected (bounded recursion).
constexpr int kMaxPostProcessorDepth = 16;

Template parse_post_processor_node(const JsonFields& f, const json& node, const std::string& path,
                                   int depth) {
  if (depth > kMaxPostProcessorDepth) {
    f.fail(path, "post-processor Sequences nest deeper than " +
                     std::to_string(kMaxPostProcessorDepth) + " levels");
  }
  const std::string type = type_of(f, node, path);
  Template result;
  if (type == "ByteLevel") return result;
  if (type == "Sequence") {
    const json& list = f.require(node, "processors", path);
    f.expect(list, json::value_t::array, path + ".processors");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Template inner = parse_post_processor_node(
          f, list[i], JsonFields::index(path + ".processors", i), depth + 1);
      // A later processor wraps what the earlier ones produced.
      result.prefix.insert(result.prefix.begin(), inner.prefix.begin(), inner.prefix.end());
      result.suffix.insert(result.suffix.end(), inner.suffix.begin(), inner.suffix.end());
    }
    return result;
  }
  if (type != "TemplateProcessing") {
    f.fail(path + ".type", "post-processor " + quote_for_message(type) +
                               " is not supported (supported: null, ByteLevel, "
                               "TemplateProcessing, Sequence)");
  }
  const json& specials = f.require(node, "special_tokens", path);
  f.expect(specials, json::value_t::object, path + ".special_tokens");
  const json& single = f.require(node, "single", path);
  f.expect(single, json::value_t::array, path + ".single");
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string item_path = JsonFields::index(path + ".single", i);
    const json& item = single[i];
    f.expect(item, json::value_t::object, item_path);
    if (const json* sequence = f.find(item, "Sequence")) {
      f.expect(*sequence, json::value_t::object, item_path + ".Sequence");
      const std::string id = f.string_member(*sequence, "id", item_path + ".Sequence");
      if (id != "A") f.fail(item_path + ".Sequence.id", "expected \"A\" in the single template");
      if (seen_sequence) f.fail(item_path, "$A appears twice in the single template");
      seen_sequence = true;
    } else if (const json* special = f.find(item, "SpecialToken")) {
      f.expect(*special, json::value_t::object, item_path + ".SpecialToken");
      const std::string name = f.string_member(*special, "id", item_path + ".SpecialToken");
      const json* entry = f.find(specials, name);
      if (entry == nullptr) {
        f.fail(item_path + ".SpecialToken.id",
               quote_for_message(name) + " is not in " + path + ".special_tokens");
      }
      const std::string entry_path = path + ".special_tokens." + quote_for_message(name);
      f.expect(*entry, json::value_t::object, entry_path);
      const json& ids = f.require(*entry, "ids", entry_path);
      f.expect(ids, json::value_t::array, entry_path + ".ids");
      auto& target = seen_sequence ? result.suffix : result.prefix;
      for (std::size_t k = 0; k < ids.size(); ++k) {
        target.push_back(f.id_value(ids[k], JsonFields::index(entry_path + ".ids", k)));
      }
    } else {
      f.fail(item_path, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  if (!seen_sequence) f.fail(path + ".single", "the single template has no $A");
  return result;
}

void parse_post_processor(const JsonFields& f, const json& root, BpeVocabulary& v) {
  const json* post = f.find(root, "post_processor");
  if (post == nullptr) return;
  Template t = parse_post_processor_node(f, *post, "post_processor", 0);
  v.prefix_ids = std::move(t.prefix);
  v.suffix_ids = std::move(t.suffix);
  if (v.prefix_ids.size() == 1) v.bos_id = v.prefix_ids.front();
  if (v.suffix_ids.size() == 1) v.eos_ids = {v.suffix_ids.front()};
}

void parse_decoder(const JsonFields& f, const json& root) {
  const json* decoder = f.find(root, "decoder");
  if (decoder == nullptr) f.fail("decoder", "is missing or null; a byte-level BPE needs ByteLevel");
  const std::string type = type_of(f, *decoder, "decoder");
  if (type != "ByteLevel") {
    f.fail("decoder.type",
           "decoder " + quote_for_message(type) + " is not supported (only ByteLevel)");
  }
}

}  // namespace

BpeVocabulary parse_tokenizer_json(std::string_view json_text, const std::string& source) {
  const json root = parse_json_strict(json_text, source);
  const JsonFields f(source);
  f.expect(root, json::value_t::object, "(top level)");
  if (const json* version = f.find(root, "version")) {
    if (!version->is_string() || version->get_ref<const std::string&>() != "1.0") {
      f.fail("version", "expected \"1.0\", found " + quote_for_message(version->dump()));
    }
  }
  BpeVocabulary v;
  v.source = source;
  v.vocab_origin = "model.vocab";
  v.merges_origin = "model.merges";
  parse_model(f, root, v);
  parse_added_tokens(f, root, v);
  parse_normalizer(f, root, v);
  parse_pre_tokenizer(f, root, v);
  parse_post_processor(f, root, v);
  parse_decoder(f, root);
  return v;
}

BpeVocabulary read_tokenizer_json(const std::filesystem::path& path) {
  const MappedFile file(path);
  const auto bytes = file.bytes();
  return parse_tokenizer_json(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
}

}  // namespace kvaudit::model
