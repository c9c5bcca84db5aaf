// Scalar HDF5 attributes and string datasets as suite/records uses them: strings as scalar
// variable-length UTF-8 (so h5py reads them as str), integers as 64-bit little-endian.
//
// Writers overwrite an existing attribute in place and blame failures on the environment
// (InternalError); readers blame the file (InputError, "<file>: attribute 'x' ...").
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>

#include "suite/records/hdf5_handle.h"

namespace kvaudit::h5 {

// A variable-length UTF-8 string type (H5T_C_S1, H5T_VARIABLE, H5T_CSET_UTF8).
Datatype make_vlen_utf8_type();

bool has_attribute(hid_t object, const std::string& name, const std::string& file);

void write_string_attribute(hid_t object, const std::string& name, const std::string& value,
                            const std::string& file);
void write_int64_attribute(hid_t object, const std::string& name, std::int64_t value,
                           const std::string& file);
void write_uint64_attribute(hid_t object, const std::string& name, std::uint64_t value,
                            const std::string& file);

// Readers throw InputError naming the file and attribute if it is missing, is not a single value,
// or has the wrong class (string vs integer). Fixed-length strings are accepted too.
std::string read_string_attribute(hid_t object, const std::string& name, const std::string& file);
std::int64_t read_int64_attribute(hid_t object, const std::string& name, const std::string& file);
std::uint64_t read_uint64_attribute(hid_t object, const std::string& name, const std::string& file);

// A scalar variable-length UTF-8 string dataset at `path` (intermediate groups are created).
void write_string_dataset(hid_t file_id, const std::string& path, const std::string& value,
                          const std::string& file);
// The dataset's string, or nullopt if there is no object at `path`.
std::optional<std::string> read_string_dataset(hid_t file_id, const std::string& path,
                                               const std::string& file);

}  // namespace kvaudit::h5
