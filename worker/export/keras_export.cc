#include "worker/export/keras_export.h"

#include <set>

#include "common/logging.h"
#include "common/run_dir/checkpoint_index.h"
#include "common/run_dir/checkpoint_reader.h"
#include "worker/checkpoint/model_checkpoint.h"
#include "worker/export/keras_weights_h5.h"
#include "worker/export/keras_weights_layout.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/keras_zoo_json.h"

namespace mirrored {
namespace {

std::string Parent(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

constexpr char kTempPrefix[] = ".tmp-";

// Refuses to replace a directory that holds anything but an export's files
// (and temporary ones a crash left): --export-dir may name a user's own.
Status CheckReplaceable(FileEnv* env, const std::string& export_dir) {
  if (!env->FileExists(export_dir)) return OkStatus();
  MIRRORED_ASSIGN_OR_RETURN(std::vector<std::string> entries, env->ListDir(export_dir));
  for (const std::string& e : entries) {
    if (e != kKerasJsonFileName && e != kKerasWeightsFileName && e.rfind(kTempPrefix, 0) != 0) {
      return InvalidArgumentError("export directory " + export_dir + " holds \"" + e + "\", which is not an export's " +
                                  "file; the export replaces the directory whole: give a new or empty one");
    }
    // An export's files are regular files: a directory of one's name is a
    // user's, and replacing the export directory would delete it whole.
    if (env->ListDir(JoinPath(export_dir, e)).ok()) {
      return InvalidArgumentError("export directory " + export_dir + " holds a directory \"" + e +
                                  "\", not an export's file; the export replaces the directory whole: give a new "
                                  "or empty one");
    }
  }
  return OkStatus();
}

// Removes what an export that crashed left beside the directory (best
// effort): its temporary directory, or the version it replaced.
void RemoveStraySiblings(FileEnv* env, const std::string& parent, const std::string& prefix) {
  StatusOr<std::vector<std::string>> entries = env->ListDir(parent);
  if (!entries.ok()) return;
  for (const std::string& e : *entries)
    if (e.rfind(prefix, 0) == 0) (void)env->RemoveTree(JoinPath(parent, e));
}

// Writes `files` (name, bytes) into a new directory beside `export_dir`,
// then puts it in place of `export_dir` whole (PublishDirectory): a reader
// finds the previous pair or the new one, never a new JSON beside old
// weights; a crash or an error leaves the previous pair.
Status WriteExportDir(FileEnv* env, const std::string& export_dir,
                      const std::vector<std::pair<std::string, std::string>>& files) {
  MIRRORED_RETURN_IF_ERROR(CheckReplaceable(env, export_dir));
  const std::string parent = Parent(export_dir), name = BaseName(export_dir);
  RemoveStraySiblings(env, parent, kTempPrefix + name + "-");
  const std::string temp = JoinPath(parent, kTempPrefix + name + "-" + RandomHexSuffix());
  StatusOr<std::string> replaced = [&]() -> StatusOr<std::string> {
    MIRRORED_RETURN_IF_ERROR(env->CreateDir(temp));
    for (const auto& [file_name, bytes] : files) {
      MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, env->NewWritableFile(JoinPath(temp, file_name)));
      MIRRORED_RETURN_IF_ERROR(f->Append(bytes));
      MIRRORED_RETURN_IF_ERROR(f->Sync());
      MIRRORED_RETURN_IF_ERROR(f->Close());
    }
    MIRRORED_RETURN_IF_ERROR(env->SyncDir(temp));
    return PublishDirectory(env, parent, temp, name, kTempPrefix + name + "-replaced-");
  }();
  if (!replaced.ok()) {
    if (env->FileExists(temp)) (void)env->RemoveTree(temp);  // best effort
    return replaced.status();
  }
  if (!replaced->empty()) (void)env->RemoveTree(*replaced);  // best effort: a stray .tmp- sibling
  return OkStatus();
}

// Where a checkpoint tensor lies: the host buffer of its kind and its place.
struct TensorPlace {
  const std::vector<float>* buffer;
  const model::TensorInfo* info;
};

// The Keras groups of `layout`, their variables viewing `params` / `state`.
// Every tensor of the store must find its place, and every place a tensor.
StatusOr<std::vector<KerasWeightsGroup>> Groups(const std::vector<KerasLayerWeights>& layout,
                                                const model::ParameterStore& store, const std::vector<float>& params,
                                                const std::vector<float>& state, const std::string& model_name) {
  std::map<std::string, TensorPlace> tensors;
  for (const auto& t : store.trainable()) tensors[t.name] = {&params, &t};
  for (const auto& t : store.state()) tensors[t.name] = {&state, &t};
  std::vector<KerasWeightsGroup> groups;
  std::set<std::string> used;
  for (const KerasLayerWeights& l : layout) {
    KerasWeightsGroup g{l.group, l.layer_name, {}};
    for (const std::string& name : l.tensors) {
      auto it = tensors.find(name);
      if (it == tensors.end())
        return InternalError("model " + model_name + ": Keras layer \"" + l.layer_name + "\" needs tensor \"" + name +
                             "\", which the model lacks");
      g.variables.push_back({it->second.info->shape, it->second.buffer->data() + it->second.info->offset});
      used.insert(name);
    }
    groups.push_back(std::move(g));
  }
  for (const auto& [name, place] : tensors)
    if (!used.count(name))
      return InternalError("model " + model_name + ": tensor \"" + name + "\" has no place in its Keras model");
  return groups;
}

}  // namespace

StatusOr<KerasExport> ExportKeras(FileEnv* env, const model::ModelChoice& choice, model::Model& model,
                                  const std::string& export_dir) {
  nlohmann::json keras_json;
  std::map<std::string, std::string> prefixes;
  if (choice.is_keras()) {
    keras_json = choice.RecordedJson();
  } else {
    MIRRORED_ASSIGN_OR_RETURN(model::KerasZooModel zoo, model::KerasZooModel::Build(choice.name(), model.input_shape(), model.classes()));
    keras_json = std::move(zoo.json);
    prefixes = std::move(zoo.tensor_prefix);
  }
  StatusOr<std::vector<KerasLayerWeights>> layout = KerasWeightsLayout(keras_json, prefixes);
  if (!layout.ok()) return InternalError("model " + choice.name() + ": " + layout.status().message());
  const std::vector<float> params = model.store().DownloadParams();
  const std::vector<float> state = model.store().DownloadState();
  MIRRORED_ASSIGN_OR_RETURN(std::vector<KerasWeightsGroup> groups,
                            Groups(*layout, model.store(), params, state, choice.name()));
  KerasExport out;
  out.weights_path = JoinPath(export_dir, kKerasWeightsFileName);
  out.json_path = JoinPath(export_dir, kKerasJsonFileName);
  out.weight_layers = static_cast<int>(groups.size());
  MIRRORED_ASSIGN_OR_RETURN(std::string h5, EncodeKerasWeightsH5(groups, out.weights_path));
  MIRRORED_RETURN_IF_ERROR(WriteExportDir(env, export_dir, {{kKerasJsonFileName, keras_json.dump(2) + "\n"},
                                                            {kKerasWeightsFileName, std::move(h5)}}));
  return out;
}

Status ExportFinalWeights(const model::ModelChoice& choice, model::Model& model, const std::string& run_dir) {
  MIRRORED_ASSIGN_OR_RETURN(KerasExport e,
                            ExportKeras(FileEnv::Default(), choice, model, JoinPath(run_dir, kExportDirName)));
  MIRRORED_LOG(INFO) << "weights for Keras: " << e.json_path << ", " << e.weights_path
                     << " (tf_keras.models.model_from_json, then load_weights)";
  return OkStatus();
}

namespace {

// The checkpoint `path` names, and the run directory's export/ (empty when
// it lies in none). A damaged or missing one is InvalidArgument (exit 2):
// --export's input, not the job's.
StatusOr<LoadedCheckpoint> LoadForExport(FileEnv* env, const std::string& path, std::string* default_export_dir) {
  const bool run_dir = env->FileExists(CheckpointsDir(path));
  CheckpointReader reader(env, run_dir ? path : Parent(Parent(path)), /*model_only=*/true);
  StatusOr<LoadedCheckpoint> loaded = NotFoundError("");
  if (run_dir) {
    *default_export_dir = JoinPath(path, kExportDirName);
    loaded = reader.LoadLatest(CheckpointReader::IfAllDamaged::kReport);
  } else {
    const std::optional<int64_t> step = ParseCheckpointDirName(BaseName(path));
    if (!step) {
      return InvalidArgumentError("--export " + path + ": not a checkpoint (a ckpt-<step> directory) nor a run "
                                  "directory (one holding checkpoints/)");
    }
    if (BaseName(Parent(path)) == "checkpoints") *default_export_dir = JoinPath(Parent(Parent(path)), kExportDirName);
    loaded = reader.LoadDirectory(path, *step);
  }
  if (loaded.ok() || ExitCodeFor(loaded.status()) == kExitUsage) return loaded;
  return InvalidArgumentError("--export " + path + ": " + loaded.status().message());
}

}  // namespace

StatusOr<KerasExport> ExportCheckpoint(FileEnv* env, const std::string& path, std::string export_dir) {
  std::string default_dir;
  MIRRORED_ASSIGN_OR_RETURN(LoadedCheckpoint checkpoint, LoadForExport(env, path, &default_dir));
  if (export_dir.empty()) export_dir = default_dir;
  if (export_dir.empty()) {
    return InvalidArgumentError("--export " + path + ": the checkpoint lies in no run directory; give --export-dir");
  }
  const CheckpointState& st = checkpoint.info.state;
  const std::string source = JoinPath(checkpoint.info.dir, kStateFileName);
  StatusOr<model::ModelChoice> choice = model::ModelChoice::FromRecorded(st.model, st.model_json, source);
  if (!choice.ok()) return InvalidArgumentError(choice.status().message());
  // The data it trained on; checkpoints of earlier versions record none:
  // a Keras model's own input, else Fashion-MNIST's (the only data then).
  model::Shape3 input{28, 28, 1};
  if (st.data_shape.size() == 3) {
    input = {int(st.data_shape[0]), int(st.data_shape[1]), int(st.data_shape[2])};
  } else if (choice->is_keras()) {
    input = choice->keras()->input_shape();
  }
  const int classes = st.classes > 0 ? int(st.classes) : choice->is_keras() ? choice->keras()->outputs() : 10;
  StatusOr<std::unique_ptr<model::Model>> model = choice->Create(model::MakeCpuBackend(), 0, input, classes);
  if (!model.ok()) return InvalidArgumentError(source + ": " + model.status().message());
  if (Status s = RestoreModel(checkpoint, **model, nullptr); !s.ok()) return InvalidArgumentError(s.message());
  MIRRORED_ASSIGN_OR_RETURN(KerasExport out, ExportKeras(env, *choice, **model, export_dir));
  out.step = checkpoint.info.step;
  return out;
}

}  // namespace mirrored
