// Reading and writing scalar attributes and string datasets with the HDF5 C API.
#include "suite/records/hdf5_attributes.h"

#include <string>
#include <vector>

#include "base/errors.h"
#include "suite/records/hdf5_handle.h"

namespace kvaudit::h5 {
namespace {

Dataspace scalar_space(const std::string& file) {
  return adopt<Kind::dataspace>(H5Screate(H5S_SCALAR), Blame::internal, file, "H5Screate");
}

// Opens the attribute `name` for writing, creating it with `file_type` if it does not exist.
Attribute open_or_create(hid_t object, const std::string& name, hid_t file_type,
                         const std::string& file) {
  if (has_attribute(object, name, file)) {
    return adopt<Kind::attribute>(H5Aopen(object, name.c_str(), H5P_DEFAULT), Blame::internal, file,
                                  "opening attribute '" + name + "'");
  }
  const Dataspace space = scalar_space(file);
  return adopt<Kind::attribute>(
      H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      Blame::internal, file, "creating attribute '" + name + "'");
}

template <typename T>
void write_integer(hid_t object, const std::string& name, T value, hid_t file_type,
                   hid_t memory_type, const std::string& file) {
  const Attribute attribute = open_or_create(object, name, file_type, file);
  check(H5Awrite(attribute.get(), memory_type, &value), Blame::internal, file,
        "writing attribute '" + name + "'");
}

// Opens `name` for reading and checks that it holds one value of class `expected`.
Attribute open_for_reading(hid_t object, const std::string& name, H5T_class_t expected,
                           const char* expected_phrase, const std::string& file) {
  if (!has_attribute(object, name, file)) {
    throw InputError(file + ": attribute '" + name + "' is missing");
  }
  Attribute attribute =
      adopt<Kind::attribute>(H5Aopen(object, name.c_str(), H5P_DEFAULT), Blame::input, file,
                             "opening attribute '" + name + "'");
  const Dataspace space =
      adopt<Kind::dataspace>(H5Aget_space(attribute.get()), Blame::input, file,
                             "reading the dataspace of attribute '" + name + "'");
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw InputError(file + ": attribute '" + name + "' is not a single value");
  }
  const Datatype type = adopt<Kind::datatype>(H5Aget_type(attribute.get()), Blame::input, file,
                                              "reading the type of attribute '" + name + "'");
  if (H5Tget_class(type.get()) != expected) {
    throw InputError(file + ": attribute '" + name + "' is not " + expected_phrase);
  }
  return attribute;
}

template <typename T>
T read_integer(hid_t object, const std::string& name, hid_t memory_type, const std::string& file) {
  const Attribute attribute = open_for_reading(object, name, H5T_INTEGER, "an integer", file);
  T value{};
  check(H5Aread(attribute.get(), memory_type, &value), Blame::input, file,
        "reading attribute '" + name + "'");
  return value;
}

// Reads one string (variable- or fixed-length) from an attribute or dataset through `read`.
template <typename Read>
std::string read_one_string(hid_t stored_type, hid_t space, const std::string& what,
                            const std::string& file, Read read) {
  if (H5Tis_variable_str(stored_type) > 0) {
    const Datatype memory = make_vlen_utf8_type();
    char* text = nullptr;
    check(read(memory.get(), static_cast<void*>(&text)), Blame::input, file, "reading " + what);
    std::string value = text != nullptr ? std::string(text) : std::string();
    H5Dvlen_reclaim(memory.get(), space, H5P_DEFAULT, &text);
    return value;
  }
  const std::size_t size = H5Tget_size(stored_type);
  const Datatype memory = adopt<Kind::datatype>(H5Tcopy(stored_type), Blame::input, file,
                                                "copying the type of " + what);
  std::vector<char> buffer(size + 1, '\0');
  check(read(memory.get(), static_cast<void*>(buffer.data())), Blame::input, file,
        "reading " + what);
  return std::string(buffer.data());  // up to the first NUL
}

}  // namespace

Datatype make_vlen_utf8_type() {
  const std::string what = "a UTF-8 string type";
  auto type = adopt<Kind::datatype>(H5Tcopy(H5T_C_S1), Blame::internal, what, "H5Tcopy(H5T_C_S1)");
  check(H5Tset_size(type.get(), H5T_VARIABLE), Blame::internal, what, "H5Tset_size");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), Blame::internal, what, "H5Tset_cset");
  return type;
}

bool has_attribute(hid_t object, const std::string& name, const std::string& file) {
  return check(H5Aexists(object, name.c_str()), Blame::input, file,
               "looking up attribute '" + name + "'") > 0;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value,
                            const std::string& file) {
  const Datatype type = make_vlen_utf8_type();
  const Attribute attribute = open_or_create(object, name, type.get(), file);
  const char* text = value.c_str();
  check(H5Awrite(attribute.get(), type.get(), &text), Blame::internal, file,
        "writing attribute '" + name + "'");
}

void write_int64_attribute(hid_t object, const std::string& name, std::int64_t value,
                           const std::string& file) {
  write_integer(object, name, value, H5T_STD_I64LE, H5T_NATIVE_INT64, file);
}

void write_uint64_attribute(hid_t object, const std::string& name, std::uint64_t value,
                            const std::string& file) {
  write_integer(object, name, value, H5T_STD_U64LE, H5T_NATIVE_UINT64, file);
}

std::string read_string_attribute(hid_t object, const std::string& name, const std::string& file) {
  const Attribute attribute = open_for_reading(object, name, H5T_STRING, "a string", file);
  const Datatype stored = adopt<Kind::datatype>(H5Aget_type(attribute.get()), Blame::input, file,
                                                "reading the type of attribute '" + name + "'");
  const Dataspace space =
      adopt<Kind::dataspace>(H5Aget_space(attribute.get()), Blame::input, file,
                             "reading the dataspace of attribute '" + name + "'");
  return read_one_string(
      stored.get(), space.get(), "attribute '" + name + "'", file,
      [&](hid_t memory, void* buffer) { return H5Aread(attribute.get(), memory, buffer); });
}

std::int64_t read_int64_attribute(hid_t object, const std::string& name, const std::string& file) {
  return read_integer<std::int64_t>(object, name, H5T_NATIVE_INT64, file);
}

std::uint64_t read_uint64_attribute(hid_t object, const std::string& name,
                                    const std::string& file) {
  return read_integer<std::uint64_t>(object, name, H5T_NATIVE_UINT64, file);
}

void write_string_dataset(hid_t file_id, const std::string& path, const std::string& value,
                          const std::string& file) {
  const PropertyList link_props = adopt<Kind::property_list>(
      H5Pcreate(H5P_LINK_CREATE), Blame::internal, file, "H5Pcreate(H5P_LINK_CREATE)");
  check(H5Pset_create_intermediate_group(link_props.get(), 1), Blame::internal, file,
        "H5Pset_create_intermediate_group");
  const Datatype type = make_vlen_utf8_type();
  const Dataspace space = scalar_space(file);
  const Dataset dataset =
      adopt<Kind::dataset>(H5Dcreate2(file_id, path.c_str(), type.get(), space.get(),
                                      link_props.get(), H5P_DEFAULT, H5P_DEFAULT),
                           Blame::internal, file, "creating dataset " + path);
  const char* text = value.c_str();
  check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), Blame::internal,
        file, "writing dataset " + path);
}

std::optional<std::string> read_string_dataset(hid_t file_id, const std::string& path,
                                               const std::string& file) {
  // H5Lexists needs each intermediate link to exist, so walk the path from the root.
  std::string prefix;
  for (std::size_t start = 1; start <= path.size();) {
    const std::size_t slash = path.find('/', start);
    const std::size_t end = slash == std::string::npos ? path.size() : slash;
    prefix = path.substr(0, end);
    if (check(H5Lexists(file_id, prefix.c_str(), H5P_DEFAULT), Blame::input, file,
              "looking up " + prefix) <= 0) {
      return std::nullopt;
    }
    start = end + 1;
  }
  const Dataset dataset = adopt<Kind::dataset>(H5Dopen2(file_id, path.c_str(), H5P_DEFAULT),
                                               Blame::input, file, "opening dataset " + path);
  const Datatype stored = adopt<Kind::datatype>(H5Dget_type(dataset.get()), Blame::input, file,
                                                "reading the type of " + path);
  if (H5Tget_class(stored.get()) != H5T_STRING) {
    throw InputError(file + ": dataset " + path + " is not a string");
  }
  const Dataspace space = adopt<Kind::dataspace>(H5Dget_space(dataset.get()), Blame::input, file,
                                                 "reading the dataspace of " + path);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw InputError(file + ": dataset " + path + " is not a single string");
  }
  return read_one_string(
      stored.get(), space.get(), "dataset " + path, file, [&](hid_t memory, void* buffer) {
        return H5Dread(dataset.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer);
      });
}

}  // namespace kvaudit::h5
