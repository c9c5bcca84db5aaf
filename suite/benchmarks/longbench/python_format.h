// Python `str.format(**fields)` for the LongBench prompt templates (THUDM/LongBench pred.py fills
// config/dataset2prompt.json with `prompt_format.format(**json_obj)`; kvpress's
// create_huggingface_dataset.py does the same with its context/question tables).
//
// Semantics reproduced (CPython 3.11, Objects/stringlib/unicode_format.h, for the subset the
// templates use): the TEMPLATE is parsed, never the values, so braces inside the data are copied
// verbatim; "{{" and "}}" in the template are literal braces; "{name}" is replaced by the value of
// `name`. Anything else a template could contain — a field name the record lacks, an empty or
// positional field ("{}", "{0}"), attribute/index access, a conversion ("!r") or a format spec
// (":>10"), a lone "{" or "}" — throws std::invalid_argument, since the built-in templates never
// use them (Python would raise KeyError, IndexError or ValueError there).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kvaudit::benchmarks {

// Returns the value of a field, or nullopt when the record has no field of that name.
using FormatFieldLookup = std::function<std::optional<std::string_view>(std::string_view name)>;

// `template_text.format(**fields)` as Python computes it for simple "{name}" fields.
std::string python_format(std::string_view template_text, const FormatFieldLookup& lookup);

}  // namespace kvaudit::benchmarks
