// The CoordinationGrpcTest fixture (coordination_grpc_test.cc,
// coordination_grpc_claim_test.cc, coordination_grpc_failure_test.cc): a real
// service and gRPC server on a free loopback port, with agents as threads
// connected concurrently; WaitFor polls a condition up to a deadline.
//
//   StartService(2);                              // chief:0, worker:0
//   auto agents = ConnectAll(2);
//   ASSERT_TRUE(WaitFor([&] { return service_->job_error().has_value(); }, std::chrono::seconds(5)));
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"

namespace mirrored::coordination {


inline constexpr char kToken[] = "test-token-0123456789";

inline std::vector<std::string> TaskNames(int n) {
  std::vector<std::string> names = {"chief:0"};
  for (int i = 1; i < n; ++i) names.push_back("worker:" + std::to_string(i - 1));
  return names;
}

// Polls `done` until it holds or `timeout` passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class CoordinationGrpcTest : public ::testing::Test {
 protected:
  void StartService(int n, int64_t registration_timeout_ms = 10000,
                    const std::string& listen_address = "127.0.0.1:0") {
    CoordinationServiceOptions o;
    o.tasks = TaskNames(n);
    o.heartbeat_timeout = std::chrono::milliseconds(service_heartbeat_timeout_ms_);
    o.registration_timeout = std::chrono::milliseconds(registration_timeout_ms);
    o.shutdown_timeout = std::chrono::seconds(5);
    o.check_interval = std::chrono::milliseconds(50);
    auto s = CoordinationService::Create(o);
    ASSERT_TRUE(s.ok()) << s.status();
    service_ = std::move(*s);
    service_->StartDeadlineThread();
    auto server = CoordinationServer::Start(listen_address, kToken, service_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
  }

  CoordinationAgentOptions AgentOptions(const std::string& task, int devices = 1) {
    CoordinationAgentOptions o;
    o.service_address = server_->bound_address();
    o.task_name = task;
    o.device_count = devices;
    o.job_token = kToken;
    o.service_task = "chief:0";
    o.heartbeat_interval = std::chrono::milliseconds(100);
    o.heartbeat_timeout = std::chrono::seconds(1);
    o.registration_timeout = std::chrono::seconds(10);
    o.shutdown_timeout = std::chrono::seconds(5);
    return o;
  }

  // The service's heartbeat timeout for the next StartService.
  int64_t service_heartbeat_timeout_ms_ = 1000;

  // Creates and connects one agent per task, concurrently.
  std::vector<std::unique_ptr<CoordinationAgent>> ConnectAll(int n,
                                                             std::vector<int> devices = {}) {
    std::vector<std::unique_ptr<CoordinationAgent>> agents;
    const auto names = TaskNames(n);
    for (int i = 0; i < n; ++i) {
      agents.push_back(std::make_unique<CoordinationAgent>(
          AgentOptions(names[i], devices.empty() ? 1 : devices[i])));
    }
    std::vector<std::future<Status>> results;
    for (auto& a : agents) {
      results.push_back(std::async(std::launch::async, [&a] { return a->Connect(); }));
    }
    for (auto& r : results) EXPECT_TRUE(r.get().ok());
    return agents;
  }

  // Runs fn(agent) on every agent concurrently and returns the statuses.
  std::vector<Status> OnAll(std::vector<std::unique_ptr<CoordinationAgent>>& agents,
                            const std::function<Status(CoordinationAgent&)>& fn) {
    std::vector<std::future<Status>> results;
    for (auto& a : agents) {
      results.push_back(std::async(std::launch::async, [&a, &fn] { return fn(*a); }));
    }
    std::vector<Status> out;
    for (auto& r : results) out.push_back(r.get());
    return out;
  }

  void TearDown() override {
    if (server_) server_->Stop();
  }

  std::unique_ptr<CoordinationService> service_;
  std::unique_ptr<CoordinationServer> server_;
};

}  // namespace mirrored::coordination
