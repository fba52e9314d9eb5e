// Status and Result<T>: how native code outside the hot paths says that something failed, and
// why, in one line a person can act on.
//
// Every set-up, tear-down and I/O function that can fail returns one of the two: a Status
// when it produces nothing else, a Result<T> (a T or a failed Status, like C++23's
// std::expected) when it does. Both are [[nodiscard]], so a failure is never dropped by
// accident; `(void)` marks the few places that ignore one on purpose. The binding
// (bindings/core_module.cc) is the only place that turns a failed Status into a Python
// exception or value, with message() as its text.
//
// Not for the hot paths: a malloc hook or a signal handler never fails and never returns a
// Status. It degrades ("not sampled") and counts what it could not do (dropped_samples,
// untracked, ...). A successful Status holds an empty string and allocates nothing; a failed
// one allocates its message when the failure happens.
//
// code(): the errno value behind a failure (FromErrno, or given to Error), 0 otherwise.
// Callers that must tell one failure from another (EBUSY: the handler was kept) test the
// code, never the text.
#ifndef PEAKLINE_STATUS_STATUS_H_
#define PEAKLINE_STATUS_STATUS_H_

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace peakline {

class [[nodiscard]] Status {
 public:
  Status() = default;  // success

  // A failure with its one-line reason; code: the errno value behind it, or 0.
  static Status Error(std::string message, int code = 0) {
    Status s;
    s.failed_ = true;
    s.code_ = code;
    s.message_ = std::move(message);
    return s;
  }
  // A failed system call: "what: <strerror(err)>", code() == err.
  static Status FromErrno(int err, std::string_view what);

  bool ok() const { return !failed_; }
  int code() const { return code_; }
  const std::string& message() const { return message_; }  // "" when ok()

  // The same failure as "context: message" (same code); success stays success.
  Status WithContext(std::string_view context) const;

 private:
  bool failed_ = false;
  int code_ = 0;
  std::string message_;
};

// A T, or the failed Status that says why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // A failure. An ok() Status here is a bug of the caller: it becomes a failure that says so.
  Result(Status failure)  // NOLINT(google-explicit-constructor)
      : status_(failure.ok() ? Status::Error("internal error: a Result without a value")
                             : std::move(failure)) {}

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }  // ok() when there is a value

  // The value; only when ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

inline Status Status::FromErrno(int err, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return Error(std::move(message), err);
}

inline Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return Error(std::move(message), code_);
}

}  // namespace peakline

#endif  // PEAKLINE_STATUS_STATUS_H_
