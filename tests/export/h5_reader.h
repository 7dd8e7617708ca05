// Reads back what the export wrote, with the HDF5 C API (tests only): a
// dataset's shape and floats, a group's existence, a string attribute.
//
//   H5Reader r(path);
//   std::vector<int64_t> shape; std::vector<float> v = r.Floats("layers/dense/vars/0", &shape);
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mirrored {

class H5Reader {
 public:
  explicit H5Reader(const std::string& path) : file_(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)) {}
  ~H5Reader() {
    if (file_ >= 0) H5Fclose(file_);
  }
  bool ok() const { return file_ >= 0; }

  bool Exists(const std::string& path) const {
    // H5Lexists wants each parent to exist: walk the path.
    std::string prefix;
    size_t start = 0;
    while (start <= path.size()) {
      const size_t slash = path.find('/', start);
      prefix = path.substr(0, slash);
      if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
      if (slash == std::string::npos) return true;
      start = slash + 1;
    }
    return true;
  }

  // Names of the links in group `path`, in name order.
  std::vector<std::string> Children(const std::string& path) const {
    std::vector<std::string> names;
    hid_t g = H5Gopen2(file_, path.c_str(), H5P_DEFAULT);
    if (g < 0) return names;
    H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, nullptr,
               [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
                 static_cast<std::vector<std::string>*>(out)->push_back(name);
                 return 0;
               },
               &names);
    H5Gclose(g);
    return names;
  }

  std::vector<float> Floats(const std::string& path, std::vector<int64_t>* shape) const {
    std::vector<float> out;
    hid_t d = H5Dopen2(file_, path.c_str(), H5P_DEFAULT);
    if (d < 0) return out;
    hid_t space = H5Dget_space(d);
    const int rank = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> dims(size_t(rank > 0 ? rank : 0));
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    shape->assign(dims.begin(), dims.end());
    out.resize(size_t(H5Sget_simple_extent_npoints(space)));
    H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
    hid_t type = H5Dget_type(d);
    float_type_ = H5Tequal(type, H5T_IEEE_F32LE) > 0;
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(d);
    return out;
  }
  // The object's recorded modification time (0: none recorded), or -1.
  int64_t ModificationTime(const std::string& path) const {
    H5O_info_t info;
    if (H5Oget_info_by_name2(file_, path.c_str(), &info, H5O_INFO_TIME, H5P_DEFAULT) < 0) return -1;
    return static_cast<int64_t>(info.mtime);
  }

  // Whether the last Floats() dataset was stored as little-endian float32.
  bool last_was_float32() const { return float_type_; }

  std::string StringAttribute(const std::string& object, const std::string& name) const {
    hid_t a = H5Aopen_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) return "<none>";
    hid_t type = H5Aget_type(a);
    std::string value(H5Tget_size(type), '\0');
    H5Aread(a, type, value.data());
    H5Tclose(type);
    H5Aclose(a);
    return value.substr(0, value.find('\0'));
  }

 private:
  hid_t file_;
  mutable bool float_type_ = false;
};

}  // namespace mirrored
