#include "launcher/process/failure_report.h"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <ostream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/file_system_full.h"
#include "common/json_depth.h"
#include "common/signal_name.h"
#include "common/status.h"
#include "common/task_interrupt.h"

namespace mirrored {
namespace {

// A training task's own exit 143 is not a crash: it received SIGTERM (a
// scheduler preempting it), stopped with the others at an agreed step and
// the chief checkpointed that step (worker/train/preemption.h).
bool Preempted(const TaskResult& r) {
  return r.is_training && r.exit.exit_code == kExitPreempted;
}

}  // namespace

std::optional<BlamedTask> BlamedBy(const TaskResult& result) {
  if (result.exit.exit_code != kExitPeerFailed) return std::nullopt;
  static const std::regex kNamed(
      R"(task ([a-z]+:[0-9]+) failed(?: at \S+: exited with error: ([A-Z_]+): )?|hosted by task ([a-z]+:[0-9]+)\) has not answered)");
  for (auto it = result.last_lines.rbegin(); it != result.last_lines.rend(); ++it) {
    std::smatch m;
    if (!std::regex_search(*it, m, kNamed)) continue;
    BlamedTask blamed{.task = m[1].matched ? m[1].str() : m[3].str()};
    if (blamed.task == result.name) continue;
    blamed.interrupted = m[2].matched && m[2].str() == "CANCELLED" &&
                         it->find(kInterruptedOnItsHost) != std::string::npos;
    if (m[2].matched) {
      for (int c = 0; c <= static_cast<int>(StatusCode::kUnauthenticated); ++c) {
        const auto code = static_cast<StatusCode>(c);
        if (StatusCodeName(code) == m[2].str()) blamed.configuration_error = ExitCodeFor(Status(code, "")) == kExitUsage;
      }
    }
    return blamed;
  }
  return std::nullopt;
}

namespace {

// An error file is a message and a call stack: more is not one.
constexpr std::streamsize kMaxErrorFileBytes = 1 << 20;
// Of its message, the report quotes this many lines (a Python exception's
// message may carry a whole traceback).
constexpr int kErrorMessageLines = 8;

std::string FirstLines(const std::string& text, int lines) {
  std::istringstream in(text);
  std::string out, line;
  for (int n = 0; std::getline(in, line); ++n) {
    if (n == lines) return out + "...";
    out += line + "\n";
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

std::optional<std::string> ErrorFileMessage(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxErrorFileBytes, '\0');
  in.read(text.data(), kMaxErrorFileBytes);
  text.resize(static_cast<size_t>(in.gcount()));
  if (JsonNestingPastLimit(text)) return std::nullopt;
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("message")) return std::nullopt;
  const nlohmann::json* message = &doc["message"];
  if (message->is_object() && message->contains("message")) message = &(*message)["message"];
  if (!message->is_string() || message->get<std::string>().empty()) return std::nullopt;
  return FirstLines(message->get<std::string>(), kErrorMessageLines);
}

namespace {

// "2026-11-23 03:44:43": when `r` ended, local time.
std::string EndedAt(const TaskResult& r) {
  std::time_t t = std::chrono::system_clock::to_time_t(r.ended_at);
  std::tm tm{};
  localtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
  return when;
}

// A full disk is the one cause a user can fix between two attempts: said
// up front, not only in the last lines.
void WriteFullDiskCause(std::ostream& out, const TaskResult& f) {
  for (auto it = f.last_lines.rbegin(); it != f.last_lines.rend(); ++it) {
    if (std::optional<std::string> full = FileSystemFullIn(*it)) {
      out << "  cause: " << *full << ": free space there (a restart writes there again)\n";
      return;
    }
  }
}

// A signal the launcher did not send came from outside (a user's kill, the
// OOM killer); after every other training task had finished, it struck at
// the job's very end (final checkpoint, exit barrier, shutdown).
void WriteSignalFromOutside(std::ostream& out, const JobOutcome& outcome, const TaskResult& f) {
  if (!f.exit.signal || f.signal_sent) return;
  const bool others_finished =
      f.is_training && std::all_of(outcome.tasks.begin(), outcome.tasks.end(), [&](const TaskResult& r) {
        return r.name == f.name || !r.is_training || r.exit.success();
      }) && outcome.tasks.size() > 1;
  out << "  (" << SignalName(*f.exit.signal) << " from outside the launcher"
      << (others_finished ? "; every other training task had finished (exit code 0): it ended after training, "
                            "at the final checkpoint, the exit barrier or the shutdown"
                          : "")
      << ")\n";
}

// Exit 3 first: the task that failed was stopped by the launcher (frozen,
// or still running) before it could exit on its own. Its peer's own
// message names it.
void WriteBlamedTask(std::ostream& out, const TaskResult& f) {
  if (std::optional<BlamedTask> blamed = BlamedBy(f)) {
    out << "  (exit 3: it stopped because another task failed; it names " << blamed->task
        << (blamed->configuration_error ? ", whose error is one of usage or configuration"
            : blamed->interrupted       ? ", interrupted on its host (SIGINT: a Ctrl-C)"
                                        : "")
        << ")\n";
  }
}

void WriteHeadline(std::ostream& out, const JobOutcome& outcome, const TaskResult& f) {
  if (Preempted(f)) {
    out << "==== job preempted ====\n";
    out << "first: task " << f.name << " ended with " << f.exit.ToString()
        << " (preempted: a SIGTERM reached the job, every task stopped after the same step and the "
           "chief checkpointed it) at "
        << EndedAt(f) << "\n";
    return;
  }
  out << "==== job failed ====\n";
  out << "first failure: task " << f.name << " ended with " << f.exit.ToString() << " at " << EndedAt(f) << "\n";
  if (f.hung) out << "  (stopped as hung: " << *f.hung << ")\n";
  if (f.error_message) {
    out << "  its error (" << f.error_file << "):\n";
    std::istringstream lines(*f.error_message);
    for (std::string line; std::getline(lines, line);) out << "  | " << line << "\n";
  }
  WriteFullDiskCause(out, f);
  if (!f.hung) WriteSignalFromOutside(out, outcome, f);
  WriteBlamedTask(out, f);
}

// One line for a task other than the first failure: how it ended, and why.
void WriteOtherTask(std::ostream& out, const TaskResult& r, bool job_preempted) {
  out << "  " << r.name << ": " << r.exit.ToString();
  if (job_preempted && Preempted(r)) {
    out << " (preempted)";
  } else if (r.exit.success()) {
    // Its work was done; a SIGTERM from us reached it as it ended.
    out << (r.signal_sent ? " (it had finished, and ended by itself as the launcher's " + SignalName(*r.signal_sent) +
                                " came)"
                          : " (it had finished)");
  } else if (r.exit.exit_code == kExitPeerFailed) {
    // Its own exit: it saw the failure before (or while) the launcher
    // stopped it.
    out << " (stopped because another task failed)";
  } else if (r.stopped_by_supervisor) {
    out << " (stopped by the launcher)";
  }
  out << "\n";
}

}  // namespace

std::string FormatFailureReport(const JobOutcome& outcome) {
  std::ostringstream out;
  if (outcome.stop_signal) {
    out << "job stopped by " << SignalName(*outcome.stop_signal) << "\n";
  }
  if (!outcome.first_failure) return out.str();
  const TaskResult& f = *outcome.first_failure;
  const bool preempted = Preempted(f);
  WriteHeadline(out, outcome, f);
  for (const auto& r : outcome.tasks) {
    if (r.name != f.name) WriteOtherTask(out, r, preempted);
  }
  out << "last " << (f.last_lines.size() == 1 ? std::string("line") : std::to_string(f.last_lines.size()) + " lines")
      << " of " << f.name << ":\n";
  for (const auto& line : f.last_lines) out << "  | " << line << "\n";
  if (preempted) {
    out << "started again on the same run directory, the job resumes from that checkpoint, losing no step\n";
  }
  return out.str();
}

}  // namespace mirrored
