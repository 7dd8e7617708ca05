#include "worker/strategy/terminate_handler.h"

#include <errno.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <mutex>

namespace mirrored {
namespace {

std::terminate_handler g_previous_terminate = nullptr;
std::string g_task_for_terminate;

[[noreturn]] void OnTerminate() {
  std::string what = "std::terminate without an exception (a joinable std::thread destroyed?)";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
      what = "an exception of unknown type";
    }
  }
  const std::string msg = std::string(program_invocation_short_name) + ": " + g_task_for_terminate +
                          ": fatal: uncaught exception: " + what +
                          (what.find("enforce fail") != std::string::npos
                               ? " (Gloo received a message that does not fit the operation posted here: the tasks "
                                 "called collectives of different sizes or kinds at the same point)\n"
                               : "\n");
  (void)!write(STDERR_FILENO, msg.data(), msg.size());
  if (g_previous_terminate != nullptr) g_previous_terminate();
  std::abort();
}

}  // namespace

void InstallTerminateHandler(const std::string& task) {
  static std::once_flag installed;
  std::call_once(installed, [&] {
    g_task_for_terminate = task;
    g_previous_terminate = std::set_terminate(&OnTerminate);
  });
}

}  // namespace mirrored
