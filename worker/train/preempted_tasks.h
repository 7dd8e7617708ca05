// Which task a SIGTERM reached first, told from three sums the trainer's
// sync point adds across the replicas anyway: a replica told to stop
// (Preemption::Requested) adds 1, k and k * k, with k its task's ordinal + 1
// in the task list. All of them are of one task exactly when
// told * sum(k * k) == sum(k)^2, and then sum(k) / told names it. (Other
// tasks may have been signalled too and not have seen it yet: "first".)
//
//   sums = {..., told, told * k, told * k * k};  replica.SumAcrossReplicas(sums);
//   if (sums[3] > 0) summary.preempted_tasks = PreemptedTasks(tasks, sums[3], sums[4], sums[5], world);
#pragma once

#include <string>
#include <vector>

namespace mirrored {

// `tasks`: the training tasks in order; `told`: how many of the `world`
// replicas were told to stop (> 0); `sum_k`, `sum_k2`: their sums of k and
// k * k. "seen by every task" (or "seen by chief:0", a single task),
// "first seen by worker:1", or "first seen by several tasks: 3 of 4
// replicas".
std::string PreemptedTasks(const std::vector<std::string>& tasks, float told, float sum_k, float sum_k2, int world);

}  // namespace mirrored
