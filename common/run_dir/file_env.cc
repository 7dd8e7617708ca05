#include "common/run_dir/file_env.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <random>

namespace mirrored {

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

Status CreateDirIfMissing(FileEnv* env, const std::string& path) {
  Status s = env->CreateDir(path);
  if (s.code() == StatusCode::kAlreadyExists) return OkStatus();
  return s;
}

Status WriteFileAtomically(FileEnv* env, const std::string& dir, const std::string& name,
                           std::string_view content, const std::string& temp_prefix) {
  const std::string temp = JoinPath(dir, temp_prefix + RandomHexSuffix());
  const std::string target = JoinPath(dir, name);
  Status s = [&]() -> Status {
    MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(temp));
    MIRRORED_RETURN_IF_ERROR(file->Append(content));
    MIRRORED_RETURN_IF_ERROR(file->Sync());
    MIRRORED_RETURN_IF_ERROR(file->Close());
    MIRRORED_RETURN_IF_ERROR(env->Rename(temp, target));
    return env->SyncDir(dir);
  }();
  if (!s.ok() && env->FileExists(temp)) (void)env->RemoveFile(temp);  // best effort
  return s;
}

StatusOr<std::string> PublishDirectory(FileEnv* env, const std::string& dir, const std::string& temp,
                                       const std::string& name, const std::string& aside_prefix) {
  const std::string target = JoinPath(dir, name);
  std::string replaced;
  if (env->FileExists(target)) {
    Status swapped = env->Exchange(temp, target);
    if (swapped.ok()) {
      MIRRORED_RETURN_IF_ERROR(env->SyncDir(dir));
      return temp;
    }
    if (swapped.code() != StatusCode::kUnimplemented) return swapped;
    replaced = JoinPath(dir, aside_prefix + RandomHexSuffix());
    MIRRORED_RETURN_IF_ERROR(env->Rename(target, replaced));
  }
  MIRRORED_RETURN_IF_ERROR(env->Rename(temp, target));
  MIRRORED_RETURN_IF_ERROR(env->SyncDir(dir));
  return replaced;
}

std::string RandomHexSuffix() {
  static std::mutex mu;
  static std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }());
  uint64_t v;
  {
    std::lock_guard<std::mutex> lock(mu);
    v = rng();
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace mirrored
