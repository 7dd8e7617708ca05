#include "bench/coordination/light_agents.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/coordination/client_processes.h"
#include "common/logging.h"
#include "proto/coordination.grpc.pb.h"
#include "worker/coordination/coordination_client.h"
#include "worker/coordination/coordination_rpc_handler.h"

namespace mirrored::coordination {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kLightCallTimeout{120000};
constexpr std::chrono::milliseconds kLightHeartbeatInterval{1000};  // the agent's default
constexpr char kBenchToken[] = "bench-token";

int64_t NowNs() { return Clock::now().time_since_epoch().count(); }

std::string TaskName(int i) { return i == 0 ? "chief:0" : "worker:" + std::to_string(i - 1); }

// One asynchronous call per task, all in flight together; Wait() returns once
// every one has completed, with the first error.
class Round {
 public:
  explicit Round(int calls) : left_(calls) {}
  void Done(const grpc::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok() && error_.empty()) error_ = std::to_string(s.error_code()) + " " + s.error_message();
    if (--left_ == 0) cv_.notify_all();
  }
  std::string Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return left_ == 0; });  // every call has its own deadline
    return error_.empty() ? "ok" : error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
  std::string error_;
};

// A task's error poll, held open as an agent holds its own: the service
// then has an operation outstanding per task, as in a real job.
class ErrorPoll final : public grpc::ClientReadReactor<rpc::PollForErrorResponse> {
 public:
  ErrorPoll(rpc::CoordinationService::Stub* stub, const std::string& task, uint64_t incarnation) {
    ctx_.AddMetadata(kJobTokenMetadataKey, kBenchToken);
    req_.set_task(task);
    req_.set_incarnation(incarnation);
    stub->async()->PollForError(&ctx_, &req_, this);
    StartRead(&resp_);
    StartCall();
  }
  ~ErrorPoll() override {
    ctx_.TryCancel();  // no-op once the service ended the poll
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });  // a cancelled call ends once gRPC ran its reactions
  }
  // Until the service says it holds the poll; false: the poll ended first.
  bool WaitOpen() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_ || done_; });
    return open_;
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = open_ || resp_.open();
    }
    cv_.notify_all();
    StartRead(&resp_);
  }
  void OnDone(const grpc::Status&) override {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

 private:
  grpc::ClientContext ctx_;
  rpc::PollForErrorRequest req_;
  rpc::PollForErrorResponse resp_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false, done_ = false;
};

struct LightTask {
  std::string name;
  uint64_t incarnation = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<rpc::CoordinationService::Stub> stub;
  std::unique_ptr<ErrorPoll> poll;  // with --error-polls
};

std::unique_ptr<grpc::ClientContext> Context(bool wait_for_ready) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata(kJobTokenMetadataKey, kBenchToken);
  ctx->set_deadline(std::chrono::system_clock::now() + kLightCallTimeout);
  ctx->set_wait_for_ready(wait_for_ready);
  return ctx;
}

// Issues `call(task, ctx, done)` for every task and waits for all; `on_done`
// sees each task's completion time.
template <typename Request, typename Response, typename Call>
std::string CallEveryTask(std::vector<LightTask>& tasks, std::function<Request(const LightTask&)> request,
                          Call call, std::function<void(size_t)> on_done = nullptr) {
  Round round(static_cast<int>(tasks.size()));
  struct Pending {
    std::unique_ptr<grpc::ClientContext> ctx;
    Request req;
    Response resp;
  };
  std::vector<Pending> pending(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    pending[i] = {Context(true), request(tasks[i]), {}};
    call(*tasks[i].stub->async(), pending[i].ctx.get(), &pending[i].req, &pending[i].resp,
         [&round, &on_done, i](grpc::Status s) {
           if (on_done) on_done(i);
           round.Done(s);
         });
  }
  return round.Wait();
}

std::string RegisterAll(std::vector<LightTask>& tasks) {
  return CallEveryTask<rpc::RegisterRequest, rpc::RegisterResponse>(
      tasks,
      [](const LightTask& t) {
        rpc::RegisterRequest r;
        r.set_task(t.name);
        r.set_incarnation(t.incarnation);
        r.set_device_count(1);
        return r;
      },
      [](auto& async, auto* ctx, auto* req, auto* resp, auto done) { async.Register(ctx, req, resp, done); });
}

std::string HeartbeatAll(std::vector<LightTask>& tasks) {
  return CallEveryTask<rpc::HeartbeatRequest, rpc::HeartbeatResponse>(
      tasks,
      [](const LightTask& t) {
        rpc::HeartbeatRequest r;
        r.set_task(t.name);
        r.set_incarnation(t.incarnation);
        return r;
      },
      [](auto& async, auto* ctx, auto* req, auto* resp, auto done) { async.Heartbeat(ctx, req, resp, done); });
}

std::string BarrierAll(std::vector<LightTask>& tasks, const std::string& name, int64_t* first_done_ns) {
  return CallEveryTask<rpc::BarrierRequest, rpc::BarrierResponse>(
      tasks,
      [&name](const LightTask& t) {
        rpc::BarrierRequest r;
        r.set_task(t.name);
        r.set_incarnation(t.incarnation);
        r.set_name(name);
        r.set_timeout_ms(kLightCallTimeout.count());
        return r;
      },
      [](auto& async, auto* ctx, auto* req, auto* resp, auto done) { async.Barrier(ctx, req, resp, done); },
      [first_done_ns](size_t i) {
        if (i == 0) *first_done_ns = NowNs();
      });
}

std::string ShutdownAll(std::vector<LightTask>& tasks) {
  return CallEveryTask<rpc::ShutdownRequest, rpc::ShutdownResponse>(
      tasks,
      [](const LightTask& t) {
        rpc::ShutdownRequest r;
        r.set_task(t.name);
        r.set_incarnation(t.incarnation);
        return r;
      },
      [](auto& async, auto* ctx, auto* req, auto* resp, auto done) { async.Shutdown(ctx, req, resp, done); });
}

// Heartbeats every task every second until the parent says "go" on stdin.
std::string HeartbeatUntilGo(std::vector<LightTask>& tasks) {
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::string error = "ok";
  std::thread beats([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!go) {
      lock.unlock();
      std::string e = HeartbeatAll(tasks);
      lock.lock();
      if (e != "ok") error = e;
      cv.wait_for(lock, kLightHeartbeatInterval, [&] { return go; });
    }
  });
  std::string line;
  const bool told = static_cast<bool>(std::getline(std::cin, line)) && line == "go";
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  beats.join();
  return told ? error : "not told to go";
}

// Mean RTT of the rounds after the first, as task 0 sees it (-1 in the other
// processes).
double BarrierRounds(std::vector<LightTask>& tasks, int first, int rounds, std::string* error) {
  double sum = 0;
  for (int r = 0; r < rounds && *error == "ok"; ++r) {
    int64_t first_done = 0;
    const int64_t t0 = NowNs();
    const std::string name = "bench/" + std::to_string(r);
    *error = BarrierAll(tasks, name, &first_done);
    if (r > 0) sum += static_cast<double>(first_done - t0) / 1e6;
  }
  return first == 0 && rounds > 1 ? sum / (rounds - 1) : -1;
}

}  // namespace

// Opens every task's error poll; "ok" once the service holds them all.
std::string OpenErrorPolls(std::vector<LightTask>& tasks) {
  for (LightTask& t : tasks) t.poll = std::make_unique<ErrorPoll>(t.stub.get(), t.name, t.incarnation);
  for (LightTask& t : tasks) {
    if (!t.poll->WaitOpen()) return t.name + ": its error poll ended before it opened";
  }
  return "ok";
}

int RunLightAgentProcess(int argc, char** argv) {
  if (argc != 8) return 2;
  const bool error_polls = std::string(argv[7]) == "polls";
  SetLogLevel(LogLevel::kWarning);
  const std::string address = argv[2];
  const int first = std::atoi(argv[3]), count = std::atoi(argv[4]), rounds = std::atoi(argv[6]);
  std::vector<LightTask> tasks(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    LightTask& t = tasks[static_cast<size_t>(i)];
    t.name = TaskName(first + i);
    t.incarnation = static_cast<uint64_t>(first + i) + 1;
    t.channel = CoordinationClient::MakeChannel(address, /*separate_connection=*/true);
    t.channel->GetState(/*try_to_connect=*/true);
    t.stub = rpc::CoordinationService::NewStub(t.channel);
  }
  for (LightTask& t : tasks) t.channel->WaitForConnected(std::chrono::system_clock::now() + kLightCallTimeout);
  const int64_t accepted = NowNs();
  std::string error = RegisterAll(tasks);
  const int64_t registered = NowNs();
  if (error == "ok" && error_polls) error = OpenErrorPolls(tasks);
  std::printf("registered %lld %lld %.1f %s\n", static_cast<long long>(accepted), static_cast<long long>(registered),
              ProcessCpuMs(), error.c_str());
  std::fflush(stdout);
  if (error != "ok") return 1;
  error = HeartbeatUntilGo(tasks);
  const double cpu0 = ProcessCpuMs();
  const double barrier_ms = error == "ok" ? BarrierRounds(tasks, first, rounds, &error) : -1;
  if (!ReportBarriersAndWaitForExit(barrier_ms, ProcessCpuMs() - cpu0, error)) return 1;
  if (error == "ok") error = ShutdownAll(tasks);
  const int64_t exited = NowNs();
  for (LightTask& t : tasks) t.poll.reset();  // ended by the exit barrier, or cancelled
  std::printf("done %lld %s\n", static_cast<long long>(exited), error.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace mirrored::coordination
