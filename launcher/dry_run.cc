#include "launcher/dry_run.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "common/launcher_environment.h"
#include "launcher/job/local_job_plan.h"
#include "launcher/process/child_process.h"

namespace mirrored {
namespace {

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Whether `binary` (a path, or a name looked up in PATH) is an ELF
// executable: mirrored-worker is, a wrapper script under its name is not.
bool IsElfProgram(const std::string& binary) {
  std::vector<std::string> candidates;
  if (binary.find('/') != std::string::npos) {
    candidates.push_back(binary);
  } else if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (size_t begin = 0; begin <= dirs.size();) {
      size_t end = dirs.find(':', begin);
      if (end == std::string::npos) end = dirs.size();
      candidates.push_back((end > begin ? dirs.substr(begin, end - begin) : std::string(".")) + "/" + binary);
      begin = end + 1;
    }
  }
  for (const std::string& c : candidates) {
    std::ifstream in(c, std::ios::binary);
    if (!in) continue;
    char magic[4] = {};
    in.read(magic, sizeof(magic));
    return in.gcount() == 4 && magic[0] == '\x7f' && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
  }
  return false;
}

bool StartsWith(const std::string& entry, const char* key) {
  const std::string prefix = std::string(key) + "=";
  return entry.rfind(prefix, 0) == 0;
}

// What the real launch would find when it creates RUN_DIR/logs, without
// creating anything: every existing part of the path is a directory, and
// the deepest existing one can be written into.
Status CheckRunDirUsable(const std::string& run_dir) {
  namespace fs = std::filesystem;
  const fs::path logs = fs::path(run_dir) / "logs";
  fs::path existing = logs;
  std::error_code ec;
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  if (!fs::is_directory(existing, ec)) {
    return InvalidArgumentError("run directory " + run_dir + ": " + existing.string() +
                                " is not a directory, so the launch cannot create " + logs.string());
  }
  if (access(existing.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgumentError("run directory " + run_dir + ": cannot write into " + existing.string() + ": " +
                                std::strerror(errno));
  }
  return OkStatus();
}

}  // namespace

void PrintDryRun(const std::vector<TaskLaunch>& tasks, std::ostream& out) {
  for (const auto& t : tasks) {
    out << t.name << (t.is_training ? "" : " (evaluator)") << "\n  command:";
    for (const auto& a : t.argv) out << " " << a;
    out << "\n";
    for (const auto& e : LauncherSetEnvironment(t)) {
      // The token is a secret: show enough to compare, not to reuse (none of
      // a short one).
      if (e.rfind("MIRRORED_JOB_TOKEN=", 0) == 0) {
        const size_t chars = e.size() - 19;
        out << "  env: " << e.substr(0, chars > 8 ? 23 : 19) << "... (" << chars << " chars)\n";
      } else {
        out << "  env: " << e << "\n";
      }
    }
    out << "  log: " << t.log_path << "\n";
  }
}

Status CheckWorkerFlags(const TaskLaunch& task, std::string* note) {
  const std::string& binary = task.argv.front();
  if (std::filesystem::path(binary).filename() != "mirrored-worker" || !IsElfProgram(binary)) {
    *note = "not checked: " + binary + " is not mirrored-worker (no other program is run for a dry run)";
    return OkStatus();
  }
  // Nothing that would let it join a job, were it to start one. TF_CONFIG
  // stays: it says the task's role, and so which data files it reads
  // (--check-flags checks them too, and joins nothing).
  std::vector<std::string> env;
  for (const std::string& e : task.env) {
    if (!StartsWith(e, kJobTokenVariable) && !StartsWith(e, kGenerationVariable) &&
        !StartsWith(e, kTrainingEndedVariable)) {
      env.push_back(e);
    }
  }
  std::vector<std::string> argv = task.argv;
  argv.push_back("--check-flags");
  auto checked = ChildProcess::RunToEnd(argv, env, std::chrono::seconds(10));
  if (!checked.ok()) {
    *note = "not checked: " + binary + " --check-flags: " + checked.status().message();
    return OkStatus();
  }
  const auto& [exit, output] = *checked;
  if (exit.success()) {
    *note = "checked by " + binary + " --check-flags";
    return OkStatus();
  }
  if (output.find("--check-flags") != std::string::npos) {  // CLI11: "not expected: --check-flags"
    *note = "not checked: " + binary + " is an older mirrored-worker, without --check-flags";
    return OkStatus();
  }
  if (exit.exit_code == kExitUsage) {
    return InvalidArgumentError("the workers' flags (after `--`): " + Trimmed(output));
  }
  if (exit.signal.has_value()) {  // a crash: the job's tasks would crash the same way
    return InternalError("the workers' flags (after `--`): " + binary + " --check-flags crashed (" + exit.ToString() +
                         "), and the job's tasks would too: " + Trimmed(output));
  }
  *note = "not checked: " + binary + " --check-flags ended with " + exit.ToString() + ": " + Trimmed(output);
  return OkStatus();
}

int DryRun(const std::vector<TaskLaunch>& tasks, const std::string& run_dir, std::ostream& out,
           std::ostream& err) {
  PrintDryRun(tasks, out);
  if (tasks.empty()) return kExitSuccess;
  if (!run_dir.empty()) {
    if (Status s = CheckRunDirUsable(run_dir); !s.ok()) {
      err << "mirrored-launch: error: " << s.message() << "\n";
      return ExitCodeFor(s);
    }
  }
  // One task of each role: they take the same flags, but an evaluator
  // reads other data files than a training task with --no-validate.
  std::vector<const TaskLaunch*> checked;
  for (bool training : {true, false}) {
    auto first = std::find_if(tasks.begin(), tasks.end(),
                              [training](const TaskLaunch& t) { return t.is_training == training; });
    if (first != tasks.end()) checked.push_back(&*first);
  }
  std::string note;
  for (const TaskLaunch* task : checked) {
    if (Status s = CheckWorkerFlags(*task, &note); !s.ok()) {
      err << "mirrored-launch: error: " << s.message() << "\n";
      return ExitCodeFor(s);
    }
  }
  out << "# worker flags: " << note << "\n";
  return kExitSuccess;
}

}  // namespace mirrored
