// make_courier_unit (courier_unit.h).
#include "bench/courier_unit.h"

#include <cstdlib>
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

// Numbered courier records until the rendered context reaches `tokens` tokens.
kvaudit::unit::UnitTokens make_courier_unit(const kvaudit::model::Tokenizer& tokenizer,
                                            int tokens) {
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
    kvaudit::model::PromptSplitInput input;
    input.kind = kvaudit::model::ChatTemplateKind::chatml;
    input.context = context;
    input.question = "How many parcels did record 17 deliver?";
    input.answer_prefix = "Answer:";
    parts = kvaudit::model::split_prompt(input);
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
  return unit;
}

}  // namespace kvaudit::bench
