// The errors a task's registration can end with, and how the agent reads
// the service's answers while it registers: the texts the operator sees
// when the job does not form (a chief never reached, a failed generation
// that never made way, a second process claiming a running task). Pure:
// no agent, no clock; the agent's registration loop decides when each
// applies (coordination_agent_registration.cc).
//
//   if (ToldToWaitForPreviousProcess(resp.status())) { ... register again after a pause ... }
//   return FailedGenerationOutlastedRegistration("worker:1", 300000, service_name, failed.message());
//   // DEADLINE_EXCEEDED: task worker:1 could not rendezvous within 300000 ms: ...
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace mirrored::coordination {

// The service answered Unavailable saying the task's previous process on
// this host still runs (kPreviousProcessStillRunning): register again later.
bool ToldToWaitForPreviousProcess(const Status& answer);

// The chief (`service_task`) failed before this generation could form and
// its service serves only that error (MirroredStrategy::ReportFailureBeforeJoining):
// Aborted "task <service_task> failed at ... (before it joined the job)".
bool IsChiefFailureBeforeJoining(const Status& answer, const std::string& service_task);

// DeadlineExceeded: the registration call itself ran out (no verdict of the
// service's own: `cause` is the call's message), so the chief's service was
// likely never reached.
Status RendezvousTimedOut(const std::string& task, const std::string& service_name, int64_t timeout_ms,
                          const std::string& cause);

// DeadlineExceeded: a restarted task met only the failed generation's
// service (its last word: `failed_message`) until its registration deadline.
Status FailedGenerationOutlastedRegistration(const std::string& task, int64_t timeout_ms,
                                             const std::string& service_name, const std::string& failed_message);

// InvalidArgument: the task's previous process on this host outlived this
// second process's registration deadline; the claim is refused.
Status PreviousProcessOutlastedRegistration(const std::string& task, int64_t timeout_ms);

// InvalidArgument: told to wait for the task's previous process, this
// process spent its registration timeout and the service did not answer
// its last call.
Status ClaimWaitLastCallUnanswered(const std::string& task, int64_t timeout_ms, const std::string& service_name);

// InvalidArgument: told to wait, then the service stopped answering
// (`cause`): the job that ran the task has ended, or its chief is gone.
Status ServiceGoneWhileClaimWaiting(const std::string& task, const std::string& service_name, const Status& cause);

// InvalidArgument: the TLS handshake with the service fails (`grpc_message`
// says how): a certificate, the CA or the name verified is wrong, and
// waiting longer will not fix it.
Status TlsHandshakeFailed(const std::string& task, const std::string& service_name, const std::string& grpc_message);

// InvalidArgument: this task speaks plaintext and the service TLS (a
// probe's finding; `grpc_message` is what gRPC said of the connection).
Status ServiceSpeaksTls(const std::string& task, const std::string& service_name, const std::string& grpc_message);

// InvalidArgument: this task speaks TLS and what answers at the service's
// address does not (its answer is no TLS record).
Status ServiceSpeaksNoTls(const std::string& task, const std::string& service_name, const std::string& grpc_message);

}  // namespace mirrored::coordination
