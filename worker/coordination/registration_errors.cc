#include "worker/coordination/registration_errors.h"

#include <string_view>

#include "worker/coordination/task_claim.h"

namespace mirrored::coordination {

bool ToldToWaitForPreviousProcess(const Status& answer) {
  return answer.code() == StatusCode::kUnavailable &&
         answer.message().find(kPreviousProcessStillRunning) != std::string_view::npos;
}

bool IsChiefFailureBeforeJoining(const Status& answer, const std::string& service_task) {
  const std::string_view message = answer.message();
  return answer.code() == StatusCode::kAborted && message.starts_with("task " + service_task + " failed at ") &&
         message.ends_with("(before it joined the job)");
}

Status RendezvousTimedOut(const std::string& task, const std::string& service_name, int64_t timeout_ms,
                          const std::string& cause) {
  return DeadlineExceededError("task " + task + " could not rendezvous with " +
                               service_name + " within " +
                               std::to_string(timeout_ms) +
                               " ms; check that the chief is running and reachable (" +
                               cause + ")");
}

Status FailedGenerationOutlastedRegistration(const std::string& task, int64_t timeout_ms,
                                             const std::string& service_name, const std::string& failed_message) {
  return DeadlineExceededError("task " + task + " could not rendezvous within " +
                               std::to_string(timeout_ms) + " ms: " + service_name +
                               " only answered for the generation that failed (" +
                               failed_message + "); was the chief's task restarted?");
}

Status PreviousProcessOutlastedRegistration(const std::string& task, int64_t timeout_ms) {
  return InvalidArgumentError(
      "task " + task + " is still running: its process on this host did not end within this "
      "second process's registration timeout (" + std::to_string(timeout_ms) +
      " ms), spent waiting for it; this second process claiming it is refused: every process of a job needs its "
      "own task (stop the other process running it, another launcher's or job's, or check TF_CONFIG's \"task\" "
      "here)");
}

Status ClaimWaitLastCallUnanswered(const std::string& task, int64_t timeout_ms, const std::string& service_name) {
  return InvalidArgumentError(
      "task " + task + ": this second process claiming it spent its registration timeout (" +
      std::to_string(timeout_ms) + " ms) waiting for the task's process on this host "
      "to end, and " + service_name + " did not answer its last call: either that process still runs (stop "
      "it, or check TF_CONFIG's \"task\" here) or the job's chief is gone (run the job again)");
}

Status ServiceGoneWhileClaimWaiting(const std::string& task, const std::string& service_name, const Status& cause) {
  return InvalidArgumentError("task " + task + ": " + service_name + " stopped answering (" +
                              cause.ToString() +
                              ") while this second process waited for the task's process on this host to end: the "
                              "job that ran it has ended, or its chief is gone; this process has no job to join "
                              "(run the job again, every task of it, to go on)");
}

Status TlsHandshakeFailed(const std::string& task, const std::string& service_name, const std::string& grpc_message) {
  return InvalidArgumentError(
      "task " + task + ": the TLS handshake with " + service_name + " failed (" + grpc_message +
      "): check that the chief's certificate is signed by this task's --tls-ca and names the chief's host as "
      "TF_CONFIG gives it (or --tls-server-name), and, with mutual TLS, that this task has a certificate "
      "(--tls-cert, --tls-key) signed by the chief's CA (docs/security.md)");
}

Status ServiceSpeaksTls(const std::string& task, const std::string& service_name, const std::string& grpc_message) {
  return InvalidArgumentError(
      "task " + task + " has no TLS settings, but " + service_name + " speaks TLS (" + grpc_message +
      "): give this task the job's --tls-ca (MIRRORED_TLS_CA) and, unless the chief runs with "
      "--tls-client-auth none, its certificate (--tls-cert, --tls-key) signed by that CA (docs/security.md)");
}

Status ServiceSpeaksNoTls(const std::string& task, const std::string& service_name, const std::string& grpc_message) {
  return InvalidArgumentError(
      "task " + task + " speaks TLS, but what answers at " + service_name + " speaks none (" + grpc_message +
      "): the chief was started without TLS settings (give every task of the job the same --tls-ca, and each its "
      "--tls-cert and --tls-key), or its TLS files failed to load and it serves that error in plaintext (the "
      "chief's log names the file), or something other than the job's chief answers at that address");
}

}  // namespace mirrored::coordination
