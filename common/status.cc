#include "common/status.h"

namespace mirrored {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

#define MIRRORED_DEFINE_ERROR_(Name, Code) \
  Status Name(std::string message) { return Status(StatusCode::Code, std::move(message)); }
MIRRORED_DEFINE_ERROR_(CancelledError, kCancelled)
MIRRORED_DEFINE_ERROR_(UnknownError, kUnknown)
MIRRORED_DEFINE_ERROR_(InvalidArgumentError, kInvalidArgument)
MIRRORED_DEFINE_ERROR_(DeadlineExceededError, kDeadlineExceeded)
MIRRORED_DEFINE_ERROR_(NotFoundError, kNotFound)
MIRRORED_DEFINE_ERROR_(AlreadyExistsError, kAlreadyExists)
MIRRORED_DEFINE_ERROR_(PermissionDeniedError, kPermissionDenied)
MIRRORED_DEFINE_ERROR_(FailedPreconditionError, kFailedPrecondition)
MIRRORED_DEFINE_ERROR_(AbortedError, kAborted)
MIRRORED_DEFINE_ERROR_(OutOfRangeError, kOutOfRange)
MIRRORED_DEFINE_ERROR_(UnimplementedError, kUnimplemented)
MIRRORED_DEFINE_ERROR_(InternalError, kInternal)
MIRRORED_DEFINE_ERROR_(UnavailableError, kUnavailable)
MIRRORED_DEFINE_ERROR_(DataLossError, kDataLoss)
MIRRORED_DEFINE_ERROR_(UnauthenticatedError, kUnauthenticated)
#undef MIRRORED_DEFINE_ERROR_

std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return kExitSuccess;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:          // a missing file named on the command line
    case StatusCode::kPermissionDenied:  // a binary or file we may not use
    case StatusCode::kUnauthenticated:   // wrong job token: a configuration error
      return kExitUsage;
    case StatusCode::kDeadlineExceeded: return kExitTimeout;
    case StatusCode::kAborted: return kExitPeerFailed;
    default: return kExitFailure;
  }
}

Status WhileRunning(const Status& status) {
  if (ExitCodeFor(status) != kExitUsage) return status;
  return UnavailableError(status.message() + " (while the job ran)");
}

}  // namespace mirrored
