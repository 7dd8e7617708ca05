#include "worker/export/keras_weights_h5.h"

#include <hdf5.h>

#include "common/run_dir/file_env.h"

namespace mirrored {
namespace {

// The core driver grows its in-memory image by this much at a time.
constexpr size_t kCoreIncrementBytes = size_t{1} << 20;

// An HDF5 identifier, closed by `close` when it goes out of scope.
class H5Id {
 public:
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Id() {
    if (id_ >= 0) close_(id_);
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

class ImageWriter {
 public:
  // Objects without modification times: the same weights give the same
  // bytes (HDF5 stamps each object by default).
  explicit ImageWriter(const std::string& file_name)
      : file_name_(file_name), gcpl_(H5Pcreate(H5P_GROUP_CREATE), H5Pclose), dcpl_(H5Pcreate(H5P_DATASET_CREATE), H5Pclose) {}

  Status Init() const {
    if (!gcpl_.ok() || !dcpl_.ok() || H5Pset_obj_track_times(gcpl_.get(), 0) < 0 ||
        H5Pset_obj_track_times(dcpl_.get(), 0) < 0)
      return Fail("H5Pset_obj_track_times", "");
    return OkStatus();
  }
  hid_t gcpl() const { return gcpl_.get(); }

  Status Fail(const std::string& call, const std::string& object) const {
    return InternalError(file_name_ + ": HDF5 " + call + " failed" + (object.empty() ? "" : " for \"" + object + "\""));
  }

  // "name" = `value` as a fixed-length string attribute of `object`.
  Status NameAttribute(hid_t object, const std::string& where, const std::string& value) const {
    H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
    if (!type.ok() || H5Tset_size(type.get(), value.empty() ? 1 : value.size()) < 0) return Fail("H5Tset_size", where);
    H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
    H5Id attr(H5Acreate2(object, "name", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!space.ok() || !attr.ok() || H5Awrite(attr.get(), type.get(), value.c_str()) < 0)
      return Fail("H5Acreate2", where + " name");
    return OkStatus();
  }

  Status Variable(hid_t group, const std::string& where, const KerasVariable& v) const {
    std::vector<hsize_t> dims(v.shape.begin(), v.shape.end());
    H5Id space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
               H5Sclose);
    if (!space.ok()) return Fail("H5Screate_simple", where);
    const std::string name = where.substr(where.rfind('/') + 1);
    H5Id set(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl_.get(), H5P_DEFAULT),
             H5Dclose);
    if (!set.ok()) return Fail("H5Dcreate2", where);
    if (H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data) < 0)
      return Fail("H5Dwrite", where);
    return OkStatus();
  }

  // Makes each missing group above `path` ("layers" of "layers/dense/vars").
  Status Parents(hid_t file, const std::string& path) const {
    for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      const std::string parent = path.substr(0, slash);
      if (H5Lexists(file, parent.c_str(), H5P_DEFAULT) > 0) continue;
      H5Id group(H5Gcreate2(file, parent.c_str(), H5P_DEFAULT, gcpl_.get(), H5P_DEFAULT), H5Gclose);
      if (!group.ok()) return Fail("H5Gcreate2", parent);
    }
    return OkStatus();
  }

  Status Group(hid_t file, const KerasWeightsGroup& g) const {
    const std::string vars = g.path + "/vars";
    MIRRORED_RETURN_IF_ERROR(Parents(file, vars));
    H5Id group(H5Gcreate2(file, vars.c_str(), H5P_DEFAULT, gcpl_.get(), H5P_DEFAULT), H5Gclose);
    if (!group.ok()) return Fail("H5Gcreate2", vars);
    MIRRORED_RETURN_IF_ERROR(NameAttribute(group.get(), vars, g.layer_name));
    for (size_t i = 0; i < g.variables.size(); ++i)
      MIRRORED_RETURN_IF_ERROR(Variable(group.get(), vars + "/" + std::to_string(i), g.variables[i]));
    return OkStatus();
  }

  StatusOr<std::string> Image(hid_t file) const {
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) return Fail("H5Fflush", "");
    const ssize_t size = H5Fget_file_image(file, nullptr, 0);
    if (size <= 0) return Fail("H5Fget_file_image", "");
    std::string bytes(size_t(size), '\0');
    if (H5Fget_file_image(file, bytes.data(), bytes.size()) != size) return Fail("H5Fget_file_image", "");
    return bytes;
  }

 private:
  const std::string& file_name_;
  H5Id gcpl_, dcpl_;
};

}  // namespace

StatusOr<std::string> EncodeKerasWeightsH5(const std::vector<KerasWeightsGroup>& groups, const std::string& file_name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // failures become this Status, not lines on stderr
  const ImageWriter w(file_name);
  MIRRORED_RETURN_IF_ERROR(w.Init());
  H5Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), kCoreIncrementBytes, /*backing_store=*/0) < 0)
    return w.Fail("H5Pset_fapl_core", "");
  // A name of its own: the core driver keeps nothing on disk, but HDF5
  // refuses to create a file of the name of one open.
  const std::string image_name = "mirrored-keras-weights-" + RandomHexSuffix() + ".h5";
  H5Id file(H5Fcreate(image_name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!file.ok()) return w.Fail("H5Fcreate", "");
  H5Id root_vars(H5Gcreate2(file.get(), "vars", H5P_DEFAULT, w.gcpl(), H5P_DEFAULT), H5Gclose);
  if (!root_vars.ok()) return w.Fail("H5Gcreate2", "vars");
  for (const KerasWeightsGroup& g : groups) MIRRORED_RETURN_IF_ERROR(w.Group(file.get(), g));
  return w.Image(file.get());
}

}  // namespace mirrored
