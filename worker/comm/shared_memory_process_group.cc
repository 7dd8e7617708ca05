#include "worker/comm/shared_memory_process_group.h"

#include <fcntl.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "common/cpu_cores.h"
#include "worker/comm/half_conversion.h"

namespace mirrored {

// The segment: this header, then one slot per process, then the result area.
struct SharedMemoryProcessGroup::Header {
  uint64_t magic;
  uint32_t size;
  uint32_t unused;
  uint64_t slot_floats;
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;  // the futex word: bumped by the last to arrive
  alignas(64) std::atomic<uint32_t> aborted;
};

namespace {

constexpr uint64_t kMagic = 0x6d69727273686d31;  // "mirrshm1"
constexpr size_t kAlignment = 64;
// A waiter spins this many times (a peer usually arrives within
// microseconds, and a futex round trip costs more), then yields its core
// this many times (on a machine with more threads than cores the peer may
// be waiting for it), then sleeps on the futex. With more processes than
// the CPUs they may use, some member is always off a core, and a spin only
// delays it: the waiter yields at once.
constexpr int kSpins = 1000;
constexpr int kYields = 100;
// A sleeping waiter wakes at least this often to check its deadline and
// the abort flags.
constexpr std::chrono::milliseconds kLongestSleep{50};

size_t AlignUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000), static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

// The store reports a missing key by an exception (a timeout).
StatusOr<std::string> WaitAndGet(gloo::rendezvous::Store& store, const std::string& key,
                                 std::chrono::milliseconds timeout) {
  try {
    store.wait({key}, timeout);
    const std::vector<char> value = store.get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    return DeadlineExceededError("shared-memory group: waiting for " + key + ": " + e.what());
  }
}

Status Set(gloo::rendezvous::Store& store, const std::string& key, const std::string& value) {
  try {
    store.set(key, std::vector<char>(value.begin(), value.end()));
    return OkStatus();
  } catch (const std::exception& e) {
    return UnavailableError("shared-memory group: publishing " + key + ": " + e.what());
  }
}

size_t SegmentBytes(int size, size_t slot_bytes) {
  return AlignUp(sizeof(SharedMemoryProcessGroup::Header)) + (static_cast<size_t>(size) + 1) * slot_bytes;
}

// Rank 0: a fresh memfd, sized and mapped, its header written.
StatusOr<std::pair<int, void*>> CreateSegment(const SharedMemoryProcessGroupOptions& options, size_t bytes) {
  const int fd = memfd_create("mirrored-process-group", MFD_CLOEXEC);
  if (fd < 0) return UnavailableError(ErrnoText("shared-memory group: memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status s = UnavailableError(ErrnoText("shared-memory group: sizing the segment to " + std::to_string(bytes) +
                                          " bytes"));
    close(fd);
    return s;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status s = UnavailableError(ErrnoText("shared-memory group: mmap"));
    close(fd);
    return s;
  }
  auto* header = new (base) SharedMemoryProcessGroup::Header{};
  header->magic = kMagic;
  header->size = static_cast<uint32_t>(options.size);
  header->slot_floats = options.slot_bytes / sizeof(float);
  return std::make_pair(fd, base);
}

// The others: rank 0's memfd through its /proc entry ("pid:fd").
StatusOr<void*> OpenSegment(const std::string& where, const SharedMemoryProcessGroupOptions& options, size_t bytes) {
  const size_t colon = where.find(':');
  const std::string path = "/proc/" + where.substr(0, colon) + "/fd/" + where.substr(colon + 1);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return UnavailableError(ErrnoText("shared-memory group: opening process 0's segment " + path) +
                            " (the processes must share a host, a PID namespace and a user)");
  }
  struct stat st {};
  void* base = MAP_FAILED;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (base == MAP_FAILED) {
    return UnavailableError("shared-memory group: " + path + " is not a segment of " + std::to_string(bytes) +
                            " bytes for " + std::to_string(options.size) + " processes");
  }
  const auto* header = static_cast<const SharedMemoryProcessGroup::Header*>(base);
  if (header->magic != kMagic || header->size != static_cast<uint32_t>(options.size)) {
    munmap(base, bytes);
    return UnavailableError("shared-memory group: " + path + " holds another group's segment");
  }
  return base;
}

}  // namespace

StatusOr<std::unique_ptr<SharedMemoryProcessGroup>> SharedMemoryProcessGroup::Connect(
    gloo::rendezvous::Store& store, const SharedMemoryProcessGroupOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgumentError("process rank " + std::to_string(options.rank) + " is out of range for " +
                                std::to_string(options.size) + " processes");
  }
  if (options.slot_bytes < kAlignment || options.slot_bytes % kAlignment != 0) {
    return InvalidArgumentError("shared-memory slot of " + std::to_string(options.slot_bytes) +
                                " bytes: it must be a positive multiple of " + std::to_string(kAlignment));
  }
  const size_t bytes = SegmentBytes(options.size, options.slot_bytes);
  const std::string segment_key = options.prefix + "/segment";
  if (options.rank != 0) {
    MIRRORED_ASSIGN_OR_RETURN(const std::string where, WaitAndGet(store, segment_key, options.timeout));
    MIRRORED_ASSIGN_OR_RETURN(void* base, OpenSegment(where, options, bytes));
    MIRRORED_RETURN_IF_ERROR(Set(store, options.prefix + "/attached/" + std::to_string(options.rank), "1"));
    return std::unique_ptr<SharedMemoryProcessGroup>(new SharedMemoryProcessGroup(options, base, bytes));
  }
  MIRRORED_ASSIGN_OR_RETURN(const auto made, CreateSegment(options, bytes));
  auto group = std::unique_ptr<SharedMemoryProcessGroup>(new SharedMemoryProcessGroup(options, made.second, bytes));
  Status published = Set(store, segment_key, std::to_string(getpid()) + ":" + std::to_string(made.first));
  // The memfd stays open until every member has mapped it; then only the
  // mappings hold the memory, and it goes with the last of them.
  for (int r = 1; r < options.size && published.ok(); ++r) {
    published = WaitAndGet(store, options.prefix + "/attached/" + std::to_string(r), options.timeout).status();
  }
  close(made.first);
  if (!published.ok()) return published;
  return group;
}

SharedMemoryProcessGroup::SharedMemoryProcessGroup(SharedMemoryProcessGroupOptions options, void* base, size_t bytes)
    : options_(std::move(options)), base_(base), bytes_(bytes), header_(static_cast<Header*>(base)),
      slot_floats_(options_.slot_bytes / sizeof(float)),
      spins_(options_.size > UsableCpuCores() ? 0 : kSpins) {}

SharedMemoryProcessGroup::~SharedMemoryProcessGroup() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

float* SharedMemoryProcessGroup::Slot(int rank) const {
  return reinterpret_cast<float*>(static_cast<char*>(base_) + AlignUp(sizeof(Header)) +
                                  static_cast<size_t>(rank) * options_.slot_bytes);
}

float* SharedMemoryProcessGroup::Result() const { return Slot(options_.size); }

void SharedMemoryProcessGroup::Abort() {
  aborted_ = true;
  header_->aborted.store(1, std::memory_order_release);
  FutexWakeAll(&header_->generation);
}

Status SharedMemoryProcessGroup::Arrive(const char* what) {
  const uint32_t generation = header_->generation.load(std::memory_order_acquire);
  if (header_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(options_.size)) {
    header_->arrived.store(0, std::memory_order_relaxed);
    header_->generation.fetch_add(1, std::memory_order_release);
    FutexWakeAll(&header_->generation);
    return OkStatus();
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options_.timeout;
  for (int spins = 0;; ++spins) {
    if (header_->generation.load(std::memory_order_acquire) != generation) return OkStatus();
    if (aborted_ || header_->aborted.load(std::memory_order_acquire) != 0) {
      aborted_ = true;
      return AbortedError(std::string("shared-memory ") + what + " #" + std::to_string(operations_) +
                          ": the process group was aborted (a peer failed or the job is stopping)");
    }
    if (spins < spins_) {
      CpuRelax();
      continue;
    }
    if (spins < spins_ + kYields) {
      sched_yield();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return DeadlineExceededError(
          std::string("shared-memory ") + what + " #" + std::to_string(operations_) + ": not every one of the " +
          std::to_string(options_.size - 1) + " other process(es) of this host came within " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - start).count()) +
          " s (the collective timeout)");
    }
    FutexWait(&header_->generation, generation, std::min<std::chrono::nanoseconds>(kLongestSleep, deadline - now));
  }
}

// This process's share [lo, hi) of one chunk, summed over every process's
// contribution in rank order (its own read from `mine`, the others' from
// their slots) into the result area, where the others copy it from, and
// then into `mine`. Passes over the whole share, two contributions each:
// summing in 4 KiB blocks ran 1.2-1.5x slower at 16 MiB between 2
// processes (the long streams keep the prefetchers going), and one
// contribution per pass re-reads the partial sum (4 processes: 1.15-1.7x
// slower at 16 MiB).
void SharedMemoryProcessGroup::ReduceShare(float* mine, size_t lo, size_t hi, ReduceOp op) const {
  float* result = Result() + lo;
  const size_t n = hi - lo;
  auto contribution = [&](int r) -> const float* { return r == options_.rank ? mine + lo : Slot(r) + lo; };
  // Two contributions per pass, in rank order: ((c0 + c1) + c2) + c3.
  ReduceTwo(result, contribution(0), contribution(1), n, op);
  int r = 2;
  for (; r + 1 < options_.size; r += 2) ReduceTwoInto(result, contribution(r), contribution(r + 1), n, op);
  if (r < options_.size) ReduceInto(result, contribution(r), n, op);
  std::memcpy(mine + lo, result, n * sizeof(float));
}

Status SharedMemoryProcessGroup::RunChunks(float* data, size_t count, size_t chunk_elements, const CopyStep& copy_in,
                                           const ReduceStep& reduce, const CopyStep& copy_out) {
  const auto size = static_cast<size_t>(options_.size);
  const auto me = static_cast<size_t>(options_.rank);
  for (size_t offset = 0; offset < count; offset += chunk_elements) {
    const size_t n = std::min(chunk_elements, count - offset);
    float* chunk = data + offset;
    // This process reduces [lo, hi) of the chunk from its own memory, so
    // only the other shares go into its slot, and only they come back.
    const size_t lo = n * me / size, hi = n * (me + 1) / size;
    copy_in(chunk, 0, lo);
    copy_in(chunk, hi, n - hi);
    MIRRORED_RETURN_IF_ERROR(Arrive("all-reduce"));
    reduce(chunk, lo, hi);
    MIRRORED_RETURN_IF_ERROR(Arrive("all-reduce"));
    // No third barrier: the next chunk's (or operation's) slot writes come
    // after every read of the slots (before the barrier above), and its
    // writes of the result after its first barrier, which every process
    // reaches only once done copying this result out.
    copy_out(chunk, 0, lo);
    copy_out(chunk, hi, n - hi);
  }
  return OkStatus();
}

Status SharedMemoryProcessGroup::AllReduce(float* data, size_t count, ReduceOp op) {
  ++operations_;
  if (count == 0 || options_.size == 1) return OkStatus();
  if (aborted_) return AbortedError("the process group was aborted");
  float* slot = Slot(options_.rank);
  const float* result = Result();
  return RunChunks(
      data, count, slot_floats_,
      [&](float* chunk, size_t at, size_t len) { std::memcpy(slot + at, chunk + at, len * sizeof(float)); },
      [&](float* chunk, size_t lo, size_t hi) { ReduceShare(chunk, lo, hi, op); },
      [&](float* chunk, size_t at, size_t len) { std::memcpy(chunk + at, result + at, len * sizeof(float)); });
}

void SharedMemoryProcessGroup::ReduceShareOnWire(WireType wire, float* mine, size_t lo, size_t hi,
                                                 ReduceOp op) const {
  // FP32 sums of an L1-sized block, in rank order, of every contribution as
  // the wire holds it: widened from its slot, or (this process's own)
  // rounded from its buffer.
  constexpr size_t kBlock = 2048;
  float sum[kBlock], part[kBlock];
  uint16_t* result = Slot16(options_.size);
  auto load = [&](int r, size_t b, size_t len, float* into) {
    if (r == options_.rank) {
      std::memcpy(into, mine + b, len * sizeof(float));
      RoundToWire(wire, into, len);
    } else {
      WidenFromWire(wire, Slot16(r) + b, into, len);
    }
  };
  for (size_t b = lo; b < hi; b += kBlock) {
    const size_t len = std::min(kBlock, hi - b);
    load(0, b, len, sum);
    for (int r = 1; r < options_.size; ++r) {
      if (op == ReduceOp::kMax) {
        load(r, b, len, part);
        ReduceInto(sum, part, len, op);
      } else if (r == options_.rank) {  // a sum: added straight from the buffer or slot
        AddRoundedToWire(wire, sum, mine + b, len);
      } else {
        AddWidenedFromWire(wire, sum, Slot16(r) + b, len);
      }
    }
    NarrowToWire(wire, sum, result + b, len);
    WidenFromWire(wire, result + b, mine + b, len);
  }
}

Status SharedMemoryProcessGroup::AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) {
  if (wire == WireType::kFp32) return AllReduce(data, count, op);
  ++operations_;
  if (count == 0 || options_.size == 1) {
    RoundToWire(wire, data, count);  // the sum of one contribution
    return OkStatus();
  }
  if (aborted_) return AbortedError("the process group was aborted");
  uint16_t* slot = Slot16(options_.rank);
  const uint16_t* result = Slot16(options_.size);
  // As AllReduce, in 16 bits; this process's own share is rounded as it is summed.
  return RunChunks(
      data, count, options_.slot_bytes / sizeof(uint16_t),
      [&](float* chunk, size_t at, size_t len) { NarrowToWire(wire, chunk + at, slot + at, len); },
      [&](float* chunk, size_t lo, size_t hi) { ReduceShareOnWire(wire, chunk, lo, hi, op); },
      [&](float* chunk, size_t at, size_t len) { WidenFromWire(wire, result + at, chunk + at, len); });
}

Status SharedMemoryProcessGroup::Broadcast(float* data, size_t count, int root_process) {
  ++operations_;
  if (count == 0 || options_.size == 1) return OkStatus();
  if (root_process < 0 || root_process >= options_.size) {
    return InvalidArgumentError("broadcast root " + std::to_string(root_process) + " is out of range for " +
                                std::to_string(options_.size) + " processes");
  }
  if (aborted_) return AbortedError("the process group was aborted");
  for (size_t offset = 0; offset < count; offset += slot_floats_) {
    const size_t n = std::min(slot_floats_, count - offset);
    if (options_.rank == root_process) std::memcpy(Result(), data + offset, n * sizeof(float));
    MIRRORED_RETURN_IF_ERROR(Arrive("broadcast"));
    if (options_.rank != root_process) std::memcpy(data + offset, Result(), n * sizeof(float));
    MIRRORED_RETURN_IF_ERROR(Arrive("broadcast"));
  }
  return OkStatus();
}

Status SharedMemoryProcessGroup::Barrier() {
  ++operations_;
  if (options_.size == 1) return OkStatus();
  if (aborted_) return AbortedError("the process group was aborted");
  return Arrive("barrier");
}

std::string SameHostIdentity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char ns[128] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  std::ostringstream id;
  id << boot_id << "/" << (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "?") << "/uid" << getuid();
  return id.str();
}

}  // namespace mirrored
