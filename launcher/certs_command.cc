#include "launcher/certs_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/decimal_integer.h"
#include "common/flag_checks.h"
#include "common/launcher_environment.h"
#include "launcher/tls/certificate_authority.h"
#include "launcher/tls/tls_file_set.h"

namespace mirrored {
namespace {

// A certificate valid for longer than ten years outlives its key's safety.
constexpr int kMaxValidityDays = 3650;

// `text` as one shell word.
std::string ShellWord(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:+=,@") ==
                           std::string::npos) {
    return text;
  }
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

// DIR made (mode 0700) unless it exists; refused when it holds a CA already:
// a new one would invalidate every host's files. An existing directory
// keeps its mode (a shared one must not lose others' access): what certs
// writes into it is 0600 and 0700 itself.
Status PrepareDirectory(const std::string& dir) {
  const bool made = ::mkdir(dir.c_str(), 0700) == 0;
  if (!made && errno != EEXIST) return InvalidArgumentError("cannot create " + dir + ": " + std::strerror(errno));
  if (!std::filesystem::is_directory(dir)) return InvalidArgumentError(dir + " is not a directory");
  if (std::filesystem::exists(dir + "/ca.pem")) {
    return InvalidArgumentError(dir + "/ca.pem exists: certs makes a new CA, which would invalidate the files "
                                "of every host made with the old one; remove " + dir + " first, or choose another "
                                "directory");
  }
  if (made && ::chmod(dir.c_str(), 0700) != 0) {  // whatever the umask took away
    return InvalidArgumentError("cannot restrict " + dir + ": " + std::strerror(errno));
  }
  return OkStatus();
}

void PrintHost(std::ostream& out, const std::string& host, const TlsFileSet& files) {
  out << "# " << host << ": copy " << files.ca_file.substr(0, files.ca_file.rfind('/') + 1) << " to " << host
      << " (same path), then set there:\n";
  for (const std::string& entry : files.Environment()) {
    const size_t eq = entry.find('=');
    out << "export " << entry.substr(0, eq + 1) << ShellWord(entry.substr(eq + 1)) << "\n";
  }
}

}  // namespace

void CertsCommand::Register(CLI::App& app) {
  subcommand_ = app.add_subcommand(
      "certs", "Write a CA and a TLS certificate per host for a cluster's coordination service (docs/security.md)");
  subcommand_->add_option("dir", dir_, "Directory to write into: DIR/ca.pem and DIR/<host>/{ca,cert,key}.pem")
      ->required()
      ->check(NonEmptyPath("dir", "give the directory to write the CA and the hosts' files into"));
  subcommand_->add_option("--hosts", hosts_,
                          "The cluster's hosts as TF_CONFIG names them, comma-separated; more names of one host "
                          "after '+' (node1+10.0.0.1)")
      ->required();
  subcommand_->add_option("--days", days_, "Days the certificates are valid")
      ->capture_default_str()
      ->transform(DecimalInteger<int>());
}

StatusOr<std::vector<std::vector<std::string>>> CertsCommand::ParseHosts(const std::string& hosts) {
  std::vector<std::vector<std::string>> parsed;
  std::set<std::string> seen;
  for (const std::string& entry : Split(hosts, ',')) {
    std::vector<std::string> names = Split(entry, '+');
    for (const std::string& name : names) {
      if (Status s = CheckCertificateHost(name); !s.ok()) return InvalidArgumentError("--hosts: " + s.message());
      if (!seen.insert(name).second) return InvalidArgumentError("--hosts: \"" + name + "\" is given twice");
    }
    parsed.push_back(std::move(names));
  }
  return parsed;
}

int CertsCommand::Run(std::ostream& out, std::ostream& err) {
  auto fail = [&err](const Status& s) {
    err << "mirrored-launch certs: error: " << s.message() << "\n";
    return ExitCodeFor(s);
  };
  if (days_ < 1 || days_ > kMaxValidityDays) {
    return fail(InvalidArgumentError("--days " + std::to_string(days_) + " must be 1 to " +
                                     std::to_string(kMaxValidityDays)));
  }
  auto hosts = ParseHosts(hosts_);
  if (!hosts.ok()) return fail(hosts.status());
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(dir_, ec);
  if (ec) return fail(InvalidArgumentError("dir \"" + dir_ + "\": " + ec.message()));
  const std::string dir = absolute.lexically_normal().string();
  // Every certificate is made before anything is written: a name OpenSSL
  // refuses must not leave a ca.pem that blocks the next try.
  const std::chrono::hours validity(24 * days_);
  auto ca = CertificateAuthority::Create("mirrored cluster CA", validity);
  if (!ca.ok()) return fail(ca.status());
  std::vector<IssuedCertificate> issued;
  for (const std::vector<std::string>& names : *hosts) {
    auto one = ca->Issue(names, validity);
    if (!one.ok()) return fail(one.status());
    issued.push_back(std::move(*one));
  }
  if (Status s = PrepareDirectory(dir); !s.ok()) return fail(s);
  if (Status s = WritePrivateFile(dir + "/ca.pem", ca->certificate_pem()); !s.ok()) return fail(s);
  std::vector<TlsFileSet> written;
  for (size_t i = 0; i < hosts->size(); ++i) {
    auto files = WriteTlsFiles(dir + "/" + (*hosts)[i].front(), ca->certificate_pem(), issued[i]);
    if (!files.ok()) return fail(files.status());
    written.push_back(*files);
  }
  err << "mirrored-launch certs: wrote a CA and " << written.size() << " host certificate(s), valid " << days_
      << " days, into " << dir << " (mode 0600; the CA's key is not kept: run certs again, into a new directory, "
      << "to add a host)\n";
  for (size_t i = 0; i < written.size(); ++i) PrintHost(out, (*hosts)[i].front(), written[i]);
  return kExitSuccess;
}

}  // namespace mirrored
