// make_courier_unit and make_courier_reuse_unit (courier_unit.h).
#include "bench/courier_unit.h"

#include <cstdlib>
#include <iterator>
#include <stdexcept>
#include <string>

#include "runners/model/chat/prompt_split.h"
#include "suite/run/unit_instance.h"

namespace kvaudit::bench {

std::string bench_model_path() {
  const char* env = std::getenv("KVAUDIT_BENCH_MODEL");
  return env != nullptr ? std::string(env)
                        : std::string(KVAUDIT_SOURCE_DIR) +
                              "/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
}

namespace {

struct CourierQuestion {
  const char* question;
  const char* answer_prefix;
};

// The benchmarks' questions about the courier document: different records, wordings, lengths and
// answer prefixes (the first is make_courier_unit's).
constexpr CourierQuestion kCourierQuestions[] = {
    {"How many parcels did record 17 deliver?", "Answer:"},
    {"Which city was the courier of record 23 from? Reply with the city only.", "City:"},
    {"To which warehouse did record 9 deliver its parcels?", "Warehouse:"},
    {"How many parcels did records 5 and 12 deliver together?", "Total:"},
};

kvaudit::model::PromptParts split_courier(const std::string& context,
                                          const CourierQuestion& asked) {
  kvaudit::model::PromptSplitInput input;
  input.kind = kvaudit::model::ChatTemplateKind::chatml;
  input.context = context;
  input.question = asked.question;
  input.answer_prefix = asked.answer_prefix;
  return kvaudit::model::split_prompt(input);
}

// Numbered courier records until the rendered context reaches `tokens` tokens; with
// `reuse_questions`, every kCourierQuestions entry as a reuse question too.
kvaudit::unit::UnitTokens build_courier_unit(const kvaudit::model::Tokenizer& tokenizer, int tokens,
                                             bool reuse_questions) {
  const char* const cities[] = {"Lisbon", "Oslo",   "Quito", "Hanoi", "Perth", "Tunis", "Lima",
                                "Cairo",  "Dublin", "Accra", "Riga",  "Sofia", "Bern"};
  const kvaudit::model::EncodeOptions plain{.add_special_tokens = false, .parse_special = true};
  std::string context;
  kvaudit::model::PromptParts parts;
  for (int record = 1;; ++record) {
    context += "Record " + std::to_string(record) + ": the courier from " + cities[record % 13] +
               " delivered " + std::to_string(11 + record * 37 % 89) + " parcels to warehouse " +
               static_cast<char>('A' + record % 26) + ". ";
    if (record % 8 != 0) continue;
    parts = split_courier(context, kCourierQuestions[0]);
    if (static_cast<int>(tokenizer.encode(parts.prefix_plus_context, plain).size()) >= tokens) {
      break;
    }
  }
  kvaudit::unit::UnitTokens unit;
  unit.context = tokenizer.encode(parts.prefix_plus_context, plain);
  unit.context.resize(static_cast<std::size_t>(tokens));  // exactly `tokens` context tokens
  unit.question = tokenizer.encode(parts.question, plain);
  unit.suffix = tokenizer.encode(parts.suffix_plus_answer_prefix, plain);
  // KVzip's context-reconstruction prompt, as `kvaudit run` builds it for a unit.
  unit.pass_prompt =
      kvaudit::run::reconstruction_prompt(tokenizer, kvaudit::model::ChatTemplateKind::chatml);
  if (!reuse_questions) return unit;
  unit.reuse_questions.reserve(std::size(kCourierQuestions));
  for (const CourierQuestion& asked : kCourierQuestions) {
    const kvaudit::model::PromptParts split = split_courier(context, asked);
    if (split.prefix_plus_context != parts.prefix_plus_context) {
      throw std::logic_error("courier unit: the split context depends on the question");
    }
    unit.reuse_questions.push_back({tokenizer.encode(split.question, plain),
                                    tokenizer.encode(split.suffix_plus_answer_prefix, plain)});
  }
  return unit;
}

}  // namespace

kvaudit::unit::UnitTokens make_courier_unit(const kvaudit::model::Tokenizer& tokenizer,
                                            int tokens) {
  return build_courier_unit(tokenizer, tokens, false);
}

kvaudit::unit::UnitTokens make_courier_reuse_unit(const kvaudit::model::Tokenizer& tokenizer,
                                                  int tokens) {
  return build_courier_unit(tokenizer, tokens, true);
}

}  // namespace kvaudit::bench
