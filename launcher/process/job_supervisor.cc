#include "launcher/process/job_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launcher/process/running_job.h"
#include "launcher/process/running_task.h"

namespace mirrored {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

JobSupervisor::JobSupervisor(ConsoleWriter* console, SupervisorOptions options)
    : console_(console), options_(options) {
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) wake_pipe_[0] = wake_pipe_[1] = -1;
}

JobSupervisor::~JobSupervisor() {
  CloseFd(wake_pipe_[0]);
  CloseFd(wake_pipe_[1]);
}

void JobSupervisor::RequestStop(int sig, pid_t sender) {
  // One write (atomic on a pipe): the signal, then the sender.
  unsigned char message[1 + sizeof(pid_t)];
  message[0] = static_cast<unsigned char>(sig);
  std::memcpy(message + 1, &sender, sizeof(pid_t));
  if (wake_pipe_[1] >= 0) (void)!write(wake_pipe_[1], message, sizeof(message));
}

std::optional<int> JobSupervisor::WaitForStopRequest(std::chrono::milliseconds timeout) {
  if (wake_pipe_[0] < 0) return std::nullopt;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd fd{wake_pipe_[0], POLLIN, 0};
    const int ready = poll(&fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return std::nullopt;
    if (ready <= 0) continue;
    unsigned char message[1 + sizeof(pid_t)];
    if (read(wake_pipe_[0], message, sizeof(message)) == static_cast<ssize_t>(sizeof(message))) return message[0];
  }
}

StatusOr<JobOutcome> JobSupervisor::Run(const std::vector<TaskLaunch>& tasks) {
  if (wake_pipe_[0] < 0) return InternalError("cannot create the supervisor's wake-up pipe");
  RunningJob job(tasks, options_, console_, wake_pipe_[0]);
  MIRRORED_RETURN_IF_ERROR(job.Start());
  MIRRORED_RETURN_IF_ERROR(job.Supervise());
  return job.Finish();
}

}  // namespace mirrored
