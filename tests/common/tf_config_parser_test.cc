// Table-driven TF_CONFIG cases: each valid one checks the resolved cluster and
// task, each invalid one the exact operator-facing message.
#include "common/cluster/tf_config_parser.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace mirrored {
namespace {

struct ValidCase {
  const char* name;
  const char* json;
  std::vector<std::string> training;  // TrainingTasks() as "addr" in rank order
  const char* chief;
  const char* task;
  int rank;  // -1: not a training task
  bool single_local;
  std::vector<std::string> warnings;
};

// Short parameter names in test listings (ctest -N) instead of a byte dump.
void PrintTo(const ValidCase& c, std::ostream* os) { *os << c.name; }

std::vector<std::string> TrainingAddresses(const ClusterConfig& c) {
  std::vector<std::string> out;
  for (const TaskId& t : c.cluster.TrainingTasks()) {
    out.push_back(t.ToString() + "=" + c.cluster.AddressOf(t)->ToString());
  }
  return out;
}

class ValidTfConfigTest : public ::testing::TestWithParam<ValidCase> {};

TEST_P(ValidTfConfigTest, Resolves) {
  const ValidCase& c = GetParam();
  StatusOr<ClusterConfig> config = ParseTfConfig(c.json);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(TrainingAddresses(*config), c.training);
  EXPECT_EQ(config->task.ToString(), c.task);
  EXPECT_EQ(config->is_single_local_task, c.single_local);
  EXPECT_EQ(config->warnings, c.warnings);
  if (!c.single_local) {
    EXPECT_EQ(config->cluster.ChiefTask().ToString(), c.chief);
    auto rank = config->cluster.RankOf(config->task);
    EXPECT_EQ(rank.value_or(-1), c.rank);
    // Round trip through the TF_CONFIG a launcher hands to a child.
    StatusOr<ClusterConfig> again = ParseTfConfig(config->ToTfConfigJson());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(TrainingAddresses(*again), c.training);
    EXPECT_EQ(again->task, config->task);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ValidTfConfigTest,
    ::testing::Values(
        ValidCase{"ReadmeTwoWorkers",
                  R"({"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":1}})",
                  {"worker:0=h1:2222", "worker:1=h2:2222"}, "worker:0", "worker:1", 1, false, {}},
        ValidCase{"ChiefWorkersEvaluator",
                  R"({"cluster":{"worker":["w0:1","w1:2"],"evaluator":["e:3"],"chief":["c:4"]},
                      "task":{"type":"chief","index":0}})",
                  {"chief:0=c:4", "worker:0=w0:1", "worker:1=w1:2"}, "chief:0", "chief:0", 0, false, {}},
        ValidCase{"WorkerRankAfterChief",
                  R"({"cluster":{"chief":["c:4"],"worker":["w0:1","w1:2"]},"task":{"type":"worker","index":1}})",
                  {"chief:0=c:4", "worker:0=w0:1", "worker:1=w1:2"}, "chief:0", "worker:1", 2, false, {}},
        ValidCase{"EvaluatorInCluster",
                  R"({"cluster":{"worker":["w0:1"],"evaluator":["e:3"]},"task":{"type":"evaluator","index":0}})",
                  {"worker:0=w0:1"}, "worker:0", "evaluator:0", -1, false, {}},
        ValidCase{"EvaluatorLeftOutOfCluster",
                  R"({"cluster":{"worker":["w0:1","w1:1"]},"task":{"type":"evaluator","index":0}})",
                  {"worker:0=w0:1", "worker:1=w1:1"}, "worker:0", "evaluator:0", -1, false, {}},
        ValidCase{"Ipv6AndRpcLayerAndEnvironment",
                  R"({"cluster":{"worker":["[::1]:2222","[::1]:2223"]},"task":{"type":"worker","index":0},
                      "rpc_layer":"grpc","environment":"cloud"})",
                  {"worker:0=[::1]:2222", "worker:1=[::1]:2223"}, "worker:0", "worker:0", 0, false, {}},
        ValidCase{"UnknownKeysWarn",
                  R"({"cluster":{"worker":["w0:1"]},"task":{"type":"worker","index":0,"trial":"x"},
                      "session_master":"grpc://x:1"})",
                  {"worker:0=w0:1"}, "worker:0", "worker:0", 0, false,
                  {"TF_CONFIG has unknown key \"session_master\"; it is ignored",
                   "TF_CONFIG has unknown key \"task.trial\"; it is ignored"}},
        ValidCase{"SamePortOtherHosts",
                  R"({"cluster":{"worker":["a:2222","b:2222","c:2222"]},"task":{"type":"worker","index":2}})",
                  {"worker:0=a:2222", "worker:1=b:2222", "worker:2=c:2222"}, "worker:0", "worker:2", 2,
                  false, {}},
        // As TensorFlow's int(task["index"]).
        ValidCase{"IndexWrittenAsStringOrFloat",
                  R"({"cluster":{"worker":["a:1","b:1","c:1"]},"task":{"type":"worker","index":"2"}})",
                  {"worker:0=a:1", "worker:1=b:1", "worker:2=c:1"}, "worker:0", "worker:2", 2, false, {}},
        ValidCase{"IndexWrittenAsFloat",
                  R"({"cluster":{"worker":["a:1","b:1"]},"task":{"type":"worker","index":1.0}})",
                  {"worker:0=a:1", "worker:1=b:1"}, "worker:0", "worker:1", 1, false, {}},
        ValidCase{"IndexWrittenWithExponent",
                  R"({"cluster":{"worker":["a:1","b:1"]},"task":{"type":"worker","index":1e0}})",
                  {"worker:0=a:1", "worker:1=b:1"}, "worker:0", "worker:1", 1, false, {}},
        // Strings as Python's int(): blanks around, a sign, underscores between digits.
        ValidCase{"IndexStringWithPlusSign",
                  R"({"cluster":{"worker":["a:1","b:1"]},"task":{"type":"worker","index":"+1"}})",
                  {"worker:0=a:1", "worker:1=b:1"}, "worker:0", "worker:1", 1, false, {}},
        ValidCase{"IndexStringWithBlanks",
                  R"({"cluster":{"worker":["a:1","b:1"]},"task":{"type":"worker","index":" \t1\n "}})",
                  {"worker:0=a:1", "worker:1=b:1"}, "worker:0", "worker:1", 1, false, {}},
        ValidCase{"IndexStringMinusZero",
                  R"({"cluster":{"worker":["a:1","b:1"]},"task":{"type":"worker","index":"-0"}})",
                  {"worker:0=a:1", "worker:1=b:1"}, "worker:0", "worker:0", 0, false, {}},
        ValidCase{"IndexStringWithUnderscore",
                  R"({"cluster":{"worker":["a:1","b:1","c:1","d:1","e:1","f:1","g:1","h:1","i:1","j:1","k:1"]},
                      "task":{"type":"worker","index":"1_0"}})",
                  {"worker:0=a:1", "worker:1=b:1", "worker:2=c:1", "worker:3=d:1", "worker:4=e:1", "worker:5=f:1",
                   "worker:6=g:1", "worker:7=h:1", "worker:8=i:1", "worker:9=j:1", "worker:10=k:1"},
                  "worker:0", "worker:10", 10, false, {}},
        // A job as a map of index to address (TF's ClusterSpec takes a dict job).
        ValidCase{"DenseMapInOrder",
                  R"({"cluster":{"worker":{"0":"h1:2222","1":"h2:2222"}},"task":{"type":"worker","index":1}})",
                  {"worker:0=h1:2222", "worker:1=h2:2222"}, "worker:0", "worker:1", 1, false, {}},
        ValidCase{"DenseMapOutOfOrderWithChief",
                  R"({"cluster":{"chief":{"0":"c:1"},"worker":{"2":"w2:1","0":"w0:1","1":"w1:1"}},
                      "task":{"type":"worker","index":2}})",
                  {"chief:0=c:1", "worker:0=w0:1", "worker:1=w1:1", "worker:2=w2:1"}, "chief:0", "worker:2", 3,
                  false, {}},
        ValidCase{"DenseMapKeysReadAsInt",
                  R"({"cluster":{"worker":{" 1 ":"b:1","+0":"a:1","0_2":"c:1"}},"task":{"type":"worker","index":"2"}})",
                  {"worker:0=a:1", "worker:1=b:1", "worker:2=c:1"}, "worker:0", "worker:2", 2, false, {}},
        ValidCase{"EmptyObjectIsSingleLocal", "{}", {}, "", "worker:0", 0, true, {}},
        ValidCase{"BlankIsSingleLocal", "  \n", {}, "", "worker:0", 0, true, {}},
        ValidCase{"EmptyClusterIsSingleLocal", R"({"cluster":{},"task":{"type":"worker","index":0}})",
                  {}, "", "worker:0", 0, true, {}},
        ValidCase{"TaskWithoutClusterKeepsType", R"({"task":{"type":"evaluator","index":0}})", {}, "",
                  "evaluator:0", -1, true, {}}),
    [](const ::testing::TestParamInfo<ValidCase>& info) { return std::string(info.param.name); });

struct InvalidCase {
  const char* name;
  const char* json;
  const char* message;
};

// 600 nested arrays: nlohmann would recurse once per level.
const std::string kDeepTfConfig = "{\"task\":" + std::string(600, '[') + std::string(600, ']') + "}";

// Short parameter names in test listings (ctest -N) instead of a byte dump.
void PrintTo(const InvalidCase& c, std::ostream* os) { *os << c.name; }

class InvalidTfConfigTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidTfConfigTest, IsRejectedWithExactMessage) {
  const InvalidCase& c = GetParam();
  StatusOr<ClusterConfig> config = ParseTfConfig(c.json);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExitCodeFor(config.status()), 2);
  EXPECT_EQ(config.status().message(), c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, InvalidTfConfigTest,
    ::testing::Values(
        InvalidCase{"IndexOutOfRange",
                    R"({"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":3}})",
                    "task.index 3 is out of range: job \"worker\" has 2 tasks"},
        InvalidCase{"IndexOutOfRangeOneTask",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":1}})",
                    "task.index 1 is out of range: job \"worker\" has 1 task"},
        InvalidCase{"NegativeIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":-1}})",
                    "task.index -1 must be a non-negative integer"},
        InvalidCase{"StringIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"zero"}})",
                    "task.index string \"zero\" must be a non-negative integer"},
        InvalidCase{"NegativeStringIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"-1"}})",
                    "task.index string \"-1\" must be a non-negative integer"},
        // Bytes of UTF-8 (negative chars) are no digits: "\u00b9" is superscript one.
        InvalidCase{"NonAsciiStringIndex",
                    "{\"cluster\":{\"worker\":[\"h1:2222\"]},\"task\":{\"type\":\"worker\",\"index\":\"1\u00b9\"}}",
                    "task.index string \"1\u00b9\" must be a non-negative integer"},
        InvalidCase{"FractionalIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":0.5}})",
                    "task.index 0.5 must be a non-negative integer"},
        InvalidCase{"EmptyStringIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":""}})",
                    "task.index string \"\" must be a non-negative integer"},
        InvalidCase{"BlankStringIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":" "}})",
                    "task.index string \" \" must be a non-negative integer"},
        InvalidCase{"SignOnlyIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"+"}})",
                    "task.index string \"+\" must be a non-negative integer"},
        InvalidCase{"BlankAfterSignIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"+ 1"}})",
                    "task.index string \"+ 1\" must be a non-negative integer"},
        InvalidCase{"ExponentStringIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"1e0"}})",
                    "task.index string \"1e0\" must be a non-negative integer"},
        InvalidCase{"DecimalPointStringIndex",
                    R"({"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":"1.0"}})",
                    "task.index string \"1.0\" must be a non-negative integer"},
        // Python's int() refuses these underscores too.
        InvalidCase{"DoubleUnderscoreIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"1__0"}})",
                    "task.index string \"1__0\" must be a non-negative integer"},
        InvalidCase{"LeadingUnderscoreIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"_1"}})",
                    "task.index string \"_1\" must be a non-negative integer"},
        InvalidCase{"TrailingUnderscoreIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"1_"}})",
                    "task.index string \"1_\" must be a non-negative integer"},
        InvalidCase{"UnderscoreAfterSignIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"+_1"}})",
                    "task.index string \"+_1\" must be a non-negative integer"},
        // int() takes Unicode digits ("\u0663" is Arabic-Indic three); we do not.
        InvalidCase{"UnicodeDigitIndex",
                    "{\"cluster\":{\"worker\":[\"h1:2222\"]},\"task\":{\"type\":\"worker\",\"index\":\"\u0663\"}}",
                    "task.index string \"\u0663\" must be a non-negative integer"},
        InvalidCase{"BooleanIndex",
                    R"({"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":true}})",
                    "task.index true must be a non-negative integer"},
        InvalidCase{"HugeStringIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":"99999999999999999999"}})",
                    "task.index string \"99999999999999999999\" is above the limit of 1000000 (a job has at "
                    "most that many tasks of a type)"},
        InvalidCase{"HugeUnsignedIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":18446744073709551615}})",
                    "task.index 18446744073709551615 is above the limit of 1000000 (a job has at most that many "
                    "tasks of a type)"},
        InvalidCase{"HugeFloatIndex",
                    R"({"cluster":{"worker":["h1:2222"]},"task":{"type":"worker","index":1e12}})",
                    "task.index 1000000000000.0 is above the limit of 1000000 (a job has at most that many "
                    "tasks of a type)"},
        InvalidCase{"DenseMapGap",
                    R"({"cluster":{"worker":{"0":"h1:2222","2":"h3:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker: task index 1 is missing (TF_CONFIG gives 0, 2; mirrored needs the indices "
                    "0..N-1)"},
        InvalidCase{"DenseMapNotFromZero",
                    R"({"cluster":{"worker":{"2":"h3:2222","1":"h2:2222"}},"task":{"type":"worker","index":1}})",
                    "cluster.worker: task index 0 is missing (TF_CONFIG gives 1, 2; mirrored needs the indices "
                    "0..N-1)"},
        InvalidCase{"DenseMapLongGapListShortened",
                    R"({"cluster":{"worker":{"0":"a:1","1":"a:2","2":"a:3","3":"a:4","4":"a:5","5":"a:6","6":"a:7",
                        "7":"a:8","8":"a:9","9":"a:10","10":"a:11","11":"a:12","12":"a:13","14":"a:15"}},
                        "task":{"type":"worker","index":0}})",
                    "cluster.worker: task index 13 is missing (TF_CONFIG gives 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "
                    "..., 14; mirrored needs the indices 0..N-1)"},
        InvalidCase{"DenseMapKeyNotANumber",
                    R"({"cluster":{"worker":{"0":"h1:2222","a":"h2:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker: key \"a\" is not a task index (a job given as a map needs the keys 0..N-1)"},
        InvalidCase{"DenseMapKeyNegative",
                    R"({"cluster":{"worker":{"-1":"h0:2222","0":"h1:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker: key \"-1\" is not a task index (a job given as a map needs the keys 0..N-1)"},
        InvalidCase{"DenseMapKeyFraction",
                    R"({"cluster":{"worker":{"0":"h1:2222","1.5":"h2:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker: key \"1.5\" is not a task index (a job given as a map needs the keys 0..N-1)"},
        InvalidCase{"DenseMapKeyEmpty",
                    R"({"cluster":{"worker":{"":"h0:2222","0":"h1:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker: key \"\" is not a task index (a job given as a map needs the keys 0..N-1)"},
        InvalidCase{"DenseMapKeyExponent",
                    R"({"cluster":{"worker":{"0":"h1:2222","1e0":"h2:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker: key \"1e0\" is not a task index (a job given as a map needs the keys 0..N-1)"},
        InvalidCase{"DenseMapKeyTooLarge",
                    R"({"cluster":{"worker":{"0":"h1:2222","99999999999999999999":"h2:2222"}},
                        "task":{"type":"worker","index":0}})",
                    "cluster.worker: key \"99999999999999999999\" is above the limit of 1000000 (a job has at "
                    "most that many tasks of a type)"},
        InvalidCase{"DenseMapTwoKeysOneIndex",
                    R"({"cluster":{"worker":{"0":"h0:2222","1":"h1:2222","01":"h2:2222"}},
                        "task":{"type":"worker","index":0}})",
                    "cluster.worker: keys \"01\" and \"1\" both name task index 1"},
        InvalidCase{"DenseMapEmpty", R"({"cluster":{"worker":{}},"task":{"type":"worker","index":0}})",
                    "cluster.worker is an empty map: give at least one address"},
        InvalidCase{"DenseMapAddressNotString",
                    R"({"cluster":{"worker":{"1":2222,"0":"h1:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker[1] must be a \"host:port\" string, got number 2222"},
        InvalidCase{"DenseMapBadPort",
                    R"({"cluster":{"worker":{"1":"h2:99999","0":"h1:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker[1] \"h2:99999\": port 99999 is out of range 1-65535"},
        InvalidCase{"DenseMapDuplicateAddress",
                    R"({"cluster":{"worker":{"1":"h1:2222","0":"h1:2222"}},"task":{"type":"worker","index":0}})",
                    "cluster.worker[1] \"h1:2222\" is already the address of worker:0: every task needs its own "
                    "host:port"},
        InvalidCase{"DenseMapIndexOutOfRange",
                    R"({"cluster":{"worker":{"1":"h2:2222","0":"h1:2222"}},"task":{"type":"worker","index":2}})",
                    "task.index 2 is out of range: job \"worker\" has 2 tasks"},
        InvalidCase{"PsJobRefused", R"({"cluster":{"ps":["p:1"],"worker":["w:1"]},"task":{"type":"worker","index":0}})",
                    "cluster.ps: parameter-server training is not supported; mirrored runs synchronous "
                    "data-parallel training with chief, worker and evaluator tasks only"},
        InvalidCase{"PsTaskRefused", R"({"task":{"type":"ps","index":0}})",
                    "task.type \"ps\": parameter-server training is not supported; use chief, worker or "
                    "evaluator"},
        InvalidCase{"UnknownJob", R"({"cluster":{"master":["m:1"]},"task":{"type":"master","index":0}})",
                    "cluster has an unsupported job \"master\": the jobs can be chief, worker and evaluator"},
        InvalidCase{"UnknownTaskType", R"({"cluster":{"worker":["w:1"]},"task":{"type":"Worker"}})",
                    "task.type \"Worker\" is not supported: use chief, worker or evaluator"},
        InvalidCase{"TaskTypeNotInCluster", R"({"cluster":{"worker":["w:1"]},"task":{"type":"chief","index":0}})",
                    "task.type \"chief\" is not in the cluster: cluster has no \"chief\" job"},
        InvalidCase{"TwoChiefs", R"({"cluster":{"chief":["a:1","b:1"]},"task":{"type":"chief","index":0}})",
                    "cluster.chief has 2 tasks: at most one chief is allowed"},
        InvalidCase{"TwoEvaluators",
                    R"({"cluster":{"worker":["w:1"],"evaluator":["a:1","b:1"]},"task":{"type":"worker","index":0}})",
                    "cluster.evaluator has 2 tasks: at most one evaluator is allowed"},
        InvalidCase{"SecondEvaluatorOutsideCluster",
                    R"({"cluster":{"worker":["w:1"]},"task":{"type":"evaluator","index":1}})",
                    "task.index 1 is out of range: there is at most one evaluator, so its index is 0"},
        InvalidCase{"OnlyEvaluator", R"({"cluster":{"evaluator":["e:1"]},"task":{"type":"evaluator","index":0}})",
                    "cluster has no chief or worker task: nothing would train"},
        InvalidCase{"EmptyJob", R"({"cluster":{"worker":[]},"task":{"type":"worker","index":0}})",
                    "cluster.worker is an empty list: give at least one address"},
        InvalidCase{"PortTooLarge", R"({"cluster":{"worker":["h1:2222","h2:99999"]},"task":{"type":"worker","index":0}})",
                    "cluster.worker[1] \"h2:99999\": port 99999 is out of range 1-65535"},
        InvalidCase{"PortZero", R"({"cluster":{"worker":["h1:0"]},"task":{"type":"worker","index":0}})",
                    "cluster.worker[0] \"h1:0\": port 0 is out of range 1-65535"},
        InvalidCase{"PortNotNumber", R"({"cluster":{"worker":["h1:http"]},"task":{"type":"worker","index":0}})",
                    "cluster.worker[0] \"h1:http\": port \"http\" is not a number"},
        InvalidCase{"NoPort", R"({"cluster":{"worker":["h1"]},"task":{"type":"worker","index":0}})",
                    "cluster.worker[0] \"h1\": has no port (expected host:port, e.g. \"h1:2222\")"},
        InvalidCase{"EmptyHost", R"({"cluster":{"worker":[":2222"]},"task":{"type":"worker","index":0}})",
                    "cluster.worker[0] \":2222\": host is empty"},
        InvalidCase{"UnbracketedIpv6", R"({"cluster":{"worker":["::1:2222"]},"task":{"type":"worker","index":0}})",
                    "cluster.worker[0] \"::1:2222\": an IPv6 host must be in brackets, e.g. \"[::1]:2222\""},
        InvalidCase{"UrlScheme", R"({"cluster":{"worker":["grpc://h1:2222"]},"task":{"type":"worker","index":0}})",
                    "cluster.worker[0] \"grpc://h1:2222\": has a URL scheme (\"grpc://\"): expected host:port, e.g. "
                    "\"h1:2222\""},
        InvalidCase{"DuplicateAddress",
                    R"({"cluster":{"chief":["H1:2222"],"worker":["h2:2222","h1:2222"]},"task":{"type":"chief","index":0}})",
                    "cluster.worker[1] \"h1:2222\" is already the address of chief:0: every task needs its "
                    "own host:port"},
        InvalidCase{"AddressNotString", R"({"cluster":{"worker":[2222]},"task":{"type":"worker","index":0}})",
                    "cluster.worker[0] must be a \"host:port\" string, got number 2222"},
        InvalidCase{"JobNotListOrMap", R"({"cluster":{"worker":"w:1"},"task":{"type":"worker","index":0}})",
                    "cluster.worker must be a list of \"host:port\" strings (or a map of index to \"host:port\"), "
                    "got string \"w:1\""},
        InvalidCase{"ClusterNotObject", R"({"cluster":"w:1","task":{"type":"worker","index":0}})",
                    "cluster must be an object of job name -> list of \"host:port\", got string \"w:1\""},
        InvalidCase{"TaskMissing", R"({"cluster":{"worker":["w:1"]}})",
                    "task is missing: with a cluster, TF_CONFIG must say which task this process is, e.g. "
                    "\"task\": {\"type\": \"worker\", \"index\": 0}"},
        InvalidCase{"TaskTypeMissing", R"({"cluster":{"worker":["w:1"]},"task":{"index":0}})",
                    "task.type is missing: with a cluster, TF_CONFIG must say which task this process is, "
                    "e.g. \"task\": {\"type\": \"worker\", \"index\": 0}"},
        InvalidCase{"TaskIndexMissing", R"({"cluster":{"worker":["w:1","v:1"]},"task":{"type":"worker"}})",
                    "task.index is missing: with a cluster, TF_CONFIG must say which worker this "
                    "process is, e.g. \"task\": {\"type\": \"worker\", \"index\": 0}"},
        InvalidCase{"TaskTypeNotString", R"({"cluster":{"worker":["w:1"]},"task":{"type":1}})",
                    "task.type must be a string, got number 1"},
        InvalidCase{"TaskNotObject", R"({"cluster":{"worker":["w:1"]},"task":"worker:0"})",
                    "task must be an object like {\"type\": \"worker\", \"index\": 0}, got string \"worker:0\""},
        InvalidCase{"RpcLayerNotGrpc",
                    R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":0},"rpc_layer":"grpc+verbs"})",
                    "rpc_layer \"grpc+verbs\" is not supported: only \"grpc\" is"},
        InvalidCase{"EnvironmentNotString",
                    R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":0},"environment":1})",
                    "environment must be a string, got number 1"},
        InvalidCase{"IndexWithoutCluster", R"({"task":{"type":"worker","index":2}})",
                    "task.index 2 is out of range: TF_CONFIG has no cluster, so this process is the only "
                    "task and its index is 0"},
        InvalidCase{"NotAnObject", R"(["w:1"])", "TF_CONFIG must be a JSON object, got array"},
        InvalidCase{"BadJsonLineColumn", "{\"cluster\":\n  {\"worker\": [\"w:1\",]}}",
                    "not valid JSON: line 2, column 21: syntax error while parsing value - unexpected "
                    "']'; expected '[', '{', or a literal"},
        InvalidCase{"TruncatedJson", "{\"cluster\":",
                    "not valid JSON: line 1, column 12: syntax error while parsing value - unexpected "
                    "end of input; expected '[', '{', or a literal"},
        InvalidCase{"NestedTooDeep", kDeepTfConfig.c_str(),
                    "not valid TF_CONFIG: it nests more than 512 levels deep (at byte 519); nothing mirrored reads "
                    "nests that deep (a damaged or hostile input)"}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return std::string(info.param.name); });

TEST(ResolveTfConfigTest, ReadsEnvironmentFileAndJsonFlag) {
  const std::string json = R"({"cluster":{"worker":["a:1","b:1"]},"task":{"type":"worker","index":1}})";
  EnvironmentMap env{{"TF_CONFIG", json}};
  StatusOr<ClusterConfig> from_env = ResolveTfConfig(std::nullopt, env);
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_EQ(from_env->task.ToString(), "worker:1");
  EXPECT_EQ(from_env->source, "TF_CONFIG environment variable");

  // The flag wins over the environment.
  StatusOr<ClusterConfig> from_flag =
      ResolveTfConfig(std::string(R"( {"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0}})"), env);
  ASSERT_TRUE(from_flag.ok()) << from_flag.status();
  EXPECT_EQ(from_flag->task.ToString(), "worker:0");
  EXPECT_EQ(from_flag->source, "--tf-config JSON");

  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("tf_config_test_" + std::to_string(::getpid()) + ".json");
  { std::ofstream(path) << json; }
  StatusOr<ClusterConfig> from_file = ResolveTfConfig(path.string(), {});
  std::filesystem::remove(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->cluster.NumTasks("worker"), 2);
  EXPECT_EQ(from_file->source, "--tf-config file \"" + path.string() + "\"");
}

TEST(ResolveTfConfigTest, NoConfigIsSingleLocalTask) {
  for (const EnvironmentMap& env : {EnvironmentMap{}, EnvironmentMap{{"TF_CONFIG", ""}}}) {
    StatusOr<ClusterConfig> config = ResolveTfConfig(std::nullopt, env);
    ASSERT_TRUE(config.ok());
    EXPECT_TRUE(config->is_single_local_task);
    EXPECT_TRUE(config->IsChief());
    EXPECT_EQ(config->NumTrainingTasks(), 1);
  }
}

TEST(ResolveTfConfigTest, ErrorsNameTheirOrigin) {
  StatusOr<ClusterConfig> env_error =
      ResolveTfConfig(std::nullopt, {{"TF_CONFIG", R"({"task":{"type":"ps"}})"}});
  EXPECT_EQ(env_error.status().message(),
            "TF_CONFIG environment variable: task.type \"ps\": parameter-server training is not "
            "supported; use chief, worker or evaluator");
  StatusOr<ClusterConfig> missing = ResolveTfConfig(std::string("/nonexistent/tf.json"), {});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ExitCodeFor(missing.status()), 2);
  EXPECT_EQ(missing.status().message(),
            "--tf-config \"/nonexistent/tf.json\": no such file (a JSON value must start with \"{\")");
  StatusOr<ClusterConfig> directory = ResolveTfConfig(std::string("/tmp"), {});
  EXPECT_EQ(ExitCodeFor(directory.status()), 2);
  EXPECT_EQ(directory.status().message(), "--tf-config file \"/tmp\" is a directory: give a JSON file");
}

}  // namespace
}  // namespace mirrored
