// Reader of NumPy .npy arrays (numpy.save / numpy.lib.format), for the artefacts some methods take
// from a file named in the manifest (LU-KV's budget curve, methods/lukv.h). Every failure is an
// std::invalid_argument whose message starts with the file's path (or the `source` of in-memory
// bytes) and says which field is wrong.
//
// Format (numpy.lib.format, versions 1.0, 2.0 and 3.0):
//   bytes 0..6    magic "\x93NUMPY"
//   byte  6, 7    major version 1, 2 or 3; minor version 0
//   then          header length N: little-endian u16 (1.0) or u32 (2.0, 3.0)
//   then N bytes  the header: a Python dict literal (latin-1; UTF-8 in 3.0) with exactly the keys
//                 'descr', 'fortran_order', 'shape', e.g.
//                   {'descr': '<f4', 'fortran_order': False, 'shape': (99, 32, 8), }
//                 padded with spaces and ending in '\n'
//   then          the data: prod(shape) elements, row-major, nothing after them.
// Accepted: descr '<f4' or '<f8' (little-endian float32 / float64; '|', '>' and every other type,
// object arrays (pickles) included, are refused), fortran_order False, shape a tuple of
// non-negative integers (() is a scalar). Checked: every header field is present once and well
// formed, the element count times the element size does not overflow and equals the bytes after
// the header exactly. Values are widened to f64 exactly; non-finite values are kept (callers that
// need finite values check them, see check_lukv_curve_file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvaudit::methods {

struct NpyArray {
  std::vector<std::int64_t> shape;  // row-major; empty = a scalar
  std::string descr;                // "<f4" or "<f8"
  std::vector<double> values;       // prod(shape) values, widened exactly
};

// Reads a whole .npy file.
NpyArray read_npy_file(const std::string& path);
// The same over bytes already in memory, `source` naming them in messages (the fuzzing entry
// point, fuzz/fuzz_npy_file.cpp).
NpyArray parse_npy(const std::vector<unsigned char>& bytes, const std::string& source);

// LU-KV's budget curve (methods/lukv.h): a float .npy of shape [99, layers, KV heads] holding the
// prune ratio of target index t = round(100·cr) − 1, layer, KV head; every value finite. Throws
// std::invalid_argument ("<path>: ..."). kLukvTargets = 99 (cr = 0.01 .. 0.99).
inline constexpr std::int64_t kLukvTargets = 99;
NpyArray read_lukv_curve(const std::string& path);
// The plan-time content check of lukv.curve (ParamSpec::check_file): as read_lukv_curve, the
// message without the path (the plan writes "manifest:line:col: methods.<config>.curve: <path>: ").
// The model's layer and KV-head counts are checked at plan time against each model of the grids
// (suite/cli/plan_checks.cpp) and again by the method on every capture.
void check_lukv_curve_file(const std::string& path);

}  // namespace kvaudit::methods
