// Errors as values at module boundaries, with the vocabulary the whole
// project shares (STYLE.md, rule 3) and the mapping to process exit codes
// (DESIGN.md, "Exit codes").
//
//   Status s = InvalidArgumentError("task.index 3 is out of range");
//   StatusOr<int> r = ParsePort("h:99999");
//   if (!r.ok()) return r.status();        // or MIRRORED_RETURN_IF_ERROR(...)
#pragma once

#include <cassert>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace mirrored {

// Which kind of failure; picks the exit code and tells callers whether a
// retry can help. Values follow absl/gRPC so they map one to one.
enum class StatusCode {
  kOk = 0,
  kCancelled = 1,           // stopped on request (signal, shutdown)
  kUnknown = 2,
  kInvalidArgument = 3,     // bad flag, TF_CONFIG field, data file
  kDeadlineExceeded = 4,    // a wait ran past its deadline
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kFailedPrecondition = 9,
  kAborted = 10,            // a peer restarted, or the job was aborted
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,        // a peer or the service is lost
  kDataLoss = 15,           // corrupt file
  kUnauthenticated = 16,    // wrong or missing job token
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: task.index 3 is out of range", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
Status CancelledError(std::string message);
Status UnknownError(std::string message);
Status InvalidArgumentError(std::string message);
Status DeadlineExceededError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status PermissionDeniedError(std::string message);
Status FailedPreconditionError(std::string message);
Status AbortedError(std::string message);
Status OutOfRangeError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);
Status UnauthenticatedError(std::string message);

std::ostream& operator<<(std::ostream& os, const Status& s);

// A value or the error that prevented it. Never holds an OK status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : value_(value) {}          // NOLINT: implicit by design
  StatusOr(T&& value) : value_(std::move(value)) {}     // NOLINT
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "StatusOr built from an OK status");
    if (status_.ok()) status_ = InternalError("StatusOr built from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

// Process exit codes of DESIGN.md, shared by launcher and worker.
enum ExitCode : int {
  kExitSuccess = 0,
  kExitFailure = 1,       // any other failure of this task
  kExitUsage = 2,         // bad usage or configuration
  kExitPeerFailed = 3,    // stopped because another task failed
  kExitTimeout = 4,       // rendezvous or collective timeout
  kExitPreempted = 143,   // SIGTERM: checkpointed and stopped (128 + 15)
};

// The exit code a task ends with when `status` is what stopped it.
// kAborted means "stopped because a peer failed" throughout the project.
int ExitCodeFor(const Status& status);

// An error met while a job runs (a run directory that turned read-only or
// full) is not bad usage even when its code says so (PermissionDenied,
// NotFound, InvalidArgument from a file system call): Unavailable, i.e. exit
// 1, which the launcher may retry. Other errors pass unchanged.
Status WhileRunning(const Status& status);

}  // namespace mirrored

#define MIRRORED_STATUS_CONCAT_INNER_(a, b) a##b
#define MIRRORED_STATUS_CONCAT_(a, b) MIRRORED_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define MIRRORED_RETURN_IF_ERROR(expr)                  \
  do {                                                  \
    ::mirrored::Status _mirrored_status = (expr);       \
    if (!_mirrored_status.ok()) return _mirrored_status; \
  } while (0)

// `MIRRORED_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns
// its error from the enclosing function.
#define MIRRORED_ASSIGN_OR_RETURN(lhs, expr) \
  MIRRORED_ASSIGN_OR_RETURN_IMPL_(MIRRORED_STATUS_CONCAT_(_mirrored_or_, __LINE__), lhs, expr)
#define MIRRORED_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()
