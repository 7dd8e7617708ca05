// One training job per run directory at a time. Two jobs on one directory
// would resume from each other's checkpoints, overwrite them and interleave
// their logs; so the chief holds an exclusive flock(2) on
// RUN_DIR/checkpoints/chief.lock while it trains, with who it is written in
// the file. The kernel releases the lock when the process ends, however it
// ends: a crashed job leaves nothing stale behind. (Over NFS, flock is
// carried by the server's byte-range locks.) Evaluators hold a lock of
// their own, and only look at the chief's (ChiefLockHeld).
//
//   MIRRORED_ASSIGN_OR_RETURN(RunDirLock lock, RunDirLock::Acquire(run_dir));
//   ... train; the lock is held until `lock` is destroyed ...
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/status.h"

namespace mirrored {

inline constexpr char kChiefLockFileName[] = "chief.lock";
inline constexpr char kEvaluatorLockFileName[] = "evaluator.lock";
inline constexpr char kLauncherLockFilePrefix[] = "launcher-";  // + host name + ".lock"
// A holder on this machine: how long a live one is given (its launcher may
// just have been killed, its exit not yet begun), and how long one whose
// exit is under way (killed, tearing down; a GPU context takes a while).
inline constexpr std::chrono::milliseconds kHolderGrace{3000};
inline constexpr std::chrono::milliseconds kExitingHolderWait{60000};

class RunDirLock {
 public:
  // How a lock held by someone else is refused:
  // "--run-dir D <what><holder>), still after N s: <advice>", `what`
  // opening the parenthesis.
  struct Refusal {
    std::string what;
    std::string advice;
  };
  // Creates RUN_DIR/checkpoints if needed and locks it for this process.
  // A holder on this machine (host name and boot id) is another job:
  // refused once it still holds the lock after kHolderGrace, or after
  // kExitingHolderWait while its process is exiting (a job whose launcher
  // was just killed: its tasks die with the launcher, not in the same
  // instant). A holder on
  // another host may be one that died with the lock on a network file system
  // (the server frees it when its lease expires, ~90 s for NFSv4, e.g. while
  // Slurm requeues the job elsewhere): waited for up to `remote_wait`. A
  // shared lock (someone looking: HeldOnThisMachine, ChiefLockHeld) is no
  // holder: tried again in a moment (its file's line names an earlier
  // holder), and refused only if shared locks stay in the way for
  // kHolderGrace, counted from the first one seen (a wait for a remote
  // holder before does not use it up).
  // Errors: InvalidArgument naming the directory and the holder ("pid 123
  // on host h (boot 1a2b3c4d) since <time>") when it is still held, naming
  // the lock file when a shared lock lasts (some other process's: no job),
  // or naming the path when RUN_DIR or its checkpoints/ cannot be created
  // or written.
  static StatusOr<RunDirLock> Acquire(const std::string& run_dir,
                                      std::chrono::milliseconds remote_wait = std::chrono::milliseconds(0));

  // Whether a process on this machine holds RUN_DIR's lock (probed with a
  // shared flock, released at once): its holder line, or nullopt when free,
  // held from another machine, or absent. Waits for a dying holder as
  // Acquire does. For mirrored-launch, to refuse a second job before it
  // starts any task.
  static std::optional<std::string> HeldOnThisMachine(const std::string& run_dir);
  // The same, at once.
  static std::optional<std::string> HolderOnThisMachineNow(const std::string& run_dir);
  // Whether any process holds RUN_DIR's chief lock now (a chief is running,
  // on this machine or, where the file system carries flock, another).
  // Probed with a shared flock, released at once, as HolderOnThisMachineNow.
  static bool ChiefLockHeld(const std::string& run_dir);

  // mirrored-launch's own lock, RUN_DIR/logs/launcher-<host>.lock, held for the
  // launcher's lifetime: a second launcher started on the directory from
  // this machine is refused (as Acquire refuses a chief) even before the
  // first job's chief has locked it. A holder on another machine is not
  // judged here: nullopt, and the chief's lock decides.
  static StatusOr<std::optional<RunDirLock>> AcquireForLauncher(const std::string& run_dir);

  // The evaluator's lock, RUN_DIR/checkpoints/evaluator.lock, held while it
  // follows the run: a second evaluator would share the first one's lease
  // and evaluate every checkpoint twice. Refused as Acquire refuses a second
  // chief (a holder on another machine waited for up to `remote_wait`).
  static StatusOr<RunDirLock> AcquireForEvaluator(const std::string& run_dir, std::chrono::milliseconds remote_wait);

  RunDirLock(RunDirLock&& other) noexcept;
  RunDirLock& operator=(RunDirLock&& other) noexcept;
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;
  ~RunDirLock();

 private:
  explicit RunDirLock(int fd) : fd_(fd) {}
  // Locks `dir`/`name` (created with `dir`), refused as `refusal` says. A holder on another machine: waited for up to
  // remote_wait and refused if `remote_is_refusal`, else nullopt at once.
  static StatusOr<std::optional<RunDirLock>> AcquireFile(const std::string& run_dir, const std::string& dir,
                                                         const char* name, const Refusal& refusal,
                                                         std::chrono::milliseconds remote_wait, bool remote_is_refusal);
  int fd_ = -1;
};

}  // namespace mirrored
