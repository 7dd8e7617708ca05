// TlsFileSet: one task's TLS files (the CA to trust, its certificate and
// key) as written by the launcher, and the MIRRORED_TLS_* variables that
// hand them to mirrored-worker. Files are mode 0600 in a directory of mode
// 0700: the key is a secret of the job.
//
//   MIRRORED_ASSIGN_OR_RETURN(TlsFileSet tls, WriteLocalJobTls(run_dir));   // RUN_DIR/tls/
//   env = WithTlsVariables(env, tls);   // MIRRORED_TLS_CA=..., MIRRORED_TLS_CERT=..., MIRRORED_TLS_KEY=...
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/tls/certificate_authority.h"

namespace mirrored {

struct TlsFileSet {
  std::string ca_file;    // the CA certificate every task trusts
  std::string cert_file;  // this task's certificate (server and client)
  std::string key_file;   // its key

  // "MIRRORED_TLS_CA=...", "MIRRORED_TLS_CERT=...", "MIRRORED_TLS_KEY=...".
  std::vector<std::string> Environment() const;
};

// Writes `contents` to `path` readable by its owner alone (mode 0600, also
// when the file existed). Errors: the file system's, naming the path.
Status WritePrivateFile(const std::string& path, const std::string& contents);

// Makes `dir` (mode 0700; an existing one is tightened to it) and writes
// ca.pem, cert.pem and key.pem into it.
StatusOr<TlsFileSet> WriteTlsFiles(const std::string& dir, const std::string& ca_pem, const IssuedCertificate& issued);

// `mirrored-launch local`'s: a throwaway CA (its key never written) and one
// certificate for 127.0.0.1, ::1 and localhost that every task of the job
// presents, in RUN_DIR/tls/. Written again by each launch.
StatusOr<TlsFileSet> WriteLocalJobTls(const std::string& run_dir);

// `env` ("KEY=VALUE") without any MIRRORED_TLS_* entry, plus `tls`'s.
std::vector<std::string> WithTlsVariables(std::vector<std::string> env, const TlsFileSet& tls);

// WriteLocalJobTls(run_dir), then WithTlsVariables(env, ...): the
// environment of a local job's tasks.
StatusOr<std::vector<std::string>> WithLocalJobTls(const std::string& run_dir, std::vector<std::string> env);

}  // namespace mirrored
