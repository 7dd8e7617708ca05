// service_bench: what the coordination service itself costs, with no
// client in the way. Simulated tasks (SimulatedJob) drive a real
// CoordinationService in this process through the calls its gRPC handler
// makes; every figure is the service's own work on one thread.
//
//   service_bench                              # 1024 4096 16384 tasks
//   service_bench --tasks 1024,16384 --heartbeat-seconds 5 --failure-at 4096
//
// Per task count: the phases of forming the job (the first N-1
// registrations, the last one: ranks, NCCL id and every answer), opening
// the error polls, a barrier, a heartbeat round, the service's CPU per
// second while every task heartbeats at the agent's default interval, and
// the exit barrier. Then, at --failure-at tasks with the default heartbeat
// timeout, how long after a frozen task's last heartbeat every task has
// learned of it, and how long a reported error takes to reach all.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "worker/coordination/simulated_job.h"

using namespace mirrored;
using namespace mirrored::coordination;
using Clock = std::chrono::steady_clock;

namespace {

// How long the failure run waits for every task to be told at all.
constexpr std::chrono::milliseconds kFailureWait{60000};

double ProcessCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// CPU milliseconds per second of the whole process (the service's deadline
// thread and the simulated tasks' heartbeat calls) over `seconds`.
double HeartbeatCpuPerSecond(SimulatedJob& job, int seconds) {
  job.StartHeartbeats();
  const double cpu0 = ProcessCpuMs();
  const Clock::time_point t0 = Clock::now();
  std::this_thread::sleep_until(t0 + std::chrono::seconds(seconds));  // the period measured, not a wait for an event
  const double cpu = ProcessCpuMs() - cpu0;
  const double wall = Ms(Clock::now() - t0);
  job.StopHeartbeats();
  return cpu / wall * 1000.0;
}

Status RunScale(int n, int heartbeat_seconds) {
  auto job = SimulatedJob::Create({.tasks = n});
  MIRRORED_RETURN_IF_ERROR(job.status());
  SimulatedJob& j = **job;
  MIRRORED_RETURN_IF_ERROR(j.Form());
  MIRRORED_RETURN_IF_ERROR(j.OpenErrorPolls());
  MIRRORED_RETURN_IF_ERROR(j.HeartbeatRound());
  double barrier_ms = 0;
  constexpr int kBarrierRounds = 5;
  for (int r = 0; r < kBarrierRounds; ++r) {
    MIRRORED_RETURN_IF_ERROR(j.PassBarrier("bench/" + std::to_string(r)));
    barrier_ms += j.times().barrier_ms / kBarrierRounds;
  }
  const double hb_cpu = heartbeat_seconds > 0 ? HeartbeatCpuPerSecond(j, heartbeat_seconds) : 0;
  MIRRORED_RETURN_IF_ERROR(j.ShutdownAll());
  const SimulatedJobTimes& t = j.times();
  const double form = t.register_ms + t.last_registration_ms;
  std::printf("  %6d  %7.1f  %8.1f  %6.2f  %8.1f  %7.1f  %7.1f  %6.2f  %9.1f  %7.1f  %7.2f  %8.1f  %7.1f\n", n,
              t.create_ms, t.register_ms, t.register_ms * 1000.0 / (n - 1), t.last_registration_ms, t.answers_ms, form,
              form * 1000.0 / n, t.form_wall_ms, t.polls_ms, barrier_ms, t.heartbeat_round_ms, hb_cpu);
  std::printf("          exit barrier %.1f ms\n", t.exit_barrier_ms);
  std::fflush(stdout);
  return OkStatus();
}

Status RunFailure(int n) {
  auto job = SimulatedJob::Create({.tasks = n});
  MIRRORED_RETURN_IF_ERROR(job.status());
  SimulatedJob& j = **job;
  MIRRORED_RETURN_IF_ERROR(j.Form());
  MIRRORED_RETURN_IF_ERROR(j.OpenErrorPolls());
  const Clock::time_point last_heartbeat = Clock::now();  // the frozen task's is no earlier
  MIRRORED_RETURN_IF_ERROR(j.HeartbeatRound());
  const int frozen = n / 2;
  j.StartHeartbeats(frozen);
  MIRRORED_ASSIGN_OR_RETURN(const Clock::time_point told, j.WaitForErrorEverywhere(j.task_name(frozen), kFailureWait));
  std::printf("# failure at %d tasks: a frozen task (heartbeat timeout 5000 ms, check every 100 ms) reached every "
              "task %.0f ms after its last heartbeat\n", n, Ms(told - last_heartbeat));

  auto second = SimulatedJob::Create({.tasks = n});
  MIRRORED_RETURN_IF_ERROR(second.status());
  MIRRORED_RETURN_IF_ERROR((*second)->Form());
  MIRRORED_RETURN_IF_ERROR((*second)->OpenErrorPolls());
  const Clock::time_point reported = Clock::now();
  MIRRORED_RETURN_IF_ERROR(
      (*second)->service().ReportError((*second)->task_name(frozen), frozen + 1, InternalError("loss is NaN")));
  MIRRORED_ASSIGN_OR_RETURN(const Clock::time_point all,
                            (*second)->WaitForErrorEverywhere((*second)->task_name(frozen), kFailureWait));
  std::printf("# failure at %d tasks: a reported error reached every task's error poll in %.1f ms\n", n,
              Ms(all - reported));
  return OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts = {1024, 4096, 16384};
  int heartbeat_seconds = 5, failure_at = 4096;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tasks" && i + 1 < argc) {
      counts.clear();
      std::stringstream ss(argv[++i]);
      for (std::string c; std::getline(ss, c, ',');) counts.push_back(std::max(2, std::atoi(c.c_str())));
    } else if (a == "--heartbeat-seconds" && i + 1 < argc) {
      heartbeat_seconds = std::atoi(argv[++i]);
    } else if (a == "--failure-at" && i + 1 < argc) {
      failure_at = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--tasks 1024,16384] [--heartbeat-seconds S] [--failure-at N (0: none)]\n",
                   argv[0]);
      return 2;
    }
  }
  SetLogLevel(LogLevel::kWarning);
  std::printf("# service_bench: simulated tasks against the service in process; CPU ms of the calling thread "
              "(form wall: wall ms), hb cpu: the process's CPU ms per second\n");
  std::printf("# %6s  %7s  %8s  %6s  %8s  %7s  %7s  %6s  %9s  %7s  %7s  %8s  %7s\n", "tasks", "create", "register",
              "us/reg", "last reg", "answers", "form", "us/task", "form wall", "polls", "barrier", "hb round",
              "hb cpu");
  std::printf("# %6s  %7s  %8s  %6s  %8s  %7s  %7s  %6s  %9s  %7s  %7s  %8s  %7s\n", "", "", "(N-1)", "", "(ranks+id)",
              "", "", "", "", "", "(mean 5)", "", "ms/s");
  int rc = 0;
  for (int n : counts) {
    if (Status s = RunScale(n, heartbeat_seconds); !s.ok()) {
      std::printf("  %6d  FAILED: %s\n", n, s.ToString().c_str());
      rc = 1;
    }
  }
  if (failure_at > 1) {
    if (Status s = RunFailure(failure_at); !s.ok()) {
      std::printf("# failure at %d tasks: FAILED: %s\n", failure_at, s.ToString().c_str());
      rc = 1;
    }
  }
  std::printf("# done\n");
  return rc;
}
