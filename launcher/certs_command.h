// `mirrored-launch certs DIR --hosts h1,h2,...`: the TLS files of a cluster's
// coordination service. A new CA (its key is not kept) signs one
// certificate per host, good as server and client certificate; each host's
// directory DIR/<host>/ holds ca.pem, cert.pem and key.pem (mode 0600), and
// the command prints the MIRRORED_TLS_* variables to set on each host.
//
//   CertsCommand certs;
//   certs.Register(app);
//   if (certs.parsed()) return certs.Run(std::cout, std::cerr);
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored {

class CertsCommand {
 public:
  void Register(CLI::App& app);
  bool parsed() const { return subcommand_ != nullptr && subcommand_->parsed(); }
  // Returns the launcher's exit code: 0, 2 for a bad host, an existing CA in
  // DIR or a directory that cannot be written.
  int Run(std::ostream& out, std::ostream& err);

  // "h1,h2+10.0.0.2" -> {{"h1"}, {"h2", "10.0.0.2"}}: each host's names
  // (its directory is named after the first). Errors: InvalidArgument
  // naming an empty, repeated or malformed name.
  static StatusOr<std::vector<std::vector<std::string>>> ParseHosts(const std::string& hosts);

 private:
  CLI::App* subcommand_ = nullptr;
  std::string dir_;
  std::string hosts_;
  int days_ = 365;
};

}  // namespace mirrored
