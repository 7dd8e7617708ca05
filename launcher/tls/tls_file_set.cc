#include "launcher/tls/tls_file_set.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/launcher_environment.h"

namespace mirrored {
namespace {

Status FileError(const std::string& what, const std::string& path, int err) {
  const std::string message = "cannot " + what + " " + path + ": " + std::strerror(err);
  if (err == EACCES || err == EPERM || err == EROFS) return PermissionDeniedError(message);
  if (err == ENOENT || err == ENOTDIR) return NotFoundError(message);
  return UnavailableError(message);
}

}  // namespace

std::vector<std::string> TlsFileSet::Environment() const {
  return {std::string(kTlsCaVariable) + "=" + ca_file, std::string(kTlsCertVariable) + "=" + cert_file,
          std::string(kTlsKeyVariable) + "=" + key_file};
}

Status WritePrivateFile(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return FileError("write", path, errno);
  // An existing file keeps its mode through O_CREAT: tighten it first.
  if (::fchmod(fd, 0600) != 0) {
    const int err = errno;
    ::close(fd);
    return FileError("restrict the mode of", path, err);
  }
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return FileError("write", path, err);
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return FileError("write", path, errno);
  return OkStatus();
}

StatusOr<TlsFileSet> WriteTlsFiles(const std::string& dir, const std::string& ca_pem, const IssuedCertificate& issued) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return FileError("create the directory", dir, errno);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return FileError("stat", dir, errno);
  if (!S_ISDIR(st.st_mode)) return FailedPreconditionError(dir + " is not a directory: cannot write TLS files into it");
  if (::chmod(dir.c_str(), 0700) != 0) return FileError("restrict the mode of", dir, errno);
  TlsFileSet files{.ca_file = dir + "/ca.pem", .cert_file = dir + "/cert.pem", .key_file = dir + "/key.pem"};
  MIRRORED_RETURN_IF_ERROR(WritePrivateFile(files.key_file, issued.key_pem));
  MIRRORED_RETURN_IF_ERROR(WritePrivateFile(files.cert_file, issued.certificate_pem));
  MIRRORED_RETURN_IF_ERROR(WritePrivateFile(files.ca_file, ca_pem));
  return files;
}

StatusOr<TlsFileSet> WriteLocalJobTls(const std::string& run_dir) {
  MIRRORED_ASSIGN_OR_RETURN(CertificateAuthority ca,
                            CertificateAuthority::Create("mirrored-launch local job CA", kCertificateValidity));
  MIRRORED_ASSIGN_OR_RETURN(IssuedCertificate issued, ca.Issue({"127.0.0.1", "::1", "localhost"}, kCertificateValidity));
  return WriteTlsFiles(run_dir + "/tls", ca.certificate_pem(), issued);
}

std::vector<std::string> WithTlsVariables(std::vector<std::string> env, const TlsFileSet& tls) {
  env.erase(std::remove_if(env.begin(), env.end(),
                           [](const std::string& e) { return e.rfind(kTlsVariablePrefix, 0) == 0; }),
            env.end());
  for (std::string& entry : tls.Environment()) env.push_back(std::move(entry));
  return env;
}

StatusOr<std::vector<std::string>> WithLocalJobTls(const std::string& run_dir, std::vector<std::string> env) {
  MIRRORED_ASSIGN_OR_RETURN(TlsFileSet tls, WriteLocalJobTls(run_dir));
  return WithTlsVariables(std::move(env), tls);
}

}  // namespace mirrored
