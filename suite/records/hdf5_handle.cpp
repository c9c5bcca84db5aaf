// Closing HDF5 identifiers by kind, and turning HDF5's error stack into exception text.
#include "suite/records/hdf5_handle.h"

#include <string>

#include "base/errors.h"

namespace kvaudit::h5 {

herr_t close_id(Kind kind, hid_t id) noexcept {
  switch (kind) {
    case Kind::file:
      return H5Fclose(id);
    case Kind::dataset:
      return H5Dclose(id);
    case Kind::dataspace:
      return H5Sclose(id);
    case Kind::datatype:
      return H5Tclose(id);
    case Kind::attribute:
      return H5Aclose(id);
    case Kind::property_list:
      return H5Pclose(id);
    case Kind::group:
      return H5Gclose(id);
  }
  return -1;
}

void quiet_errors() noexcept { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

std::string message_text(hid_t message_id) {
  if (message_id < 0) return {};
  const ssize_t length = H5Eget_msg(message_id, nullptr, nullptr, 0);
  if (length <= 0) return {};
  std::string text(static_cast<std::size_t>(length) + 1, '\0');
  if (H5Eget_msg(message_id, nullptr, text.data(), text.size()) < 0) return {};
  text.resize(static_cast<std::size_t>(length));
  return text;
}

// Walked upward, entry 0 is the innermost (most specific) error.
herr_t keep_innermost(unsigned n, const H5E_error2_t* entry, void* client_data) {
  if (n != 0 || entry == nullptr) return 0;
  auto& out = *static_cast<std::string*>(client_data);
  const std::string description = entry->desc != nullptr ? entry->desc : "";
  const std::string minor = message_text(entry->min_num);
  out = description;
  if (!minor.empty() && minor != description) {
    out += out.empty() ? minor : " (" + minor + ")";
  }
  return 0;
}

}  // namespace

std::string innermost_error_message() {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &message);
  return message;
}

void throw_error(Blame blame, const std::string& file, std::string_view operation) {
  std::string text = file + ": " + std::string(operation) + " failed";
  const std::string detail = innermost_error_message();
  if (!detail.empty()) text += ": " + detail;
  H5Eclear2(H5E_DEFAULT);
  if (blame == Blame::input) throw InputError(text);
  throw InternalError(text);
}

}  // namespace kvaudit::h5
