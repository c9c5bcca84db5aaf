// A synthetic long-context unit for the benchmarks: numbered courier records rendered with the
// chatml template and split as kvpress splits a prompt (context | question | suffix), tokenized by
// the model's own tokenizer and cut to exactly `tokens` context tokens.
#pragma once

#include <string>

#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/unit_runner.h"

namespace kvaudit::bench {

// The benchmarks' model: $KVAUDIT_BENCH_MODEL, else the embedded SmolLM2 GGUF of the source tree.
std::string bench_model_path();

// Its question/suffix ask how many parcels record 17 delivered.
kvaudit::unit::UnitTokens make_courier_unit(const kvaudit::model::Tokenizer& tokenizer, int tokens);

// The same unit with reuse_questions (Protocol::reuse): that question and three more about other
// records, of other wordings, lengths and answer prefixes.
kvaudit::unit::UnitTokens make_courier_reuse_unit(const kvaudit::model::Tokenizer& tokenizer,
                                                  int tokens);

}  // namespace kvaudit::bench
