// RAII ownership of HDF5 identifiers and the HDF5 error policy of suite/records.
//
// Every hid_t that suite/records opens or creates lives in a move-only Handle<Kind> whose
// destructor calls the matching H5*close. Failed HDF5 calls become C++ exceptions whose text names
// the file, the operation and HDF5's innermost error message; HDF5's own automatic printing of its
// error stack to stderr is switched off (quiet_errors) so that nothing but our message reaches the
// user.
#pragma once

#include <hdf5.h>

#include <string>
#include <string_view>
#include <utility>

namespace kvaudit::h5 {

// Which H5*close releases an identifier.
enum class Kind { file, dataset, dataspace, datatype, attribute, property_list, group };

// Closes `id` with the H5*close that fits `kind`; returns that call's status.
herr_t close_id(Kind kind, hid_t id) noexcept;

template <Kind K>
class Handle {
 public:
  Handle() noexcept = default;
  explicit Handle(hid_t id) noexcept : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  ~Handle() { reset(); }

  hid_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }

  // Closes the identifier (if any) and ignores the status: for destructors and error paths.
  void reset() noexcept {
    if (id_ >= 0) close_id(K, std::exchange(id_, H5I_INVALID_HID));
  }
  // Closes the identifier and returns the status of the close call (0 when there was none), for
  // callers that must know whether the close worked (H5Fclose writes the last metadata).
  herr_t close() noexcept {
    return id_ >= 0 ? close_id(K, std::exchange(id_, H5I_INVALID_HID)) : 0;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<Kind::file>;
using Dataset = Handle<Kind::dataset>;
using Dataspace = Handle<Kind::dataspace>;
using Datatype = Handle<Kind::datatype>;
using Attribute = Handle<Kind::attribute>;
using PropertyList = Handle<Kind::property_list>;
using Group = Handle<Kind::group>;

// Whom a failure blames: the file the user gave us (kvaudit::InputError) or the environment / our
// code (kvaudit::InternalError).
enum class Blame { input, internal };

// Turns off HDF5's automatic printing of error stacks (H5Eset_auto2(H5E_DEFAULT, nullptr,
// nullptr)). Called at every public entry point of suite/records: in thread-safe HDF5 builds the
// setting is per thread.
void quiet_errors() noexcept;

// HDF5's innermost error message on the default error stack (the description of the deepest
// function that failed, with its minor error class), or "" if the stack is empty.
std::string innermost_error_message();

// Throws InputError or InternalError with "<file>: <operation> failed: <innermost HDF5 message>".
[[noreturn]] void throw_error(Blame blame, const std::string& file, std::string_view operation);

// Returns `status` unless it is negative (an HDF5 failure), in which case it throws (see
// throw_error).
template <typename Status>
Status check(Status status, Blame blame, const std::string& file, std::string_view operation) {
  if (status < 0) throw_error(blame, file, operation);
  return status;
}

// Wraps a freshly returned identifier, throwing if HDF5 returned an error instead.
template <Kind K>
Handle<K> adopt(hid_t id, Blame blame, const std::string& file, std::string_view operation) {
  if (id < 0) throw_error(blame, file, operation);
  return Handle<K>(id);
}

}  // namespace kvaudit::h5
