// The variables mirrored-launch sets for every task it starts (replacing any
// inherited value), and what a task reads of them:
//
//   if (std::optional<int> g = LauncherGeneration()) ...   // under mirrored-launch; *g restarts so far
//   if (LauncherSaysTrainingEnded()) ...                    // an evaluator started again after training
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "common/status.h"

namespace mirrored {

// The job's run: 0 for its first, k after k whole-job restarts.
inline constexpr char kGenerationVariable[] = "MIRRORED_GENERATION";
// "1" for an evaluator started again after every training task ended well.
inline constexpr char kTrainingEndedVariable[] = "MIRRORED_TRAINING_ENDED";
// The secret every task of a job presents to its coordination service.
inline constexpr char kJobTokenVariable[] = "MIRRORED_JOB_TOKEN";
// TLS of the coordination service (docs/security.md): the files a task
// reads (PEM), as mirrored-worker's --tls-ca, --tls-cert, --tls-key,
// --tls-server-name and --tls-client-auth (the flags win).
inline constexpr char kTlsVariablePrefix[] = "MIRRORED_TLS_";
inline constexpr char kTlsCaVariable[] = "MIRRORED_TLS_CA";
inline constexpr char kTlsCertVariable[] = "MIRRORED_TLS_CERT";
inline constexpr char kTlsKeyVariable[] = "MIRRORED_TLS_KEY";
inline constexpr char kTlsServerNameVariable[] = "MIRRORED_TLS_SERVER_NAME";
inline constexpr char kTlsClientAuthVariable[] = "MIRRORED_TLS_CLIENT_AUTH";
// Set to 1 (or true, yes, on): check that every task runs the same
// collectives (StrategyOptions::check_collectives).
inline constexpr char kCheckCollectivesVariable[] = "MIRRORED_CHECK_COLLECTIVES";
// auto (default), shm or gloo: how the worker processes of a CPU job on
// one host all-reduce (StrategyOptions::host_transport).
inline constexpr char kHostTransportVariable[] = "MIRRORED_HOST_TRANSPORT";
// "1" for the tasks of `mirrored-launch local` and of `cluster --from-slurm`
// (srun): every task of the job gets a signal at once (none is interrupted
// alone).
inline constexpr char kWholeJobSignalledVariable[] = "MIRRORED_WHOLE_JOB_SIGNALLED";
// A training task's file descriptor for signs of life to its launcher (a
// byte every heartbeat round, "S" when heartbeats end): "3".
inline constexpr char kLivenessFdVariable[] = "MIRRORED_LIVENESS_FD";

// The longest MIRRORED_JOB_TOKEN: it travels as a gRPC header, and gRPC
// refuses a call whose headers pass 8 KiB together.
inline constexpr size_t kMaxJobTokenBytes = 4096;
// A token off loopback shorter than this is easy to guess (a warning).
inline constexpr size_t kShortJobTokenBytes = 16;

// OK for a token a gRPC header can carry: at most kMaxJobTokenBytes of
// printable ASCII without spaces (gRPC aborts the process on a newline, a
// tab or a byte over 0x7E). The error names the variable and the first bad
// byte's position, never the token itself.
Status CheckJobToken(std::string_view token);

// MIRRORED_GENERATION: nullopt when this process was not started by
// mirrored-launch (unset or not a number).
std::optional<int> LauncherGeneration();
// MIRRORED_TRAINING_ENDED=1.
bool LauncherSaysTrainingEnded();
// MIRRORED_WHOLE_JOB_SIGNALLED=1.
bool LauncherSignalsTheWholeJob();
// MIRRORED_LIVENESS_FD: the launcher's liveness pipe, or -1.
int LauncherLivenessFd();

}  // namespace mirrored
