// What MirroredStrategy::Create is given besides the cluster: the replicas'
// devices, the job token, whether the launcher restarted this task, and the
// timeouts of the job's rendezvous and collectives.
//
//   StrategyOptions options = StrategyOptions::FromEnvironment();   // the launcher's job token, restarts
//   options.cpu_replicas = 2;
//   options.registration_timeout = std::chrono::seconds(60);
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "worker/coordination/tls_files.h"
#include "worker/strategy/device_choice.h"

namespace mirrored {

struct StrategyOptions {
  // kCpu: `cpu_replicas` CPU replicas. kGpu: one replica per visible GPU
  // (InvalidArgument when there is none). kAuto: GPUs when the CUDA runtime
  // sees any, else CPU replicas. The library default is kCpu, so a program
  // that asks for cpu_replicas gets them on any host; mirrored-worker passes
  // --device (default auto).
  DeviceKind device = DeviceKind::kCpu;
  int cpu_replicas = 1;
  // What the CUDA runtime says about the GPUs (a seam for tests); empty:
  // ProbeGpus(). Not consulted for kCpu.
  std::function<GpuProbe()> gpu_probe;
  std::string job_token;  // MIRRORED_JOB_TOKEN
  // TLS of the coordination service (MIRRORED_TLS_*; docs/security.md).
  // Empty: plaintext. Files that do not load fail the join (InvalidArgument).
  coordination::TlsFiles tls;
  // This task was restarted by its launcher (MIRRORED_GENERATION > 0): a
  // coordination service that answers its registration with the job's
  // failure still runs the generation that failed, and the task waits
  // (within registration_timeout) for the chief's next one instead of
  // exiting 3. See CoordinationAgentOptions::restarted.
  bool restarted = false;
  // Ends a restarted task's wait for the chief's next generation early when
  // it returns true (any thread may call it). Empty: the wait lasts
  // registration_timeout. mirrored-worker passes its SIGTERM flag
  // (Preemption::Requested, worker/train/preemption.h).
  std::function<bool()> stop_waiting;
  std::chrono::milliseconds collective_timeout{300000};
  std::chrono::milliseconds registration_timeout{300000};
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{5000};
  // How long an aborting task waits for its replicas to return before it
  // exits anyway (a Gloo operation blocked on a frozen peer cannot be
  // interrupted; replicas waiting on local barriers return at once).
  std::chrono::milliseconds abort_grace{500};
  // Before every cross-process operation, check that every task runs the
  // same one (kind, reduction, root, size) and fail all of them naming what
  // each ran if not (CheckedProcessGroup); one small all-reduce more per
  // operation. CPU replicas; MIRRORED_CHECK_COLLECTIVES=1.
  bool check_collectives = false;
  // How the worker processes of a CPU job meet for their collectives:
  // kAuto takes shared memory when every task runs on this host (same boot,
  // PID namespace and user), Gloo's TCP otherwise; kSharedMemory insists
  // (an error when a task is elsewhere), kGloo always takes TCP.
  // MIRRORED_HOST_TRANSPORT=auto|shm|gloo.
  enum class HostTransport { kAuto, kSharedMemory, kGloo };
  HostTransport host_transport = HostTransport::kAuto;

  // What mirrored-launch tells each task in its environment: the job token
  // (MIRRORED_JOB_TOKEN), its TLS files (MIRRORED_TLS_*) and whether the task was restarted
  // (MIRRORED_GENERATION > 0), MIRRORED_CHECK_COLLECTIVES and
  // MIRRORED_HOST_TRANSPORT. Start from
  // this in your own program.
  static StrategyOptions FromEnvironment();
};

}  // namespace mirrored
