// Status and Result (status/status.h): the one way native code outside the hot paths reports
// a failure. The messages built here are the ones Python shows, so their shape is tested.
#include "status/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace peakline {
namespace {

TEST(StatusTest, DefaultIsSuccessWithNoMessageAndNoCode) {
  const Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), 0);
  EXPECT_EQ(ok.message(), "");
}

TEST(StatusTest, ErrorKeepsItsMessageAndCode) {
  const Status plain = Status::Error("no NVIDIA device");
  EXPECT_FALSE(plain.ok());
  EXPECT_EQ(plain.message(), "no NVIDIA device");
  EXPECT_EQ(plain.code(), 0);
  const Status busy = Status::Error("a sampling signal is still pending", EBUSY);
  EXPECT_FALSE(busy.ok());
  EXPECT_EQ(busy.code(), EBUSY);
}

TEST(StatusTest, AnErrorWithAnEmptyMessageIsStillAFailure) {
  EXPECT_FALSE(Status::Error("").ok());
}

TEST(StatusTest, FromErrnoReadsLikeStrerrorAfterWhatFailed) {
  const Status s = Status::FromErrno(EINVAL, "cannot watch signal 1000");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_EQ(s.message(), std::string("cannot watch signal 1000: ") + std::strerror(EINVAL));
}

TEST(StatusTest, WithContextPrefixesAFailureAndKeepsItsCode) {
  const Status s = Status::FromErrno(EBUSY, "sigaction").WithContext("cannot install the hooks");
  EXPECT_EQ(s.message(),
            std::string("cannot install the hooks: sigaction: ") + std::strerror(EBUSY));
  EXPECT_EQ(s.code(), EBUSY);
  EXPECT_TRUE(Status().WithContext("cannot install the hooks").ok());
  EXPECT_EQ(Status().WithContext("cannot install the hooks").message(), "");
}

Result<std::unique_ptr<int>> MakeInt(bool fail) {
  if (fail) return Status::Error("no int today");
  return std::make_unique<int>(7);
}

TEST(ResultTest, HoldsAMoveOnlyValue) {
  Result<std::unique_ptr<int>> r = MakeInt(false);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(*r.value(), 7);
  std::unique_ptr<int> taken = std::move(r).value();
  EXPECT_EQ(*taken, 7);
}

TEST(ResultTest, HoldsTheFailureWhenThereIsNoValue) {
  const Result<std::unique_ptr<int>> r = MakeInt(true);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no int today");
}

TEST(ResultTest, ASuccessfulStatusWithoutAValueBecomesAFailure) {
  const Result<int> r{Status()};
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.status().ok());
  EXPECT_NE(r.status().message().find("without a value"), std::string::npos);
}

}  // namespace
}  // namespace peakline
