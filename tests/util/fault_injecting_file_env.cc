#include "tests/util/fault_injecting_file_env.h"

#include <algorithm>

namespace mirrored {
namespace {

std::string ParentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Normalize(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

class FaultInjectingFileEnv::File : public WritableFile {
 public:
  File(FaultInjectingFileEnv* env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}

  Status Append(std::string_view data) override {
    MIRRORED_RETURN_IF_ERROR(env_->Tick("append " + path_));
    MIRRORED_RETURN_IF_ERROR(base_->Append(data));
    env_->RecordAppend(path_, data.size());
    return OkStatus();
  }
  Status Sync() override {
    MIRRORED_RETURN_IF_ERROR(env_->Tick("fsync " + path_));
    MIRRORED_RETURN_IF_ERROR(base_->Sync());
    env_->RecordSync(path_);
    return OkStatus();
  }
  Status Close() override {
    MIRRORED_RETURN_IF_ERROR(env_->Tick("close " + path_));
    return base_->Close();
  }

 private:
  FaultInjectingFileEnv* env_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
};

void FaultInjectingFileEnv::InjectFault(Mode mode, int64_t operation_index) {
  std::lock_guard<std::mutex> lock(mu_);
  mode_ = mode;
  fault_index_ = operation_index;
}

int64_t FaultInjectingFileEnv::operation_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

bool FaultInjectingFileEnv::crashed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return crashed_;
}

std::vector<std::string> FaultInjectingFileEnv::operation_log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

Status FaultInjectingFileEnv::Tick(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t index = count_++;
  log_.push_back("#" + std::to_string(index) + " " + what);
  if (crashed_) return InternalError("simulated crash: " + what + " not performed");
  if (mode_ == Mode::kNone || index != fault_index_) return OkStatus();
  if (mode_ == Mode::kCrash) crashed_ = true;
  return InternalError("injected fault at file operation #" + std::to_string(index) + " (" + what +
                       ")");
}

void FaultInjectingFileEnv::RecordAppend(const std::string& path, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  files_[path].size += bytes;
}

void FaultInjectingFileEnv::RecordSync(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  FileState& f = files_[path];
  f.synced_size = f.size;
}

StatusOr<std::unique_ptr<WritableFile>> FaultInjectingFileEnv::NewWritableFile(
    const std::string& path_in) {
  const std::string path = Normalize(path_in);
  MIRRORED_RETURN_IF_ERROR(Tick("create " + path));
  const bool existed = base_->FileExists(path);
  MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> base, base_->NewWritableFile(path));
  {
    std::lock_guard<std::mutex> lock(mu_);
    files_[path] = FileState{};
    if (!existed) changes_.push_back({EntryChange::kCreateFile, path, "", false, false, {}});
  }
  return std::unique_ptr<WritableFile>(new File(this, path, std::move(base)));
}

Status FaultInjectingFileEnv::CreateDir(const std::string& path_in) {
  const std::string path = Normalize(path_in);
  MIRRORED_RETURN_IF_ERROR(Tick("mkdir " + path));
  MIRRORED_RETURN_IF_ERROR(base_->CreateDir(path));
  std::lock_guard<std::mutex> lock(mu_);
  changes_.push_back({EntryChange::kCreateDir, path, "", false, false, {}});
  return OkStatus();
}

Status FaultInjectingFileEnv::SyncDir(const std::string& path_in) {
  const std::string path = Normalize(path_in);
  MIRRORED_RETURN_IF_ERROR(Tick("fsync directory " + path));
  MIRRORED_RETURN_IF_ERROR(base_->SyncDir(path));
  std::lock_guard<std::mutex> lock(mu_);
  for (EntryChange& c : changes_) {
    if (ParentDir(c.path) == path) c.to_dir_synced = true;
    if (c.kind == EntryChange::kRename || c.kind == EntryChange::kExchange) {
      if (ParentDir(c.from) == path) c.from_dir_synced = true;
    }
  }
  std::erase_if(changes_, [](const EntryChange& c) {
    const bool two_dirs = c.kind == EntryChange::kRename || c.kind == EntryChange::kExchange;
    return c.to_dir_synced && (!two_dirs || c.from_dir_synced);
  });
  return OkStatus();
}

Status FaultInjectingFileEnv::Rename(const std::string& from_in, const std::string& to_in) {
  const std::string from = Normalize(from_in);
  const std::string to = Normalize(to_in);
  MIRRORED_RETURN_IF_ERROR(Tick("rename " + from + " -> " + to));
  std::optional<std::string> replaced;
  if (base_->FileExists(to)) {
    StatusOr<std::string> old = base_->ReadFile(to);  // fails for a directory: nothing to keep
    if (old.ok()) replaced = std::move(*old);
  }
  MIRRORED_RETURN_IF_ERROR(base_->Rename(from, to));
  std::lock_guard<std::mutex> lock(mu_);
  // Files (and files under a renamed directory) keep their sync state.
  std::map<std::string, FileState> moved;
  MoveTrackedLocked(from, to, &moved);
  for (auto& [p, state] : moved) files_[p] = state;
  changes_.push_back({EntryChange::kRename, to, from, false, false, std::move(replaced)});
  return OkStatus();
}

void FaultInjectingFileEnv::MoveTrackedLocked(const std::string& from, const std::string& to,
                                              std::map<std::string, FileState>* moved) {
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->first == from || it->first.starts_with(from + "/")) {
      (*moved)[to + it->first.substr(from.size())] = it->second;
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
}

Status FaultInjectingFileEnv::Exchange(const std::string& a_in, const std::string& b_in) {
  const std::string a = Normalize(a_in);
  const std::string b = Normalize(b_in);
  MIRRORED_RETURN_IF_ERROR(Tick("exchange " + a + " <-> " + b));
  MIRRORED_RETURN_IF_ERROR(base_->Exchange(a, b));
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, FileState> moved;
  MoveTrackedLocked(a, b, &moved);
  MoveTrackedLocked(b, a, &moved);  // the old b entries, not the ones just moved
  for (auto& [p, state] : moved) files_[p] = state;
  changes_.push_back({EntryChange::kExchange, b, a, false, false, {}});
  return OkStatus();
}

Status FaultInjectingFileEnv::RemoveFile(const std::string& path) {
  MIRRORED_RETURN_IF_ERROR(Tick("unlink " + path));
  MIRRORED_RETURN_IF_ERROR(base_->RemoveFile(path));
  std::lock_guard<std::mutex> lock(mu_);
  files_.erase(Normalize(path));
  return OkStatus();
}

Status FaultInjectingFileEnv::RemoveTree(const std::string& path_in) {
  const std::string path = Normalize(path_in);
  MIRRORED_RETURN_IF_ERROR(Tick("remove tree " + path));
  MIRRORED_RETURN_IF_ERROR(base_->RemoveTree(path));
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(
      files_, [&](const auto& kv) { return kv.first == path || kv.first.starts_with(path + "/"); });
  return OkStatus();
}

StatusOr<std::vector<std::string>> FaultInjectingFileEnv::ListDir(const std::string& path) {
  MIRRORED_RETURN_IF_ERROR(Tick("list " + path));
  return base_->ListDir(path);
}

StatusOr<std::string> FaultInjectingFileEnv::ReadFile(const std::string& path) {
  MIRRORED_RETURN_IF_ERROR(Tick("read " + path));
  return base_->ReadFile(path);
}

StatusOr<std::string> FaultInjectingFileEnv::ReadFilePrefix(const std::string& path,
                                                            uint64_t max_bytes) {
  MIRRORED_RETURN_IF_ERROR(Tick("read prefix " + path));
  return base_->ReadFilePrefix(path, max_bytes);
}

StatusOr<uint64_t> FaultInjectingFileEnv::GetFileSize(const std::string& path) {
  MIRRORED_RETURN_IF_ERROR(Tick("stat " + path));
  return base_->GetFileSize(path);
}

bool FaultInjectingFileEnv::FileExists(const std::string& path) {
  if (!Tick("exists " + path).ok()) return false;
  return base_->FileExists(path);
}

Status FaultInjectingFileEnv::DropUnsyncedState() {
  std::map<std::string, FileState> files;
  std::vector<EntryChange> changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    files.swap(files_);
    changes.swap(changes_);
  }
  for (const auto& [path, state] : files) {
    if (state.size == state.synced_size || !base_->FileExists(path)) continue;
    MIRRORED_ASSIGN_OR_RETURN(std::string kept, base_->ReadFilePrefix(path, state.synced_size));
    MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, base_->NewWritableFile(path));
    MIRRORED_RETURN_IF_ERROR(f->Append(kept));
    MIRRORED_RETURN_IF_ERROR(f->Close());
  }
  for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
    switch (it->kind) {
      case EntryChange::kCreateFile: {
        Status s = base_->RemoveFile(it->path);
        if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
        break;
      }
      case EntryChange::kCreateDir:
        MIRRORED_RETURN_IF_ERROR(base_->RemoveTree(it->path));
        break;
      case EntryChange::kExchange:
        if (!base_->FileExists(it->path) || !base_->FileExists(it->from)) break;  // removed since
        MIRRORED_RETURN_IF_ERROR(base_->Exchange(it->path, it->from));
        break;
      case EntryChange::kRename:
        if (!base_->FileExists(it->path)) break;  // removed since: removals are durable
        MIRRORED_RETURN_IF_ERROR(base_->Rename(it->path, it->from));
        if (it->replaced_content) {
          MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f,
                                    base_->NewWritableFile(it->path));
          MIRRORED_RETURN_IF_ERROR(f->Append(*it->replaced_content));
          MIRRORED_RETURN_IF_ERROR(f->Close());
        }
        break;
    }
  }
  return OkStatus();
}

}  // namespace mirrored
