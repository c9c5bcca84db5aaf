// Golden tests of runners/model/chat against Hugging Face: tests/golden/chat/chat_golden.json is
// written by tools/golden/make_chat_golden.py from transformers' apply_chat_template on each
// family's real template, and from a re-implementation of kvpress's preprocess. Every render must
// be bit-exact (or refused where the real template raises), every kvpress split must give the same
// three strings, and the detection records must show each real template recognized as its family.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "runners/model/chat/chat_template.h"
#include "runners/model/chat/prompt_split.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

const nlohmann::json& golden() {
  static const nlohmann::json data = [] {
    std::ifstream in(KVAUDIT_CHAT_GOLDEN);
    if (!in) throw std::runtime_error("cannot open " + std::string(KVAUDIT_CHAT_GOLDEN));
    return nlohmann::json::parse(in);
  }();
  return data;
}

ChatRole role_from(const std::string& name) {
  if (name == "system") return ChatRole::system;
  if (name == "user") return ChatRole::user;
  if (name == "assistant") return ChatRole::assistant;
  throw std::runtime_error("golden: unknown role " + name);
}

std::vector<ChatMessage> messages_from(const nlohmann::json& list) {
  std::vector<ChatMessage> messages;
  for (const auto& m : list) {
    messages.push_back(
        {role_from(m.at("role").get<std::string>()), m.at("content").get<std::string>()});
  }
  return messages;
}

TEST(ChatGolden, CoversEveryFamilyAndConversation) {
  std::map<std::string, std::set<std::string>> conversations;
  for (const auto& r : golden().at("renders")) {
    conversations[r.at("family").get<std::string>()].insert(
        r.at("conversation").get<std::string>());
  }
  ASSERT_EQ(conversations.size(), 5u);
  for (const std::string_view family : chat_template_names()) {
    if (family == "none") continue;
    ASSERT_TRUE(conversations.count(std::string(family))) << family;
    EXPECT_GE(conversations[std::string(family)].size(), 16u) << family;
  }
}

TEST(ChatGolden, RendersAreBitExact) {
  std::size_t checked = 0;
  std::size_t refused = 0;
  for (const auto& r : golden().at("renders")) {
    const auto family = r.at("family").get<std::string>();
    const auto conversation = r.at("conversation").get<std::string>();
    SCOPED_TRACE(family + " / " + conversation);
    const ChatTemplateKind kind = parse_chat_template_name(family);
    const std::vector<ChatMessage> messages = messages_from(r.at("messages"));
    RenderOptions options;
    options.add_generation_prompt = r.at("add_generation_prompt").get<bool>();
    if (r.contains("llama3_date_string")) {
      options.llama3_date_string = r.at("llama3_date_string").get<std::string>();
    }
    if (r.contains("error")) {
      EXPECT_THROW(render_chat(kind, messages, options), ModelInputError)
          << "HF refused: " << r.at("error").get<std::string>();
      ++refused;
    } else {
      EXPECT_EQ(render_chat(kind, messages, options), r.at("expected").get<std::string>());
      ++checked;
    }
  }
  EXPECT_GE(checked, 75u);
  EXPECT_GE(refused, 2u);  // mistral-v3 refuses non-alternating roles
}

TEST(ChatGolden, KvpressSplitsMatch) {
  std::set<std::string> families;
  std::size_t checked = 0;
  for (const auto& s : golden().at("splits")) {
    const auto family = s.at("family").get<std::string>();
    const auto visibility = s.at("visibility").get<std::string>();
    SCOPED_TRACE(family + " / " + s.at("case").get<std::string>() + " / " + visibility);
    const auto context = s.at("context").get<std::string>();
    const auto question = s.at("question").get<std::string>();
    const auto answer_prefix = s.at("answer_prefix").get<std::string>();
    std::string system;
    PromptSplitInput input;
    input.kind = parse_chat_template_name(family);
    input.context = context;
    input.question = question;
    input.answer_prefix = answer_prefix;
    if (!s.at("system").is_null()) {
      system = s.at("system").get<std::string>();
      input.system = system;
    }
    ASSERT_TRUE(visibility == "query-agnostic" || visibility == "query-aware");
    input.visibility = visibility == "query-aware" ? QueryVisibility::query_aware
                                                   : QueryVisibility::query_agnostic;
    EXPECT_EQ(query_visibility_name(input.visibility), visibility);
    if (s.contains("bos_text")) input.options.bos_text = s.at("bos_text").get<std::string>();

    const PromptParts parts = split_prompt(input);
    EXPECT_EQ(parts.prefix_plus_context, s.at("prefix_plus_context").get<std::string>());
    EXPECT_EQ(parts.question, s.at("question_part").get<std::string>());
    EXPECT_EQ(parts.suffix_plus_answer_prefix,
              s.at("suffix_plus_answer_prefix").get<std::string>());
    // The parts concatenate to kvpress's context string followed by its question string.
    EXPECT_EQ(parts.joined(), s.at("kvpress_context").get<std::string>() +
                                  s.at("kvpress_question").get<std::string>());
    EXPECT_EQ(parts.question + parts.suffix_plus_answer_prefix,
              s.at("kvpress_question").get<std::string>());
    families.insert(family);
    ++checked;
  }
  EXPECT_EQ(families.size(), 6u);  // five templates and none
  EXPECT_GE(checked, 60u);
}

// The detection records come from the C++ detector run over the real templates by the generator
// (the texts are not committed). Each family's own template must have been recognized, and no
// template recognized as a family may render differently from that family's golden strings.
TEST(ChatGolden, DetectionRecordsShowEveryFamilyRecognized) {
  const auto& templates = golden().at("templates");
  std::map<std::string, std::string> detected_by_sha;
  std::size_t recognized = 0;
  for (const auto& d : golden().at("detection")) {
    const std::string source = d.at("source").get<std::string>();
    const auto& detected = d.at("detected");
    detected_by_sha[d.at("sha256").get<std::string>()] =
        detected.is_null() ? "" : detected.get<std::string>();
    if (detected.is_null()) continue;
    ++recognized;
    EXPECT_NO_THROW(parse_chat_template_name(detected.get<std::string>())) << source;
    EXPECT_NE(detected.get<std::string>(), "none") << source;
    EXPECT_TRUE(d.at("renders_like_family").get<bool>()) << source;
  }
  for (const auto& [family, info] : templates.items()) {
    const auto sha = info.at("sha256").get<std::string>();
    ASSERT_TRUE(detected_by_sha.count(sha)) << family << ": its template is not in the records";
    EXPECT_EQ(detected_by_sha[sha], family);
  }
  EXPECT_GE(golden().at("detection").size(), 100u);
  EXPECT_GE(recognized, 5u);
  EXPECT_LT(recognized, 20u);  // most real templates belong to other families
}

}  // namespace
}  // namespace kvaudit::model
