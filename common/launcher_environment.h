// The variables mirrored-launch sets for every task it starts (replacing any
// inherited value), and what a task reads of them:
//
//   if (std::optional<int> g = LauncherGeneration()) ...   // under mirrored-launch; *g restarts so far
//   if (LauncherSaysTrainingEnded()) ...                    // an evaluator started again after training
#pragma once

#include <optional>

namespace mirrored {

// The job's run: 0 for its first, k after k whole-job restarts.
inline constexpr char kGenerationVariable[] = "MIRRORED_GENERATION";
// "1" for an evaluator started again after every training task ended well.
inline constexpr char kTrainingEndedVariable[] = "MIRRORED_TRAINING_ENDED";
// The secret every task of a job presents to its coordination service.
inline constexpr char kJobTokenVariable[] = "MIRRORED_JOB_TOKEN";

// MIRRORED_GENERATION: nullopt when this process was not started by
// mirrored-launch (unset or not a number).
std::optional<int> LauncherGeneration();
// MIRRORED_TRAINING_ENDED=1.
bool LauncherSaysTrainingEnded();

}  // namespace mirrored
