// The CoordinationService tests' fixture (coordination_service_test.cc,
// coordination_service_registration_test.cc, coordination_service_claim_test.cc):
// a service on a fake clock (now_, moved by hand; CheckDeadlines() fires the
// deadlines), its tasks registered at once or as a running job.
//
//   auto s = RunningJob();                        // chief:0 and worker:0 joined
//   Pass(*s, 500);                                // both heartbeat 500 ms later
//   EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 3)));
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/coordination/coordination_service.h"

namespace mirrored::coordination {


class CoordinationServiceTest : public ::testing::Test {
 protected:
  std::unique_ptr<CoordinationService> Make(std::vector<std::string> tasks) {
    CoordinationServiceOptions o;
    o.tasks = std::move(tasks);
    o.heartbeat_timeout = std::chrono::milliseconds(1000);
    o.registration_timeout = std::chrono::milliseconds(5000);
    o.shutdown_timeout = std::chrono::milliseconds(3000);
    o.now_ms = [this] { return now_.load(); };
    o.make_nccl_unique_id = [this]() -> StatusOr<std::string> {
      return std::string(128, static_cast<char>('a' + ids_made_++));
    };
    auto s = CoordinationService::Create(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }

  // Registers every task (incarnation = index + 1) and returns their views.
  std::vector<std::optional<StatusOr<RegisteredView>>> RegisterAll(
      CoordinationService& s, const std::vector<int>& devices) {
    std::vector<std::optional<StatusOr<RegisteredView>>> views(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
      s.RegisterTaskAsync({.task = s.options().tasks[i], .incarnation = i + 1, .device_count = devices[i]},
                          [&views, i](const StatusOr<RegisteredView>& v) { views[i] = v; });
    }
    return views;
  }

  // chief:0 (10.0.0.1, incarnation 1) and worker:0 (10.0.0.2, incarnation
  // 2) registered: the job formed.
  std::unique_ptr<CoordinationService> TwoHostsRegistered() {
    auto s = Make({"chief:0", "worker:0"});
    std::vector<std::optional<StatusOr<RegisteredView>>> views(2);
    s->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1, .peer = "ipv4:10.0.0.1:40000"},
                         [&](const auto& v) { views[0] = v; });
    s->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1, .peer = "ipv4:10.0.0.2:40001"},
                         [&](const auto& v) { views[1] = v; });
    EXPECT_TRUE(views[0] && views[0]->ok() && views[1] && views[1]->ok());
    return s;
  }

  // TwoHostsRegistered, worker:0's error poll open: a running job.
  std::unique_ptr<CoordinationService> RunningJob() {
    auto s = TwoHostsRegistered();
    s->PollForErrorAsync("worker:0", 2, [](const Status&) {});
    return s;
  }

  // A process registering as worker:0 from its host (10.0.0.2), not
  // restarted by a launcher: the service's answer.
  static Status ClaimWorker0(CoordinationService& s, uint64_t incarnation) {
    std::optional<StatusOr<RegisteredView>> answer;
    s.RegisterTaskAsync(
        {.task = "worker:0", .incarnation = incarnation, .device_count = 1, .peer = "ipv4:10.0.0.2:40003"},
        [&](const auto& v) { answer = v; });
    EXPECT_TRUE(answer.has_value());
    return answer ? answer->status() : InternalError("no answer");
  }

  // `ms` pass on the fake clock while both tasks of RunningJob heartbeat.
  void Pass(CoordinationService& s, int64_t ms) {
    now_ += ms;
    EXPECT_TRUE(s.Heartbeat("chief:0", 1).ok());
    EXPECT_TRUE(s.Heartbeat("worker:0", 2).ok());
  }

  static bool ToldToWait(const Status& s) {
    return s.code() == StatusCode::kUnavailable &&
           s.message().find(kPreviousProcessStillRunning) != std::string::npos;
  }

  std::atomic<int64_t> now_{0};
  int ids_made_ = 0;
};

}  // namespace mirrored::coordination
