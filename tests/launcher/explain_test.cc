// Runs the built `mirrored-launch explain` as a child process with a
// constructed environment (TF_CONFIG, SLURM_*), never touching this test
// process's own environment, and checks its output and exit codes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace mirrored {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

const std::string kLauncher = std::string(MIRRORED_BIN_DIR) + "/mirrored-launch";

// Starts the launcher with exactly `env` as its environment (plus PATH) and
// collects its output; fails the test if it runs past the deadline.
RunResult RunLauncher(const std::vector<std::string>& args,
                      const std::map<std::string, std::string>& env) {
  RunResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2 failed";
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);

  std::vector<std::string> argv_storage{kLauncher};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage{"PATH=/usr/bin:/bin"};
  for (const auto& [k, v] : env) env_storage.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = -1;
  const int rc = posix_spawn(&pid, kLauncher.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    ADD_FAILURE() << "cannot start " << kLauncher << ": " << strerror(rc);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(pid, SIGKILL);
      ADD_FAILURE() << "mirrored-launch did not finish within 20 s";
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

constexpr const char* kReadmeTfConfig =
    R"({"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":1}})";
constexpr const char* kFullTfConfig =
    R"({"cluster":{"chief":["c0:2222"],"worker":["w0:2222","w1:2222"],"evaluator":["ev:2222"]},
        "task":{"type":"worker","index":1}})";

std::map<std::string, std::string> SrunEnv(const char* procid, const char* localid) {
  return {{"SLURM_PROCID", procid},
          {"SLURM_LOCALID", localid},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_STEP_NODELIST", "gpu[08-09]"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}};
}

TEST(ExplainTest, ReadmeTfConfigFromEnvironmentPrintsTable) {
  RunResult r = RunLauncher({"explain"}, {{"TF_CONFIG", kReadmeTfConfig}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "source: TF_CONFIG environment variable\n"
            "tasks:  2 training tasks\n"
            "\n"
            "TASK      ROLE       RANK  ADDRESS  NOTES\n"
            "worker:0  chief      0     h1:2222  coordination service\n"
            "worker:1  worker     1     h2:2222  <- this process\n"
            "\n"
            "coordination service: worker:0 at h1:2222\n"
            "this process:         worker:1 (worker, rank 1) at h2:2222\n");
}

// A job given as a map of index to address (TF's ClusterSpec takes one)
// resolves to, and prints as, the list it stands for.
TEST(ExplainTest, DenseMapTfConfigPrintsAsTheList) {
  RunResult r = RunLauncher(
      {"explain"},
      {{"TF_CONFIG", R"({"cluster":{"worker":{"1":"h2:2222","0":"h1:2222"}},"task":{"type":"worker","index":"+1"}})"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "source: TF_CONFIG environment variable\n"
            "tasks:  2 training tasks\n"
            "\n"
            "TASK      ROLE       RANK  ADDRESS  NOTES\n"
            "worker:0  chief      0     h1:2222  coordination service\n"
            "worker:1  worker     1     h2:2222  <- this process\n"
            "\n"
            "coordination service: worker:0 at h1:2222\n"
            "this process:         worker:1 (worker, rank 1) at h2:2222\n");
}

TEST(ExplainTest, ChiefWorkersEvaluatorFromFileAsJson) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) /
                                     ("explain_test_" + std::to_string(getpid()) + ".json");
  { std::ofstream(path) << kFullTfConfig; }
  RunResult r = RunLauncher({"explain", "--tf-config", path.string(), "--json"}, {});
  std::filesystem::remove(path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["source"], "--tf-config file \"" + path.string() + "\"");
  ASSERT_EQ(j["tasks"].size(), 4u);
  std::vector<std::string> names, roles;
  for (const auto& t : j["tasks"]) {
    names.push_back(t["task"]);
    roles.push_back(t["role"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"chief:0", "worker:0", "worker:1", "evaluator:0"}));
  EXPECT_EQ(roles, (std::vector<std::string>{"chief", "worker", "worker", "evaluator"}));
  EXPECT_EQ(j["tasks"][3]["rank"], nullptr);
  EXPECT_EQ(j["coordination_service"]["task"], "chief:0");
  EXPECT_EQ(j["coordination_service"]["address"], "c0:2222");
  EXPECT_EQ(j["this_task"]["task"], "worker:1");
  EXPECT_EQ(j["this_task"]["rank"], 2);
  EXPECT_EQ(j["num_training_tasks"], 3);
}

TEST(ExplainTest, JsonStringFlagWinsOverEnvironment) {
  RunResult r = RunLauncher({"explain", "--tf-config", kFullTfConfig, "--json"},
                            {{"TF_CONFIG", kReadmeTfConfig}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["source"], "--tf-config JSON");
  EXPECT_EQ(j["coordination_service"]["task"], "chief:0");
}

TEST(ExplainTest, FromSlurmUnderSrunVariables) {
  RunResult r = RunLauncher({"explain", "--from-slurm", "--json"}, SrunEnv("3", "1"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  std::vector<std::string> addresses;
  for (const auto& t : j["tasks"]) addresses.push_back(t["address"]);
  EXPECT_EQ(addresses,
            (std::vector<std::string>{"gpu08:8888", "gpu08:8889", "gpu09:8888", "gpu09:8889"}));
  EXPECT_EQ(j["this_task"]["task"], "worker:3");
  EXPECT_EQ(j["coordination_service"]["address"], "gpu08:8888");

  RunResult table = RunLauncher({"explain", "--from-slurm", "--slurm-port-base", "9000"},
                                SrunEnv("0", "0"));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("worker:0  chief      0     gpu08:9000  coordination service, <- this process\n"),
            std::string::npos)
      << table.out;
}

TEST(ExplainTest, NoTfConfigIsSingleLocalTask) {
  RunResult r = RunLauncher({"explain", "--json"}, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["single_local_task"], true);
  EXPECT_EQ(j["coordination_service"], nullptr);
  EXPECT_EQ(j["this_task"]["task"], "worker:0");
}

TEST(ExplainTest, UnknownKeysAreWarningsOnStderr) {
  RunResult r = RunLauncher(
      {"explain"}, {{"TF_CONFIG", R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0},"x":1})"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "mirrored-launch: warning: TF_CONFIG has unknown key \"x\"; it is ignored\n");
}

struct ErrorCase {
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string stderr_text;
};

TEST(ExplainTest, InvalidConfigurationsExitTwoWithTheFieldNamed) {
  const std::vector<ErrorCase> cases = {
      {{"explain", "--tf-config",
        R"({"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":3}})"},
       {},
       "mirrored-launch: error: --tf-config JSON: task.index 3 is out of range: job \"worker\" has 2 "
       "tasks\n"},
      {{"explain"},
       {{"TF_CONFIG", "{\"cluster\":\n{\"worker\":[\"a:1\"}}"}},
       "mirrored-launch: error: TF_CONFIG environment variable: not valid JSON: line 2, column 17: "
       "syntax error while parsing array - unexpected '}'; expected ']'\n"},
      {{"explain"},
       {{"TF_CONFIG", R"({"cluster":{"ps":["p:1"],"worker":["w:1"]},"task":{"type":"worker","index":0}})"}},
       "mirrored-launch: error: TF_CONFIG environment variable: cluster.ps: parameter-server "
       "training is not supported; mirrored runs synchronous data-parallel training with chief, "
       "worker and evaluator tasks only\n"},
      {{"explain"},
       {{"TF_CONFIG", R"({"cluster":{"worker":{"0":"h1:2222","2":"h3:2222"}},"task":{"type":"worker","index":0}})"}},
       "mirrored-launch: error: TF_CONFIG environment variable: cluster.worker: task index 1 is missing "
       "(TF_CONFIG gives 0, 2; mirrored needs the indices 0..N-1)\n"},
      {{"explain", "--tf-config", "/nonexistent/cluster.json"},
       {},
       "mirrored-launch: error: --tf-config \"/nonexistent/cluster.json\": no such file (a JSON value "
       "must start with \"{\")\n"},
      {{"explain", "--from-slurm"},
       {{"SLURM_PROCID", "0"}},
       "mirrored-launch: error: neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is set: --from-slurm "
       "must run inside a Slurm job step (under srun)\n"},
      {{"explain", "--from-slurm"},
       SrunEnv("2", "1"),
       "mirrored-launch: error: SLURM_LOCALID 1 does not match SLURM_PROCID 2: by "
       "SLURM_STEP_TASKS_PER_NODE \"2(x2)\" rank 2 is local task 0 on gpu09 (run srun with the "
       "default block distribution, --distribution=block)\n"},
  };
  for (const ErrorCase& c : cases) {
    RunResult r = RunLauncher(c.args, c.env);
    EXPECT_EQ(r.exit_code, 2) << c.stderr_text;
    EXPECT_EQ(r.err, c.stderr_text);
    EXPECT_EQ(r.out, "");
  }
}

// The 2026-11-27 probe's bad inputs (D1-D6, D14, D15 in
// shared/findings/reliability-2026-11-27.md): each once aborted, hung, was
// accepted or printed raw control bytes; each is now exit 2 naming it.
bool HasRawControlByte(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto b = static_cast<unsigned char>(c);
    return (b < 0x20 && b != '\n') || b == 0x7F;
  });
}

struct ProbeCase {
  const char* defect;
  std::vector<std::string> args;
  std::string expected_in_stderr;
};

TEST(ExplainTest, ProbeInputsThatAbortedHungOrPassedNowExitTwoNamingThem) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("probe-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string worker0 = R"("cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"worker","index":0})";
  const std::string nul_file = (dir / "nul.json").string();
  {
    std::ofstream f(nul_file, std::ios::binary);
    f << "{" << worker0 << "}" << std::string(1, '\0') << "GARBAGE{{{";
  }
  const std::string a_file = (dir / "afile").string();
  std::ofstream(a_file) << "x";
  const std::vector<ProbeCase> cases = {
      {"D1", {"explain", "--tf-config", "{" + worker0 + R"(,"x":1e400})"}, "not valid JSON: "},
      {"D1", {"explain", "--tf-config", "{" + worker0 + R"(,"x":1e400})"}, "number overflow"},
      {"D2", {"explain", "--tf-config", (dir / "x\xff.json").string()}, "x\\xff.json\""},
      {"D3", {"explain", "--tf-config", "/dev/zero"}, "\"/dev/zero\" is larger than 16 MiB"},
      {"D4", {"explain", "--tf-config", R"({"cluster":{"worker":["h\u0000evil:2222"]},"task":{"type":"worker","index":0}})"},
       R"(host "h\u0000evil" contains an invalid character)"},
      {"D4", {"explain", "--tf-config", R"({"cluster":{"worker":["\u0007\u001bc:2222"]},"task":{"type":"worker","index":0}})"},
       R"(host "\u0007\u001bc" contains an invalid character)"},
      {"D4", {"explain", "--tf-config", R"({"cluster":{"worker":["\u001b[31mRED:1"]},"task":{"type":"worker","index":0}})"},
       R"(host "\u001b[31mRED" contains an invalid character)"},
      {"D4", {"explain", "--tf-config", R"({"cluster":{"worker":["a,b:2222"]},"task":{"type":"worker","index":0}})"},
       "contains an invalid character"},
      {"D4", {"explain", "--tf-config", R"({"cluster":{"worker":[")" + std::string(300, 'h') + R"(:1"]},"task":{"type":"worker","index":0}})"},
       "host name of 300 characters is longer than 253"},
      {"D5", {"explain", "--tf-config", nul_file}, "not valid JSON: a NUL byte at offset 73"},
      {"D6", {"explain", "--tf-config", R"({"cluster":{"worker":["h:1"]},"task":{"type":"worker","index":1000001}})"},
       "task.index 1000001 is above the limit of 1000000"},
      {"D14", {"local", "--dry-run", "--workers", "1", "--run-dir", a_file, "--", "--model", "mlp"},
       a_file + " is not a directory, so the launch cannot create " + a_file + "/logs"},
      {"D15", {"local", "--workers", "1", "--run-dir", "", "--", "--model", "mlp"}, "--run-dir is empty"},
      {"D15", {"cluster", "--run-dir", "", "--", "--model", "mlp"}, "--run-dir is empty"},
  };
  for (const ProbeCase& c : cases) {
    const RunResult r = RunLauncher(c.args, {});
    EXPECT_EQ(r.exit_code, 2) << c.defect << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected_in_stderr), std::string::npos) << c.defect << ": " << r.err;
    EXPECT_FALSE(HasRawControlByte(r.err)) << c.defect << ": " << r.err;
  }
  std::filesystem::remove_all(dir);
}

TEST(ExplainTest, UsageErrorsExitTwoAndHelpVersionExitZero) {
  EXPECT_EQ(RunLauncher({"explain", "--tf-config", "{}", "--from-slurm"}, {}).exit_code, 2);
  EXPECT_EQ(RunLauncher({"explain", "--slurm-port-base", "9000"}, {}).exit_code, 2);
  EXPECT_EQ(RunLauncher({}, {}).exit_code, 2);
  // explain starts no worker: no hint about the workers' flags.
  RunResult bogus = RunLauncher({"explain", "--bogus"}, {});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_EQ(bogus.err,
            "mirrored-launch explain: error: --bogus is not a flag of `explain` (`mirrored-launch explain --help` "
            "lists them)\n");
  RunResult extra = RunLauncher({"explain", "extra"}, {});
  EXPECT_EQ(extra.exit_code, 2);
  EXPECT_EQ(extra.err.find("workers"), std::string::npos) << extra.err;
  RunResult help = RunLauncher({"explain", "--help"}, {});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--from-slurm"), std::string::npos);
  RunResult version = RunLauncher({"--version"}, {});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("mirrored-launch ", 0), 0u) << version.out;
}

}  // namespace
}  // namespace mirrored
