// ClusterSpec, TaskId and HostPort: the small types every module builds on.
#include "common/cluster/cluster_spec.h"

#include <gtest/gtest.h>

#include "common/cluster/cluster_config.h"

namespace mirrored {
namespace {

HostPort Addr(const char* text) { return *HostPort::Parse(text); }

TEST(TaskIdTest, PrintsAndParses) {
  EXPECT_EQ((TaskId{"worker", 1}).ToString(), "worker:1");
  StatusOr<TaskId> parsed = TaskId::Parse("chief:0");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, (TaskId{"chief", 0}));
  for (const char* bad : {"worker", "worker:", ":1", "worker:-1", "worker:1x", "worker:+1"}) {
    StatusOr<TaskId> r = TaskId::Parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              std::string("task name \"") + bad + "\" is not <type>:<index>, e.g. \"worker:1\"");
  }
}

TEST(HostPortTest, ParsesHostnamesIpv4AndBracketedIpv6) {
  EXPECT_EQ(Addr("h1:2222"), (HostPort{"h1", 2222}));
  EXPECT_EQ(Addr("10.0.0.1:1"), (HostPort{"10.0.0.1", 1}));
  EXPECT_EQ(Addr("[fe80::1]:65535"), (HostPort{"fe80::1", 65535}));
  EXPECT_EQ(Addr("[fe80::1]:65535").ToString(), "[fe80::1]:65535");
  EXPECT_EQ(Addr("h:007").port, 7);
  EXPECT_EQ(HostPort::Parse("h:65536").status().message(), "port 65536 is out of range 1-65535");
  EXPECT_EQ(HostPort::Parse("h:99999999999999999999").status().message(),
            "port 99999999999999999999 is out of range 1-65535");
  EXPECT_EQ(HostPort::Parse("[::1]").status().message(),
            "has no port (expected host:port, e.g. \"[::1]:2222\")");
  EXPECT_EQ(HostPort::Parse("[::1:2222").status().message(), "IPv6 host has no closing \"]\"");
  EXPECT_EQ(HostPort::Parse("[]:1").status().message(), "host is empty");
  EXPECT_EQ(HostPort::Parse("[zzz]:2222").status().message(),
            "\"[zzz]\": brackets are only for an IPv6 address, e.g. \"[::1]:2222\"");
  EXPECT_EQ(HostPort::Parse("[10.0.0.1]:2222").status().message(),
            "\"[10.0.0.1]\": brackets are only for an IPv6 address, e.g. \"[::1]:2222\"");
  EXPECT_EQ(HostPort::Parse("h :1").status().message(),
            "host \"h \" contains an invalid character (a host name has letters, digits, \"-\" and \".\"; an "
            "IPv6 address goes in brackets)");
  EXPECT_EQ(HostPort::Parse("h:").status().message(), "port is empty");
}

// Probe D4: NUL and control bytes, commas and 100 000-character names were
// taken as hosts (and printed raw); only RFC 1123 names and IP literals are.
TEST(HostPortTest, HostsAreNamesOrAddressesAndShownEscaped) {
  for (const char* good : {"localhost:1", "w-0.svc.cluster.local:1", "h1.example.:1", "10.0.0.1:1", "my_host:1",
                           "[fe80::1%eth0]:1", "[::ffff:10.0.0.1]:1"}) {
    EXPECT_TRUE(HostPort::Parse(good).ok()) << good << ": " << HostPort::Parse(good).status();
  }
  EXPECT_EQ(HostPort::Parse(std::string("h\0evil:2222", 11)).status().message(),
            "host \"h\\u0000evil\" contains an invalid character (a host name has letters, digits, \"-\" and "
            "\".\"; an IPv6 address goes in brackets)");
  EXPECT_EQ(HostPort::Parse("-h:1").status().message(),
            "host \"-h\" has an invalid label \"-h\": each dot-separated part is 1-63 characters and does not "
            "begin or end with \"-\"");
  EXPECT_EQ(HostPort::Parse("a..b:1").status().message(),
            "host \"a..b\" has an invalid label \"\": each dot-separated part is 1-63 characters and does not "
            "begin or end with \"-\"");
  EXPECT_EQ(HostPort::Parse(std::string(254, 'h') + ":1").status().message(),
            "host name of 254 characters is longer than 253 (RFC 1123)");
  EXPECT_EQ(HostPort::Parse("[fe80::1%]:1").status().message(),
            "host \"fe80::1%\" is not an IPv6 address (hex digits and \":\", with an optional %zone)");
  EXPECT_EQ(HostPort::Parse("[::1\x1b]:1").status().message(),
            "host \"::1\\u001b\" is not an IPv6 address (hex digits and \":\", with an optional %zone)");
  // Hosts from Slurm or Kubernetes do not pass through Parse: Create checks them.
  auto spec = ClusterSpec::Create({{"worker", {HostPort{"n\x07", 1}}}});
  EXPECT_EQ(spec.status().message(),
            "cluster.worker[0]: host \"n\\u0007\" contains an invalid character (a host name has letters, digits, "
            "\"-\" and \".\"; an IPv6 address goes in brackets)");
}

TEST(ClusterSpecTest, ChiefFirstThenWorkersByIndex) {
  StatusOr<ClusterSpec> spec = ClusterSpec::Create(
      {{"worker", {Addr("w0:1"), Addr("w1:1")}}, {"evaluator", {Addr("e:1")}}, {"chief", {Addr("c:1")}}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->TrainingTasks(),
            (std::vector<TaskId>{{"chief", 0}, {"worker", 0}, {"worker", 1}}));
  EXPECT_EQ(spec->ChiefTask(), (TaskId{"chief", 0}));
  EXPECT_EQ(spec->CoordinatorAddress(), Addr("c:1"));
  EXPECT_EQ(spec->RankOf({"worker", 1}), 2);
  EXPECT_EQ(spec->RankOf({"evaluator", 0}), std::nullopt);
  EXPECT_EQ(spec->RankOf({"worker", 2}), std::nullopt);
  EXPECT_EQ(spec->EvaluatorAddress(), Addr("e:1"));
  EXPECT_EQ(spec->AddressOf({"worker", 5}), std::nullopt);
}

// Tasks listed at one host share its cores: hosts compared case-
// insensitively, every loopback name as one; the evaluator is no training
// task.
TEST(ClusterSpecTest, CountsTheTrainingTasksListedAtATasksHost) {
  StatusOr<ClusterSpec> spec = ClusterSpec::Create({{"chief", {Addr("127.0.0.1:1")}},
                                                    {"worker", {Addr("localhost:2"), Addr("H1:3"), Addr("h1:4"),
                                                                Addr("[::1]:5"), Addr("h2:6")}},
                                                    {"evaluator", {Addr("h1:7")}}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->TrainingTasksAtHostOf({"chief", 0}), 3);
  EXPECT_EQ(spec->TrainingTasksAtHostOf({"worker", 3}), 3);
  EXPECT_EQ(spec->TrainingTasksAtHostOf({"worker", 1}), 2);
  EXPECT_EQ(spec->TrainingTasksAtHostOf({"evaluator", 0}), 2);
  EXPECT_EQ(spec->TrainingTasksAtHostOf({"worker", 4}), 1);
  EXPECT_EQ(spec->TrainingTasksAtHostOf({"worker", 9}), 0);
}

TEST(ClusterSpecTest, WorkerZeroIsChiefWithoutChiefJob) {
  StatusOr<ClusterSpec> spec = ClusterSpec::Create({{"worker", {Addr("w0:1"), Addr("w1:1")}}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->ChiefTask(), (TaskId{"worker", 0}));
  EXPECT_EQ(spec->CoordinatorAddress(), Addr("w0:1"));
  ClusterConfig config;
  config.cluster = *spec;
  config.task = TaskId{"worker", 1};
  EXPECT_FALSE(config.IsChief());
  config.task = TaskId{"worker", 0};
  EXPECT_TRUE(config.IsChief());
  EXPECT_EQ(config.NumTrainingTasks(), 2);
}

}  // namespace
}  // namespace mirrored
