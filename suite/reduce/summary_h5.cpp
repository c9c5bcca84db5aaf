// summary.h5 writer (see summary_h5.h).
#include "suite/reduce/summary_h5.h"

#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "suite/records/hdf5_attributes.h"
#include "suite/records/hdf5_handle.h"

namespace kvaudit::reduce {
namespace {

using namespace kvaudit::h5;

Datatype bool_enum(const std::string& file) {
  Datatype t = adopt<Kind::datatype>(H5Tenum_create(H5T_NATIVE_INT8), Blame::internal, file,
                                     "H5Tenum_create");
  const std::int8_t no = 0, yes = 1;
  check(H5Tenum_insert(t.get(), "FALSE", &no), Blame::internal, file, "H5Tenum_insert");
  check(H5Tenum_insert(t.get(), "TRUE", &yes), Blame::internal, file, "H5Tenum_insert");
  return t;
}

std::size_t member_size(ColumnType type) {
  switch (type) {
    case ColumnType::text:
      return sizeof(const char*);
    case ColumnType::integer:
      return sizeof(std::int64_t);
    case ColumnType::real:
    case ColumnType::pvalue:
      return sizeof(double);
    case ColumnType::flag:
      return sizeof(std::int8_t);
  }
  return 0;
}

void write_table(hid_t file_id, const Table& t, const std::string& file) {
  std::vector<std::size_t> offset;
  std::size_t row_size = 0;
  for (const auto& c : t.columns) {
    offset.push_back(row_size);
    row_size += member_size(c.type);
  }
  if (row_size == 0) return;
  const Datatype text = make_vlen_utf8_type();
  const Datatype flag = bool_enum(file);
  const Datatype compound = adopt<Kind::datatype>(H5Tcreate(H5T_COMPOUND, row_size),
                                                  Blame::internal, file, "H5Tcreate(compound)");
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    hid_t member = H5T_NATIVE_INT64;
    switch (t.columns[i].type) {
      case ColumnType::text:
        member = text.get();
        break;
      case ColumnType::integer:
        member = H5T_NATIVE_INT64;
        break;
      case ColumnType::real:
      case ColumnType::pvalue:
        member = H5T_NATIVE_DOUBLE;
        break;
      case ColumnType::flag:
        member = flag.get();
        break;
    }
    check(H5Tinsert(compound.get(), t.columns[i].name.c_str(), offset[i], member), Blame::internal,
          file, "H5Tinsert(" + t.id + "." + t.columns[i].name + ")");
  }
  std::vector<unsigned char> buffer(row_size * std::max<std::size_t>(t.rows.size(), 1), 0);
  static const char* const kEmpty = "";
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    unsigned char* base = buffer.data() + r * row_size;
    for (std::size_t i = 0; i < t.columns.size(); ++i) {
      const Value& v = t.rows[r][i];
      unsigned char* p = base + offset[i];
      switch (t.columns[i].type) {
        case ColumnType::text: {
          const auto* s = std::get_if<std::string>(&v);
          const char* ptr = s != nullptr ? s->c_str() : kEmpty;
          std::memcpy(p, &ptr, sizeof ptr);
          break;
        }
        case ColumnType::integer: {
          std::int64_t x = kH5IntegerNotApplicable;
          if (const auto* n = std::get_if<std::int64_t>(&v)) x = *n;
          std::memcpy(p, &x, sizeof x);
          break;
        }
        case ColumnType::real:
        case ColumnType::pvalue: {
          double x = std::numeric_limits<double>::quiet_NaN();
          if (const auto* d = std::get_if<double>(&v)) x = *d;
          if (const auto* n = std::get_if<std::int64_t>(&v)) x = static_cast<double>(*n);
          std::memcpy(p, &x, sizeof x);
          break;
        }
        case ColumnType::flag: {
          std::int8_t x = 0;
          if (const auto* b = std::get_if<bool>(&v)) x = *b ? 1 : 0;
          std::memcpy(p, &x, sizeof x);
          break;
        }
      }
    }
  }
  const hsize_t dims[1] = {static_cast<hsize_t>(t.rows.size())};
  const Dataspace space = adopt<Kind::dataspace>(H5Screate_simple(1, dims, nullptr),
                                                 Blame::internal, file, "H5Screate_simple");
  const std::string path = "/tables/" + t.id;
  const PropertyList links =
      adopt<Kind::property_list>(H5Pcreate(H5P_LINK_CREATE), Blame::internal, file, "H5Pcreate");
  check(H5Pset_create_intermediate_group(links.get(), 1), Blame::internal, file,
        "H5Pset_create_intermediate_group");
  const Dataset ds =
      adopt<Kind::dataset>(H5Dcreate2(file_id, path.c_str(), compound.get(), space.get(),
                                      links.get(), H5P_DEFAULT, H5P_DEFAULT),
                           Blame::internal, file, "creating " + path);
  if (!t.rows.empty())
    check(H5Dwrite(ds.get(), compound.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()),
          Blame::internal, file, "writing " + path);
  write_string_attribute(ds.get(), "title", t.title, file);
  write_string_attribute(ds.get(), "description", t.description, file);
  write_int64_attribute(ds.get(), "partial_rows", static_cast<std::int64_t>(t.partial_rows()),
                        file);
  for (const auto& [key, value] : t.attributes) write_string_attribute(ds.get(), key, value, file);
}

}  // namespace

void write_summary_h5(const std::filesystem::path& path, const std::vector<Table>& tables,
                      const std::vector<std::pair<std::string, std::string>>& root_attributes) {
  quiet_errors();
  const std::string file = path.string();
  File f = adopt<Kind::file>(H5Fcreate(file.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT),
                             Blame::internal, file, "creating summary.h5 (H5F_ACC_EXCL)");
  for (const auto& [key, value] : root_attributes)
    write_string_attribute(f.get(), key, value, file);
  write_int64_attribute(f.get(), "integer_not_applicable", kH5IntegerNotApplicable, file);
  for (const auto& t : tables) write_table(f.get(), t, file);
  check(f.close(), Blame::internal, file, "closing summary.h5");
}

}  // namespace kvaudit::reduce
