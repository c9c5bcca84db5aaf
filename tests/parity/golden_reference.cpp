// GoldenReference: reads an HF-parity fixture (see golden_reference.h).
#include "tests/parity/golden_reference.h"

#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace kvaudit::parity_test {
namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream stream(path);
  if (!stream) throw std::runtime_error(path.string() + ": cannot open the fixture manifest");
  try {
    return nlohmann::json::parse(stream);
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(path.string() + ": not valid JSON: " + error.what());
  }
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::ostringstream text;
  text << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) text << (i ? ", " : "") << shape[i];
  text << ']';
  return text.str();
}

}  // namespace

GoldenReference::GoldenReference(const std::filesystem::path& directory)
    : directory_(directory),
      manifest_(read_json(directory / "reference.json")),
      tensors_(model::SafetensorsFile::open(directory / "reference.safetensors")) {}

bool GoldenReference::contains(const std::string& tensor_name) const {
  return tensors_.contains(tensor_name);
}

std::vector<float> GoldenReference::tensor(const std::string& tensor_name,
                                           const std::vector<std::int64_t>& expected_shape) const {
  const model::SafetensorsTensorInfo& info = tensors_.info(tensor_name);
  if (info.dtype != model::SafetensorsDtype::F32) {
    throw std::runtime_error(tensors_.source() + ": tensor '" + tensor_name + "' has dtype " +
                             std::string(model::safetensors_dtype_name(info.dtype)) +
                             ", expected F32");
  }
  if (info.shape != expected_shape) {
    throw std::runtime_error(tensors_.source() + ": tensor '" + tensor_name + "' has shape " +
                             shape_text(info.shape) + ", expected " + shape_text(expected_shape));
  }
  return tensors_.to_f32(tensor_name);
}

std::vector<std::int32_t> token_ids(const nlohmann::json& array) {
  std::vector<std::int32_t> ids;
  ids.reserve(array.size());
  for (const nlohmann::json& id : array) {
    const auto value = id.get<std::int64_t>();
    if (value < 0 || value > std::numeric_limits<std::int32_t>::max()) {
      throw std::runtime_error("token id out of range in fixture: " + std::to_string(value));
    }
    ids.push_back(static_cast<std::int32_t>(value));
  }
  return ids;
}

}  // namespace kvaudit::parity_test
