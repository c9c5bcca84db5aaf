// SafetensorsCheckpoint: an HF model directory holding model.safetensors, or shards listed by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}).
// Shard names must be plain file names inside the directory (no '/', '\', '..'); every shard must
// exist and hold exactly the tensors the index maps to it.
#include <nlohmann/json.hpp>

#include "runners/model/formats/safetensors.h"
#include "runners/model/formats/strict_json.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string read_text_file(const std::filesystem::path& path) {
  // MappedFile gives the clear missing/directory/empty errors.
  const MappedFile file(path);
  const auto bytes = file.bytes();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find("..") == std::string::npos &&
         name != "." && name.find('\0') == std::string::npos;
}

}  // namespace

bool SafetensorsCheckpoint::contains(std::string_view name) const {
  return file_index_.find(name) != file_index_.end();
}

const SafetensorsFile& SafetensorsCheckpoint::file_of(std::string_view name) const {
  const auto it = file_index_.find(name);
  if (it == file_index_.end())
    throw ModelInputError(directory_.string() + ": tensor '" + std::string(name) +
                          "' is missing from the checkpoint");
  return files_[it->second];
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::filesystem::path& model_dir) {
  SafetensorsCheckpoint checkpoint;
  checkpoint.directory_ = model_dir;
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec))
    throw ModelInputError(model_dir.string() + ": not a directory (expected an HF model " +
                          "directory with model.safetensors or model.safetensors.index.json)");
  const auto index_path = model_dir / kIndexFile;
  const auto single_path = model_dir / kSingleFile;

  if (!std::filesystem::exists(index_path, ec)) {
    if (!std::filesystem::exists(single_path, ec))
      throw ModelInputError(model_dir.string() + ": no " + kSingleFile + " and no " + kIndexFile +
                            " in the directory");
    checkpoint.files_.push_back(SafetensorsFile::open(single_path));
    for (const auto& name : checkpoint.files_.front().names()) {
      checkpoint.file_index_.emplace(name, 0);
      checkpoint.names_.push_back(name);
    }
    return checkpoint;
  }

  const std::string index_source = index_path.string();
  const nlohmann::json index = parse_json_strict(read_text_file(index_path), index_source);
  if (!index.is_object())
    throw ModelInputError(index_source + ": expected a JSON object, found " +
                          json_type_name(index));
  const auto map_it = index.find("weight_map");
  if (map_it == index.end())
    throw ModelInputError(index_source + ": field 'weight_map' is missing");
  if (!map_it->is_object())
    throw ModelInputError(index_source + ": field 'weight_map' must be an object, found " +
                          json_type_name(*map_it));
  if (map_it->empty()) throw ModelInputError(index_source + ": field 'weight_map' is empty");

  std::map<std::string, std::size_t> shard_slot;  // shard file name -> files_ index
  std::vector<std::string> shard_names;
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string())
      throw ModelInputError(index_source + ": field 'weight_map." + tensor +
                            "' must be a shard file name (string), found " + json_type_name(shard));
    const auto shard_name = shard.get<std::string>();
    if (!is_plain_file_name(shard_name))
      throw ModelInputError(index_source + ": field 'weight_map." + tensor +
                            "': shard file name '" + shard_name +
                            "' must be a plain file name inside the directory (no '/', no '..')");
    auto [slot, inserted] = shard_slot.emplace(shard_name, shard_names.size());
    if (inserted) shard_names.push_back(shard_name);
    checkpoint.file_index_.emplace(tensor, slot->second);
  }

  for (const auto& shard_name : shard_names) {
    const auto shard_path = model_dir / shard_name;
    if (!std::filesystem::exists(shard_path, ec))
      throw ModelInputError(index_source + ": shard '" + shard_name + "' named in 'weight_map' " +
                            "does not exist in " + model_dir.string());
    checkpoint.files_.push_back(SafetensorsFile::open(shard_path));
  }
  // Every mapped tensor is in its shard, and every shard tensor is mapped to that shard.
  for (const auto& [tensor, slot] : checkpoint.file_index_) {
    if (!checkpoint.files_[slot].contains(tensor))
      throw ModelInputError(index_source + ": field 'weight_map." + tensor + "' names shard '" +
                            shard_names[slot] + "', which has no tensor '" + tensor + "'");
    checkpoint.names_.push_back(tensor);
  }
  for (std::size_t slot = 0; slot < checkpoint.files_.size(); ++slot)
    for (const auto& tensor : checkpoint.files_[slot].names()) {
      const auto it = checkpoint.file_index_.find(tensor);
      if (it == checkpoint.file_index_.end() || it->second != slot)
        throw ModelInputError(checkpoint.files_[slot].source() + ": tensor '" + tensor +
                              "' is not mapped to this shard by " + index_source +
                              " field 'weight_map'");
    }
  return checkpoint;
}

}  // namespace kvaudit::model
