// NcclReplicaGroup / NcclCommunicator on a real GPU. Every test that needs a
// device skips cleanly when cudaGetDeviceCount reports none; the option
// checks run everywhere.
//
// The two-rank test runs on ONE GPU: it starts this binary twice as child
// processes with distinct NCCL_HOSTID values, so NCCL treats them as two
// hosts (it refuses two ranks on one GPU of one host) and connects them over
// loopback sockets. The unique id travels from child 0 through the parent to
// child 1 over pipes.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/gpu_test_util.h"
#include "worker/comm/half_conversion.h"
#include "worker/comm/nccl_replica_group.h"

extern char** environ;

namespace mirrored {
namespace {

using namespace std::chrono_literals;

int DeviceCount(std::string* error = nullptr) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    if (error != nullptr) *error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return 0;
  }
  if (count == 0 && error != nullptr) *error = "cudaGetDeviceCount found none";
  return count;
}

#define SKIP_WITHOUT_GPU()                                  \
  std::string _mirrored_gpu_error;                          \
  const int _mirrored_gpus = DeviceCount(&_mirrored_gpu_error); \
  MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(_mirrored_gpus, _mirrored_gpu_error)

std::string NewUniqueId() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  return std::string(id.internal, sizeof(id.internal));
}

// A device buffer of floats, copied to and from host vectors.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), n * 4), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p_); }
  float* get() { return p_; }
  void Set(const std::vector<float>& v) {
    ASSERT_EQ(v.size(), n_);
    ASSERT_EQ(cudaMemcpy(p_, v.data(), n_ * 4, cudaMemcpyHostToDevice), cudaSuccess);
    // From pageable memory cudaMemcpy may return before the DMA lands, and
    // NCCL's non-blocking stream is not ordered after it.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<float> Get() {
    std::vector<float> v(n_);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  size_t n_;
  float* p_ = nullptr;
};

std::vector<float> Pattern(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 7 + 1);
  return v;
}

TEST(NcclReplicaGroupOptions, RejectsBadOptionsBeforeTouchingAGpu) {
  auto short_id = NcclReplicaGroup::Create({.unique_id = "abc"});
  ASSERT_FALSE(short_id.ok());
  EXPECT_EQ(short_id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_id.status().message().find("3 bytes, expected 128"), std::string::npos);

  const std::string id(128, 'x');
  auto twice = NcclReplicaGroup::Create({.unique_id = id, .world_size = 2, .devices = {0, 0}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("listed twice"), std::string::npos);

  auto overflow = NcclReplicaGroup::Create({.unique_id = id, .world_size = 2, .rank_offset = 1, .devices = {0, 1}});
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("ranks 1..2 do not fit in world size 2"), std::string::npos);
}

TEST(NcclReplicaGroup, OneRankRoundTripOnDeviceMemory) {
  SKIP_WITHOUT_GPU();
  auto group = NcclReplicaGroup::Create({.unique_id = NewUniqueId(), .world_size = 1, .devices = {0}});
  ASSERT_TRUE(group.ok()) << group.status();
  NcclCommunicator& comm = (*group)->replica(0);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);

  constexpr size_t kN = 4099;  // not a multiple of any NCCL chunk
  DeviceBuffer buf(kN);
  const std::vector<float> in = Pattern(kN, 1.5f);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    buf.Set(in);
    ASSERT_TRUE(comm.AllReduce(buf.get(), kN, op).ok()) << ReduceOpName(op);
    EXPECT_EQ(buf.Get(), in) << ReduceOpName(op);
  }
  ASSERT_TRUE(comm.Broadcast(buf.get(), kN, 0).ok());
  EXPECT_EQ(buf.Get(), in);
  EXPECT_TRUE(comm.Barrier().ok());

  Status bad_root = comm.Broadcast(buf.get(), kN, 1);
  EXPECT_EQ(bad_root.code(), StatusCode::kInvalidArgument) << bad_root;

  // Host memory through the staging buffer, growing it past its first size.
  for (size_t n : {size_t{3}, size_t{5000}}) {
    std::vector<float> host = Pattern(n, 0.5f);
    ASSERT_TRUE(comm.AllReduceHost(host.data(), n, ReduceOp::kSum).ok());
    EXPECT_EQ(host, Pattern(n, 0.5f));
    ASSERT_TRUE(comm.BroadcastHost(host.data(), n, 0).ok());
    EXPECT_EQ(host, Pattern(n, 0.5f));
  }
}

// Values whose 16-bit rounding matters: ties, fp16's overflow (65520) and
// subnormals, NaN, infinity, bf16's tiny values.
std::vector<float> RoundingCases(size_t n) {
  std::vector<float> v = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -11), 65504.0f, 65520.0f,
                          std::ldexp(1.0f, -25), 3 * std::ldexp(1.0f, -25), std::nanf(""), INFINITY, -INFINITY,
                          1e-40f, -0.0f, 3e38f};
  for (size_t i = v.size(); i < n; ++i) v.push_back((1.0f + 0.00071f * static_cast<float>(i % 997)) * (i % 2 ? 1 : -1));
  return v;
}

// Equal bits, or both NaN.
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i;
    } else {
      ASSERT_EQ(got[i], want[i]) << what << " element " << i << " from " << RoundingCases(got.size())[i];
    }
  }
}

// --allreduce-dtype on the device: narrowed as the CPU paths round (to
// nearest even), reduced by NCCL as ncclBfloat16 / ncclFloat16, widened back.
TEST(NcclReplicaGroup, SixteenBitAllReduceRoundsOnTheDeviceAsTheCpuDoes) {
  SKIP_WITHOUT_GPU();
  auto group = NcclReplicaGroup::Create({.unique_id = NewUniqueId(), .world_size = 1, .devices = {0}});
  ASSERT_TRUE(group.ok()) << group.status();
  NcclCommunicator& comm = (*group)->replica(0);
  constexpr size_t kN = 4099;
  DeviceBuffer buf(kN);
  const std::vector<float> in = RoundingCases(kN);
  for (WireType wire : {WireType::kBf16, WireType::kFp16}) {
    std::vector<float> want = in;
    RoundToWire(wire, want.data(), want.size());
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      buf.Set(in);
      Status s = comm.AllReduceAs(wire, buf.get(), kN, op);
      ASSERT_TRUE(s.ok()) << s;
      ExpectSameBits(buf.Get(), want, std::string(WireTypeName(wire)) + " " + std::string(ReduceOpName(op)));
    }
  }
  // The 16-bit buffer grows past its first size; FP32 is untouched by it.
  DeviceBuffer big(kN * 3);
  big.Set(Pattern(kN * 3, 1.5f));
  ASSERT_TRUE(comm.AllReduceAs(WireType::kBf16, big.get(), kN * 3, ReduceOp::kSum).ok());
  EXPECT_EQ(big.Get(), Pattern(kN * 3, 1.5f));  // small integers x 1.5: exact in bf16
  buf.Set(in);
  ASSERT_TRUE(comm.AllReduceAs(WireType::kFp32, buf.get(), kN, ReduceOp::kSum).ok());
  ExpectSameBits(buf.Get(), in, "fp32");
}

TEST(NcclReplicaGroup, AbortFailsLaterOperationsWithTheReason) {
  SKIP_WITHOUT_GPU();
  auto group = NcclReplicaGroup::Create({.unique_id = NewUniqueId(), .world_size = 1, .devices = {0}});
  ASSERT_TRUE(group.ok()) << group.status();
  NcclCommunicator& comm = (*group)->replica(0);
  DeviceBuffer buf(16);
  buf.Set(Pattern(16, 1.0f));
  ASSERT_TRUE(comm.AllReduce(buf.get(), 16, ReduceOp::kSum).ok());

  comm.Abort(UnavailableError("worker 1 stopped heartbeating"));
  Status s = comm.AllReduce(buf.get(), 16, ReduceOp::kSum);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
  EXPECT_NE(s.message().find("all-reduce #2 (sum, 16 floats) on rank 0 of 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("worker 1 stopped heartbeating"), std::string::npos) << s;
  EXPECT_EQ(comm.Barrier().code(), StatusCode::kAborted);
}

TEST(NcclReplicaGroup, InitTimesOutWhenARankNeverJoins) {
  SKIP_WITHOUT_GPU();
  const auto start = std::chrono::steady_clock::now();
  auto group = NcclReplicaGroup::Create(
      {.unique_id = NewUniqueId(), .world_size = 2, .devices = {0}, .init_timeout = 2000ms});
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), StatusCode::kDeadlineExceeded) << group.status();
  EXPECT_NE(group.status().message().find("within 2000 ms"), std::string::npos) << group.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);  // the abort returned, nothing hung
}

// ---- Two processes on one GPU -------------------------------------------

constexpr int kChildFd = 3;  // the child's end of its pipe to the parent
constexpr size_t kIdBytes = sizeof(ncclUniqueId);

// Reads exactly n bytes (or to EOF when n == 0) from fd within `timeout`.
bool ReadWithDeadline(int fd, char* out, size_t n, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t got = 0;
  char sink[64];
  for (;;) {
    if (n != 0 && got == n) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t r = n == 0 ? read(fd, sink, sizeof(sink)) : read(fd, out + got, n - got);
    if (r == 0) return n == 0;  // EOF
    if (r > 0 && n != 0) got += static_cast<size_t>(r);
  }
}

// Runs as a child of TwoProcessesOnOneGpu (skipped when run any other way).
// DISABLED_: CTest lists it as disabled, not as a test that every run skips;
// the parent runs it with --gtest_also_run_disabled_tests.
TEST(NcclTwoProcessChild, DISABLED_Run) {
  const char* rank_env = std::getenv("MIRRORED_NCCL_CHILD_RANK");
  if (rank_env == nullptr) GTEST_SKIP() << "runs only as a child of NcclReplicaGroup.TwoProcessesOnOneGpu";
  const int rank = std::atoi(rank_env);
  std::string id(kIdBytes, '\0');
  if (rank == 0) {
    id = NewUniqueId();
    ASSERT_EQ(write(kChildFd, id.data(), id.size()), static_cast<ssize_t>(id.size()));
    close(kChildFd);
  } else {
    ASSERT_TRUE(ReadWithDeadline(kChildFd, id.data(), id.size(), 60s)) << "no unique id from the parent";
  }
  auto group = NcclReplicaGroup::Create({.unique_id = id, .world_size = 2, .rank_offset = rank, .devices = {0},
                                         .timeout = 3000ms, .init_timeout = 60000ms});
  ASSERT_TRUE(group.ok()) << group.status();
  NcclCommunicator& comm = (*group)->replica(0);
  ASSERT_EQ(comm.rank(), rank);

  constexpr size_t kN = 1 << 20;
  DeviceBuffer buf(kN);
  const float mine = static_cast<float>(rank + 1);  // rank 0: 1x, rank 1: 2x the pattern
  struct Case { ReduceOp op; float expected_scale; };
  for (Case c : {Case{ReduceOp::kSum, 3.0f}, Case{ReduceOp::kAvg, 1.5f}, Case{ReduceOp::kMax, 2.0f}}) {
    buf.Set(Pattern(kN, mine));
    Status s = comm.AllReduce(buf.get(), kN, c.op);  // #1..#3
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(buf.Get(), Pattern(kN, c.expected_scale)) << ReduceOpName(c.op);
  }
  buf.Set(Pattern(kN, 10.0f * mine));
  ASSERT_TRUE(comm.Broadcast(buf.get(), kN, 1).ok());  // #4
  EXPECT_EQ(buf.Get(), Pattern(kN, 20.0f));
  ASSERT_TRUE(comm.Barrier().ok());  // #5

  // Host memory, staged through the communicator's device buffer.
  std::vector<float> host = Pattern(9, mine);
  ASSERT_TRUE(comm.AllReduceHost(host.data(), host.size(), ReduceOp::kSum).ok());  // #6
  EXPECT_EQ(host, Pattern(9, 3.0f));
  host = Pattern(9, 5.0f * mine);
  ASSERT_TRUE(comm.BroadcastHost(host.data(), host.size(), 0).ok());  // #7
  EXPECT_EQ(host, Pattern(9, 5.0f));

  // 16 bits between two ranks: one hop, so NCCL's sum of the rounded
  // contributions, rounded once, is wire_type.h's rule exactly.
  std::vector<float> mine16 = RoundingCases(kN), other16 = RoundingCases(kN);
  for (size_t i = 0; i < kN; ++i) (rank == 0 ? other16 : mine16)[i] *= 1.0f + std::ldexp(1.0f, -9);
  std::vector<float> want = mine16, theirs = other16;
  RoundToWire(WireType::kBf16, want.data(), kN);
  RoundToWire(WireType::kBf16, theirs.data(), kN);
  for (size_t i = 0; i < kN; ++i) want[i] += theirs[i];
  RoundToWire(WireType::kBf16, want.data(), kN);
  buf.Set(mine16);
  ASSERT_TRUE(comm.AllReduceAs(WireType::kBf16, buf.get(), kN, ReduceOp::kSum).ok());  // #8
  ExpectSameBits(buf.Get(), want, "two ranks, bf16");

  if (rank == 0) {
    // Rank 1 never joins this one: the bounded wait must turn it into an error.
    Status s = comm.AllReduce(buf.get(), kN, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("all-reduce #9 (sum, 1048576 floats) on rank 0 of 2 (GPU 0) failed after"),
              std::string::npos) << s;
    EXPECT_NE(s.message().find("3000 ms collective timeout"), std::string::npos) << s;
    EXPECT_EQ(comm.Barrier().code(), StatusCode::kAborted);  // the timeout aborted the group
  } else {
    // Idle until rank 0 has finished its timeout check (the parent closes our
    // pipe when rank 0 exits), then abort from another thread.
    ASSERT_TRUE(ReadWithDeadline(kChildFd, nullptr, 0, 60s)) << "the parent never closed the pipe";
    std::thread([&] { (*group)->Abort(UnavailableError("test: rank 0 is gone")); }).join();
    Status s = comm.AllReduce(buf.get(), kN, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
    EXPECT_NE(s.message().find("test: rank 0 is gone"), std::string::npos) << s;
  }
}

// Waits for pid to exit within `timeout`; kills it past the deadline.
int WaitChild(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(20ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

pid_t SpawnChild(int rank, int child_fd) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back("MIRRORED_NCCL_CHILD_RANK=" + std::to_string(rank));
  // Distinct host ids: NCCL sees two hosts, so one GPU may hold both ranks.
  env_strings.push_back("NCCL_HOSTID=mirrored-nccl-test-host-" + std::to_string(rank));
  if (std::getenv("NCCL_SOCKET_IFNAME") == nullptr) env_strings.push_back("NCCL_SOCKET_IFNAME=lo");
  if (std::getenv("NCCL_IB_DISABLE") == nullptr) env_strings.push_back("NCCL_IB_DISABLE=1");
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=NcclTwoProcessChild.DISABLED_Run",
              disabled = "--gtest_also_run_disabled_tests";
  char* argv[] = {exe.data(), filter.data(), disabled.data(), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_fd, kChildFd);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

TEST(NcclReplicaGroup, TwoProcessesOnOneGpu) {
  SKIP_WITHOUT_GPU();
  int from0[2], to1[2];  // [0] read end, [1] write end; the parent's ends are close-on-exec
  ASSERT_EQ(pipe2(from0, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(to1, O_CLOEXEC), 0);
  const pid_t child0 = SpawnChild(0, from0[1]);
  const pid_t child1 = SpawnChild(1, to1[0]);
  close(from0[1]);
  close(to1[0]);
  ASSERT_GT(child0, 0);
  ASSERT_GT(child1, 0);

  std::string id(kIdBytes, '\0');
  const bool got_id = ReadWithDeadline(from0[0], id.data(), id.size(), 60s);
  if (got_id) {
    EXPECT_EQ(write(to1[1], id.data(), id.size()), static_cast<ssize_t>(id.size()));
  }
  close(from0[0]);
  EXPECT_TRUE(got_id) << "child 0 sent no unique id";

  EXPECT_EQ(WaitChild(child0, 120s), 0) << "child 0 failed (its gtest output is above)";
  close(to1[1]);  // lets child 1 go on to its abort check
  EXPECT_EQ(WaitChild(child1, 60s), 0) << "child 1 failed (its gtest output is above)";
}

}  // namespace
}  // namespace mirrored
