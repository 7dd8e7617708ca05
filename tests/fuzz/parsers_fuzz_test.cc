// A deterministic fuzz run of every parser that reads what a user or a disk
// hands us (issue #25): TF_CONFIG, host:port, Slurm's host and task lists,
// safetensors, state.json, the checkpoint index and IDX images. Each gets
// kInputsPerParser inputs mutated from valid seeds by a fixed-seed
// generator, so a failure reproduces exactly. Passing means: no crash, no
// uncaught exception, no allocation past kAddressSpaceLimit (set for the
// whole process, so a parser that trusts a length field aborts the test)
// and no hang (CTest's timeout). The outcome of each input is not checked:
// most are refused, which is the point.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/cluster/host_port.h"
#include "common/cluster/slurm_host_list.h"
#include "common/cluster/tf_config_parser.h"
#include "common/run_dir/checkpoint_index.h"
#include "common/run_dir/checkpoint_state.h"
#include "common/run_dir/safetensors_file.h"
#include "worker/data/idx_file.h"

namespace mirrored {
namespace {

constexpr int kInputsPerParser = 100000;
constexpr rlim_t kAddressSpaceLimit = rlim_t{4} << 30;

// Bytes that parsers give meaning to, spliced in whole.
const std::vector<std::string> kTokens = {
    "{", "}", "[", "]", "\"", ":", ",", "-", "(x", ")", "\\u0000", "\\ud800", "1e400", "-1", "0",
    "18446744073709551616", "99999999999", "9223372036854775807", "null", "true", "[]", "{}",
    std::string(1, '\0'), "\xff", "\xc3", "::", "%", "worker", "chief", "evaluator", "index", "type",
    "cluster", "task", "data_offsets", "dtype", "shape", "F32", "I64", "__metadata__", "step", "epoch",
    "state_crc32c", "latest", std::string(8, '\xff'), std::string("\x00\x00\x08\x03", 4)};

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string Mutate(std::string s) {
    const int edits = 1 + static_cast<int>(Below(4));
    for (int i = 0; i < edits; ++i) Edit(s);
    return s;
  }

 private:
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  void Edit(std::string& s) {
    const size_t at = Below(s.size() + 1);
    switch (Below(6)) {
      case 0:  // flip a bit
        if (!s.empty()) s[at % s.size()] ^= static_cast<char>(1u << Below(8));
        break;
      case 1:  // a random byte
        s.insert(at, 1, static_cast<char>(Below(256)));
        break;
      case 2:  // a token
        s.insert(at, kTokens[Below(kTokens.size())]);
        break;
      case 3:  // cut a range
        s.erase(at, Below(16));
        break;
      case 4:  // repeat a range
        if (at < s.size()) s.insert(at, s.substr(at, 1 + Below(32)));
        break;
      default:  // truncate
        s.resize(at);
        break;
    }
  }

  std::mt19937_64 rng_;
};

void FuzzParser(const char* name, const std::vector<std::string>& seeds,
                const std::function<void(const std::string&)>& parse) {
  Mutator mutator(std::hash<std::string>{}(name));
  for (const std::string& seed : seeds) parse(seed);
  for (int i = 0; i < kInputsPerParser; ++i) parse(mutator.Mutate(seeds[static_cast<size_t>(i) % seeds.size()]));
}

class ParsersFuzzTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rlimit limit{kAddressSpaceLimit, kAddressSpaceLimit};
    ASSERT_EQ(setrlimit(RLIMIT_AS, &limit), 0);
  }
};

TEST_F(ParsersFuzzTest, TfConfig) {
  FuzzParser("tf_config",
             {R"({"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":1}})",
              R"({"cluster":{"chief":["c:1"],"worker":["[::1]:2","10.0.0.1:3"],"evaluator":["e:4"]},)"
              R"("task":{"type":"evaluator","index":"0"},"rpc_layer":"grpc","environment":"cloud"})",
              R"({"task":{"type":"chief","index":0.0}})",
              R"({"cluster":{"worker":{"1":"h2:2222","0":"h1:2222"," 2":"h3:1"}},)"
              R"("task":{"type":"worker","index":" +1"}})"},
             [](const std::string& s) { (void)ParseTfConfig(s, "fuzz"); });
}

TEST_F(ParsersFuzzTest, HostPort) {
  FuzzParser("host_port", {"h1:2222", "[fe80::1%eth0]:65535", "w-0.svc.cluster.local.:1", "10.0.0.1:007"},
             [](const std::string& s) { (void)HostPort::Parse(s); });
}

TEST_F(ParsersFuzzTest, SlurmLists) {
  FuzzParser("slurm_hosts", {"node[01-03,07],gpu-a[1-2]", "n1,n2", "rack[1-2]-node[001-004]"},
             [](const std::string& s) { (void)ExpandSlurmHostList(s); });
  FuzzParser("slurm_tasks", {"3(x2),2", "1", "8(x1024)"},
             [](const std::string& s) { (void)ExpandSlurmTasksPerNode(s); });
}

TEST_F(ParsersFuzzTest, Safetensors) {
  const std::vector<float> weights = {1, 2, 3, 4, 5, 6};
  const int64_t step = 7;
  auto file = SafetensorsFile::Serialize(
      {{"dense0/kernel", DType::kF32, {2, 3}, weights.data()}, {"iterations", DType::kI64, {}, &step}},
      {{"format", "mirrored"}});
  ASSERT_TRUE(file.ok()) << file.status();
  FuzzParser("safetensors", {*file}, [](const std::string& s) {
    (void)SafetensorsFile::Parse(s, "fuzz.safetensors");
    (void)SafetensorsFile::ValidateHeader(s, s.size(), "fuzz.safetensors");
  });
}

TEST_F(ParsersFuzzTest, CheckpointStateAndIndex) {
  CheckpointState state;
  state.step = 600;
  state.epoch = 2;
  state.step_in_epoch = 131;
  state.model = "cnn";
  state.optimizer = "adam";
  state.files["model.safetensors"] = {1077808, 0x93bb0896u};
  FuzzParser("state_json", {state.ToJsonText()},
             [](const std::string& s) { (void)CheckpointState::FromJsonText(s, "state.json"); });
  FuzzParser("checkpoint_index", {CheckpointIndex{40, {30, 40}, {10, 20}}.ToJsonText()},
             [](const std::string& s) { (void)CheckpointIndex::FromJsonText(s, "checkpoint"); });
}

TEST_F(ParsersFuzzTest, IdxImages) {
  std::string images("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x03", 16);
  images += std::string(18, '\x7f');
  const std::string labels = std::string("\x00\x00\x08\x01\x00\x00\x00\x04", 8) + "\x01\x02\x03\x09";
  FuzzParser("idx", {images, labels}, [](const std::string& s) {
    (void)data::IdxFile::Parse("fuzz-idx", std::vector<uint8_t>(s.begin(), s.end()));
  });
}

}  // namespace
}  // namespace mirrored
