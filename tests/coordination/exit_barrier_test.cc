// ExitBarrier: every task's arrival, its one deadline, and failure.
#include "worker/coordination/exit_barrier.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>

namespace mirrored::coordination {
namespace {

std::string Absent(const std::set<int>& arrived) {
  std::string out;
  for (int i = 0; i < 3; ++i) {
    if (!arrived.count(i)) out += (out.empty() ? "" : ", ") + std::to_string(i);
  }
  return out;
}

void RunAll(ExitBarrier::Deferred& deferred) {
  for (auto& f : deferred) f();
  deferred.clear();
}

TEST(CoordinationExitBarrierTest, PassesOnceEveryParticipantArrived) {
  ExitBarrier barrier(3, 1000);
  ExitBarrier::Deferred deferred;
  std::optional<Status> a, b, c;
  EXPECT_FALSE(barrier.Arrive(0, 0, [&](const Status& s) { a = s; }, &deferred));
  EXPECT_FALSE(barrier.Arrive(2, 10, [&](const Status& s) { b = s; }, &deferred));
  EXPECT_TRUE(deferred.empty());
  EXPECT_TRUE(barrier.Arrive(1, 20, [&](const Status& s) { c = s; }, &deferred));
  RunAll(deferred);
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(a->ok() && b->ok() && c->ok());
}

TEST(CoordinationExitBarrierTest, TheFirstArrivalFixesTheDeadline) {
  ExitBarrier barrier(3, 1000);
  ExitBarrier::Deferred deferred;
  std::optional<Status> first, second;
  barrier.Arrive(0, 100, [&](const Status& s) { first = s; }, &deferred);
  barrier.Arrive(1, 900, [&](const Status& s) { second = s; }, &deferred);
  barrier.Expire(1099, Absent, &deferred);
  EXPECT_TRUE(deferred.empty());
  barrier.Expire(1100, Absent, &deferred);
  RunAll(deferred);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(first->message(), "exit barrier timed out after 1000 ms; tasks still running: 2");
  EXPECT_EQ(second->code(), StatusCode::kDeadlineExceeded);
}

TEST(CoordinationExitBarrierTest, ALaterArrivalKeepsThePassedDeadline) {
  ExitBarrier barrier(3, 1000);
  ExitBarrier::Deferred deferred;
  barrier.Arrive(0, 0, [](const Status&) {}, &deferred);
  barrier.Expire(1000, Absent, &deferred);
  RunAll(deferred);
  std::optional<Status> late;
  EXPECT_FALSE(barrier.Arrive(1, 5000, [&](const Status& s) { late = s; }, &deferred));
  barrier.Expire(5000, Absent, &deferred);
  RunAll(deferred);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->message(), "exit barrier timed out after 1000 ms; tasks still running: 2");
}

TEST(CoordinationExitBarrierTest, FailAllAnswersEveryWaiter) {
  ExitBarrier barrier(2, 1000);
  ExitBarrier::Deferred deferred;
  std::optional<Status> got;
  barrier.Arrive(0, 0, [&](const Status& s) { got = s; }, &deferred);
  barrier.FailAll(AbortedError("task worker:1 failed"), &deferred);
  RunAll(deferred);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->code(), StatusCode::kAborted);
  barrier.Expire(10000, Absent, &deferred);  // nobody left to answer
  EXPECT_TRUE(deferred.empty());
}

TEST(CoordinationArrivalSetTest, CountsEachParticipantOnce) {
  ArrivalSet arrived(4);
  EXPECT_TRUE(arrived.empty());
  EXPECT_TRUE(arrived.Insert(2));
  EXPECT_FALSE(arrived.Insert(2));  // a second arrival of the same task
  EXPECT_TRUE(arrived.Insert(0));
  EXPECT_EQ(arrived.size(), 2u);
  EXPECT_EQ(arrived.ToSet(), (std::set<int>{0, 2}));
}

}  // namespace
}  // namespace mirrored::coordination
