// --dry-run of `local` and `cluster`: what would be started, and a check of
// the workers' own flags, starting nothing.
//
//   if (dry_run) return DryRun(plan->Tasks(0, env), run_dir, std::cout, std::cerr);
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/process/job_supervisor.h"

namespace mirrored {

// Prints each task's command, TF_CONFIG and the environment the launcher
// sets (the job token masked).
void PrintDryRun(const std::vector<TaskLaunch>& tasks, std::ostream& out);

// The workers' own flags (after `--`), checked by the task's binary when it
// is a mirrored-worker (an ELF program of that name: no other program is
// run, since one that ignores the flag would start training, and a wrapper
// script could do anything): it runs with --check-flags, which parses and
// validates them, checks the data files the task's role reads (its
// TF_CONFIG says which) and starts nothing, in an environment without the
// job's token. InvalidArgument with the worker's message for a bad flag or
// a missing file; *note says what was checked, or why not.
Status CheckWorkerFlags(const TaskLaunch& task, std::string* note);

// PrintDryRun, then whether `run_dir` could be created as the launch would
// ("" skips that), then CheckWorkerFlags on the first training task and the
// first evaluator: the exit code.
int DryRun(const std::vector<TaskLaunch>& tasks, const std::string& run_dir, std::ostream& out,
           std::ostream& err);

}  // namespace mirrored
