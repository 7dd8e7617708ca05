// What a process running the strategy prints when std::terminate ends it:
// an exception escaping a thread this program does not run its own code on
// (Gloo's transport thread, on a message of another size than the operation
// posted here) is said to be that, naming the task, before the standard
// handler prints the exception.
//
//   InstallTerminateHandler("worker:1");   // once per process; later calls do nothing
#pragma once

#include <string>

namespace mirrored {

// Installs the handler the first time it is called, naming `task`; it then
// calls the handler it replaced. Thread-safe.
void InstallTerminateHandler(const std::string& task);

}  // namespace mirrored
