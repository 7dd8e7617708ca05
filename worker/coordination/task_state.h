// TaskState: where a training task stands on the coordination service (the
// lifecycle is drawn in coordination_service.h), and its name for messages.
//
//   if (state == TaskState::kShuttingDown) ...   // in the exit barrier
//   log << TaskStateName(state);                  // "in exit barrier"
#pragma once

#include <string_view>

namespace mirrored::coordination {

enum class TaskState { kUnregistered, kConnected, kFailed, kShuttingDown, kShutdown };

constexpr std::string_view TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kUnregistered: return "unregistered";
    case TaskState::kConnected: return "connected";
    case TaskState::kFailed: return "failed";
    case TaskState::kShuttingDown: return "in exit barrier";
    case TaskState::kShutdown: return "shut down";
  }
  return "?";
}

}  // namespace mirrored::coordination
