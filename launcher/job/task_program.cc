#include "launcher/job/task_program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/quoted_text.h"
#include "launcher/job/local_job_plan.h"

namespace mirrored {
namespace {

constexpr char kMirroredWorkerName[] = "mirrored-worker";

bool IsFlag(const std::string& word) { return !word.empty() && word.front() == '-'; }

// A file that execve could run: an executable regular file.
Status CheckRunnable(const std::string& path, const std::string& what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return NotFoundError(what + " " + QuotedText(path) + " does not exist");
  if (S_ISDIR(st.st_mode)) return PermissionDeniedError(what + " " + QuotedText(path) + " is a directory, not a program");
  if (!S_ISREG(st.st_mode) || access(path.c_str(), X_OK) != 0) {
    return PermissionDeniedError(what + " " + QuotedText(path) + " is not executable (chmod +x, or run it through "
                                 "its interpreter: -- python3 " + path + " ...)");
  }
  return OkStatus();
}

}  // namespace

std::string ResolveWorkerBinary(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("MIRRORED_WORKER_BINARY"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "mirrored-worker";
  return (self.parent_path() / "mirrored-worker").string();
}

StatusOr<std::string> ResolveProgram(const std::string& program, const std::string& path_variable) {
  if (program.find('/') != std::string::npos) {
    MIRRORED_RETURN_IF_ERROR(CheckRunnable(program, "program"));
    return program;
  }
  // As execvp: the first executable of that name along PATH ("" is the
  // current directory).
  Status first_problem = OkStatus();
  size_t begin = 0;
  while (begin <= path_variable.size()) {
    size_t end = path_variable.find(':', begin);
    if (end == std::string::npos) end = path_variable.size();
    const std::string dir = end > begin ? path_variable.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + program;
    Status s = CheckRunnable(candidate, "program");
    if (s.ok()) return candidate;
    if (s.code() != StatusCode::kNotFound && first_problem.ok()) first_problem = s;
    begin = end + 1;
  }
  if (!first_problem.ok()) return first_problem;
  return NotFoundError("program " + QuotedText(program) + " is not found in PATH (" + QuotedText(path_variable) +
                       "): give its path, or install it");
}

StatusOr<TaskProgram> ProgramOf(std::vector<std::string> words, const std::string& what,
                                const std::string& path_variable) {
  if (words.empty() || words.front().empty()) return InvalidArgumentError(what + " names no program");
  StatusOr<std::string> path = ResolveProgram(words.front(), path_variable);
  if (!path.ok()) return Status(path.status().code(), what + ": " + path.status().message());
  TaskProgram program;
  program.is_mirrored_worker = std::filesystem::path(*path).filename() == kMirroredWorkerName;
  words.front() = *path;
  program.argv = std::move(words);
  return program;
}

StatusOr<TaskProgram> ChooseTaskProgram(const std::string& worker_binary_flag,
                                        const std::vector<std::string>& after_dashes,
                                        const std::string& path_variable) {
  if (after_dashes.empty() || IsFlag(after_dashes.front())) {
    TaskProgram program;
    program.argv = {ResolveWorkerBinary(worker_binary_flag)};
    MIRRORED_RETURN_IF_ERROR(CheckWorkerBinary(program.argv.front()));
    program.argv.insert(program.argv.end(), after_dashes.begin(), after_dashes.end());
    return program;
  }
  if (!worker_binary_flag.empty()) {
    // `--worker-binary X -- prog ...` is ambiguous: X's first argument, or
    // a program of its own? (`--worker-binary python3 -- train.py` was the
    // way before the program after `--`: say the new one.)
    return InvalidArgumentError("--worker-binary " + QuotedText(worker_binary_flag) + " and the program " +
                                QuotedText(after_dashes.front()) +
                                " after `--` both name what to run: give the program after `--` alone "
                                "(mirrored-launch local -- python3 train.py ...)");
  }
  return ProgramOf(after_dashes, "the program after `--`", path_variable);
}

StatusOr<std::vector<std::string>> SplitCommandWords(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = '\0';
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote != '\0') {
      if (c == quote) {
        quote = '\0';
      } else if (c == '\\' && quote == '"' && i + 1 < command.size() &&
                 (command[i + 1] == '"' || command[i + 1] == '\\')) {
        word += command[++i];
      } else {
        word += c;
      }
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != '\0') {
    return InvalidArgumentError("command " + QuotedText(command) + ": the " + std::string(1, quote) +
                                " quote is not closed");
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) return InvalidArgumentError("the command is empty: give the program to run and its arguments");
  return words;
}

std::optional<TorchWorld> TorchWorldOf(const ClusterSpec& cluster, const TaskId& task) {
  const std::optional<int> rank = cluster.RankOf(task);
  if (!rank) return std::nullopt;
  const HostPort chief = cluster.CoordinatorAddress();
  return TorchWorld{.master_addr = chief.host,
                    .master_port = chief.port,
                    .rank = *rank,
                    .world_size = static_cast<int>(cluster.TrainingTasks().size()),
                    .local_rank = cluster.LocalIndexAtHostOf(task).value_or(0),
                    .local_world_size = cluster.TrainingTasksAtHostOf(task),
                    .group_rank = cluster.TrainingHostIndexOf(task).value_or(0),
                    .group_world_size = cluster.NumTrainingHosts()};
}

namespace {

constexpr const char* kTorchVariables[] = {
    "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"};

}  // namespace

std::vector<std::string> TorchDistributedEnvironment(const TorchWorld& world, int restart_count, int max_restarts,
                                                     const std::string& run_id, const std::string& error_file) {
  auto number = [](int n) { return std::to_string(n); };
  std::vector<std::string> env = {
      "MASTER_ADDR=" + world.master_addr,
      "MASTER_PORT=" + number(world.master_port),
      "RANK=" + number(world.rank),
      "WORLD_SIZE=" + number(world.world_size),
      "LOCAL_RANK=" + number(world.local_rank),
      "LOCAL_WORLD_SIZE=" + number(world.local_world_size),
      "GROUP_RANK=" + number(world.group_rank),
      "GROUP_WORLD_SIZE=" + number(world.group_world_size),
      // One role, as torchrun's default: the role's ranks are the ranks.
      "ROLE_RANK=" + number(world.rank),
      "ROLE_WORLD_SIZE=" + number(world.world_size),
      "ROLE_NAME=default",
      "TORCHELASTIC_RESTART_COUNT=" + number(restart_count),
      "TORCHELASTIC_MAX_RESTARTS=" + number(max_restarts),
      "TORCHELASTIC_RUN_ID=" + run_id,
  };
  if (!error_file.empty()) env.push_back("TORCHELASTIC_ERROR_FILE=" + error_file);
  return env;
}

void AddUserProgramEnvironment(const ClusterSpec& cluster, const TaskId& task, const std::string& run_dir,
                               int generation, int max_restarts, TaskLaunch& t) {
  t.reports_liveness = false;  // only mirrored-worker writes signs of life
  t.env.push_back(std::string(kRunDirVariable) + "=" + run_dir);
  AddUnbufferedPython(t.env);
  if (std::optional<TorchWorld> world = TorchWorldOf(cluster, task)) {
    t.error_file = run_dir + "/logs/" + t.name + ".error.json";
    const std::string run_id = std::filesystem::path(run_dir).filename().string();
    for (std::string& e : TorchDistributedEnvironment(*world, generation, max_restarts, run_id, t.error_file))
      t.env.push_back(std::move(e));
  }
}

void AddUnbufferedPython(std::vector<std::string>& env) {
  for (const std::string& e : env)
    if (e.rfind("PYTHONUNBUFFERED=", 0) == 0) return;  // the user's choice
  env.push_back("PYTHONUNBUFFERED=1");
}

bool IsUserProgramVariable(const std::string& entry) {
  auto sets = [&entry](std::string_view key) {
    return entry.size() > key.size() && entry.compare(0, key.size(), key) == 0 && entry[key.size()] == '=';
  };
  if (sets(kRunDirVariable)) return true;
  for (const char* key : kTorchVariables)
    if (sets(key)) return true;
  return false;
}

}  // namespace mirrored
