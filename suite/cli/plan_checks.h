// Plan-time checks that a study's inputs can work, run by `kvaudit plan` before the lock is written
// (docs/CLI.md "kvaudit plan"), so a study that every cell of would fail is refused at plan time
// instead of recorded as errors by `kvaudit run`:
//  * each model's dtype is one the engines support (bf16, f32; `f16` is refused);
//  * each model's files open: the config (config.json or the GGUF metadata), the tokenizer, and
//    the tensor table — every tensor the loader needs is present with the shape the config implies
//    and a loadable dtype, and its data lies inside its file (safetensors headers and GGUF tensor
//    infos are parsed from a read-only mapping; the weights themselves are not read), and the
//    tokenizer's ids fit the model's vocabulary;
//  * each RULER benchmark without `generation_tokenizer` fits its nominal length with the
//    tokenizer and chat template of every model a grid pairs it with: instance 0 of every task is
//    generated and fitted (the generator refuses a task whose fixed part — template, question,
//    needles, max_new_tokens — exceeds the length even with the smallest haystack).
// Each problem is one `manifest.toml:line:column: field: what` line.
#pragma once

#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "runners/model/chat/chat_template.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::cli {

// A manifest chat_template family as the renderer names it ("mistral" is the v3 template).
model::ChatTemplateKind chat_template_of(const manifest::Model& model);

// The models that some grid runs on benchmark `b`, by name.
std::set<std::string> models_paired_with(const manifest::Manifest& m, const std::string& b);

// Every problem found (empty when the inputs can work); `progress` gets one line per slow step.
std::vector<std::string> check_plan_inputs(const manifest::Manifest& m, std::ostream& progress);

// Prints the problems of check_plan_inputs to stderr and throws InputError when there is any;
// `consequence` ends the summary ("nothing was written").
void require_plan_inputs_work(const manifest::Manifest& m, std::ostream& progress,
                              const std::string& consequence);

}  // namespace kvaudit::cli
