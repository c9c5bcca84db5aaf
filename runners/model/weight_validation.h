// Checks that a ModelWeights is complete and consistent with its config before an engine (either
// device) uses it: every tensor has the element count its HF shape implies. Errors are
// model::ModelInputError naming the source file, the HF tensor name and both sizes.
#pragma once

#include "runners/model/model_weights.h"

namespace kvaudit::model {

void validate_model_weights(const ModelWeights& weights);

}  // namespace kvaudit::model
