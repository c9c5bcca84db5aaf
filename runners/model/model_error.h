// ModelInputError: a model file, tokenizer file or prompt that is malformed or unsupported. The
// message names the file, the field (tensor, key, JSON path) and what is wrong. runners/ knows
// nothing of suite/, so it has its own type; the CLI maps it to exit code 1 (bad input), like
// kvaudit::InputError.
#pragma once

#include <stdexcept>
#include <string>

namespace kvaudit::model {

class ModelInputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvaudit::model
