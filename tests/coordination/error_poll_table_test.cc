// ErrorPollTable: the error polls held open, closed by their caller or
// answered all at once.
#include "worker/coordination/error_poll_table.h"

#include <gtest/gtest.h>

#include <optional>

namespace mirrored::coordination {
namespace {

TEST(CoordinationErrorPollTableTest, OpenPollsAreKnownByTaskAndIncarnation) {
  ErrorPollTable polls;
  const uint64_t id = polls.Open(1, 7, [](const Status&) {});
  EXPECT_NE(id, 0u);
  EXPECT_EQ(polls.size(), 1u);
  EXPECT_TRUE(polls.IsOpen(1, 7));
  EXPECT_FALSE(polls.IsOpen(1, 8));  // another process of the task
  EXPECT_FALSE(polls.IsOpen(0, 7));
}

TEST(CoordinationErrorPollTableTest, CloseHandsThePollBackOnce) {
  ErrorPollTable polls;
  std::optional<Status> got;
  const uint64_t id = polls.Open(1, 7, [&](const Status& s) { got = s; });
  std::optional<ErrorPollTable::Poll> poll = polls.Close(id);
  ASSERT_TRUE(poll);
  EXPECT_EQ(poll->task_index, 1);
  EXPECT_EQ(poll->incarnation, 7u);
  EXPECT_FALSE(got);  // unanswered: the caller answers it
  poll->done(CancelledError("gone"));
  EXPECT_EQ(got->code(), StatusCode::kCancelled);
  EXPECT_FALSE(polls.Close(id));
  EXPECT_FALSE(polls.Close(12345));
  EXPECT_FALSE(polls.IsOpen(1, 7));
}

// A process may hold two polls (a retried PollForError): it stays known as
// polling until both are closed.
TEST(CoordinationErrorPollTableTest, AProcessWithTwoPollsIsOpenUntilBothClose) {
  ErrorPollTable polls;
  const uint64_t first = polls.Open(3, 9, [](const Status&) {});
  const uint64_t second = polls.Open(3, 9, [](const Status&) {});
  ASSERT_TRUE(polls.Close(first));
  EXPECT_TRUE(polls.IsOpen(3, 9));
  ASSERT_TRUE(polls.Close(second));
  EXPECT_FALSE(polls.IsOpen(3, 9));
  polls.Open(3, 9, [](const Status&) {});
  ErrorPollTable::Deferred deferred;
  polls.AnswerAll(OkStatus(), &deferred);
  EXPECT_FALSE(polls.IsOpen(3, 9));
}

TEST(CoordinationErrorPollTableTest, AnswerAllAnswersEachOnceAndClosesThem) {
  ErrorPollTable polls;
  int answered = 0;
  const uint64_t a = polls.Open(0, 1, [&](const Status& s) { answered += s.ok() ? 1 : 100; });
  const uint64_t b = polls.Open(1, 2, [&](const Status& s) { answered += s.ok() ? 1 : 100; });
  EXPECT_NE(a, b);
  ErrorPollTable::Deferred deferred;
  polls.AnswerAll(OkStatus(), &deferred);
  EXPECT_EQ(answered, 0);  // deferred: run outside the service's lock
  for (auto& f : deferred) f();
  EXPECT_EQ(answered, 2);
  EXPECT_EQ(polls.size(), 0u);
}

}  // namespace
}  // namespace mirrored::coordination
