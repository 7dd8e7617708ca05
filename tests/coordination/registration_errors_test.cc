// The errors a task's registration ends with, and the agent's reading of
// the service's answers while it registers.
#include "worker/coordination/registration_errors.h"

#include <gtest/gtest.h>

#include <string>

#include "worker/coordination/task_claim.h"

namespace mirrored::coordination {
namespace {

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

const std::string kService = "the coordination service at 10.0.0.1:2222 (hosted by task chief:0)";

TEST(CoordinationRegistrationErrorsTest, OnlyAnUnavailablePreviousProcessAnswerMeansWait) {
  const std::string wait = "task worker:1: " + std::string(kPreviousProcessStillRunning) + " (waits up to 5 s)";
  EXPECT_TRUE(ToldToWaitForPreviousProcess(UnavailableError(wait)));
  EXPECT_FALSE(ToldToWaitForPreviousProcess(InvalidArgumentError(wait)));
  EXPECT_FALSE(ToldToWaitForPreviousProcess(UnavailableError("connection refused")));
  EXPECT_FALSE(ToldToWaitForPreviousProcess(OkStatus()));
}

TEST(CoordinationRegistrationErrorsTest, TheChiefsFailureBeforeJoiningIsAbortedNamingTheChief) {
  const std::string text = "task chief:0 failed at 2026-11-25T15:00:00.000Z: bad flags (before it joined the job)";
  EXPECT_TRUE(IsChiefFailureBeforeJoining(AbortedError(text), "chief:0"));
  EXPECT_FALSE(IsChiefFailureBeforeJoining(AbortedError(text), "worker:0"));  // another task hosts the service
  EXPECT_FALSE(IsChiefFailureBeforeJoining(UnavailableError(text), "chief:0"));
  EXPECT_FALSE(IsChiefFailureBeforeJoining(
      AbortedError("task chief:0 failed at 2026-11-25T15:00:00.000Z: exited with error"), "chief:0"));
}

TEST(CoordinationRegistrationErrorsTest, ARendezvousTimeoutNamesTheServiceAndTheCause) {
  const Status s = RendezvousTimedOut("worker:1", kService, 300000, "Deadline Exceeded");
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), "task worker:1 could not rendezvous with " + kService +
                             " within 300000 ms; check that the chief is running and reachable (Deadline Exceeded)");
}

TEST(CoordinationRegistrationErrorsTest, AFailedGenerationThatOutlastedRegistrationIsNamed) {
  const Status s = FailedGenerationOutlastedRegistration("worker:1", 3000, kService, "task chief:0 failed at X: y");
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Has(s, "task worker:1 could not rendezvous within 3000 ms: " + kService)) << s.message();
  EXPECT_TRUE(Has(s, "only answered for the generation that failed (task chief:0 failed at X: y)")) << s.message();
  EXPECT_TRUE(Has(s, "was the chief's task restarted?")) << s.message();
}

TEST(CoordinationRegistrationErrorsTest, ASecondProcessClaimingARunningTaskIsABadConfiguration) {
  // InvalidArgument each: exit 2, which a launcher's restart does not retry.
  const Status outlasted = PreviousProcessOutlastedRegistration("worker:1", 2000);
  EXPECT_EQ(outlasted.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(outlasted, "task worker:1 is still running")) << outlasted.message();
  EXPECT_TRUE(Has(outlasted, "registration timeout (2000 ms)")) << outlasted.message();

  const Status unanswered = ClaimWaitLastCallUnanswered("worker:1", 2000, kService);
  EXPECT_EQ(unanswered.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(unanswered, "spent its registration timeout (2000 ms)")) << unanswered.message();
  EXPECT_TRUE(Has(unanswered, kService + " did not answer its last call")) << unanswered.message();

  const Status gone = ServiceGoneWhileClaimWaiting("worker:1", kService, UnavailableError("connection refused"));
  EXPECT_EQ(gone.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(gone, kService + " stopped answering (" + UnavailableError("connection refused").ToString() + ")"))
      << gone.message();
  EXPECT_TRUE(Has(gone, "this process has no job to join")) << gone.message();
}

}  // namespace
}  // namespace mirrored::coordination
