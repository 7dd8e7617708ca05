#include "launcher/job/task_program.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/status.h"

namespace mirrored {
namespace {

namespace fs = std::filesystem;

class TaskProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("task-program-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "bin");
    MakeFile("bin/mirrored-worker", 0755);
    MakeFile("bin/train", 0755);
    MakeFile("bin/plain", 0644);
    fs::create_directories(dir_ / "bin/folder");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void MakeFile(const std::string& name, mode_t mode) {
    std::ofstream(dir_ / name) << "#!/bin/sh\n";
    chmod((dir_ / name).c_str(), mode);
  }
  std::string Bin(const std::string& name) const { return (dir_ / "bin" / name).string(); }
  fs::path dir_;
};

TEST_F(TaskProgramTest, OnlyFlagsAfterTheDashesRunMirroredWorker) {
  for (const std::vector<std::string>& after : {std::vector<std::string>{}, {"--model", "cnn"}, {"-h"}}) {
    auto program = ChooseTaskProgram(Bin("mirrored-worker"), after, "/nowhere");
    ASSERT_TRUE(program.ok()) << program.status();
    EXPECT_TRUE(program->is_mirrored_worker);
    std::vector<std::string> argv = {Bin("mirrored-worker")};
    argv.insert(argv.end(), after.begin(), after.end());
    EXPECT_EQ(program->argv, argv);
  }
}

TEST_F(TaskProgramTest, TheFirstWordThatIsNoFlagIsTheProgramFoundAlongPath) {
  auto program = ChooseTaskProgram("", {"train", "--epochs", "3", "x"}, "/nowhere::" + (dir_ / "bin").string());
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_FALSE(program->is_mirrored_worker);
  EXPECT_EQ(program->argv, (std::vector<std::string>{Bin("train"), "--epochs", "3", "x"}));
  // A path is taken as it is; a program named mirrored-worker is one.
  program = ChooseTaskProgram("", {Bin("mirrored-worker"), "--model", "cnn"}, "");
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_TRUE(program->is_mirrored_worker);
}

TEST_F(TaskProgramTest, ProgramsThatCannotRunAreExitTwoNamingThem) {
  const std::string path = (dir_ / "bin").string();
  struct Case {
    std::string program;
    StatusCode code;
    std::string says;
  } cases[] = {
      {"nosuch", StatusCode::kNotFound, "program \"nosuch\" is not found in PATH (\"" + path + "\")"},
      {Bin("nosuch"), StatusCode::kNotFound, "does not exist"},
      {Bin("plain"), StatusCode::kPermissionDenied, "is not executable"},
      {"plain", StatusCode::kPermissionDenied, "is not executable"},  // found, but not runnable: said so
      {Bin("folder"), StatusCode::kPermissionDenied, "is a directory"},
  };
  for (const Case& c : cases) {
    auto program = ChooseTaskProgram("", {c.program}, path);
    ASSERT_FALSE(program.ok()) << c.program;
    EXPECT_EQ(program.status().code(), c.code) << program.status();
    EXPECT_EQ(ExitCodeFor(program.status()), kExitUsage) << program.status();
    EXPECT_NE(program.status().message().find(c.says), std::string::npos) << program.status();
    EXPECT_NE(program.status().message().find("the program after `--`"), std::string::npos) << program.status();
  }
}

TEST_F(TaskProgramTest, WorkerBinaryAndAProgramAfterTheDashesAreRefusedTogether) {
  auto program = ChooseTaskProgram("/usr/bin/python3", {"train.py"}, "");
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(program.status().message().find("both name what to run"), std::string::npos) << program.status();
}

TEST(SplitCommandWordsTest, SplitsAsAShellWithoutExpandingAnything) {
  auto words = SplitCommandWords(R"(  python3 eval.py --name 'a b' "c \"d\"" e\ f $HOME '' )");
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, (std::vector<std::string>{"python3", "eval.py", "--name", "a b", "c \"d\"", "e f", "$HOME", ""}));
  for (const char* bad : {"", "   ", "python3 'x", "a \"b"}) {
    auto refused = SplitCommandWords(bad);
    EXPECT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(TorchWorldTest, RanksFollowTheClusterAndHostsAreNumberedInOrder) {
  auto at = [](const std::string& host, int port) { return HostPort{host, static_cast<uint16_t>(port)}; };
  auto cluster = ClusterSpec::Create({{"chief", {at("h2", 1000)}},
                                      {"worker", {at("h1", 2000), at("h2", 2001), at("H1", 2002)}},
                                      {"evaluator", {at("h3", 3000)}}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto chief = TorchWorldOf(*cluster, TaskId{"chief", 0});
  ASSERT_TRUE(chief.has_value());
  EXPECT_EQ(chief->master_addr, "h2");
  EXPECT_EQ(chief->master_port, 1000);
  EXPECT_EQ(chief->rank, 0);
  EXPECT_EQ(chief->world_size, 4);
  EXPECT_EQ(chief->group_rank, 0);  // h2 comes first (the chief's host)
  EXPECT_EQ(chief->group_world_size, 2);
  auto w2 = TorchWorldOf(*cluster, TaskId{"worker", 2});  // H1: the same host as h1
  ASSERT_TRUE(w2.has_value());
  EXPECT_EQ(w2->rank, 3);
  EXPECT_EQ(w2->local_rank, 1);
  EXPECT_EQ(w2->local_world_size, 2);
  EXPECT_EQ(w2->group_rank, 1);
  EXPECT_FALSE(TorchWorldOf(*cluster, TaskId{"evaluator", 0}).has_value());
}

TEST(TorchWorldTest, TheVariablesAreTorchrunsAndReplaceInheritedOnes) {
  TorchWorld world{.master_addr = "h", .master_port = 7, .rank = 1, .world_size = 2, .local_rank = 1,
                   .local_world_size = 2, .group_rank = 0, .group_world_size = 1};
  const auto env = TorchDistributedEnvironment(world, 3, 5, "run-a", "/r/logs/worker:1.error.json");
  for (const char* expected :
       {"MASTER_ADDR=h", "MASTER_PORT=7", "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
        "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "ROLE_RANK=1", "ROLE_WORLD_SIZE=2", "TORCHELASTIC_RESTART_COUNT=3",
        "TORCHELASTIC_MAX_RESTARTS=5", "TORCHELASTIC_RUN_ID=run-a",
        "TORCHELASTIC_ERROR_FILE=/r/logs/worker:1.error.json"}) {
    EXPECT_NE(std::find(env.begin(), env.end(), expected), env.end()) << expected;
  }
  for (const std::string& e : env) EXPECT_TRUE(IsUserProgramVariable(e)) << e;
  EXPECT_TRUE(IsUserProgramVariable("MIRRORED_RUN_DIR=/x"));
  EXPECT_FALSE(IsUserProgramVariable("RANKS=1"));
  EXPECT_FALSE(IsUserProgramVariable("PATH=/bin"));
}

}  // namespace
}  // namespace mirrored
