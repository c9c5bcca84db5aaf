// Recognizes a real chat template (tokenizer_config.json "chat_template" or GGUF
// `tokenizer.chat_template`, both untrusted text) as one of the built-in families, so a model can
// be run without naming its template. Detection is by markers: each family lists the fragments its
// real template must contain and fragments that identify look-alikes whose rendering differs
// (Llama-3.2's strftime_now date, Qwen3/QwQ thinking templates, DeepSeek templates that close the
// user turn or switch thinking off, Mistral v1/v7/tekken spacing). Fragments are matched on a
// normalized form of the source (Jinja comments dropped, whitespace outside string literals
// dropped, double quotes turned into single quotes, raw newlines/tabs inside string literals
// written as the escapes \n and \t), so reformatted copies of the same template
// (one-line HF originals, llama.cpp's indented copies) are recognized alike.
//
// When no family matches, or more than one does, the answer is nullopt: the caller must then name
// the template explicitly. tools/golden/make_chat_golden.py runs this detector (through
// tests/chat/detect_chat_template_tool) over every real template it fetches and checks that each
// template detected as family F renders like F's golden strings under HF.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runners/model/chat/chat_template.h"

namespace kvaudit::model {

// The detector's normalized form of a Jinja source (see above). Exposed for tests and diagnostics.
std::string normalize_jinja_for_markers(std::string_view jinja);

// The family whose real template `jinja` is, or nullopt. Never returns ChatTemplateKind::none.
std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja);

}  // namespace kvaudit::model
