#include "worker/coordination/mutex_deadlock_detection.h"

#include <absl/synchronization/mutex.h>

namespace mirrored::coordination {

void DisableMutexDeadlockDetection() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace mirrored::coordination
