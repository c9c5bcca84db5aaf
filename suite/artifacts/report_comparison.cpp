// The bundled report against the recomputed one (see report_comparison.h).
#include "suite/artifacts/report_comparison.h"

#include <hdf5.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "suite/records/hdf5_attributes.h"
#include "suite/records/hdf5_handle.h"

namespace kvaudit::artifacts {
namespace {

namespace fs = std::filesystem;
using namespace kvaudit::h5;

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream b;
  b << in.rdbuf();
  return b.str();
}

// One /tables/<id> dataset rendered as exact text per value (doubles as their bit patterns'
// shortest round-trip form; see report_comparison.h).
struct StoredTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

std::string exact(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.17g [0x%016llx]", v,
                static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(v)));
  return buffer;
}

StoredTable read_table(hid_t file_id, const std::string& id, const std::string& file) {
  StoredTable out;
  const std::string path = "/tables/" + id;
  const Dataset ds = adopt<Kind::dataset>(H5Dopen2(file_id, path.c_str(), H5P_DEFAULT),
                                          Blame::input, file, "opening " + path);
  const Datatype type =
      adopt<Kind::datatype>(H5Dget_type(ds.get()), Blame::input, file, "H5Dget_type " + path);
  if (H5Tget_class(type.get()) != H5T_COMPOUND) {
    throw InputError(file + ": " + path + " is not a compound dataset");
  }
  const int members = H5Tget_nmembers(type.get());
  if (members <= 0 || members > 10'000) throw InputError(file + ": " + path + ": bad member count");
  const Dataspace space =
      adopt<Kind::dataspace>(H5Dget_space(ds.get()), Blame::input, file, "H5Dget_space " + path);
  if (H5Sget_simple_extent_ndims(space.get()) != 1) {
    throw InputError(file + ": " + path + " is not one-dimensional");
  }
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  if (n > 10'000'000) throw InputError(file + ": " + path + ": more than 10,000,000 rows");
  // Read member by member into native buffers.
  out.rows.assign(static_cast<std::size_t>(n), {});
  for (int m = 0; m < members; ++m) {
    char* raw_name = H5Tget_member_name(type.get(), static_cast<unsigned>(m));
    const std::string name = raw_name != nullptr ? raw_name : "";
    H5free_memory(raw_name);
    out.columns.push_back(name);
    const Datatype member =
        adopt<Kind::datatype>(H5Tget_member_type(type.get(), static_cast<unsigned>(m)),
                              Blame::input, file, "H5Tget_member_type");
    const H5T_class_t cls = H5Tget_class(member.get());
    hid_t native = H5I_INVALID_HID;
    Datatype owned;
    std::size_t size = 0;
    if (cls == H5T_STRING) {
      owned = make_vlen_utf8_type();
      native = owned.get();
      size = sizeof(char*);
    } else if (cls == H5T_INTEGER || cls == H5T_FLOAT || cls == H5T_ENUM) {
      owned = adopt<Kind::datatype>(H5Tget_native_type(member.get(), H5T_DIR_ASCEND), Blame::input,
                                    file, "H5Tget_native_type");
      native = owned.get();
      size = H5Tget_size(native);
      if (size == 0 || size > 8) throw InputError(file + ": " + path + "." + name + ": bad size");
    } else {
      throw InputError(file + ": " + path + "." + name + ": unsupported member class");
    }
    const Datatype one =
        adopt<Kind::datatype>(H5Tcreate(H5T_COMPOUND, size), Blame::internal, file, "H5Tcreate");
    check(H5Tinsert(one.get(), name.c_str(), 0, native), Blame::internal, file, "H5Tinsert");
    std::vector<unsigned char> buffer(size * std::max<std::size_t>(static_cast<std::size_t>(n), 1),
                                      0);
    if (n > 0) {
      check(H5Dread(ds.get(), one.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()),
            Blame::input, file, "reading " + path + "." + name);
    }
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
      const unsigned char* p = buffer.data() + r * size;
      std::string text;
      if (cls == H5T_STRING) {
        const char* s = nullptr;
        std::memcpy(&s, p, sizeof s);
        text = s != nullptr ? s : "";
      } else if (cls == H5T_FLOAT) {
        double v = 0;
        if (size == sizeof(double)) {
          std::memcpy(&v, p, sizeof v);
        } else {
          float f = 0;
          std::memcpy(&f, p, sizeof f);
          v = f;
        }
        text = exact(v);
      } else {
        std::int64_t v = 0;
        std::memcpy(&v, p, size);  // little-endian host: the low bytes
        if (H5Tget_sign(native) == H5T_SGN_2 && size < 8 && (p[size - 1] & 0x80) != 0) {
          v -= std::int64_t{1} << (8 * size);
        }
        text = std::to_string(v);
      }
      out.rows[r].push_back(std::move(text));
    }
    if (cls == H5T_STRING && n > 0) {
      const Dataspace all = adopt<Kind::dataspace>(H5Screate_simple(1, &n, nullptr),
                                                   Blame::internal, file, "H5Screate_simple");
      H5Dvlen_reclaim(one.get(), all.get(), H5P_DEFAULT, buffer.data());
    }
  }
  return out;
}

std::map<std::string, StoredTable> read_summary(const fs::path& path) {
  std::map<std::string, StoredTable> out;
  const std::string file = path.string();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const File f = adopt<Kind::file>(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), Blame::input,
                                   file, "H5Fopen");
  if (H5Lexists(f.get(), "/tables", H5P_DEFAULT) <= 0) return out;
  const Group g = adopt<Kind::group>(H5Gopen2(f.get(), "/tables", H5P_DEFAULT), Blame::input, file,
                                     "opening /tables");
  H5G_info_t info{};
  check(H5Gget_info(g.get(), &info), Blame::input, file, "H5Gget_info");
  if (info.nlinks > 10'000) throw InputError(file + ": more than 10,000 tables");
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[512] = {};
    if (H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                           H5P_DEFAULT) <= 0) {
      throw InputError(file + ": cannot read the name of table " + std::to_string(i));
    }
    out.emplace(name, read_table(f.get(), name, file));
  }
  return out;
}

std::string first_difference(const StoredTable& a, const StoredTable& b) {
  if (a.columns != b.columns) return "differs: the columns differ";
  if (a.rows.size() != b.rows.size()) {
    return "differs: " + std::to_string(a.rows.size()) + " rows bundled, " +
           std::to_string(b.rows.size()) + " recomputed";
  }
  for (std::size_t r = 0; r < a.rows.size(); ++r) {
    for (std::size_t c = 0; c < a.columns.size(); ++c) {
      if (a.rows[r][c] != b.rows[r][c]) {
        return "differs: row " + std::to_string(r + 1) + ", column " + a.columns[c] + ": bundled " +
               a.rows[r][c] + ", recomputed " + b.rows[r][c];
      }
    }
  }
  return "match";
}

std::string first_csv_difference(const std::string& a, const std::string& b) {
  if (a == b) return "match";
  // Name the first differing line and field.
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  std::size_t line = 0;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(sa, la));
    const bool gb = static_cast<bool>(std::getline(sb, lb));
    ++line;
    if (!ga || !gb || la != lb) {
      return "differs at line " + std::to_string(line) + ": bundled '" + (ga ? la : "<end>") +
             "', recomputed '" + (gb ? lb : "<end>") + "'";
    }
  }
}

}  // namespace

std::vector<TableVerdict> compare_reports(const fs::path& bundled, const fs::path& recomputed) {
  std::set<std::string> ids;
  const auto collect = [&](const fs::path& dir) {
    if (!fs::is_directory(dir / "tables")) return;
    for (const auto& e : fs::directory_iterator(dir / "tables")) {
      if (e.path().extension() == ".csv") ids.insert(e.path().stem().string());
    }
  };
  collect(bundled);
  collect(recomputed);
  std::map<std::string, StoredTable> h5_bundled, h5_recomputed;
  std::string h5_error;
  try {
    if (fs::exists(bundled / "summary.h5")) h5_bundled = read_summary(bundled / "summary.h5");
    if (fs::exists(recomputed / "summary.h5")) {
      h5_recomputed = read_summary(recomputed / "summary.h5");
    }
  } catch (const std::exception& e) {
    h5_error = e.what();
  }
  for (const auto& [id, table] : h5_bundled) ids.insert(id);
  for (const auto& [id, table] : h5_recomputed) ids.insert(id);

  std::vector<TableVerdict> out;
  for (const std::string& id : ids) {
    TableVerdict v;
    v.table = id;
    const fs::path a = bundled / "tables" / (id + ".csv");
    const fs::path b = recomputed / "tables" / (id + ".csv");
    if (!fs::exists(a) && !fs::exists(b)) {
      v.csv = "match";  // neither report writes a CSV for it (summary.h5 only)
    } else if (!fs::exists(a)) {
      v.csv = "missing from the bundle";
    } else if (!fs::exists(b)) {
      v.csv = "not recomputed (the bundled report has a table the shards do not give)";
    } else {
      v.csv = first_csv_difference(file_text(a), file_text(b));
    }
    if (!h5_error.empty()) {
      v.summary_h5 = "unreadable: " + h5_error;
    } else {
      const auto ia = h5_bundled.find(id);
      const auto ib = h5_recomputed.find(id);
      if (ia == h5_bundled.end() && ib == h5_recomputed.end()) {
        v.summary_h5 = "";
      } else if (ia == h5_bundled.end()) {
        v.summary_h5 = "missing from the bundle";
      } else if (ib == h5_recomputed.end()) {
        v.summary_h5 = "not recomputed";
      } else {
        v.summary_h5 = first_difference(ia->second, ib->second);
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace kvaudit::artifacts
