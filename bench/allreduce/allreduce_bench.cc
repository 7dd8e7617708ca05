// All-reduce bandwidth of the CPU paths, in the nccl-tests format:
//   size count type | time algbw busbw #wrong,  busbw = algbw * 2(n-1)/n.
//
//   allreduce_bench [--max-mb 64] [--ranks 2,4] [--paths shm/procs,gloo/procs]
//                   [--slot-kb 1024]   (the shared-memory group's slot)
//                   [--dtype fp32|bf16|fp16]
//
// --dtype bf16/fp16: the FP32 buffers travel in 16 bits (AllReduceAs, as
// --allreduce-dtype's gradient buckets do); size and bandwidth still count
// the FP32 buffer, so the rows compare with fp32's directly.
//
// Rows compare, for n ranks:
//   gloo/threads      n Gloo ranks as threads of one process (ring over loopback TCP)
//   gloo/procs        n Gloo ranks as processes
//   shm/procs         n processes through one shared-memory segment
//                     (SharedMemoryProcessGroup: worker processes on one host)
//   mirrored/threads  n replicas of one worker: shared-memory reduction
//   mirrored/2procs   2 worker processes x n/2 replicas: in-process shared
//                     memory, then the processes' shared-memory group
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "worker/comm/cpu_replica_group.h"
#include "worker/comm/gloo_process_group.h"
#include "worker/comm/shared_memory_process_group.h"

using namespace mirrored;
using Clock = std::chrono::steady_clock;

namespace {

size_t slot_bytes = SharedMemoryProcessGroupOptions{}.slot_bytes;  // --slot-kb
WireType g_wire = WireType::kFp32;  // --dtype

struct Row {
  double seconds = 0;  // per operation
  long wrong = 0;
};

// Runs `iters` timed all-reduces on `buf` (after warm-up) and checks the
// result against the expected sum.
Row TimeAllReduce(const std::function<Status(float*, size_t)>& op, std::vector<float>& buf, int rank,
                  int world, int iters) {
  auto fill = [&] {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(rank + 1);
  };
  fill();
  if (!op(buf.data(), buf.size()).ok()) std::abort();  // warm-up
  auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    Status s = op(buf.data(), buf.size());
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  Row r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count() / iters;
  fill();
  (void)op(buf.data(), buf.size());
  const float want = world * (world + 1) / 2.0f;
  for (float v : buf) r.wrong += v != want;
  return r;
}

int ItersFor(size_t bytes) {
  size_t it = (256u << 20) / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::clamp<size_t>(it, 3, 200));
}

void PrintRow(size_t bytes, int n, const Row& r) {
  double algbw = bytes / r.seconds / 1e9;
  double busbw = algbw * 2.0 * (n - 1) / n;
  std::printf("%12zu %12zu %6s %10.1f %8.3f %8.3f %7ld\n", bytes, bytes / 4, WireTypeName(g_wire), r.seconds * 1e6, algbw,
              busbw, r.wrong);
  std::fflush(stdout);
}

void Header(const char* name, int ranks, int procs) {
  std::printf("#\n# %s: %d ranks in %d process%s, 1 host, CPU\n", name, ranks, procs, procs == 1 ? "" : "es");
  std::printf("# %10s %12s %6s %10s %8s %8s %7s\n", "size(B)", "count", "type", "time(us)", "algbw", "busbw",
              "#wrong");
  std::printf("# %10s %12s %6s %10s %8s %8s %7s\n", "", "(elements)", "", "", "(GB/s)", "(GB/s)", "");
}

// n Gloo ranks as threads, or as the local replicas of one CpuReplicaGroup.
Row RunThreads(bool mirrored_path, int n, size_t bytes) {
  const size_t count = bytes / 4;
  std::vector<Row> rows(n);
  gloo::rendezvous::HashStore store;
  std::vector<std::unique_ptr<GlooProcessGroup>> pgs(n);
  std::unique_ptr<CpuReplicaGroup> group;
  if (mirrored_path) {
    group = std::make_unique<CpuReplicaGroup>(CpuReplicaGroupOptions{{n}, 0}, nullptr);
  } else {
    std::vector<std::thread> t;
    for (int r = 0; r < n; ++r)
      t.emplace_back([&, r] { pgs[r] = std::move(GlooProcessGroup::Connect(store, {.rank = r, .size = n, .prefix = "b"}).value()); });
    for (auto& x : t) x.join();
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> buf(count);
      auto op = [&](float* d, size_t c) {
        return mirrored_path ? group->replica(r).AllReduceAs(g_wire, d, c, ReduceOp::kSum)
                             : pgs[r]->AllReduceAs(g_wire, d, c, ReduceOp::kSum);
      };
      rows[r] = TimeAllReduce(op, buf, r, n, ItersFor(bytes));
    });
  }
  for (auto& t : threads) t.join();
  Row worst = rows[0];
  for (auto& r : rows) {
    worst.seconds = std::max(worst.seconds, r.seconds);
    worst.wrong += r.wrong;
  }
  worst.wrong -= rows[0].wrong;
  return worst;
}

// A process's group: shared memory or Gloo.
std::unique_ptr<ProcessGroup> ConnectGroup(gloo::rendezvous::Store& store, int rank, int size, bool shm) {
  if (shm) {
    auto pg = SharedMemoryProcessGroup::Connect(
        store, {.rank = rank, .size = size, .prefix = "s", .slot_bytes = slot_bytes});
    if (!pg.ok()) _exit(1);
    return std::move(pg).value();
  }
  auto pg = GlooProcessGroup::Connect(store, {.rank = rank, .size = size, .prefix = "b"});
  if (!pg.ok()) _exit(1);
  return std::move(pg).value();
}

// `procs` processes with `local` replicas each (local == 1: the process
// group alone), meeting through shared memory (`shm`) or Gloo.
Row RunProcesses(int procs, int local, size_t bytes, bool shm) {
  const size_t count = bytes / 4;
  auto dir = std::filesystem::temp_directory_path() / ("mirrored-bench-" + std::to_string(getpid()) + "-" +
                                                       std::to_string(bytes) + "-" + std::to_string(local));
  std::filesystem::create_directories(dir);
  int pipes[2];
  if (pipe(pipes) != 0) std::abort();
  std::vector<pid_t> pids;
  for (int p = 0; p < procs; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      close(pipes[0]);
      gloo::rendezvous::FileStore store(dir.string());
      std::unique_ptr<ProcessGroup> pg = ConnectGroup(store, p, procs, shm);
      std::vector<int> layout(procs, local);
      CpuReplicaGroup group({layout, p}, pg.get());
      std::vector<Row> rows(local);
      std::vector<std::thread> threads;
      for (int r = 0; r < local; ++r) {
        threads.emplace_back([&, r] {
          std::vector<float> buf(count);
          auto op = [&](float* d, size_t c) {
            return local == 1 ? pg->AllReduceAs(g_wire, d, c, ReduceOp::kSum)
                              : group.replica(r).AllReduceAs(g_wire, d, c, ReduceOp::kSum);
          };
          rows[r] = TimeAllReduce(op, buf, p * local + r, procs * local, ItersFor(bytes));
        });
      }
      for (auto& t : threads) t.join();
      Row worst = rows[0];
      for (int r = 1; r < local; ++r) {
        worst.seconds = std::max(worst.seconds, rows[r].seconds);
        worst.wrong += rows[r].wrong;
      }
      if (write(pipes[1], &worst, sizeof(worst)) != sizeof(worst)) _exit(1);
      _exit(0);
    }
    pids.push_back(pid);
  }
  close(pipes[1]);
  Row total;
  for (int p = 0; p < procs; ++p) {
    Row r;
    if (read(pipes[0], &r, sizeof(r)) != sizeof(r)) std::abort();
    total.seconds = std::max(total.seconds, r.seconds);
    total.wrong += r.wrong;
  }
  close(pipes[0]);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  std::filesystem::remove_all(dir);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  size_t max_mb = 64;
  std::vector<int> rank_counts = {2, 4};
  std::string paths = "gloo/threads,mirrored/threads,gloo/procs,shm/procs,mirrored/2procs";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--max-mb")) max_mb = std::strtoul(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--ranks")) {
      rank_counts.clear();
      for (char* tok = std::strtok(argv[i + 1], ","); tok; tok = std::strtok(nullptr, ","))
        rank_counts.push_back(std::atoi(tok));
    }
    if (!std::strcmp(argv[i], "--paths")) paths = argv[i + 1];
    if (!std::strcmp(argv[i], "--slot-kb")) slot_bytes = std::strtoul(argv[i + 1], nullptr, 10) << 10;
    if (!std::strcmp(argv[i], "--dtype")) {
      auto wire = ParseWireType(argv[i + 1]);
      if (!wire.ok()) {
        std::fprintf(stderr, "%s\n", wire.status().message().c_str());
        return 2;
      }
      g_wire = *wire;
    }
  }
  std::printf("# mirrored all-reduce benchmark (sum of float32 buffers, in place, travelling as %s); %u hardware "
              "threads\n",
              WireTypeName(g_wire), std::thread::hardware_concurrency());
  std::vector<size_t> sizes;
  for (size_t b = 4096; b <= max_mb << 20; b *= 4) sizes.push_back(b);
  // Whether the comma-separated --paths names `path`.
  auto wanted = [&](const std::string& path) { return ("," + paths + ",").find("," + path + ",") != std::string::npos; };
  for (int n : rank_counts) {
    if (wanted("gloo/threads")) {
      Header("gloo/threads", n, 1);
      for (size_t b : sizes) PrintRow(b, n, RunThreads(false, n, b));
    }
    if (wanted("mirrored/threads")) {
      Header("mirrored/threads", n, 1);
      for (size_t b : sizes) PrintRow(b, n, RunThreads(true, n, b));
    }
    if (wanted("gloo/procs")) {
      Header("gloo/procs", n, n);
      for (size_t b : sizes) PrintRow(b, n, RunProcesses(n, 1, b, /*shm=*/false));
    }
    if (wanted("shm/procs")) {
      Header("shm/procs", n, n);
      for (size_t b : sizes) PrintRow(b, n, RunProcesses(n, 1, b, /*shm=*/true));
    }
    if (n % 2 == 0 && n > 2 && wanted("mirrored/2procs")) {
      Header("mirrored/2procs", n, 2);
      for (size_t b : sizes) PrintRow(b, n, RunProcesses(2, n / 2, b, /*shm=*/true));
    }
  }
  std::printf("# done\n");
  return 0;
}
