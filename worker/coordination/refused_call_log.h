// RefusedCallLog: the hosts whose calls the coordination service refused
// for a missing or wrong job token. A host started with another
// MIRRORED_JOB_TOKEN looks from the chief like one that never started: the
// first refusal from each host is logged, and the registration timeout
// (and the chief's "still waiting" note) names them. Not thread-safe: the
// service calls it under its own lock.
//
//   RefusedCallLog refused;
//   refused.Note(PeerHost(peer));                    // logs the first from each host
//   message += refused.Describe();                   // "; calls refused ... came from 10.0.0.2 (3 calls): ..."
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace mirrored::coordination {

class RefusedCallLog {
 public:
  // Hosts counted at most: enough to name the culprits; calls from further
  // hosts are neither counted nor logged.
  static constexpr size_t kMaxHosts = 16;

  // A call from `host` was refused. The first from each host is logged
  // (WARNING).
  void Note(const std::string& host);
  bool empty() const { return calls_by_host_.empty(); }
  // "; calls refused for a missing or wrong job token came from <host> (<n>
  // call(s)), ...: every task of the job needs the same MIRRORED_JOB_TOKEN",
  // hosts in sorted order; "" when none was refused.
  std::string Describe() const;

 private:
  std::map<std::string, int64_t> calls_by_host_;
};

}  // namespace mirrored::coordination
