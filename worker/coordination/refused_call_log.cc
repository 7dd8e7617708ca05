#include "worker/coordination/refused_call_log.h"

#include "common/logging.h"

namespace mirrored::coordination {

void RefusedCallLog::Note(const std::string& host) {
  if (calls_by_host_.size() >= kMaxHosts && !calls_by_host_.count(host)) return;
  if (calls_by_host_[host]++ == 0) {
    MIRRORED_LOG(WARNING) << "refused a call from " << host
                          << ": missing or wrong job token (every task of the job needs the same MIRRORED_JOB_TOKEN)";
  }
}

std::string RefusedCallLog::Describe() const {
  if (calls_by_host_.empty()) return "";
  std::string hosts;
  for (const auto& [host, calls] : calls_by_host_) {
    hosts += (hosts.empty() ? "" : ", ") + host + " (" + std::to_string(calls) + (calls == 1 ? " call)" : " calls)");
  }
  return "; calls refused for a missing or wrong job token came from " + hosts +
         ": every task of the job needs the same MIRRORED_JOB_TOKEN";
}

}  // namespace mirrored::coordination
